// Package compress implements the shard codecs of MosaicML Streaming: br,
// bz2, gz, snappy (raw block format) and zstd (one frame that records its
// content size), selected by a compression string "family[:level]".
//
// Compression works on whole byte slices, as the writer compresses whole
// shards. Decompression is bounded by the expected raw size, so a hostile
// file cannot make a reader allocate or write more than the index declares.
package compress

import (
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/andybalholm/brotli"
	dbzip2 "github.com/dsnet/compress/bzip2"
	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
)

// ErrTooLarge is returned when decompressed data exceeds its bound.
var ErrTooLarge = errors.New("compress: decompressed data exceeds the expected size")

// ErrRatio is matched (errors.Is) by the error for a raw size claimed
// beyond what the compression ratio cap allows: a decompression bomb, or
// an index that lies about a shard.
var ErrRatio = errors.New("compress: claimed raw size exceeds the compression ratio cap")

// DefaultMaxRatio is the ratio cap Decompress applies and CheckRatio's
// default: a file of n compressed bytes may claim at most
// n·DefaultMaxRatio + RatioSlack raw bytes. Real shards compress 1–20×;
// even zero-padded tensors stay far below it.
const DefaultMaxRatio = 1024

// RatioSlack is the raw size any compressed file may claim whatever its
// length (tiny files of repeated bytes reach high ratios harmlessly).
const RatioSlack = 1 << 20

// CheckRatio fails with ErrRatio when raw bytes are claimed for a file of
// compressed bytes beyond maxRatio (zero means DefaultMaxRatio). A claim
// is input from outside: check it before reserving space or memory.
func CheckRatio(compressed, raw int64, maxRatio int64) error {
	if maxRatio <= 0 {
		maxRatio = DefaultMaxRatio
	}
	if compressed < 0 || raw < 0 {
		return fmt.Errorf("%w: negative size (compressed %d, raw %d)", ErrRatio, compressed, raw)
	}
	limit := int64(RatioSlack)
	if compressed > (1<<62)/maxRatio {
		limit = 1 << 62
	} else {
		limit += compressed * maxRatio
	}
	if raw > limit {
		return fmt.Errorf("%w: %d raw bytes claimed for %d compressed bytes (a ratio of %.0f; the cap is %d)",
			ErrRatio, raw, compressed, float64(raw)/float64(max(compressed, 1)), maxRatio)
	}
	return nil
}

// Spec is a parsed compression string.
type Spec struct {
	// Family is br, bz2, gz, snappy or zstd; "" means no compression.
	Family string
	// Level is the effective level (the family's default when the string
	// has none); 0 for snappy and none.
	Level int
	// Text is the string as given, which index.json records.
	Text string
}

type family struct {
	min, max, def int
	levels        bool
}

var families = map[string]family{
	"br":     {0, 11, 11, true},
	"bz2":    {1, 9, 9, true},
	"gz":     {0, 9, 9, true},
	"snappy": {0, 0, 0, false},
	"zstd":   {1, 22, 3, true},
}

// Families returns the supported family names, sorted.
func Families() []string { return []string{"br", "bz2", "gz", "snappy", "zstd"} }

// Parse validates a compression string as MosaicML's writer does: a
// family, or family:level with the level in the family's range. The empty
// string means no compression.
func Parse(s string) (Spec, error) {
	if s == "" {
		return Spec{}, nil
	}
	name, lvl, hasLevel := strings.Cut(s, ":")
	f, ok := families[name]
	if !ok {
		return Spec{}, fmt.Errorf("compress: unsupported compression %q", s)
	}
	sp := Spec{Family: name, Level: f.def, Text: s}
	if hasLevel {
		n, err := strconv.Atoi(lvl)
		if err != nil || !f.levels || n < f.min || n > f.max || strings.HasPrefix(lvl, "+") {
			return Spec{}, fmt.Errorf("compress: invalid level in %q", s)
		}
		sp.Level = n
	}
	return sp, nil
}

// Valid reports whether family can be decompressed.
func Valid(family string) bool {
	_, ok := families[family]
	return ok
}

// Compressor compresses whole buffers with one Spec. It is safe for
// concurrent use; zstd encoders are shared across calls.
type Compressor struct {
	spec Spec
	zenc *zstd.Encoder
}

// NewCompressor returns a Compressor for the compression string s.
func NewCompressor(s string) (*Compressor, error) {
	sp, err := Parse(s)
	if err != nil {
		return nil, err
	}
	if sp.Family == "" {
		return nil, errors.New("compress: no compression given")
	}
	c := &Compressor{spec: sp}
	if sp.Family == "zstd" {
		c.zenc, err = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(sp.Level)),
			zstd.WithZeroFrames(true),
			// Single-segment frames always record the content size; without
			// it, frames under 256 bytes would omit it and Python's zstd
			// module would refuse them.
			zstd.WithSingleSegment(true),
			zstd.WithEncoderCRC(false))
		if err != nil {
			return nil, fmt.Errorf("compress: zstd: %w", err)
		}
	}
	return c, nil
}

// Spec returns the parsed compression string.
func (c *Compressor) Spec() Spec { return c.spec }

// Compress appends the compressed form of src to dst.
func (c *Compressor) Compress(dst, src []byte) ([]byte, error) {
	switch c.spec.Family {
	case "zstd":
		return c.zenc.EncodeAll(src, dst), nil
	case "snappy":
		n := snappy.MaxEncodedLen(len(src))
		if n < 0 {
			return nil, errors.New("compress: snappy: input too large")
		}
		start := len(dst)
		dst = grow(dst, n)
		out := snappy.Encode(dst[start:start+n], src)
		return dst[:start+len(out)], nil
	}
	buf := bytes.NewBuffer(dst)
	var w io.WriteCloser
	var err error
	switch c.spec.Family {
	case "gz":
		w, err = gzip.NewWriterLevel(buf, c.spec.Level)
	case "bz2":
		w, err = dbzip2.NewWriter(buf, &dbzip2.WriterConfig{Level: c.spec.Level})
	case "br":
		w = brotli.NewWriterLevel(buf, c.spec.Level)
	}
	if err != nil {
		return nil, fmt.Errorf("compress: %s: %w", c.spec.Family, err)
	}
	if _, err := w.Write(src); err != nil {
		return nil, fmt.Errorf("compress: %s: %w", c.spec.Family, err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("compress: %s: %w", c.spec.Family, err)
	}
	return buf.Bytes(), nil
}

// Close releases the Compressor's resources.
func (c *Compressor) Close() error {
	if c.zenc != nil {
		return c.zenc.Close()
	}
	return nil
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n)
	copy(nb, b)
	return nb
}

// Bound returns a capacity that holds the compressed form of n bytes for
// every family without growing (incompressible data expands slightly).
func Bound(n int) int { return n + n/128 + 1024 }

// Compress is a one-shot helper: it compresses src with the compression
// string s.
func Compress(s string, src []byte) ([]byte, error) {
	c, err := NewCompressor(s)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Compress(nil, src)
}

// Decompress decompresses src of the given family and returns at most
// maxSize bytes; a larger result is ErrTooLarge. The result is a new slice.
//
// maxSize is usually a size an index claims, so it is not trusted: a bound
// beyond DefaultMaxRatio times len(src) fails with ErrRatio before any
// memory is allocated for it.
func Decompress(family string, src []byte, maxSize int64) ([]byte, error) {
	if maxSize < 0 {
		return nil, errors.New("compress: negative size bound")
	}
	if err := CheckRatio(int64(len(src)), maxSize, 0); err != nil {
		return nil, err
	}
	switch family {
	case "snappy":
		n, err := snappy.DecodedLen(src)
		if err != nil {
			return nil, fmt.Errorf("compress: snappy: %w", err)
		}
		if int64(n) > maxSize {
			return nil, ErrTooLarge
		}
		out, err := snappy.Decode(make([]byte, n), src)
		if err != nil {
			return nil, fmt.Errorf("compress: snappy: %w", err)
		}
		return out, nil
	case "zstd":
		var h zstd.Header
		if err := h.Decode(src); err != nil {
			return nil, fmt.Errorf("compress: zstd: %w", err)
		}
		capHint := maxSize
		if h.HasFCS {
			if h.FrameContentSize > uint64(maxSize) {
				return nil, ErrTooLarge
			}
			capHint = int64(h.FrameContentSize)
		}
		if capHint > 64<<20 {
			capHint = 64 << 20 // grow beyond this only with real data
		}
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(max(uint64(maxSize), 1<<16)+1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, fmt.Errorf("compress: zstd: %w", err)
		}
		defer d.Close()
		out, err := d.DecodeAll(src, make([]byte, 0, capHint))
		if err != nil {
			if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
				return nil, ErrTooLarge
			}
			return nil, fmt.Errorf("compress: zstd: %w", err)
		}
		if int64(len(out)) > maxSize {
			return nil, ErrTooLarge
		}
		return out, nil
	}
	var buf bytes.Buffer
	// The expected size is a hint from the index: grow to it, but never
	// allocate more than 64 MiB before real data arrives.
	buf.Grow(int(min(maxSize, 64<<20)) + bytes.MinRead)
	if _, err := DecompressStream(&buf, bytes.NewReader(src), family, maxSize); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DecompressStream decompresses r into w, writing at most maxSize bytes; if
// the data is longer it stops with ErrTooLarge. It returns the number of
// bytes written.
func DecompressStream(w io.Writer, r io.Reader, family string, maxSize int64) (int64, error) {
	var dr io.Reader
	switch family {
	case "gz":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return 0, fmt.Errorf("compress: gz: %w", err)
		}
		dr = zr // concatenated members are read too, as Python does
	case "bz2":
		dr = bzip2.NewReader(r)
	case "br":
		dr = brotli.NewReader(r)
	case "zstd":
		d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(min(uint64(maxSize)+1<<10, zstd.MaxWindowSize)))
		if err != nil {
			return 0, fmt.Errorf("compress: zstd: %w", err)
		}
		defer d.Close()
		dr = d
	case "snappy":
		src, err := io.ReadAll(io.LimitReader(r, maxSize+maxSize/6+64)) // snappy worst case bound
		if err != nil {
			return 0, err
		}
		out, err := Decompress(family, src, maxSize)
		if err != nil {
			return 0, err
		}
		n, err := w.Write(out)
		return int64(n), err
	default:
		return 0, fmt.Errorf("compress: unsupported compression %q", family)
	}
	n, err := io.Copy(w, io.LimitReader(dr, maxSize+1))
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return n, ErrTooLarge
	}
	if err != nil {
		return n, fmt.Errorf("compress: %s: %w", family, err)
	}
	if n > maxSize {
		return n, ErrTooLarge
	}
	return n, nil
}
