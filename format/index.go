package format

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// IndexFile is the name of a dataset's index.
const IndexFile = "index.json"

// Limits applied to untrusted index values.
const (
	// MaxShardSamples bounds a shard's sample count: every format stores
	// u32 offsets, 4 bytes per sample, in a file below 4 GiB.
	MaxShardSamples = 1 << 30
	// MaxFileBytes bounds any file size an index may declare.
	MaxFileBytes = 1 << 42
	// MaxIndexShards bounds the number of shards in one index.
	MaxIndexShards = 1 << 24
	// MaxColumns bounds the number of columns of a shard.
	MaxColumns = 1 << 16
)

// FileInfo describes one file of a shard: its path relative to the dataset
// directory, its exact size, and hex digests by algorithm name.
type FileInfo struct {
	// Basename is the slash-separated path relative to the dataset
	// directory, for example "shard.00000.mds" or "part0/shard.00000.mds".
	Basename string
	// Bytes is the file's exact size.
	Bytes int64
	// Hashes maps algorithm name to lowercase hex digest. Nil and empty are
	// written alike ({}).
	Hashes map[string]string
}

// ShardInfo is one shard entry of index.json, for any format. Which fields
// are meaningful depends on Format (see the spec, section 2.6):
//
//	mds           ColumnEncodings, ColumnNames, ColumnSizes
//	json          Columns, Newline, RawMeta, ZipMeta
//	csv, tsv      ColumnEncodings, ColumnNames, Newline, RawMeta, ZipMeta
//	xsv           as csv, plus Separator
//
// AppendIndex writes exactly the key set of the format, as MosaicML's
// reader requires, plus any Extra keys.
type ShardInfo struct {
	// Format is "mds", "json", "csv", "tsv" or "xsv" (other formats may
	// define their own).
	Format string
	// Version is the entry's version; ParseIndex accepts only 2.
	Version int
	// Samples is the number of samples; it can be 0.
	Samples int
	// SizeLimit is the writer's shard size limit in bytes; 0 means none and
	// is written as null (MosaicML treats 0 and null alike).
	SizeLimit int64
	// Compression is the writer's compression string ("zstd", "gz:5");
	// "" means none and is written as null.
	Compression string
	// Hashes lists the hash algorithms of the shard's files, sorted.
	Hashes []string
	// RawData is the uncompressed data file (described even when only the
	// compressed form is stored).
	RawData FileInfo
	// ZipData is the compressed data file, nil without compression.
	ZipData *FileInfo
	// RawMeta is the split formats' meta file, nil for mds.
	RawMeta *FileInfo
	// ZipMeta is the compressed meta file, nil without compression.
	ZipMeta *FileInfo

	// ColumnEncodings holds each column's encoding, aligned with
	// ColumnNames (mds, csv, tsv, xsv).
	ColumnEncodings []string
	// ColumnNames holds the column names, sorted (mds, csv, tsv, xsv).
	ColumnNames []string
	// ColumnSizes holds each column's fixed byte size, 0 for variable size
	// (written as null) (mds only).
	ColumnSizes []int
	// Columns maps column name to encoding (json only).
	Columns map[string]string
	// Newline is the record terminator (json, csv, tsv, xsv).
	Newline string
	// Separator is the field separator (xsv only).
	Separator string

	// Extra holds keys this package does not know, as raw JSON text. They
	// are kept by ParseIndex and written back by AppendIndex; MosaicML's
	// reader rejects extra keys, so writers of MosaicML formats leave it nil.
	Extra map[string][]byte
}

// Index is a parsed index.json.
type Index struct {
	// Shards in index order; the order defines shard and sample IDs.
	Shards []ShardInfo
	// Merged selects the layout merge_index writes: "version" before
	// "shards" at the top level. ParseIndex sets it when the input has
	// that key order, so parsing and appending reproduce the text.
	Merged bool
}

// Samples returns the total number of samples.
func (x *Index) Samples() int64 {
	var n int64
	for i := range x.Shards {
		n += int64(x.Shards[i].Samples)
	}
	return n
}

// Files returns the files of s that are stored in a dataset directory: the
// compressed form where there is one, otherwise the raw one; data first,
// then meta.
func (s *ShardInfo) Files() []FileInfo {
	var out []FileInfo
	if s.ZipData != nil {
		out = append(out, *s.ZipData)
	} else {
		out = append(out, s.RawData)
	}
	if s.ZipMeta != nil {
		out = append(out, *s.ZipMeta)
	} else if s.RawMeta != nil {
		out = append(out, *s.RawMeta)
	}
	return out
}

// Family returns the compression family (the part before ':'), "" for
// none.
func (s *ShardInfo) Family() string {
	f, _, _ := strings.Cut(s.Compression, ":")
	return f
}

// CheckBasename reports whether name is safe to resolve under a dataset
// directory: relative, slash-separated, without empty, "." or ".."
// elements, backslashes or NUL bytes. A hostile index must never make a
// reader touch a file outside the dataset.
func CheckBasename(name string) error {
	switch {
	case name == "":
		return errors.New("empty basename")
	case strings.HasPrefix(name, "/"):
		return fmt.Errorf("basename %q is absolute", name)
	case strings.ContainsAny(name, "\\\x00"):
		return fmt.Errorf("basename %q contains a backslash or NUL", name)
	case len(name) >= 2 && name[1] == ':':
		return fmt.Errorf("basename %q has a drive letter", name)
	}
	for _, el := range strings.Split(name, "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("basename %q has a %q path element", name, el)
		}
	}
	return nil
}

// ParseIndex parses index.json text. It is lenient where MosaicML's reader
// is (key order, whitespace, unknown top-level keys; unknown shard keys are
// kept in Extra) and strict about what reading needs: version 2 at the top
// and in every shard, the keys of the shard's format with the right types,
// counts and sizes within limits, and safe basenames (CheckBasename).
// Errors match ErrCorrupt and name the shard.
//
// It is ParseCompactIndex followed by CompactIndex.Index; readers that
// need only sample counts and file names should keep the CompactIndex.
func ParseIndex(b []byte) (*Index, error) {
	c, err := ParseCompactIndex(b)
	if err != nil {
		return nil, err
	}
	return c.Index(), nil
}

// parseConfig sets and checks the writer configuration of a shard entry
// (everything but samples and files) from its values m; extra lists the
// unknown keys, in order.
func parseConfig(s *ShardInfo, m map[string]any, extra []string) error {
	s.Version = 2
	var err error
	if s.Format, err = reqString(m, "format"); err != nil {
		return err
	}
	if lim, present := m["size_limit"]; present && lim != nil {
		n, err := toInt(lim, MaxFileBytes)
		if err != nil {
			return fmt.Errorf("\"size_limit\": %w", err)
		}
		s.SizeLimit = int64(n)
	}
	if c, present := m["compression"]; present && c != nil {
		cs, ok := c.(string)
		if !ok {
			return errors.New("\"compression\" is not a string or null")
		}
		s.Compression = cs
	}
	if h, present := m["hashes"]; present {
		if s.Hashes, err = toStrings(h, "hashes", 64); err != nil {
			return err
		}
	}
	switch s.Format {
	case "mds", "csv", "tsv", "xsv":
		if s.ColumnNames, err = reqStrings(m, "column_names"); err != nil {
			return err
		}
		if s.ColumnEncodings, err = reqStrings(m, "column_encodings"); err != nil {
			return err
		}
		if len(s.ColumnNames) != len(s.ColumnEncodings) {
			return fmt.Errorf("%d column names but %d encodings", len(s.ColumnNames), len(s.ColumnEncodings))
		}
	}
	switch s.Format {
	case "mds":
		sz, present := m["column_sizes"].([]any)
		if !present {
			return errors.New("missing or non-array \"column_sizes\"")
		}
		if len(sz) != len(s.ColumnNames) {
			return fmt.Errorf("%d column sizes for %d columns", len(sz), len(s.ColumnNames))
		}
		s.ColumnSizes = make([]int, len(sz))
		for i, e := range sz {
			if e == nil {
				continue
			}
			n, err := toInt(e, 1<<32)
			if err != nil {
				return fmt.Errorf("\"column_sizes\"[%d]: %w", i, err)
			}
			s.ColumnSizes[i] = n
		}
	case "json", "csv", "tsv", "xsv":
		if s.Newline, err = reqString(m, "newline"); err != nil {
			return err
		}
	}
	switch s.Format {
	case "json":
		cv, ok := m["columns"].(*JSONObject)
		if !ok {
			return errors.New("missing or non-object \"columns\"")
		}
		if len(cv.Keys) > MaxColumns {
			return fmt.Errorf("%d columns exceed the limit", len(cv.Keys))
		}
		s.Columns = make(map[string]string, len(cv.Keys))
		for _, k := range cv.Keys {
			enc, ok := cv.Values[k].(string)
			if !ok {
				return fmt.Errorf("\"columns\"[%q] is not a string", k)
			}
			s.Columns[k] = enc
		}
	case "xsv":
		if s.Separator, err = reqString(m, "separator"); err != nil {
			return err
		}
	}
	for _, k := range extra {
		if s.Extra == nil {
			s.Extra = map[string][]byte{}
		}
		b, err := AppendJSON(nil, m[k], false)
		if err != nil {
			return fmt.Errorf("key %q: %w", k, err)
		}
		s.Extra[k] = b
	}
	return nil
}

func reqString(m map[string]any, key string) (string, error) {
	s, ok := m[key].(string)
	if !ok {
		return "", fmt.Errorf("missing or non-string %q", key)
	}
	return s, nil
}

func reqInt(m map[string]any, key string, max int64) (int, error) {
	v, present := m[key]
	if !present {
		return 0, fmt.Errorf("missing %q", key)
	}
	n, err := toInt(v, max)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", key, err)
	}
	return n, nil
}

func toInt(v any, max int64) (int, error) {
	num, ok := v.(JSONNumber)
	if !ok || !isJSONInt(string(num)) {
		return 0, errors.New("not an integer")
	}
	n, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil || n < 0 || n > max {
		return 0, fmt.Errorf("value %s out of range [0, %d]", num, max)
	}
	return int(n), nil
}

func reqStrings(m map[string]any, key string) ([]string, error) {
	v, present := m[key]
	if !present {
		return nil, fmt.Errorf("missing %q", key)
	}
	return toStrings(v, key, MaxColumns)
}

func toStrings(v any, key string, max int) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%q is not an array", key)
	}
	if len(arr) > max {
		return nil, fmt.Errorf("%q has %d entries, more than %d", key, len(arr), max)
	}
	out := make([]string, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("%q[%d] is not a string", key, i)
		}
		out[i] = s
	}
	return out, nil
}

// AppendIndex appends idx as MosaicML writes index.json: Python's
// json.dump(sort_keys=True) text (one line, ", " and ": " separators,
// ASCII-only escaping, no trailing newline), or, with idx.Merged, the
// merge_index layout whose top level is {"version": 2, "shards": [...]}.
// Each shard entry has exactly its format's key set (plus Extra).
func AppendIndex(dst []byte, idx *Index) []byte {
	if idx.Merged {
		dst = append(dst, `{"version": 2, "shards": [`...)
	} else {
		dst = append(dst, `{"shards": [`...)
	}
	for i := range idx.Shards {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = appendShard(dst, &idx.Shards[i], true)
	}
	if idx.Merged {
		return append(dst, "]}"...)
	}
	return append(dst, `], "version": 2}`...)
}

// AppendConfig appends the writer configuration of s as a shard file
// carries it (the MDS header, the split formats' meta file): the entry's
// keys without samples and the file descriptions, in Python's
// sort_keys=True text.
func AppendConfig(dst []byte, s *ShardInfo) []byte {
	return appendShard(dst, s, false)
}

func appendShard(dst []byte, s *ShardInfo, files bool) []byte {
	type kv struct {
		k string
		f func([]byte) []byte
	}
	var kvs []kv
	add := func(k string, f func([]byte) []byte) { kvs = append(kvs, kv{k, f}) }
	fileOrNull := func(fi *FileInfo) func([]byte) []byte {
		return func(b []byte) []byte {
			if fi == nil {
				return append(b, "null"...)
			}
			return appendFileInfo(b, fi)
		}
	}
	strs := func(v []string) func([]byte) []byte {
		return func(b []byte) []byte {
			b = append(b, '[')
			for i, x := range v {
				if i > 0 {
					b = append(b, ", "...)
				}
				b = AppendJSONString(b, x)
			}
			return append(b, ']')
		}
	}
	add("compression", func(b []byte) []byte {
		if s.Compression == "" {
			return append(b, "null"...)
		}
		return AppendJSONString(b, s.Compression)
	})
	add("format", func(b []byte) []byte { return AppendJSONString(b, s.Format) })
	add("hashes", strs(s.Hashes))
	add("size_limit", func(b []byte) []byte {
		if s.SizeLimit <= 0 {
			return append(b, "null"...)
		}
		return strconv.AppendInt(b, s.SizeLimit, 10)
	})
	add("version", func(b []byte) []byte { return append(b, '2') })
	if files {
		add("raw_data", fileOrNull(&s.RawData))
		add("samples", func(b []byte) []byte { return strconv.AppendInt(b, int64(s.Samples), 10) })
		add("zip_data", fileOrNull(s.ZipData))
	}
	split := false
	switch s.Format {
	case "mds":
		add("column_encodings", strs(s.ColumnEncodings))
		add("column_names", strs(s.ColumnNames))
		add("column_sizes", func(b []byte) []byte {
			b = append(b, '[')
			for i, n := range s.ColumnSizes {
				if i > 0 {
					b = append(b, ", "...)
				}
				if n <= 0 {
					b = append(b, "null"...)
				} else {
					b = strconv.AppendInt(b, int64(n), 10)
				}
			}
			return append(b, ']')
		})
	case "json":
		split = true
		add("columns", func(b []byte) []byte {
			keys := make([]string, 0, len(s.Columns))
			for k := range s.Columns {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			b = append(b, '{')
			for i, k := range keys {
				if i > 0 {
					b = append(b, ", "...)
				}
				b = AppendJSONString(b, k)
				b = append(b, ": "...)
				b = AppendJSONString(b, s.Columns[k])
			}
			return append(b, '}')
		})
	case "csv", "tsv", "xsv":
		split = true
		add("column_encodings", strs(s.ColumnEncodings))
		add("column_names", strs(s.ColumnNames))
		if s.Format == "xsv" {
			add("separator", func(b []byte) []byte { return AppendJSONString(b, s.Separator) })
		}
	}
	if split {
		add("newline", func(b []byte) []byte { return AppendJSONString(b, s.Newline) })
		if files {
			add("raw_meta", fileOrNull(s.RawMeta))
			add("zip_meta", fileOrNull(s.ZipMeta))
		}
	}
	for k, v := range s.Extra {
		v := v
		add(k, func(b []byte) []byte { return append(b, v...) })
	}
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].k < kvs[j].k })
	dst = append(dst, '{')
	for i, e := range kvs {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = AppendJSONString(dst, e.k)
		dst = append(dst, ": "...)
		dst = e.f(dst)
	}
	return append(dst, '}')
}

func appendFileInfo(dst []byte, fi *FileInfo) []byte {
	dst = append(dst, `{"basename": `...)
	dst = AppendJSONString(dst, fi.Basename)
	dst = append(dst, `, "bytes": `...)
	dst = strconv.AppendInt(dst, fi.Bytes, 10)
	dst = append(dst, `, "hashes": {`...)
	keys := make([]string, 0, len(fi.Hashes))
	for k := range fi.Hashes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = AppendJSONString(dst, k)
		dst = append(dst, ": "...)
		dst = AppendJSONString(dst, fi.Hashes[k])
	}
	return append(dst, "}}"...)
}
