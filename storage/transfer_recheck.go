package storage

import (
	"context"
	"fmt"
)

// recheck follows the i-th read of an object in ranges that did not match
// the checksum its Stat reported (mismatch, an ErrChecksum): either the
// bytes were damaged in transit, or the object was replaced between the
// Stat and the reads, when the old checksum can never match. A second
// Stat tells them apart. It returns the check for the next read, or nil
// and the error to fail with: the object changed size (not ErrChecksum:
// reading it again cannot give the size expected), the Stat failed, or
// checksumReads reads were made; the error says whether the store's
// checksum changed meanwhile.
func recheck(ctx context.Context, b Bucket, key string, size int64, rc *RangeCheck, mismatch error, i int) (*RangeCheck, error) {
	if rc == nil {
		return nil, mismatch
	}
	info, err := b.Stat(ctx, key)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w (and a Stat after it failed: %v)", mismatch, err)
	case info.Size != size:
		return nil, fmt.Errorf("the object changed while it was read: it was %d bytes, is %d (first read: %v)", size, info.Size, mismatch)
	}
	next := NewRangeCheck(info.Checksum, size)
	changed := info.Checksum.String() != rc.sum.String()
	if i >= checksumReads {
		if changed {
			return nil, fmt.Errorf("%w; the object changed while it was read (the store's checksum is now %s)", mismatch, info.Checksum)
		}
		return nil, fmt.Errorf("%w; read %d times, and the store's checksum did not change: damage on every read, or a store whose checksum does not match its bytes", mismatch, i)
	}
	if next == nil {
		// The object was replaced by one with nothing to check against.
		return nil, fmt.Errorf("%w; the object changed while it was read (the store's checksum is now %s)", mismatch, info.Checksum)
	}
	return next, nil
}
