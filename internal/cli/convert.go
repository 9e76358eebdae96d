package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/convert"
	"github.com/sluicedata/sluice/convert/fetch"
	"github.com/sluicedata/sluice/convert/input"
	"github.com/sluicedata/sluice/stream"
)

// convertFlags holds the convert command's flag values.
type convertFlags struct {
	format, columns, compression, hashes, sizeLimit string
	fetch, tokenize                                 []string
	pack                                            int
	packDropLast                                    bool
	fetchConcurrency, fetchPerHost, fetchAttempts   int
	fetchTimeout                                    time.Duration
	fetchSchemes, fetchFileRoot, fetchAllowNet      string
	maxSide, jpegQuality                            int
	minSuccess                                      float64
	skipInvalid                                     bool
	nulls, imageEncoding                            string
	part                                            string
	parts                                           int
	workers, inferRows                              int
	progress                                        string
	jsonReport                                      bool
}

func newConvertCommand(e *env) *cobra.Command {
	f := &convertFlags{}
	cmd := &cobra.Command{
		Use:   "convert INPUT OUT",
		Short: "Convert raw data into MDS shards",
		Long: `Convert raw data into an MDS dataset at OUT (a local directory or a store URL;
shards are uploaded as they finish, index.json last).

INPUT is a local path or URL of:
  JSON lines (.jsonl/.json/.ndjson), CSV (.csv), TSV (.tsv), Parquet (.parquet),
  WebDataset tar shards (.tar; brace patterns such as shard-{000000..000099}.tar,
  or a directory of them: its index.json's order when sluice index wrote one,
  else by name),
  an image folder (root/<class>/<name>.jpg gives columns image and label;
  classes are labelled in sorted order, written to labels.json and the report;
  each file's real type decides: --image-encoding jpeg|png keeps only fully
  decodable images of that type, pil converts any image, bytes keeps any image
  file; other files are skipped and counted by reason), or
  an MDS dataset (a directory with index.json: re-shard, re-compress).
Several files: a brace pattern, or a quoted local glob ("data/*.jsonl").

Columns and encodings come from the input's schema or are inferred from its
first records; --columns name:encoding,... picks and types them explicitly
(Parquet columns left out are not read at all). Parquet lists of numbers
become ndarray columns, structs, maps and other nesting json. Nulls follow
--nulls and are counted per column in the report.

URL columns: --fetch COLUMN[:encoding] fetches every object a column names
with a bounded, per-host limited pool and embeds its bytes. Transient
failures (5xx, 408, 429, timeouts, network errors) are retried with backoff;
404 and other 4xx are not. With encoding jpeg, png or pil every object must
decode as that image type. Failed fetches are skipped and counted by reason.
--min-success-rate fails the run (no index.json) below a share of successes.

URLs in data are untrusted: only http and https are fetched by default, and
never from loopback, private, link-local (cloud metadata) or other special
addresses, checked on the address actually connected to (redirects and DNS
included). --fetch-schemes s3,gs,az allows those schemes (fetched with your
credentials), --fetch-file-root DIR allows local files under DIR only, and
--fetch-allow-net 10.0.0.0/8,127.0.0.1 allows address ranges.

Text: --tokenize text=tokenizer.model adds text_input_ids, the ids of a
SentencePiece BPE model (Gemma, Llama 2 style; other model kinds are refused),
identical to the reference implementation's. --pack 2048 instead writes blocks
of 2048 ids of the concatenated documents, each ended by the model's EOS.

Scale-out: --part I/N (or SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT, or
JOB_COMPLETION_INDEX with --parts N) converts a deterministic slice into
OUT/part-I/; "sluice merge OUT" joins the parts.

A conversion that is interrupted resumes where it stopped when run again with
the same arguments. A JSON report (convert-report.json) is written next to
the index.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := f.options(args[0], args[1], os.Getenv)
			if err != nil {
				return err
			}
			opts.Registry = e.registry
			stopProgress := startConvertProgress(e.stderr, f.progress, opts)
			rep, err := convert.Run(cmd.Context(), opts)
			stopProgress()
			if rep != nil {
				if f.jsonReport {
					if jerr := writeJSON(e.stdout, rep); jerr != nil {
						return errors.Join(err, jerr)
					}
				} else if serr := rep.Summary(e.stdout); serr != nil {
					return errors.Join(err, serr)
				}
			}
			if errors.Is(err, convert.ErrQualityGate) {
				return &ExitError{Code: 3, Err: err}
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.format, "format", "", "input format: "+strings.Join(input.Formats, ", ")+" (default: from the name)")
	fl.StringVar(&f.columns, "columns", "", "output columns as name:encoding,... (default: all, inferred)")
	fl.StringVar(&f.compression, "compression", "", "shard compression: zstd, zstd:7, gz:5, br, bz2, snappy (default none)")
	fl.StringVar(&f.hashes, "hashes", "", "comma-separated hash algorithms for the index (e.g. sha1,xxh64)")
	fl.StringVar(&f.sizeLimit, "size-limit", "64mb", `shard size limit ("64mb", "1.5kb", bytes; "0" or "none" for no limit)`)
	fl.StringArrayVar(&f.fetch, "fetch", nil, "fetch and embed the objects a URL column names: COLUMN[:encoding] (repeatable)")
	fl.IntVar(&f.fetchConcurrency, "fetch-concurrency", 0, "fetches in flight (default 256)")
	fl.IntVar(&f.fetchPerHost, "fetch-per-host", 0, "fetches in flight per host (default 64)")
	fl.IntVar(&f.fetchAttempts, "fetch-attempts", 0, "tries per object (default 4)")
	fl.DurationVar(&f.fetchTimeout, "fetch-timeout", 0, "timeout of one fetch attempt (default 60s)")
	fl.StringVar(&f.fetchSchemes, "fetch-schemes", "", "URL schemes fetched besides http and https: s3, gs, az, azure (comma-separated)")
	fl.StringVar(&f.fetchFileRoot, "fetch-file-root", "", "allow fetching local files (file:// URLs, absolute paths) under this directory only")
	fl.StringVar(&f.fetchAllowNet, "fetch-allow-net", "", "address ranges fetched from although private/loopback/link-local (CIDRs or addresses, comma-separated)")
	fl.IntVar(&f.maxSide, "max-side", 0, "scale fetched images so the longer side is at most this many pixels (JPEG output)")
	fl.IntVar(&f.jpegQuality, "jpeg-quality", 0, "re-encode fetched images as JPEG at this quality (1-100)")
	fl.Float64Var(&f.minSuccess, "min-success-rate", 0, "fail (exit 3, no index.json) when fewer fetches succeed than this share (0-1)")
	fl.BoolVar(&f.skipInvalid, "skip-invalid", false, "skip records whose values do not fit their columns instead of failing")
	fl.StringVar(&f.nulls, "nulls", "error", "null or missing values in non-json columns: error (fail naming the record), skip-row (skip, counted), default (0, \"\", empty bytes)")
	fl.StringVar(&f.imageEncoding, "image-encoding", "", "image folders: image column encoding jpeg, png, pil or bytes (default: from uniform extensions, else bytes)")
	fl.StringArrayVar(&f.tokenize, "tokenize", nil, "tokenize a text column with a SentencePiece BPE model into COLUMN_input_ids (int32 ndarray): COLUMN=MODEL (repeatable)")
	fl.IntVar(&f.pack, "pack", 0, "pack the --tokenize column's ids (each document ended by EOS) into records of this many ids (only column COLUMN_input_ids)")
	fl.BoolVar(&f.packDropLast, "pack-drop-last", false, "with --pack, drop the last partial block (default: keep it, shorter)")
	fl.StringVar(&f.part, "part", "", "convert part I of N (I/N) into OUT/part-I/")
	fl.IntVar(&f.parts, "parts", 0, "number of parts when the part index comes from JOB_COMPLETION_INDEX")
	fl.IntVarP(&f.workers, "concurrency", "j", 0, "parallel workers (default: all cores)")
	// The old name, hidden: -j/--concurrency is the name cp uses too.
	fl.IntVar(&f.workers, "workers", 0, "parallel workers (deprecated: use -j/--concurrency)")
	_ = fl.MarkHidden("workers")
	fl.IntVar(&f.inferRows, "infer-rows", 0, "records looked at to infer columns (default 1000)")
	fl.StringVar(&f.progress, "progress", "auto", "progress display: "+progressValues)
	fl.BoolVar(&f.jsonReport, "json", false, "print the report as JSON instead of the summary")
	return cmd
}

// options maps the flags onto convert.Options.
func (f *convertFlags) options(in, out string, getenv func(string) string) (*convert.Options, error) {
	o := &convert.Options{
		Input: in, Output: out, Format: f.format, Compression: f.compression,
		FetchConcurrency: f.fetchConcurrency, FetchPerHost: f.fetchPerHost, FetchAttempts: f.fetchAttempts,
		FetchTimeout: f.fetchTimeout, MaxSide: f.maxSide, JPEGQuality: f.jpegQuality,
		MinSuccessRate: f.minSuccess, SkipInvalid: f.skipInvalid, Nulls: f.nulls, ImageEncoding: f.imageEncoding, Workers: f.workers, InferRows: f.inferRows,
	}
	if f.columns != "" {
		cols, err := convert.ParseColumns(f.columns)
		if err != nil {
			return nil, err
		}
		o.Columns = cols
	}
	for _, h := range strings.Split(f.hashes, ",") {
		if h = strings.TrimSpace(h); h != "" {
			o.Hashes = append(o.Hashes, h)
		}
	}
	limit, err := parseSize(f.sizeLimit)
	if err != nil {
		return nil, err
	}
	o.SizeLimit = limit
	if limit == 0 {
		o.SizeLimit = -1
	}
	for _, s := range strings.Split(f.fetchSchemes, ",") {
		if s = strings.ToLower(strings.TrimSpace(s)); s != "" {
			o.FetchSchemes = append(o.FetchSchemes, s)
		}
	}
	o.FetchFileRoot = f.fetchFileRoot
	nets, err := fetch.ParseNets(f.fetchAllowNet)
	if err != nil {
		return nil, fmt.Errorf("convert: --fetch-allow-net: %w", err)
	}
	o.FetchAllowNets = nets
	for _, s := range f.tokenize {
		tc, err := convert.ParseTokenize(s)
		if err != nil {
			return nil, err
		}
		o.Tokenize = append(o.Tokenize, tc)
	}
	o.Pack, o.PackDropLast = f.pack, f.packDropLast
	for _, s := range f.fetch {
		fc, err := convert.ParseFetch(s)
		if err != nil {
			return nil, err
		}
		o.Fetch = append(o.Fetch, fc)
	}
	part, err := resolvePart(f.part, f.parts, getenv)
	if err != nil {
		return nil, err
	}
	o.Part = part
	return o, nil
}

// parseSize parses --size-limit, a shard size, as MosaicML's writer does
// (see stream.ParseBytes: bytes, or a number with a unit b, kb ... eb, or
// kib ... eib alike, powers of 1024, fractions allowed); none or 0 means
// no limit. MDS shards stay below 4 GiB.
func parseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" || t == "none" {
		return 0, nil
	}
	n, err := stream.ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("convert: --size-limit: %w", err)
	}
	if n >= 1<<32 {
		return 0, fmt.Errorf("convert: --size-limit %q: MDS shards must stay below 4 GiB", s)
	}
	return n, nil
}

// resolvePart picks the part from --part, then Slurm array variables, then
// a Kubernetes Indexed Job's JOB_COMPLETION_INDEX with --parts.
func resolvePart(flag string, parts int, getenv func(string) string) (input.Part, error) {
	if flag != "" {
		is, ns, ok := strings.Cut(flag, "/")
		i, err1 := strconv.Atoi(is)
		n, err2 := strconv.Atoi(ns)
		if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
			return input.Part{}, fmt.Errorf("convert: bad --part %q: want I/N with 0 <= I < N", flag)
		}
		return input.Part{Index: i, Count: n}, nil
	}
	if id, cnt := getenv("SLURM_ARRAY_TASK_ID"), getenv("SLURM_ARRAY_TASK_COUNT"); id != "" && cnt != "" {
		i, err1 := strconv.Atoi(id)
		n, err2 := strconv.Atoi(cnt)
		lo := 0
		if m := getenv("SLURM_ARRAY_TASK_MIN"); m != "" {
			v, err := strconv.Atoi(m)
			if err != nil {
				return input.Part{}, fmt.Errorf("convert: bad SLURM_ARRAY_TASK_MIN %q", m)
			}
			lo = v
		}
		i -= lo
		if err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
			return input.Part{}, fmt.Errorf("convert: bad Slurm array task %q of %q (min %d)", id, cnt, lo)
		}
		return input.Part{Index: i, Count: n}, nil
	}
	if id := getenv("JOB_COMPLETION_INDEX"); id != "" && parts > 0 {
		i, err := strconv.Atoi(id)
		if err != nil || i < 0 || i >= parts {
			return input.Part{}, fmt.Errorf("convert: JOB_COMPLETION_INDEX %q outside 0..%d", id, parts-1)
		}
		return input.Part{Index: i, Count: parts}, nil
	}
	if parts > 0 {
		return input.Part{}, errors.New("convert: --parts needs JOB_COMPLETION_INDEX (a Kubernetes Indexed Job); use --part I/N otherwise")
	}
	return input.Part{}, nil
}

func writeJSON(w io.Writer, v any) error {
	b, err := jsonMarshalIndent(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
