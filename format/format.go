// Package format holds the vocabulary shared by Sluice's shard formats: the
// index.json model (Index, ShardInfo, FileInfo) with a lenient parser and a
// byte-exact writer, the Shard interface the streaming engine reads through,
// the Sample value model, and the corruption error every decoder returns.
//
// The formats themselves live in sub-packages: format/mds (MosaicML MDS),
// format/jsonl and format/xsv (MosaicML's split formats), format/wds
// (WebDataset). Codecs live in format/compress, file hashes in
// format/hashing. Python-compatible JSON text (json.dumps formatting, float
// repr, NaN-tolerant parsing) is here too, because index.json, shard headers
// and several encodings share it.
//
// Nothing in this package does I/O.
//
// # Errors
//
// Malformed input yields an error matching ErrCorrupt (errors.Is); errors.As
// reaches the *CorruptError that names the file, shard, sample and offset.
package format

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrCorrupt is matched (errors.Is) by every error that reports malformed
// input: a bad index, a truncated shard, an out-of-range offset, a value
// that does not decode.
var ErrCorrupt = errors.New("corrupt data")

// CorruptError locates malformed input. It matches ErrCorrupt with errors.Is
// and unwraps to its cause.
//
// Negative Shard, Sample and Offset mean "not known" and are left out of
// the message; constructors in this module set the unknown ones to -1.
type CorruptError struct {
	// File is the file's name as the index gives it (or "index.json").
	File string
	// Shard is the shard's position in the index, -1 if not known.
	Shard int
	// Sample is the sample's position in its shard, -1 if not known.
	Sample int
	// Offset is the byte offset in File where the problem was found, -1 if
	// not known.
	Offset int64
	// Reason says what is wrong, lowercase, without the location.
	Reason string
	// Err is the underlying cause, may be nil.
	Err error
}

// Corruptf returns a *CorruptError for file with every location unknown
// (set the fields afterwards) and a formatted reason.
func Corruptf(file string, format string, args ...any) *CorruptError {
	return &CorruptError{File: file, Shard: -1, Sample: -1, Offset: -1, Reason: fmt.Sprintf(format, args...)}
}

// Error formats the location and reason: "file: shard 3: sample 7: offset
// 120: reason: cause".
func (e *CorruptError) Error() string {
	var b strings.Builder
	b.WriteString("corrupt")
	if e.File != "" {
		b.WriteString(" ")
		b.WriteString(strconv.Quote(e.File))
	}
	if e.Shard >= 0 {
		b.WriteString(": shard ")
		b.WriteString(strconv.Itoa(e.Shard))
	}
	if e.Sample >= 0 {
		b.WriteString(": sample ")
		b.WriteString(strconv.Itoa(e.Sample))
	}
	if e.Offset >= 0 {
		b.WriteString(": offset ")
		b.WriteString(strconv.FormatInt(e.Offset, 10))
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the cause.
func (e *CorruptError) Unwrap() error { return e.Err }

// Shard is one opened shard of any format, as the streaming engine sees it:
// a count of samples and, for each, the byte range of its record in the raw
// (uncompressed) shard file.
//
// Implementations are safe for concurrent use by multiple goroutines, except
// Close, which must not run concurrently with other calls.
type Shard interface {
	// Len returns the number of samples in the shard.
	Len() int
	// Span returns the byte range [off, off+n) of sample j's record in the
	// raw shard file (for split formats: in the data file). Errors match
	// ErrCorrupt; j outside [0, Len()) is an error.
	Span(j int) (off, n int64, err error)
	// Record returns sample j's record bytes. The slice is a view into the
	// shard's storage (for example a memory map): it must not be modified
	// and is valid only until Close.
	Record(j int) ([]byte, error)
	// Close releases the shard's resources. Views returned by Record become
	// invalid.
	Close() error
}
