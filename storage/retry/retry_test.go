package retry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// clock records the waits the decorator asks for and returns at once.
type clock struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (c *clock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.delays = append(c.delays, d)
	c.mu.Unlock()
	return ctx.Err()
}

func (c *clock) got() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.delays...)
}

func noJitter(d time.Duration) time.Duration { return d }

func newRetry(t *testing.T, b storage.Bucket, o *retry.Options) (*retry.Bucket, *clock) {
	t.Helper()
	c := &clock{}
	if o == nil {
		o = &retry.Options{}
	}
	if o.Sleep == nil {
		o.Sleep = c.sleep
	}
	if o.Jitter == nil {
		o.Jitter = noJitter
	}
	r, err := retry.New(b, o)
	if err != nil {
		t.Fatal(err)
	}
	return r, c
}

var errReset = fmt.Errorf("read tcp: %w", syscall.ECONNRESET)

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Bucket {
		m := memstore.New("retry")
		b, _ := newRetry(t, m, nil)
		t.Cleanup(func() { b.Close() })
		return b
	})
}

// TestConformanceFlaky runs the suite on a store where every third call of
// each kind fails with a transient error: the decorator must hide them all.
// (Delete is left out: after a failed attempt, a missing object counts as
// deleted, so "Delete of a missing key fails" cannot hold; see
// TestDeleteLostResponse.)
func TestConformanceFlaky(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Bucket {
		f := storagetest.NewFaulty(memstore.New("flaky"))
		f.Inject(
			storagetest.Fault{Op: storagetest.OpStat, Every: 3, Err: storage.Temporary(errors.New("blip"))},
			storagetest.Fault{Op: storagetest.OpOpen, Every: 3, Err: &storage.HTTPError{Op: "get", StatusCode: 503}},
			storagetest.Fault{Op: storagetest.OpRead, Every: 3, AfterBytes: 1000, Err: errReset},
			storagetest.Fault{Op: storagetest.OpList, Every: 2, AfterBytes: 3, Err: &storage.HTTPError{Op: "list", StatusCode: 500}},
		)
		b, _ := newRetry(t, f, nil)
		t.Cleanup(func() { b.Close() })
		return b
	})
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		times int
		opts  retry.Options
		want  []time.Duration
	}{
		{
			name: "exponential, capped", err: errReset, times: 6,
			opts: retry.Options{InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second},
			want: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second},
		},
		{
			name: "throttled waits at least ThrottleBackoff", err: &storage.HTTPError{Op: "stat", StatusCode: 503, Code: "SlowDown"}, times: 2,
			opts: retry.Options{InitialBackoff: 100 * time.Millisecond, ThrottleBackoff: 2 * time.Second},
			want: []time.Duration{2 * time.Second, 2 * time.Second},
		},
		{
			name: "Retry-After honoured", err: &storage.HTTPError{Op: "stat", StatusCode: 429, RetryAfter: 7 * time.Second}, times: 1,
			opts: retry.Options{ThrottleBackoff: time.Second},
			want: []time.Duration{7 * time.Second},
		},
		{
			name: "Retry-After capped", err: &storage.HTTPError{Op: "stat", StatusCode: 503, RetryAfter: time.Hour}, times: 1,
			opts: retry.Options{MaxRetryAfter: time.Minute},
			want: []time.Duration{time.Minute},
		},
		{
			name: "500 retried", err: &storage.HTTPError{Op: "stat", StatusCode: 500}, times: 2,
			opts: retry.Options{InitialBackoff: time.Second},
			want: []time.Duration{time.Second, 2 * time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memstore.New("b")
			storagetest.Put(t, m, "k", []byte("x"))
			f := storagetest.NewFaulty(m)
			f.Inject(storagetest.Fault{Op: storagetest.OpStat, Times: tt.times, Err: tt.err})
			var events []retry.Event
			tt.opts.OnRetry = func(e retry.Event) { events = append(events, e) }
			b, c := newRetry(t, f, &tt.opts)
			if _, err := b.Stat(t.Context(), "k"); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.got()); diff != "" {
				t.Errorf("delays (-want +got):\n%s", diff)
			}
			if len(events) != tt.times || events[0].Op != "stat" || events[0].Attempt != 1 || !errors.Is(events[0].Err, tt.err) {
				t.Errorf("OnRetry events = %+v", events)
			}
			if got := f.Calls(storagetest.OpStat); got != tt.times+1 {
				t.Errorf("%d calls, want %d", got, tt.times+1)
			}
		})
	}
}

func TestDefaultJitterStaysInRange(t *testing.T) {
	m := memstore.New("b")
	storagetest.Put(t, m, "k", []byte("x"))
	f := storagetest.NewFaulty(m)
	f.Inject(storagetest.Fault{Op: storagetest.OpStat, Times: 8, Err: errReset})
	c := &clock{}
	b, err := retry.New(f, &retry.Options{Sleep: c.sleep, InitialBackoff: time.Second, MaxBackoff: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	for i, d := range c.got() {
		nominal := min(time.Second<<i, 4*time.Second)
		if d < nominal/2 || d > nominal {
			t.Errorf("wait %d = %v, want within [%v, %v]", i, d, nominal/2, nominal)
		}
	}
}

func TestPermanentErrorsAreNotRetried(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"not exist", storage.ErrNotExist},
		{"permission", storage.ErrPermission},
		{"precondition", storage.ErrPrecondition},
		{"HTTP 403", &storage.HTTPError{Op: "stat", StatusCode: http.StatusForbidden}},
		{"HTTP 404", &storage.HTTPError{Op: "stat", StatusCode: http.StatusNotFound}},
		{"HTTP 400", &storage.HTTPError{Op: "stat", StatusCode: http.StatusBadRequest}},
		{"marked permanent", storage.Permanent(errors.New("bad config"))},
		{"no space", &os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}},
		{"invalid key", storage.ErrInvalidKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := storagetest.NewFaulty(memstore.New("b"))
			f.Inject(storagetest.Fault{Op: storagetest.OpStat, Err: tt.err}, storagetest.Fault{Op: storagetest.OpOpen, Err: tt.err})
			b, c := newRetry(t, f, nil)
			if _, err := b.Stat(t.Context(), "k"); !errors.Is(err, tt.err) {
				t.Errorf("Stat = %v, want %v", err, tt.err)
			}
			if _, err := b.NewRangeReader(t.Context(), "k", 0, -1); !errors.Is(err, tt.err) {
				t.Errorf("NewRangeReader = %v, want %v", err, tt.err)
			}
			if n := f.Calls(storagetest.OpStat) + f.Calls(storagetest.OpOpen); n != 2 {
				t.Errorf("%d calls, want 1 each", n)
			}
			if len(c.got()) != 0 {
				t.Errorf("waited %v", c.got())
			}
		})
	}
}

func TestBudget(t *testing.T) {
	f := storagetest.NewFaulty(memstore.New("b"))
	cause := &storage.HTTPError{Op: "stat", URL: "mem://b/k", StatusCode: 503, Code: "SlowDown"}
	f.Inject(storagetest.Fault{Op: storagetest.OpStat, Err: cause})
	b, c := newRetry(t, f, &retry.Options{MaxAttempts: 4})
	_, err := b.Stat(t.Context(), "k")
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 4 || re.Op != "stat" || re.URL != "mem://b/k" {
		t.Fatalf("Stat = %#v, want a *retry.Error after 4 attempts", err)
	}
	if !errors.Is(err, cause) || storage.HTTPStatus(err) != 503 {
		t.Errorf("error %v does not wrap its cause", err)
	}
	for _, want := range []string{"stat", "mem://b/k", "4 attempts", "503", "SlowDown"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if got := f.Calls(storagetest.OpStat); got != 4 {
		t.Errorf("%d calls, want 4", got)
	}
	if got := len(c.got()); got != 3 {
		t.Errorf("%d waits, want 3", got)
	}
}

func TestCancelWhileWaiting(t *testing.T) {
	f := storagetest.NewFaulty(memstore.New("b"))
	f.Inject(storagetest.Fault{Op: storagetest.OpStat, Err: errReset})
	ctx, cancel := context.WithCancel(t.Context())
	b, _ := newRetry(t, f, &retry.Options{OnRetry: func(retry.Event) { cancel() }})
	_, err := b.Stat(ctx, "k")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Stat = %v, want context.Canceled", err)
	}
	if got := f.Calls(storagetest.OpStat); got != 1 {
		t.Errorf("%d calls after cancel, want 1", got)
	}
}

func TestReadResumes(t *testing.T) {
	data := storagetest.Pattern(1, 100_000)
	tests := []struct {
		name      string
		fault     storagetest.Fault
		off, n    int64
		wantOpens int
	}{
		{"reset mid-body", storagetest.Fault{Op: storagetest.OpRead, AfterBytes: 1000, Times: 3, Err: errReset}, 0, -1, 4},
		{"unexpected EOF", storagetest.Fault{Op: storagetest.OpRead, AfterBytes: 99_999, Times: 1, Err: io.ErrUnexpectedEOF}, 0, -1, 2},
		{"error at first byte", storagetest.Fault{Op: storagetest.OpRead, Times: 2, Err: &storage.HTTPError{Op: "get", StatusCode: 500}}, 0, -1, 3},
		{"ranged", storagetest.Fault{Op: storagetest.OpRead, AfterBytes: 10, Times: 5, Err: errReset}, 500, 5000, 6},
		{"open fails", storagetest.Fault{Op: storagetest.OpOpen, Times: 2, Err: errReset}, 7, -1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memstore.New("b")
			storagetest.Put(t, m, "k", data)
			f := storagetest.NewFaulty(m)
			f.Inject(tt.fault)
			b, _ := newRetry(t, f, nil)
			r, err := b.NewRangeReader(t.Context(), "k", tt.off, tt.n)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			end := int64(len(data))
			if tt.n >= 0 {
				end = tt.off + tt.n
			}
			if !bytes.Equal(got, data[tt.off:end]) {
				t.Errorf("read %d bytes, want %d byte-exact", len(got), end-tt.off)
			}
			if got := f.Calls(storagetest.OpOpen); got != tt.wantOpens {
				t.Errorf("%d opens, want %d", got, tt.wantOpens)
			}
		})
	}
}

func TestReadBudget(t *testing.T) {
	m := memstore.New("b")
	storagetest.Put(t, m, "k", storagetest.Pattern(1, 10_000))
	f := storagetest.NewFaulty(m)
	// The first body breaks after 100 bytes, every later one at once.
	f.Inject(storagetest.Fault{Op: storagetest.OpRead, AfterBytes: 100, Times: 1, Err: errReset},
		storagetest.Fault{Op: storagetest.OpRead, Err: errReset})
	b, _ := newRetry(t, f, &retry.Options{MaxAttempts: 3})
	r, err := b.NewRangeReader(t.Context(), "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	var re *retry.Error
	if !errors.As(err, &re) || re.Op != "get" || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("ReadAll = %v, want a *retry.Error wrapping ECONNRESET", err)
	}
	if len(got) != 100 || !strings.Contains(err.Error(), "byte 100") {
		t.Errorf("read %d bytes, error %q; want 100 and the offset named", len(got), err)
	}
	if _, err2 := r.Read(make([]byte, 10)); err2 == nil {
		t.Error("error is not sticky")
	}
}

func TestStallResumes(t *testing.T) {
	data := storagetest.Pattern(2, 50_000)
	m := memstore.New("b")
	storagetest.Put(t, m, "k", data)
	f := storagetest.NewFaulty(m)
	f.Inject(storagetest.Fault{Op: storagetest.OpRead, AfterBytes: 500, Times: 2, Stall: true},
		storagetest.Fault{Op: storagetest.OpOpen, Times: 1, Stall: true})
	// Real timers for the stall, but nothing waits on wall time to
	// synchronise: each stall ends only through the timeout.
	b, c := newRetry(t, f, &retry.Options{StallTimeout: 20 * time.Millisecond, AttemptTimeout: 20 * time.Millisecond})
	r, err := b.NewRangeReader(t.Context(), "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadAll = %d bytes, %v", len(got), err)
	}
	if n := len(c.got()); n != 3 {
		t.Errorf("%d retries, want 3 (one stalled open, two stalled bodies)", n)
	}
}

func TestSlowConsumerIsNotAStall(t *testing.T) {
	m := memstore.New("b")
	data := storagetest.Pattern(3, 1000)
	storagetest.Put(t, m, "k", data)
	f := storagetest.NewFaulty(m)
	b, c := newRetry(t, f, &retry.Options{StallTimeout: time.Millisecond})
	r, err := b.NewRangeReader(t.Context(), "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 100)
	var got []byte
	for {
		// The consumer takes its time between reads: a Stat round trip on
		// another store. The stall timer runs only inside Read.
		timer := time.NewTimer(2 * time.Millisecond)
		<-timer.C
		n, err := r.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, data) || len(c.got()) != 0 || f.Calls(storagetest.OpOpen) != 1 {
		t.Errorf("got %d bytes after %d retries and %d opens", len(got), len(c.got()), f.Calls(storagetest.OpOpen))
	}
}

func TestListResumesWithoutRepeats(t *testing.T) {
	m := memstore.New("b")
	var want []string
	for i := range 10 {
		k := fmt.Sprintf("k%02d", i)
		want = append(want, k)
		storagetest.Put(t, m, k, []byte("x"))
	}
	f := storagetest.NewFaulty(m)
	f.Inject(storagetest.Fault{Op: storagetest.OpList, AfterBytes: 3, Times: 1, Err: errReset},
		storagetest.Fault{Op: storagetest.OpList, AfterBytes: 7, Times: 1, Err: errReset})
	b, _ := newRetry(t, f, nil)
	if diff := cmp.Diff(want, storagetest.ListKeys(t, b, "")); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	if got := f.Calls(storagetest.OpList); got != 3 {
		t.Errorf("%d list calls, want 3", got)
	}
}

// deleteThenFail deletes and then reports a transient error, as a store
// does when the response is lost.
type deleteThenFail struct {
	storage.Bucket
	failed bool
}

func (d *deleteThenFail) Delete(ctx context.Context, key string) error {
	err := d.Bucket.Delete(ctx, key)
	if err == nil && !d.failed {
		d.failed = true
		return errReset
	}
	return err
}

func TestDeleteLostResponse(t *testing.T) {
	m := memstore.New("b")
	storagetest.Put(t, m, "k", []byte("x"))
	b, _ := newRetry(t, &deleteThenFail{Bucket: m}, nil)
	if err := b.Delete(t.Context(), "k"); err != nil {
		t.Errorf("Delete = %v, want success", err)
	}
	if err := b.Delete(t.Context(), "k"); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("Delete of a missing key = %v, want ErrNotExist", err)
	}
}

func TestUploadRetried(t *testing.T) {
	m := memstore.New("b")
	f := storagetest.NewFaulty(m)
	f.Inject(storagetest.Fault{Op: storagetest.OpWrite, Times: 2, Err: &storage.HTTPError{Op: "put", StatusCode: 503}})
	b, c := newRetry(t, f, nil)
	data := storagetest.Pattern(4, 200_000)
	path := filepath.Join(t.TempDir(), "shard")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := storage.UploadFile(t.Context(), b, "up", path, nil); err != nil {
		t.Fatal(err)
	}
	if got := storagetest.Get(t, m, "up"); !bytes.Equal(got, data) {
		t.Error("uploaded content differs")
	}
	if got := f.Calls(storagetest.OpWrite); got != 3 || len(c.got()) != 2 {
		t.Errorf("%d writes and %d waits, want 3 and 2", got, len(c.got()))
	}
	// A plain NewWriter is not retried.
	f.Inject(storagetest.Fault{Op: storagetest.OpWrite, Times: 1, Err: errReset})
	if _, err := storage.WriteFrom(t.Context(), b, "w", bytes.NewReader(data), nil); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("WriteFrom = %v, want the injected error", err)
	}
}

func TestDownloadThroughFaults(t *testing.T) {
	data := storagetest.Pattern(5, 1<<20+3)
	tests := []struct {
		name    string
		faults  []storagetest.Fault
		wantErr bool
	}{
		{"resets in every part", []storagetest.Fault{{Op: storagetest.OpRead, AfterBytes: 5000, Every: 2, Err: errReset}}, false},
		{"503 on open", []storagetest.Fault{{Op: storagetest.OpOpen, Every: 3, Err: &storage.HTTPError{Op: "get", StatusCode: 503, RetryAfter: time.Second}}}, false},
		{"resets every 5000 bytes still complete", []storagetest.Fault{{Op: storagetest.OpRead, AfterBytes: 5000, Err: errReset}}, false},
		{"persistent failure", []storagetest.Fault{{Op: storagetest.OpRead, AfterBytes: 0, Err: errReset}}, true},
		{"silently truncated body", []storagetest.Fault{{Op: storagetest.OpRead, AfterBytes: 5000, Truncate: true, Times: 1}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memstore.New("b")
			storagetest.Put(t, m, "shard", data)
			f := storagetest.NewFaulty(m)
			f.Inject(tt.faults...)
			b, _ := newRetry(t, f, &retry.Options{MaxAttempts: 5})
			dir := t.TempDir()
			dst := filepath.Join(dir, "shard")
			n, err := storage.Download(t.Context(), b, "shard", dst, &storage.DownloadOptions{PartSize: 100_000, Concurrency: 4})
			if tt.wantErr {
				if err == nil {
					t.Fatal("Download succeeded")
				}
				if !strings.Contains(err.Error(), "mem://b/shard") {
					t.Errorf("error %q does not name the object", err)
				}
				entries, _ := os.ReadDir(dir)
				if len(entries) != 0 {
					t.Errorf("files left behind: %v", entries)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(dst)
			if n != int64(len(data)) || !bytes.Equal(got, data) {
				t.Errorf("downloaded %d bytes, not byte-exact", n)
			}
		})
	}
}

func TestListStallIsRetried(t *testing.T) {
	m := memstore.New("b")
	for i := range 6 {
		storagetest.Put(t, m, fmt.Sprintf("k%d", i), []byte("x"))
	}
	f := storagetest.NewFaulty(m)
	f.Inject(storagetest.Fault{Op: storagetest.OpList, AfterBytes: 3, Stall: true, Times: 1})
	b, c := newRetry(t, f, &retry.Options{AttemptTimeout: 20 * time.Millisecond})
	if got := storagetest.ListKeys(t, b, ""); len(got) != 6 {
		t.Errorf("listed %v", got)
	}
	if len(c.got()) != 1 {
		t.Errorf("%d retries, want 1", len(c.got()))
	}
	// An error from fn is returned as it is, not retried.
	stop := errors.New("stop")
	if err := b.List(t.Context(), "", func(storage.ObjectInfo) error { return stop }); err != stop {
		t.Errorf("List = %v, want fn's error itself", err)
	}
}

// TestChecksumMismatchNotResumed: a body that fails the store's checksum
// (storage.ErrChecksum, which a driver reports when the body ends) fails
// the read: resuming after bytes already read would deliver damaged bytes
// as the object. The error stays, and no second request is made.
func TestChecksumMismatchNotResumed(t *testing.T) {
	data := storagetest.Pattern(3, 10_000)
	m := memstore.New("b")
	storagetest.Put(t, m, "k", data)
	f := storagetest.NewFaulty(m)
	f.Inject(storagetest.Fault{Op: storagetest.OpRead, AfterBytes: 10_000, Times: 1,
		Err: fmt.Errorf("store: get k: %w", storage.ErrChecksum)})
	b, _ := newRetry(t, f, nil)
	r, err := b.NewRangeReader(t.Context(), "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if !errors.Is(err, storage.ErrChecksum) {
		t.Fatalf("read %d bytes with error %v, want storage.ErrChecksum", len(got), err)
	}
	if _, err2 := r.Read(make([]byte, 1)); !errors.Is(err2, storage.ErrChecksum) {
		t.Errorf("the next Read returned %v, want the same error", err2)
	}
	if n := f.Calls(storagetest.OpOpen); n != 1 {
		t.Errorf("%d opens, want 1 (no resume)", n)
	}
}
