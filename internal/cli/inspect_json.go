package cli

import (
	"fmt"
	"io"
	"sort"

	"github.com/sluicedata/sluice/format"
)

// inspectReport is inspect --json's output (snake_case keys).
type inspectReport struct {
	Dataset       string            `json:"dataset"`
	Merged        bool              `json:"merged"`
	Formats       map[string]int    `json:"formats"`
	Shards        int               `json:"shards"`
	EmptyShards   int               `json:"empty_shards"`
	Samples       int64             `json:"samples"`
	RawBytes      int64             `json:"raw_bytes"`
	StoredBytes   int64             `json:"stored_bytes"`
	Compressions  map[string]int    `json:"compressions"`
	Hashes        []string          `json:"hashes"`
	SizeLimits    map[string]int    `json:"size_limits"`
	Columns       []inspectColumn   `json:"columns"`
	ColumnsDiffer bool              `json:"columns_differ"`
	InStore       *inspectStore     `json:"in_store,omitempty"`
	ShardList     []inspectShardRow `json:"shard_list,omitempty"`
}

type inspectColumn struct {
	Name     string `json:"name"`
	Encoding string `json:"encoding"`
	Size     *int   `json:"size"` // fixed MDS size in bytes, null when variable
}

type inspectStore struct {
	Files     int   `json:"files"`
	Bytes     int64 `json:"bytes"`
	Missing   int   `json:"missing"`
	WrongSize int   `json:"wrong_size"`
}

type inspectShardRow struct {
	Shard       int      `json:"shard"`
	Format      string   `json:"format"`
	Samples     int      `json:"samples"`
	RawBytes    int64    `json:"raw_bytes"`
	StoredBytes int64    `json:"stored_bytes"`
	Files       []string `json:"files"`
	Missing     []string `json:"missing,omitempty"`
}

func columnsOf(s *format.ShardInfo) []inspectColumn {
	var out []inspectColumn
	for i, n := range s.ColumnNames {
		c := inspectColumn{Name: n, Encoding: s.ColumnEncodings[i]}
		if s.Format == "mds" && i < len(s.ColumnSizes) && s.ColumnSizes[i] > 0 {
			size := s.ColumnSizes[i]
			c.Size = &size
		}
		out = append(out, c)
	}
	for n, enc := range s.Columns {
		out = append(out, inspectColumn{Name: n, Encoding: enc})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// writeInspectJSON prints the summary of idx as JSON; stats, when not
// nil, holds what the store holds for each file.
func writeInspectJSON(w io.Writer, dir string, idx *format.Index, stats map[string]fileStat, listShards bool) error {
	r := inspectReport{Dataset: dir, Merged: idx.Merged, Formats: map[string]int{}, Shards: len(idx.Shards),
		Samples: idx.Samples(), Compressions: map[string]int{}, Hashes: []string{}, SizeLimits: map[string]int{},
		Columns: []inspectColumn{}}
	hashes := map[string]bool{}
	if stats != nil {
		r.InStore = &inspectStore{}
	}
	for k := range idx.Shards {
		s := &idx.Shards[k]
		r.RawBytes += s.RawData.Bytes
		row := inspectShardRow{Shard: k, Format: s.Format, Samples: s.Samples, RawBytes: s.RawData.Bytes, Files: []string{}}
		for _, f := range s.Files() {
			r.StoredBytes += f.Bytes
			row.StoredBytes += f.Bytes
			row.Files = append(row.Files, f.Basename)
			if stats != nil {
				st := stats[f.Basename]
				switch {
				case st.missing:
					r.InStore.Missing++
					row.Missing = append(row.Missing, f.Basename)
				default:
					if st.size != f.Bytes {
						r.InStore.WrongSize++
					}
					r.InStore.Files++
					r.InStore.Bytes += st.size
				}
			}
		}
		if s.Samples == 0 {
			r.EmptyShards++
		}
		r.Formats[s.Format]++
		c := s.Compression
		if c == "" {
			c = "none"
		}
		r.Compressions[c]++
		for _, h := range s.Hashes {
			hashes[h] = true
		}
		limit := "none"
		if s.SizeLimit > 0 {
			limit = fmt.Sprint(s.SizeLimit)
		}
		r.SizeLimits[limit]++
		cols := columnsOf(s)
		if k == 0 {
			r.Columns = cols
		} else if fmt.Sprint(cols) != fmt.Sprint(r.Columns) {
			r.ColumnsDiffer = true
		}
		if listShards {
			r.ShardList = append(r.ShardList, row)
		}
	}
	for h := range hashes {
		r.Hashes = append(r.Hashes, h)
	}
	sort.Strings(r.Hashes)
	return writeJSON(w, r)
}
