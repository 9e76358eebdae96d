package cache

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sluicedata/sluice/storage"
)

// A file of parallelThreshold bytes or more is fetched as ranged GETs,
// and no ranged response carries a checksum of the object: the store's
// checksum of the whole object (S3's CRC64-NVME or CRC32s, GCS's CRC32C)
// comes from a Stat sent beside the first ranges, each range is summed as
// it is read, and the ranges' CRCs are combined and compared at the end
// (storage.RangeCheck). A mismatch is storage.ErrChecksum, and the
// download's next attempt fetches the file again. Where the store reports
// no checksum that ranges combine into (Azure, HTTP, a multipart upload's
// checksum of parts) or refuses the Stat itself (a presigned GET URL, which
// is signed for GETs alone), the ranges go unchecked, as before. Any other
// failed Stat fails the attempt: ranges that could have been checked are
// not cached unchecked because the store's answer did not come.

// Requests returns the number of store requests one download of a file of
// size bytes makes: one GET below the parallel threshold, else a GET per
// ranged part and the Stat that reports the checksum they are checked
// against. The simulator counts a download's requests with it.
func Requests(size int64) int {
	if size < parallelThreshold {
		return 1
	}
	return int((size+partSize-1)/partSize) + 1
}

// rangeSum is the check of one attempt's ranges: the Stat runs on its own
// goroutine, and each range's body waits for its answer before the first
// byte is read (the GETs are already sent, so the Stat's round trip is
// not added to the download's).
type rangeSum struct {
	done chan struct{}
	rc   *storage.RangeCheck // nil: nothing to check against
	err  error               // the Stat's failure, where it fails the attempt
}

// startRangeSum sends the Stat of key, expected to be size bytes. The
// Stat ends with ctx, which the caller cancels when the attempt ends.
func startRangeSum(ctx context.Context, b storage.Bucket, key string, size int64) *rangeSum {
	s := &rangeSum{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		info, err := b.Stat(ctx, key)
		switch {
		case err == nil:
			// A size that differs is noticed by the last range (it asks
			// one byte more), or the object was replaced meanwhile.
			if info.Size == size {
				s.rc = storage.NewRangeCheck(info.Checksum, size)
			}
		case errors.Is(err, storage.ErrPermission), errors.Is(err, errors.ErrUnsupported):
			// Nothing to check against, as with a store that keeps no
			// checksum.
		default:
			s.err = fmt.Errorf("stat for the checksum of the ranges: %w", err)
		}
	}()
	return s
}

// reader returns r summed as the range at off, once the Stat has
// answered.
func (s *rangeSum) reader(ctx context.Context, r io.Reader, off int64) (io.Reader, error) {
	select {
	case <-s.done:
		if s.err != nil {
			return nil, s.err
		}
		return s.rc.Reader(r, off), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// verify waits for the Stat (bounded by its context) and checks the
// ranges read; name names the file in the error.
func (s *rangeSum) verify(name string) error {
	<-s.done
	if s.err != nil {
		return fmt.Errorf("%s: %w", name, s.err)
	}
	return s.rc.Verify(name)
}
