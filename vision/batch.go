package vision

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// BatchError is the error of one image of a batch.
type BatchError struct {
	// Index is the image's position in the batch.
	Index int
	// Sample is its sample ID.
	Sample int64
	// Err is the cause (matches ErrImage for bad bytes).
	Err error
}

// Error names the image, its sample and the cause.
func (e *BatchError) Error() string {
	return fmt.Sprintf("vision: image %d of the batch (sample %d): %v", e.Index, e.Sample, e.Err)
}

// Unwrap returns the cause.
func (e *BatchError) Unwrap() error { return e.Err }

// Decoder decodes batches on a fixed number of goroutines with reusable
// scratch buffers. It is safe for concurrent use.
type Decoder struct {
	spec    Spec
	workers int
	pool    sync.Pool
}

// NewDecoder checks spec and returns a decoder for it using workers
// goroutines per batch (0: GOMAXPROCS). DecodeBatch needs a fixed output
// size (Height and Width); Decode does not.
func NewDecoder(spec Spec, workers int) (*Decoder, error) {
	if err := spec.Check(); err != nil {
		return nil, err
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	d := &Decoder{spec: spec, workers: workers}
	d.pool.New = func() any { return new(scratch) }
	return d, nil
}

// ImageSize returns the bytes of one decoded image (0 without a fixed
// output size).
func (d *Decoder) ImageSize() int { return d.spec.Height * d.spec.Width * 3 }

// Decode decodes one image as the package's Decode does, with the
// decoder's spec and reusable scratch buffers. It is safe for concurrent
// use.
func (d *Decoder) Decode(dst, src []byte, epoch, sample int64) (Image, error) {
	sc := d.pool.Get().(*scratch)
	defer d.pool.Put(sc)
	return decode(dst, src, &d.spec, epoch, sample, sc)
}

// DecodeBatch decodes srcs[i] (sample samples[i]) into
// dst[i*ImageSize():(i+1)*ImageSize()], in parallel. dst must hold
// len(srcs) images. It returns the first error by index (a *BatchError);
// the other images are still decoded.
func (d *Decoder) DecodeBatch(dst []byte, srcs [][]byte, samples []int64, epoch int64) error {
	n := d.ImageSize()
	if n == 0 {
		return errors.New("vision: batches need a fixed output size (Height and Width)")
	}
	if len(samples) != len(srcs) {
		return fmt.Errorf("vision: %d images but %d sample IDs", len(srcs), len(samples))
	}
	if len(dst) < len(srcs)*n {
		return fmt.Errorf("vision: destination of %d bytes for %d images of %d", len(dst), len(srcs), n)
	}
	errs := make([]error, len(srcs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(d.workers, len(srcs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := d.pool.Get().(*scratch)
			defer d.pool.Put(sc)
			for {
				i := int(next.Add(1) - 1)
				if i >= len(srcs) {
					return
				}
				out := dst[i*n : (i+1)*n : (i+1)*n]
				if _, err := decode(out, srcs[i], &d.spec, epoch, samples[i], sc); err != nil {
					errs[i] = &BatchError{Index: i, Sample: samples[i], Err: err}
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
