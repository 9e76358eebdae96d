package convert

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/sluicedata/sluice/convert/fetch"
	"github.com/sluicedata/sluice/convert/input"
	"github.com/sluicedata/sluice/format/compress"
	"github.com/sluicedata/sluice/format/hashing"
	"github.com/sluicedata/sluice/storage"
)

// DefaultSizeLimit is MosaicML's default shard size limit (64 MiB).
const DefaultSizeLimit = 1 << 26

// maxShardBytes is the largest shard file MDS can describe (u32 offsets).
const maxShardBytes = 1<<32 - 1

// FetchColumn names a column whose values are URLs to fetch and embed.
type FetchColumn struct {
	// Column holds the URLs.
	Column string
	// Encoding is the encoding of the fetched bytes; "" means "jpeg" when
	// images are re-encoded, otherwise "bytes".
	Encoding string
}

// ParseFetch parses a --fetch value, "COLUMN[:encoding]".
func ParseFetch(s string) (FetchColumn, error) {
	name, enc, _ := strings.Cut(s, ":")
	if name == "" {
		return FetchColumn{}, fmt.Errorf("convert: bad --fetch %q: want COLUMN[:encoding]", s)
	}
	return FetchColumn{Column: name, Encoding: enc}, nil
}

// Null policies of Options.Nulls.
const (
	NullsError   = "error"
	NullsSkipRow = "skip-row"
	NullsDefault = "default"
)

// Options configures Run. Input, Output and Registry are required; every
// other zero field means its documented default.
type Options struct {
	// Input names the data to convert: a local path or store URL of a file,
	// a brace pattern of files, a glob, an image folder or an MDS dataset
	// (see input.Open).
	Input string
	// Output is the dataset's directory: a local path or a store URL.
	// With Part.Count > 1 the part is written under Output/part-I/.
	Output string
	// Registry opens input, output and fetched URLs.
	Registry *storage.Registry
	// Format forces the input format (input.Formats); "" infers it.
	Format string

	// Columns lists the output columns. Empty means every input field,
	// with encodings from the input's schema or inferred from its first
	// InferRows records. A column with an empty Encoding is inferred.
	Columns []input.Column
	// Compression is the shard compression ("zstd", "zstd:7", "gz:5", ...);
	// "" means none.
	Compression string
	// Hashes lists the hash algorithms recorded for each shard file.
	Hashes []string
	// SizeLimit is the shard size limit in bytes; 0 means DefaultSizeLimit,
	// negative means no limit (shards still stay below 4 GiB).
	SizeLimit int64

	// Fetch lists URL columns whose objects are fetched and embedded.
	Fetch []FetchColumn
	// FetchConcurrency bounds fetches in flight; 0 means
	// fetch.DefaultConcurrency (256).
	FetchConcurrency int
	// FetchPerHost bounds fetches in flight per host; 0 means
	// fetch.DefaultPerHost.
	FetchPerHost int
	// FetchAttempts is the tries per object; 0 means fetch.DefaultAttempts.
	FetchAttempts int
	// FetchTimeout bounds one attempt; 0 means fetch.DefaultTimeout.
	FetchTimeout time.Duration
	// FetchBaseDelay is the first backoff delay; 0 means
	// fetch.DefaultBaseDelay.
	FetchBaseDelay time.Duration
	// FetchSchemes lists URL schemes fetched besides http and https ("s3",
	// "gs", "az", "azure", "file"); URLs of other schemes fail with reason
	// scheme_not_allowed. Manifests are untrusted: s3, gs and az URLs are
	// fetched with the converter's own credentials.
	FetchSchemes []string
	// FetchFileRoot, if set, allows fetching local files under this
	// directory (and nowhere else).
	FetchFileRoot string
	// FetchAllowNets lists address ranges that may be fetched from although
	// they are loopback, private, link-local or otherwise special; by
	// default such addresses fail with reason blocked_address (the check is
	// on every dialled address, redirects included).
	FetchAllowNets []netip.Prefix
	// MaxSide, if positive, scales fetched images down to at most this many
	// pixels on the longer side (re-encoding them as JPEG).
	MaxSide int
	// JPEGQuality, if positive, re-encodes every fetched image as JPEG at
	// this quality (1..100). With MaxSide alone the quality is 90.
	JPEGQuality int
	// MinSuccessRate fails the run when the share of fetches that succeed
	// is below it (0..1). The shards and the report are kept, index.json is
	// not written, so training cannot start on a failed conversion.
	MinSuccessRate float64
	// SkipInvalid skips records whose values do not fit their columns
	// (counted under reason "invalid") instead of failing the run.
	SkipInvalid bool
	// Nulls is the policy for null or missing values in columns that
	// cannot hold them (every encoding but json): NullsError (the default,
	// ""), NullsSkipRow (the record is skipped, counted under reason
	// "null") or NullsDefault (the encoding's zero value: 0, "", empty
	// bytes). Nulls are counted per column in the report either way.
	Nulls string

	// Tokenize lists text columns to tokenize with a SentencePiece model;
	// each writes COLUMN_input_ids, an ndarray of int32 ids (no BOS or EOS
	// added). The text column stays in the output if it is one of its
	// columns. Empty texts are skipped with reason "empty_text".
	Tokenize []TokenizeColumn
	// Pack, if positive, concatenates the token ids of the one Tokenize
	// column over all records (in input order), each document followed by
	// the model's EOS id, and writes blocks of Pack ids as records of the
	// single column COLUMN_input_ids: no token is lost or repeated. The
	// last block is shorter unless PackDropLast drops it (counted as
	// tokens_dropped).
	Pack int
	// PackDropLast drops the last partial block of Pack.
	PackDropLast bool

	// ImageEncoding is the image column's encoding for image folders:
	// "jpeg" or "png" (only fully decodable images of that type are kept),
	// "pil" (any decodable image, converted), "bytes" (any image file as
	// it is). "" infers jpeg or png from uniform file extensions, else
	// bytes. Files that do not fit are skipped and counted by reason.
	ImageEncoding string

	// Part converts a deterministic slice of the input (see input.Part).
	Part input.Part

	// Workers is the number of decode/encode/compress goroutines; 0 means
	// GOMAXPROCS.
	Workers int
	// BatchSize is the number of input records per unit of work; 0 means
	// 512 (32 when fetching, 64 for image folders).
	BatchSize int
	// InferRows is the number of records inference looks at; 0 means 1000.
	InferRows int
	// TempDir holds temporary copies of remote Parquet inputs; "" means
	// os.TempDir().
	TempDir string

	// Progress, if set, is called with running figures every
	// ProgressInterval (0 means one second) and once at the end, from a
	// goroutine of Run's own.
	Progress func(Progress)
	// ProgressInterval is the period of Progress calls.
	ProgressInterval time.Duration

	// testHook, if set, is called by the committer after a shard file is
	// stored ("shard") and after its journal entry ("journal"); tests use it
	// to kill the process at exact points.
	testHook func(event string, shard int)
}

// Progress is a snapshot of a running conversion.
type Progress struct {
	// SamplesIn counts input records read (including skipped ones and
	// those a resumed run took from its journal).
	SamplesIn int64
	// SamplesOut counts records written to committed shards.
	SamplesOut int64
	// Skipped counts records dropped (failed fetches, invalid values).
	Skipped int64
	// Shards counts committed shards.
	Shards int
	// Bytes counts stored shard bytes (compressed where compression is on).
	Bytes int64
	// Elapsed is the time since Run started (this run only).
	Elapsed time.Duration
	// Done is true in the final call.
	Done bool
}

type resolved struct {
	Options
	sizeLimit int64 // 0 = none
	compSpec  compress.Spec
	hashes    []string
	prefix    string // key prefix of this part's files in the output bucket
	fetchIdx  map[string]string
}

func (o *Options) resolve() (*resolved, error) {
	if o == nil {
		return nil, errors.New("convert: nil options")
	}
	r := &resolved{Options: *o}
	if r.Input == "" || r.Output == "" {
		return nil, errors.New("convert: input and output are required")
	}
	if r.Registry == nil {
		return nil, errors.New("convert: Options.Registry is required")
	}
	switch {
	case r.SizeLimit == 0:
		r.sizeLimit = DefaultSizeLimit
	case r.SizeLimit < 0:
		r.sizeLimit = 0
	case r.SizeLimit > maxShardBytes:
		return nil, fmt.Errorf("convert: size limit %d must be below 4 GiB", r.SizeLimit)
	default:
		r.sizeLimit = r.SizeLimit
	}
	if r.Compression != "" {
		spec, err := compress.Parse(r.Compression)
		if err != nil {
			return nil, fmt.Errorf("convert: %w", err)
		}
		r.compSpec = spec
	}
	r.hashes = append([]string(nil), r.Hashes...)
	slices.Sort(r.hashes)
	r.hashes = slices.Compact(r.hashes)
	for _, h := range r.hashes {
		if !hashing.Valid(h) {
			return nil, fmt.Errorf("convert: unknown hash %q (known: %s)", h, strings.Join(hashing.Names(), ", "))
		}
	}
	if p := r.Part; p.Count < 0 || (p.Count > 0 && (p.Index < 0 || p.Index >= p.Count)) {
		return nil, fmt.Errorf("convert: bad part %d/%d", p.Index, p.Count)
	}
	if r.Part.Count > 1 {
		r.prefix = PartDir(r.Part.Index, r.Part.Count) + "/"
	}
	if r.MinSuccessRate < 0 || r.MinSuccessRate > 1 {
		return nil, fmt.Errorf("convert: min success rate %v outside 0..1", r.MinSuccessRate)
	}
	for _, c := range []struct {
		name string
		v    int64
	}{
		{"workers", int64(r.Workers)}, {"batch size", int64(r.BatchSize)}, {"infer rows", int64(r.InferRows)},
		{"fetch concurrency", int64(r.FetchConcurrency)}, {"fetch per host", int64(r.FetchPerHost)},
		{"fetch attempts", int64(r.FetchAttempts)}, {"fetch timeout", int64(r.FetchTimeout)},
		{"fetch base delay", int64(r.FetchBaseDelay)}, {"max side", int64(r.MaxSide)},
	} {
		if c.v < 0 {
			return nil, fmt.Errorf("convert: %s must not be negative (got %d; 0 means the default)", c.name, c.v)
		}
	}
	if r.Workers == 0 {
		r.Workers = runtime.GOMAXPROCS(0)
	}
	if err := r.checkTokenize(); err != nil {
		return nil, err
	}
	if r.ImageEncoding != "" && !slices.Contains(input.ImageEncodings, r.ImageEncoding) {
		return nil, fmt.Errorf("convert: bad image encoding %q (want one of %s)", r.ImageEncoding, strings.Join(input.ImageEncodings, ", "))
	}
	pol := fetch.Policy{Schemes: r.FetchSchemes, FileRoot: r.FetchFileRoot, AllowNets: r.FetchAllowNets}
	if err := pol.Validate(); err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	switch r.Nulls {
	case "":
		r.Nulls = NullsError
	case NullsError, NullsSkipRow, NullsDefault:
	default:
		return nil, fmt.Errorf("convert: bad nulls policy %q: want %s, %s or %s", r.Nulls, NullsError, NullsSkipRow, NullsDefault)
	}
	if r.InferRows <= 0 {
		r.InferRows = 1000
	}
	if r.ProgressInterval <= 0 {
		r.ProgressInterval = time.Second
	}
	r.fetchIdx = map[string]string{}
	for _, f := range r.Fetch {
		enc := f.Encoding
		if enc == "" {
			enc = "bytes"
			if r.JPEGQuality > 0 || r.MaxSide > 0 {
				enc = "jpeg"
			}
		}
		if _, dup := r.fetchIdx[f.Column]; dup {
			return nil, fmt.Errorf("convert: --fetch names column %q twice", f.Column)
		}
		r.fetchIdx[f.Column] = enc
	}
	if r.JPEGQuality < 0 || r.JPEGQuality > 100 {
		return nil, fmt.Errorf("convert: JPEG quality %d outside 1..100", r.JPEGQuality)
	}
	return r, nil
}

func (r *resolved) newFetcher() (*fetch.Fetcher, error) {
	fo := &fetch.Options{
		Registry:    r.Registry,
		Concurrency: r.FetchConcurrency,
		PerHost:     r.FetchPerHost,
		Attempts:    r.FetchAttempts,
		Timeout:     r.FetchTimeout,
		BaseDelay:   r.FetchBaseDelay,
		Policy:      fetch.Policy{Schemes: r.FetchSchemes, FileRoot: r.FetchFileRoot, AllowNets: r.FetchAllowNets},
		CheckReason: "invalid_image",
		UserAgent:   "sluice-convert",
	}
	if r.MaxSide > 0 || r.JPEGQuality > 0 {
		q := r.JPEGQuality
		if q == 0 {
			q = 90
		}
		t, err := fetch.ImageTransform(r.MaxSide, q, r.JPEGQuality > 0)
		if err != nil {
			return nil, fmt.Errorf("convert: %w", err)
		}
		fo.Transform = t
	}
	return fetch.New(fo)
}

// PartDir returns the directory name of part i of n: "part-I", with I
// zero-padded to the width of n-1 so that directory order is part order.
func PartDir(i, n int) string {
	w := len(fmt.Sprint(max(n-1, 0)))
	return fmt.Sprintf("part-%0*d", w, i)
}
