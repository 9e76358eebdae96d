package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/format"
)

func newInspectCommand(e *env) *cobra.Command {
	var listShards, noStat, asJSON bool
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "inspect DATASET",
		Short: "Describe a dataset",
		Long: `Describe the dataset at DATASET (a local directory or a store URL: s3://,
gs://, az://, https://, file://) from its index.json: format, columns and
their encodings, shards, samples, raw and stored bytes, compression and
hashes. The shard files themselves are not read: each is looked up in the
store (in parallel) to report the bytes actually stored and any file that
is missing or has another size than the index says; --no-stat skips that.
--json prints the same as one JSON object (snake_case keys).`,
		Args: cobra.ExactArgs(1),
		RunE: storeRunE(&sf, func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			d, err := openDataset(ctx, e, args[0])
			if err != nil {
				return fmt.Errorf("inspect: %w", err)
			}
			defer d.Close()
			idx, err := d.readIndex(ctx)
			if err != nil {
				return fmt.Errorf("inspect: %w", err)
			}
			var stats map[string]fileStat
			if !noStat {
				if stats, err = d.statFiles(ctx, idx); err != nil {
					return fmt.Errorf("inspect: %w", err)
				}
			}
			if asJSON {
				return writeInspectJSON(e.stdout, args[0], idx, stats, listShards)
			}
			return writeInspect(e.stdout, args[0], idx, stats, listShards)
		}),
	}
	addStoreFlags(cmd, &sf)
	cmd.Flags().BoolVar(&listShards, "shards", false, "also list every shard")
	cmd.Flags().BoolVar(&noStat, "no-stat", false, "read index.json only; do not look up the shard files")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the description as JSON")
	return cmd
}

// writeInspect prints the summary of idx. stats, when not nil, holds what
// the store holds for each stored file.
func writeInspect(w io.Writer, dir string, idx *format.Index, stats map[string]fileStat, listShards bool) error {
	var raw, stored, empty int64
	formats := map[string]int{}
	compressions := map[string]int{}
	hashes := map[string]bool{}
	limits := map[int64]int{}
	type col struct{ name, enc, size string }
	var cols []col
	colsSame := true
	for k := range idx.Shards {
		s := &idx.Shards[k]
		raw += s.RawData.Bytes
		for _, f := range s.Files() {
			stored += f.Bytes
		}
		if s.Samples == 0 {
			empty++
		}
		formats[s.Format]++
		c := s.Compression
		if c == "" {
			c = "none"
		}
		compressions[c]++
		for _, h := range s.Hashes {
			hashes[h] = true
		}
		limits[s.SizeLimit]++
		var these []col
		for i, n := range s.ColumnNames {
			size := ""
			if s.Format == "mds" {
				size = "variable"
				if i < len(s.ColumnSizes) && s.ColumnSizes[i] > 0 {
					size = fmt.Sprintf("fixed %d B", s.ColumnSizes[i])
				}
			}
			these = append(these, col{n, s.ColumnEncodings[i], size})
		}
		for n, enc := range s.Columns {
			these = append(these, col{n, enc, ""})
		}
		sort.Slice(these, func(i, j int) bool { return these[i].name < these[j].name })
		if k == 0 {
			cols = these
		} else if fmt.Sprint(these) != fmt.Sprint(cols) {
			colsSame = false
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "dataset\t%s\n", dir)
	layout := ""
	if idx.Merged {
		layout = " (merged index)"
	}
	fmt.Fprintf(tw, "index\tversion 2%s\n", layout)
	fmt.Fprintf(tw, "format\t%s\n", joinCounts(formats))
	fmt.Fprintf(tw, "shards\t%d (%d empty)\n", len(idx.Shards), empty)
	fmt.Fprintf(tw, "samples\t%d\n", idx.Samples())
	fmt.Fprintf(tw, "bytes raw\t%d (%s)\n", raw, humanBytes(raw))
	fmt.Fprintf(tw, "bytes stored\t%d (%s)\n", stored, humanBytes(stored))
	if stats != nil {
		var found, missing, wrong, n int64
		for k := range idx.Shards {
			for _, f := range idx.Shards[k].Files() {
				st := stats[f.Basename]
				switch {
				case st.missing:
					missing++
				case st.size != f.Bytes:
					wrong++
					fallthrough
				default:
					n++
					found += st.size
				}
			}
		}
		fmt.Fprintf(tw, "in store\t%d files, %d bytes (%s); %d missing, %d of another size\n",
			n, found, humanBytes(found), missing, wrong)
	}
	fmt.Fprintf(tw, "compression\t%s\n", joinCounts(compressions))
	hl := make([]string, 0, len(hashes))
	for h := range hashes {
		hl = append(hl, h)
	}
	sort.Strings(hl)
	if len(hl) == 0 {
		hl = []string{"none"}
	}
	fmt.Fprintf(tw, "hashes\t%s\n", strings.Join(hl, ", "))
	ll := map[string]int{}
	for l, n := range limits {
		if l == 0 {
			ll["none"] += n
		} else {
			ll[fmt.Sprint(l)] += n
		}
	}
	fmt.Fprintf(tw, "size limit\t%s\n", joinCounts(ll))
	if !colsSame {
		fmt.Fprintf(tw, "columns\t(differ between shards; columns of shard 0)\n")
	} else {
		fmt.Fprintf(tw, "columns\t%d\n", len(cols))
	}
	for _, c := range cols {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.name, c.enc, c.size)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !listShards {
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	store := ""
	if stats != nil {
		store = "\tin store"
	}
	fmt.Fprintf(tw, "\nshard\tsamples\traw bytes\tstored bytes%s\tfile\n", store)
	for k := range idx.Shards {
		s := &idx.Shards[k]
		var st int64
		var names []string
		state := ""
		if stats != nil {
			state = "\tok"
		}
		for _, f := range s.Files() {
			st += f.Bytes
			names = append(names, f.Basename)
			if got, ok := stats[f.Basename]; ok && got.missing {
				state = "\tmissing " + f.Basename
			} else if ok && got.size != f.Bytes && state == "\tok" {
				state = fmt.Sprintf("\t%s has %d bytes", f.Basename, got.size)
			}
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d%s\t%s\n", k, s.Samples, s.RawData.Bytes, st, state, strings.Join(names, ", "))
	}
	return tw.Flush()
}

func joinCounts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 1 {
		return keys[0]
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s (%d shards)", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
