package storage

import "io"

// ResumableCheck is implemented by the readers of NewRangeReader that
// check a whole object's body against the store's checksum as it is read
// (CheckedReader's, s3store's), and by the decorators' readers that wrap
// them. When such a body breaks midway, the retry decorator resumes the
// read with a ranged request for the rest, whose response carries no
// checksum; it passes that response to ContinueCheck of the broken body,
// which returns it checked as the continuation of the bytes already read:
// the Read that reaches the object's end fails with ErrChecksum when the
// whole object, across every request, does not match. Without it a read
// resumed once went unchecked from its start.
type ResumableCheck interface {
	// ContinueCheck returns rest, the object's bytes from the one after
	// the last that this body's Reads returned, checked with them
	// against the object's checksum; rest itself when this body is not
	// checked. This body is not read again.
	ContinueCheck(rest io.Reader) io.Reader
}

// ContinueCheck returns rest checked as the continuation of prev when prev
// is a checked body (ResumableCheck), else rest.
func ContinueCheck(prev, rest io.Reader) io.Reader {
	if c, ok := prev.(ResumableCheck); ok {
		return c.ContinueCheck(rest)
	}
	return rest
}

// ContinueCheck implements ResumableCheck: the continuation shares the sum
// of the bytes read so far.
func (c *sumReader) ContinueCheck(rest io.Reader) io.Reader {
	return &sumReader{r: rest, h: c.h, sum: c.sum, name: c.name}
}

// ContinueCheck implements ResumableCheck for the body it wraps.
func (r *bodyReader) ContinueCheck(rest io.Reader) io.Reader { return ContinueCheck(r.body, rest) }
