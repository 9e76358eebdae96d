package input

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/retry"
)

// Format names accepted by Options.Format.
const (
	FormatJSONL   = "jsonl"
	FormatCSV     = "csv"
	FormatTSV     = "tsv"
	FormatParquet = "parquet"
	FormatImages  = "images"
	FormatWDS     = "wds"
	FormatMDS     = "mds"
)

// Formats lists every input format Open understands.
var Formats = []string{FormatJSONL, FormatCSV, FormatTSV, FormatParquet, FormatImages, FormatWDS, FormatMDS}

// Part selects a deterministic slice of the input: part Index of Count.
// The zero value (Count 0) means the whole input.
type Part struct {
	Index, Count int
}

// Options tunes Open.
type Options struct {
	// Registry opens the stores that input URLs name. Required.
	Registry *storage.Registry
	// Format forces the input format; "" infers it from the file
	// extension (.jsonl .json .ndjson .csv .tsv .parquet .tar), or for a
	// directory from its content (an index.json makes it an MDS dataset,
	// or the WebDataset tars it lists when sluice index wrote it; .tar
	// files make it a directory of WebDataset tars, read in name order;
	// otherwise it is an image folder).
	Format string
	// Part selects a slice of the input. When the input has at least
	// Count files, whole files are assigned round-robin (file j goes to
	// part j mod Count); otherwise item i of the whole input goes to part
	// i mod Count. Either way the slices are disjoint, cover the input and
	// depend only on the input and Count.
	Part Part
	// Columns, if set, names the only fields that need decoding. Columnar
	// sources (Parquet) do not read the other columns at all; other
	// sources may still emit every field.
	Columns []string
	// ImageEncoding is the image column's encoding for image folders
	// (one of ImageEncodings); "" means jpeg or png when every file has
	// that extension, otherwise bytes.
	ImageEncoding string
	// TempDir holds downloaded copies of remote files that need random
	// access (Parquet). "" means os.TempDir().
	TempDir string
}

// location is one input file: the store holding it and its key there.
type location struct {
	b    storage.Bucket
	key  string
	name string // for messages: the URL or path as the user gave it
}

// buckets opens each store root once and closes them all at the end.
type buckets struct {
	reg *storage.Registry
	mu  sync.Mutex
	m   map[string]storage.Bucket
}

func (bs *buckets) open(ctx context.Context, root string) (storage.Bucket, error) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if b, ok := bs.m[root]; ok {
		return b, nil
	}
	raw, err := bs.reg.Open(ctx, root)
	if err != nil {
		return nil, err
	}
	b, err := retry.New(raw, nil) // transient failures of a long read resume
	if err != nil {
		raw.Close()
		return nil, err
	}
	if bs.m == nil {
		bs.m = make(map[string]storage.Bucket)
	}
	bs.m[root] = b
	return b, nil
}

func (bs *buckets) Close() error {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	var errs []error
	for _, b := range bs.m {
		errs = append(errs, b.Close())
	}
	bs.m = nil
	return errors.Join(errs...)
}

// splitLocation splits a path or URL into the root of its store (the
// directory) and the base name, the key inside that root.
func splitLocation(s string) (root, key string, err error) {
	if !strings.Contains(s, "://") {
		dir, base := filepath.Split(filepath.Clean(s))
		if dir == "" {
			dir = "."
		}
		return dir, base, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", "", fmt.Errorf("input: bad URL %q: %w", s, err)
	}
	dir, base := path.Split(u.Path)
	if base == "" {
		return "", "", fmt.Errorf("input: URL %q names a directory, not a file", s)
	}
	u.Path = strings.TrimSuffix(dir, "/")
	u.RawPath = ""
	return u.String(), base, nil
}

// localFile returns the path a local input file is read at: a symbolic
// link's target (the store of the link's directory does not follow links
// that lead out of it), checked to be a regular file, which is read by byte
// range. Other names (URLs, files that do not exist) are returned as they
// are, for the store to report.
func localFile(name string) (string, error) {
	if strings.Contains(name, "://") {
		return name, nil
	}
	fi, err := os.Stat(name)
	if err != nil {
		return name, nil
	}
	if !fi.Mode().IsRegular() {
		what := "a device"
		switch {
		case fi.IsDir():
			what = "a directory"
		case fi.Mode()&os.ModeNamedPipe != 0:
			what = "a pipe"
		case fi.Mode()&os.ModeSocket != 0:
			what = "a socket"
		}
		return "", fmt.Errorf("input: %q is %s, not a regular file: sluice convert reads its input by byte range; write it to a file first", name, what)
	}
	real, err := filepath.EvalSymlinks(name)
	if err != nil {
		return name, nil
	}
	return real, nil
}

// compressedSuffix returns the compression suffix of name (".gz",
// ".tgz", ...), or "".
func compressedSuffix(name string) string {
	n := strings.ToLower(name)
	for _, ext := range []string{".gz", ".tgz", ".bz2", ".xz", ".zst", ".zstd", ".lz4", ".zip", ".7z"} {
		if strings.HasSuffix(n, ext) {
			return ext
		}
	}
	return ""
}

// formatOf infers a file's format from its extension.
func formatOf(name string) string {
	n := strings.ToLower(name)
	switch {
	case strings.HasSuffix(n, ".jsonl"), strings.HasSuffix(n, ".ndjson"), strings.HasSuffix(n, ".json"):
		return FormatJSONL
	case strings.HasSuffix(n, ".csv"):
		return FormatCSV
	case strings.HasSuffix(n, ".tsv"):
		return FormatTSV
	case strings.HasSuffix(n, ".parquet"), strings.HasSuffix(n, ".pq"):
		return FormatParquet
	case strings.HasSuffix(n, ".tar"):
		return FormatWDS
	}
	return ""
}

// Open opens the input spec: a local path or a store URL, naming a file,
// a brace pattern of files ("shard-{000000..000099}.tar", "{a,b}.jsonl"),
// a local glob ("data/*.jsonl"), or a directory (an image folder or an MDS
// dataset).
func Open(ctx context.Context, spec string, opts *Options) (Source, error) {
	if opts == nil || opts.Registry == nil {
		return nil, errors.New("input: Options.Registry is required")
	}
	if p := opts.Part; p.Count < 0 || (p.Count > 0 && (p.Index < 0 || p.Index >= p.Count)) {
		return nil, fmt.Errorf("input: bad part %d/%d", p.Index, p.Count)
	}
	bs := &buckets{reg: opts.Registry}
	src, err := open(ctx, spec, opts, bs)
	if err != nil {
		return nil, errors.Join(err, bs.Close())
	}
	return src, nil
}

func open(ctx context.Context, spec string, opts *Options, bs *buckets) (Source, error) {
	names, err := ExpandBraces(spec)
	if err != nil {
		return nil, err
	}
	if len(names) == 1 && !strings.Contains(spec, "://") && strings.ContainsAny(spec, "*?[") {
		names, err = filepath.Glob(spec)
		if err != nil {
			return nil, fmt.Errorf("input: bad pattern %q: %w", spec, err)
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("input: %q matches no file", spec)
		}
		sort.Strings(names)
	}
	format := opts.Format
	var locs []location // a directory's tars
	if len(names) == 1 {
		dirFormat, isDir, err := probeDir(ctx, names[0], bs)
		if err != nil {
			return nil, err
		}
		if isDir {
			if format == "" {
				format = dirFormat
			}
			switch format {
			case FormatImages:
				return openImages(ctx, names[0], opts, bs)
			case FormatMDS:
				src, err := openMDS(ctx, names[0], opts, bs)
				var wi *wdsIndexError
				if !errors.As(err, &wi) || opts.Format == FormatMDS {
					return src, err
				}
				// The index sluice index writes for WebDataset tars.
				format = FormatWDS
				if locs, err = tarDirLocations(ctx, names[0], wi.keys, bs); err != nil {
					return nil, err
				}
			case FormatWDS:
				if locs, err = tarDirLocations(ctx, names[0], nil, bs); err != nil {
					return nil, err
				}
			default:
				return nil, fmt.Errorf("input: %q is a directory; format %q needs files", names[0], format)
			}
			names = nil
		}
	}
	for _, n := range names {
		if ext := compressedSuffix(n); ext != "" {
			return nil, fmt.Errorf("input: %q is compressed (%s): sluice convert reads uncompressed files; decompress it first", n, ext)
		}
		n, err := localFile(n)
		if err != nil {
			return nil, err
		}
		root, key, err := splitLocation(n)
		if err != nil {
			return nil, err
		}
		b, err := bs.open(ctx, root)
		if err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		locs = append(locs, location{b: b, key: key, name: n})
		f := formatOf(key)
		if format == "" {
			format = f
		}
	}
	if format == "" {
		return nil, fmt.Errorf("input: cannot tell the format of %q from its name; give one of %s", spec, strings.Join(Formats, ", "))
	}
	var newFile func(ctx context.Context, l location) (fileReader, error)
	var cols func(ctx context.Context, l location) ([]Column, error)
	var dec decoder
	switch format {
	case FormatJSONL:
		newFile = openJSONLFile
		dec = decodeJSONL
	case FormatCSV, FormatTSV:
		sep := ','
		if format == FormatTSV {
			sep = '\t'
		}
		newFile = func(ctx context.Context, l location) (fileReader, error) { return openCSVFile(ctx, l, sep) }
		cols = func(ctx context.Context, l location) ([]Column, error) { return csvColumns(ctx, l, sep) }
		dec = decodeCSV
	case FormatParquet:
		newFile = func(ctx context.Context, l location) (fileReader, error) {
			return openParquetFile(ctx, l, opts.TempDir, opts.Columns)
		}
		cols = func(ctx context.Context, l location) ([]Column, error) { return parquetColumns(ctx, l, opts.TempDir) }
		dec = decodeParquet
	case FormatWDS:
		newFile = openWDSFile
		cols = wdsColumns
		dec = decodeWDS
	default:
		return nil, fmt.Errorf("input: format %q does not apply to files (formats: %s)", format, strings.Join(Formats, ", "))
	}
	m := &multi{files: locs, part: opts.Part, newFile: newFile, dec: dec, bs: bs}
	if m.part.Count > 1 && len(locs) >= m.part.Count {
		m.byFile = true
	}
	if cols != nil {
		c, err := cols(ctx, locs[0])
		if err != nil {
			return nil, err
		}
		m.cols = c
	}
	return m, nil
}

// probeDir reports whether name is a directory (a prefix with objects under
// it) and, if so, the format its content suggests.
func probeDir(ctx context.Context, name string, bs *buckets) (format string, isDir bool, err error) {
	if formatOf(name) != "" || compressedSuffix(name) != "" {
		return "", false, nil
	}
	if !strings.Contains(name, "://") {
		if fi, err := os.Stat(name); err == nil && !fi.IsDir() {
			return "", false, nil // a file: its name or --format decides
		}
	}
	b, err := bs.open(ctx, name)
	if err != nil {
		return "", false, fmt.Errorf("input: %w", err)
	}
	if ok, err := storage.Exists(ctx, b, "index.json"); err != nil {
		return "", false, fmt.Errorf("input: %w", err)
	} else if ok {
		return FormatMDS, true, nil
	}
	tars, any, err := dirHoldsTars(ctx, b)
	if err != nil {
		if errors.Is(err, storage.ErrNotExist) {
			return "", false, fmt.Errorf("input: %q does not exist", name)
		}
		return "", false, fmt.Errorf("input: list %q: %w", name, err)
	}
	if !any {
		return "", false, fmt.Errorf("input: %q is neither a file of a known format nor a directory with files", name)
	}
	if tars {
		return FormatWDS, true, nil
	}
	return FormatImages, true, nil
}

// fileReader reads the items of one input file.
type fileReader interface {
	read(ctx context.Context, dst []Item, max int) ([]Item, error)
	close() error
}

type decoder func(ctx context.Context, it *Item, fn FieldFunc) error

// multi is a Source over a list of files of one format, with the part
// selection applied.
type multi struct {
	files   []location
	part    Part
	byFile  bool
	newFile func(ctx context.Context, l location) (fileReader, error)
	dec     decoder
	cols    []Column
	bs      *buckets

	next  int        // next file to open
	cur   fileReader // open file, nil between files
	index int64      // items read so far, all parts (item-level parts)
	buf   []Item
}

func (m *multi) Columns() []Column { return m.cols }

func (m *multi) Decode(ctx context.Context, it *Item, fn FieldFunc) error { return m.dec(ctx, it, fn) }

func (m *multi) Read(ctx context.Context, dst []Item, max int) ([]Item, error) {
	for {
		if m.cur == nil {
			for m.byFile && m.next < len(m.files) && m.next%m.part.Count != m.part.Index {
				m.next++
			}
			if m.next >= len(m.files) {
				return dst, io.EOF
			}
			f, err := m.newFile(ctx, m.files[m.next])
			if err != nil {
				return dst, err
			}
			m.cur = f
			m.next++
		}
		if m.byFile || m.part.Count <= 1 {
			n0 := len(dst)
			var err error
			dst, err = m.cur.read(ctx, dst, max)
			if err == io.EOF {
				if cerr := m.cur.close(); cerr != nil {
					return dst, cerr
				}
				m.cur = nil
				if len(dst) > n0 {
					return dst, nil
				}
				continue
			}
			return dst, err
		}
		// Item-level parts: read the whole input, keep every Count-th item.
		var err error
		m.buf, err = m.cur.read(ctx, m.buf[:0], max*m.part.Count)
		n0 := len(dst)
		for i := range m.buf {
			if (m.index+int64(i))%int64(m.part.Count) == int64(m.part.Index) {
				dst = append(dst, m.buf[i])
			}
		}
		m.index += int64(len(m.buf))
		if err == io.EOF {
			if cerr := m.cur.close(); cerr != nil {
				return dst, cerr
			}
			m.cur = nil
			if len(dst) > n0 {
				return dst, nil
			}
			continue
		}
		if err != nil || len(dst) > n0 {
			return dst, err
		}
	}
}

func (m *multi) Close() error {
	var err error
	if m.cur != nil {
		err = m.cur.close()
		m.cur = nil
	}
	return errors.Join(err, m.bs.Close())
}
