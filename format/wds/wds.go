package wds

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/sluicedata/sluice/format"
)

// ErrCorrupt reports a malformed archive. Errors returned for bad input match
// it with errors.Is.
var ErrCorrupt = errors.New("wds: corrupt archive")

// ErrTooLarge is the cause (reachable with errors.Is) of a CorruptError for a
// member or sample larger than the configured limits.
var ErrTooLarge = errors.New("wds: size over limit")

// ErrUnsupported is the cause (reachable with errors.Is) of a CorruptError
// for a member Sluice cannot serve although tar readers read it: a sparse
// file (tar --sparse), whose bytes are not stored in one piece.
var ErrUnsupported = errors.New("wds: unsupported tar member")

// Default limits used when ReaderOptions leaves a field zero.
const (
	DefaultMaxMemberSize = 1 << 30 // bytes per member
	DefaultMaxSampleSize = 2 << 30 // bytes per sample, all fields together
	DefaultMaxFields     = 1024    // fields per sample
)

// CorruptError describes a malformed archive: the member (if known), the
// byte offset in the archive, and what was wrong. It matches ErrCorrupt.
type CorruptError struct {
	// Shard names the archive (a file or URL), empty when not known.
	Shard string
	// Member is the tar member name, empty when the error precedes it.
	Member string
	// Offset is the byte position in the archive where the problem lies
	// (the member's header for member problems); -1 when not known.
	Offset int64
	// Reason says what was wrong.
	Reason string
	// Err is the underlying cause, if any.
	Err error
}

// Error formats the member, offset and reason.
func (e *CorruptError) Error() string {
	var b strings.Builder
	b.WriteString("wds: corrupt archive")
	if e.Shard != "" {
		fmt.Fprintf(&b, " %s", e.Shard)
	}
	if e.Member != "" {
		fmt.Fprintf(&b, ": member %q", e.Member)
	}
	if e.Offset >= 0 {
		fmt.Fprintf(&b, " at offset %d", e.Offset)
	}
	fmt.Fprintf(&b, ": %s", e.Reason)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Is reports whether target is ErrCorrupt or format.ErrCorrupt.
func (e *CorruptError) Is(target error) bool {
	return target == ErrCorrupt || target == format.ErrCorrupt
}

// Unwrap returns the underlying cause.
func (e *CorruptError) Unwrap() error { return e.Err }

// Sample is one WebDataset sample: the members sharing a key.
type Sample struct {
	// Key is the member name up to the first dot of its base name, including
	// any directory part ("train/0001" for "train/0001.jpg").
	Key string
	// Fields maps each field name (the member name after the key's dot, for
	// example "jpg" or "seg.png") to the member's bytes.
	Fields map[string][]byte
	// Order lists the field names in archive order.
	Order []string
}

// Size returns the total number of field bytes in the sample.
func (s *Sample) Size() int64 {
	var n int64
	for _, b := range s.Fields {
		n += int64(len(b))
	}
	return n
}

// SplitName splits a member name into its sample key and field name by
// WebDataset's rule (base_plus_ext's pattern ^((?:.*/|)[^.]+)[.]([^/]*)$):
// the key is the directory part plus the base name up to its first dot,
// the field is the rest of the base name after that dot (possibly empty),
// lowercased. A base name that starts with a dot ("dir/.hidden") is keyed
// by its directory with the slash ("dir/", field "hidden") when the
// directory's last element has no dot, as webdataset yields it. ok is false
// for names that belong to no sample: a base name without a dot, a
// top-level name starting with one, or a hidden name whose directory's last
// element has a dot.
func SplitName(name string) (key, field string, ok bool) {
	d, ok := splitAt(name)
	if !ok {
		return "", "", false
	}
	return name[:d], strings.ToLower(name[d+1:]), true
}

// splitAt returns the position d of the dot that ends name's key, or !ok
// when name belongs to no sample. It is base_plus_ext's pattern
// ^((?:.*/|)[^.]+)[.]([^/]*)$ under Python's backtracking: the dot is the
// first of the last path element, and the dot-free run before it must
// start at the beginning of the name or just after a slash that no newline
// precedes (Python's "." does not match a newline).
func splitAt[S ~string | ~[]byte](name S) (d int, ok bool) {
	k := lastIndexByte(name, '/') + 1
	d = indexByte(name[k:], '.')
	if d < 0 {
		return 0, false
	}
	d += k
	if d > k && (k == 0 || indexByte(name[:k], '\n') < 0) {
		return d, true // the usual name: the run is the stem, after the last slash
	}
	if d == 0 {
		return 0, false // a top-level hidden name
	}
	q := lastIndexByte(name[:d], '.') + 1 // where the dot-free run before d starts
	end := d - 1
	if nl := indexByte(name, '\n'); nl >= 0 && nl < end {
		end = nl
	}
	if i := lastIndexByte(name[:end], '/'); i >= 0 && i+1 >= q {
		return d, true
	}
	return d, q == 0
}

func lastIndexByte[S ~string | ~[]byte](s S, c byte) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func indexByte[S ~string | ~[]byte](s S, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// isMeta reports whether WebDataset skips the member name as metadata: a
// top-level name that starts and ends with "__", or one whose first path
// element has the form "__X__".
func isMeta(name string) bool {
	if !strings.Contains(name, "/") && strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__") {
		return true
	}
	if !strings.HasPrefix(name, "__") {
		return false
	}
	first, _, _ := strings.Cut(name, "/")
	return len(first) >= 4 && strings.HasSuffix(first, "__")
}

// checkName rejects member names Sluice refuses to serve: names that are
// not UTF-8, contain NUL, or have a ".." path element.
func checkName(name string) string {
	if !utf8.ValidString(name) {
		return "member name is not valid UTF-8"
	}
	if strings.ContainsRune(name, 0) {
		return "member name contains NUL"
	}
	for rest := name; rest != ""; {
		el, after, _ := strings.Cut(rest, "/")
		if el == ".." {
			return "member name has a \"..\" element"
		}
		rest = after
	}
	return ""
}

// validKey reports whether key can be written as a sample key: non-empty,
// no dot in its last element, no NUL, not absolute, no "." or ".." elements.
func validKey(key string) error {
	if key == "" {
		return errors.New("empty key")
	}
	if strings.ContainsRune(key, 0) {
		return errors.New("key contains NUL")
	}
	if strings.HasPrefix(key, "/") {
		return errors.New("key is absolute")
	}
	for _, el := range strings.Split(key, "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("key %q has an empty, \".\" or \"..\" element", key)
		}
	}
	if strings.Contains(path.Base(key), ".") {
		return fmt.Errorf("key %q has a dot in its last element", key)
	}
	return nil
}

// validField reports whether field can be written as a field name.
func validField(field string) error {
	if field == "" {
		return errors.New("empty field name")
	}
	if strings.ContainsAny(field, "/\x00") {
		return fmt.Errorf("field %q contains '/' or NUL", field)
	}
	if strings.HasPrefix(field, ".") || strings.HasSuffix(field, ".") {
		return fmt.Errorf("field %q starts or ends with a dot", field)
	}
	return nil
}
