package storagetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/sluicedata/sluice/storage"
)

// Op names a Bucket operation for fault injection.
type Op string

// Operations Faulty can fail.
const (
	OpStat   Op = "stat"   // Stat
	OpOpen   Op = "open"   // NewRangeReader, before any byte
	OpRead   Op = "read"   // the body of a reader, after Fault.AfterBytes bytes
	OpWrite  Op = "write"  // NewWriter's Close: the write is abandoned, nothing appears
	OpList   Op = "list"   // List, after Fault.AfterBytes objects were listed
	OpDelete Op = "delete" // Delete, before it happens
)

// Fault is one injected failure. It applies to calls of Op whose key starts
// with Key.
type Fault struct {
	// Op is the operation to fail.
	Op Op
	// Key restricts the fault to keys (or List prefixes) starting with it;
	// empty matches every call.
	Key string
	// Times is the number of matching calls that fail; zero means all.
	Times int
	// Every, when above one, makes only every Every-th matching call fail
	// (the Every-th, the 2*Every-th...), for flaky-store tests.
	Every int
	// Err is the error returned. It may be nil for a Stall, Truncate or a
	// pure Delay.
	Err error
	// AfterBytes is, for OpRead, the number of body bytes delivered before
	// the fault strikes; for OpList, the number of objects listed first.
	AfterBytes int64
	// Truncate, for OpRead, ends the body cleanly with io.EOF after
	// AfterBytes bytes: a silently short body.
	Truncate bool
	// Stall blocks the call (for OpRead: after AfterBytes bytes) until its
	// context is cancelled, then returns the context's error.
	Stall bool
	// Delay waits this long (or until the context ends) before the call
	// proceeds, to add latency.
	Delay time.Duration
}

// Faulty is a storage.Bucket decorator that injects faults into the calls
// it forwards. It is safe for concurrent use.
type Faulty struct {
	storage.Bucket

	// mu guards faults and calls.
	mu     sync.Mutex
	faults []*activeFault
	calls  map[Op]int
}

type activeFault struct {
	Fault
	left int // remaining calls to fail; <0: unlimited
	seen int // matching calls so far, for Every
}

var _ storage.Bucket = (*Faulty)(nil)

// NewFaulty returns a Faulty around b with no faults.
func NewFaulty(b storage.Bucket) *Faulty {
	return &Faulty{Bucket: b, calls: make(map[Op]int)}
}

// Inject adds faults; the first matching fault applies to each call.
func (f *Faulty) Inject(faults ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ft := range faults {
		left := ft.Times
		if left == 0 {
			left = -1
		}
		f.faults = append(f.faults, &activeFault{Fault: ft, left: left})
	}
}

// Clear removes every fault.
func (f *Faulty) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = nil
}

// Calls returns how many calls of op Faulty has seen (for OpRead: how
// many bodies it has handed out).
func (f *Faulty) Calls(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// take counts a call and returns the fault that applies to it, if any.
func (f *Faulty) take(op Op, key string) *Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	for _, ft := range f.faults {
		if ft.Op != op || ft.left == 0 || !strings.HasPrefix(key, ft.Key) {
			continue
		}
		if ft.Every > 1 {
			ft.seen++
			if ft.seen%ft.Every != 0 {
				continue
			}
		}
		if ft.left > 0 {
			ft.left--
		}
		c := ft.Fault
		return &c
	}
	return nil
}

// strike applies a call-level fault: delay, stall, error.
func strike(ctx context.Context, ft *Fault, what string) error {
	if ft == nil {
		return nil
	}
	if ft.Delay > 0 {
		t := time.NewTimer(ft.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("faulty: %s: %w", what, ctx.Err())
		}
	}
	if ft.Stall {
		<-ctx.Done()
		return fmt.Errorf("faulty: %s stalled: %w", what, ctx.Err())
	}
	if ft.Err != nil {
		return fmt.Errorf("faulty: %s: %w", what, ft.Err)
	}
	return nil
}

// Stat implements storage.Bucket.
func (f *Faulty) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	if err := strike(ctx, f.take(OpStat, key), "stat "+key); err != nil {
		return storage.ObjectInfo{}, err
	}
	return f.Bucket.Stat(ctx, key)
}

// NewRangeReader implements storage.Bucket.
func (f *Faulty) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := strike(ctx, f.take(OpOpen, key), "get "+key); err != nil {
		return nil, err
	}
	r, err := f.Bucket.NewRangeReader(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	ft := f.take(OpRead, key)
	if ft == nil {
		return r, nil
	}
	return &faultyReader{ctx: ctx, r: r, ft: ft, key: key}, nil
}

// faultyReader delivers AfterBytes bytes and then fails as its fault says.
type faultyReader struct {
	ctx  context.Context
	r    io.ReadCloser
	ft   *Fault
	key  string
	read int64
}

func (r *faultyReader) Read(p []byte) (int, error) {
	left := r.ft.AfterBytes - r.read
	if left <= 0 {
		if r.ft.Truncate {
			return 0, io.EOF
		}
		if r.ft.Err == nil && !r.ft.Stall && r.ft.Delay == 0 {
			return r.r.Read(p)
		}
		err := strike(r.ctx, r.ft, fmt.Sprintf("read %s at byte %d", r.key, r.read))
		if err == nil { // a pure delay, once
			r.ft = &Fault{AfterBytes: r.read}
			return r.r.Read(p)
		}
		return 0, err
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := r.r.Read(p)
	r.read += int64(n)
	return n, err
}

func (r *faultyReader) Close() error { return r.r.Close() }

// NewWriter implements storage.Bucket. An OpWrite fault makes Close
// abandon the write and return the fault's error.
func (f *Faulty) NewWriter(ctx context.Context, key string, opts *storage.WriteOptions) (io.WriteCloser, error) {
	wctx, cancel := context.WithCancel(ctx)
	w, err := f.Bucket.NewWriter(wctx, key, opts)
	if err != nil {
		cancel()
		return nil, err
	}
	return &faultyWriter{f: f, ctx: ctx, w: w, cancel: cancel, key: key}, nil
}

type faultyWriter struct {
	f      *Faulty
	ctx    context.Context
	w      io.WriteCloser
	cancel context.CancelFunc
	key    string
}

func (w *faultyWriter) Write(p []byte) (int, error) { return w.w.Write(p) }

func (w *faultyWriter) Close() error {
	defer w.cancel()
	if err := strike(w.ctx, w.f.take(OpWrite, w.key), "put "+w.key); err != nil {
		w.cancel()
		_ = w.w.Close() // abandoned
		return err
	}
	return w.w.Close()
}

// List implements storage.Bucket.
func (f *Faulty) List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) error {
	ft := f.take(OpList, prefix)
	if ft == nil {
		return f.Bucket.List(ctx, prefix, fn)
	}
	var listed int64
	errFault := errors.New("fault")
	err := f.Bucket.List(ctx, prefix, func(info storage.ObjectInfo) error {
		if listed == ft.AfterBytes {
			return errFault
		}
		listed++
		return fn(info)
	})
	if err == errFault || (err == nil && listed == ft.AfterBytes) {
		if serr := strike(ctx, ft, "list "+prefix); serr != nil {
			return serr
		}
		if err == errFault { // a pure delay: carry on where we stopped
			return f.Bucket.List(ctx, prefix, func(info storage.ObjectInfo) error {
				if listed > 0 {
					listed--
					return nil
				}
				return fn(info)
			})
		}
	}
	return err
}

// Delete implements storage.Bucket.
func (f *Faulty) Delete(ctx context.Context, key string) error {
	if err := strike(ctx, f.take(OpDelete, key), "delete "+key); err != nil {
		return err
	}
	return f.Bucket.Delete(ctx, key)
}
