package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/stream"
)

// writeDataset writes n samples {id: i, text: "sample i"} in small shards.
func writeDataset(t testing.TB, dir string, n int, sizeLimit int64) {
	t.Helper()
	w, err := mds.NewWriter(dir, &mds.WriterOptions{
		Columns:   map[string]string{"id": "int", "text": "str"},
		SizeLimit: sizeLimit,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := w.Write(format.Sample{"id": int64(i), "text": fmt.Sprintf("sample %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

func testRegistry() *storage.Registry {
	r := &storage.Registry{}
	r.Register("file", filestore.Open)
	return r
}

type harness struct {
	t      testing.TB
	a      *Agent
	sock   string
	remote string
	local  string
	cancel context.CancelFunc
	done   chan error
}

// startAgent serves an agent on a socket in a temp dir over a fresh
// dataset of n samples.
func startAgent(t testing.TB, n int, opts *Options) *harness {
	return startAgentShards(t, n, 1<<10, opts)
}

func startAgentShards(t testing.TB, n int, sizeLimit int64, opts *Options) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, remote: filepath.Join(dir, "remote"), local: filepath.Join(dir, "cache")}
	writeDataset(t, h.remote, n, sizeLimit)
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Registry = testRegistry()
	if o.IdleTimeout == 0 {
		o.IdleTimeout = -1
	}
	a, err := New(&o)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := AcquireLock(filepath.Join(dir, "agent"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := lock.Listen()
	if err != nil {
		t.Fatal(err)
	}
	h.a, h.sock = a, SocketPath(filepath.Join(dir, "agent"))
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-h.done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		lock.Release()
	})
	return h
}

// serveAgentWith serves an agent with opts on a socket in a temp dir,
// stopped at the end of the test, and returns a dialer whose clients are
// closed then too.
func serveAgentWith(t testing.TB, opts *Options) func() *agentapi.Client {
	t.Helper()
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, a)
}

// serve is serveAgentWith for an agent the test made (and inspects).
func serve(t testing.TB, a *Agent) func() *agentapi.Client {
	t.Helper()
	dir := t.TempDir()
	lock, err := AcquireLock(filepath.Join(dir, "agent"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := lock.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		lock.Release()
	})
	return func() *agentapi.Client {
		c, err := agentapi.Dial(context.Background(), SocketPath(filepath.Join(dir, "agent")), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

func (h *harness) dial() *agentapi.Client {
	h.t.Helper()
	c, err := agentapi.Dial(context.Background(), h.sock, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

func (h *harness) dataset() agentapi.Dataset {
	return agentapi.Dataset{Remote: h.remote, Local: h.local, BatchSize: 4, Shuffle: true, NumCanonicalNodes: 2}
}

// waitConns blocks until the agent has released all but n connections.
func (h *harness) waitConns(n int) {
	h.a.mu.Lock()
	defer h.a.mu.Unlock()
	for len(h.a.conns) > n {
		h.a.gone.Wait()
	}
}

// drain reads an iteration to its end, checking every record: the id
// column read from the shard file at the announced offset must equal the
// sample ID.
func drain(t *testing.T, c *agentapi.Client, iter int, inlineMax int) []int64 {
	t.Helper()
	ctx := context.Background()
	var ids []int64
	var prev []int64
	for {
		r, err := c.Next(ctx, agentapi.Next{Iter: iter, Max: 7, InlineMax: inlineMax, Release: prev})
		if err != nil {
			t.Fatal(err)
		}
		prev = nil
		if r.ID != 0 {
			prev = []int64{r.ID}
		}
		if r.Done {
			return ids
		}
		for _, e := range r.Entries {
			var rec []byte
			if e.Ref&agentapi.InlineFlag != 0 {
				rec = r.Inline[e.Offset : e.Offset+uint64(e.Length)]
			} else {
				b, err := os.ReadFile(r.Shards[e.Ref].Path)
				if err != nil {
					t.Fatal(err)
				}
				rec = b[e.Offset : e.Offset+uint64(e.Length)]
			}
			// Record: u32 len(text), i64 id, text.
			if got := int64(binary.LittleEndian.Uint64(rec[4:12])); got != e.Sample {
				t.Fatalf("record of sample %d holds id %d", e.Sample, got)
			}
			ids = append(ids, e.Sample)
		}
	}
}

// planIDs returns what a Go consumer gets for the same world from the
// stream package directly.
func planIDs(t *testing.T, h *harness, epochs int, w agentapi.World) [][]int64 {
	t.Helper()
	ds, err := stream.Open(context.Background(), &stream.Options{Local: h.remote, BatchSize: 4, Shuffle: true, NumCanonicalNodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	var out [][]int64
	for range epochs {
		ep, err := ds.NewEpoch(context.Background(), planWorld(w, 0), max(w.NumWorkers, 1))
		if err != nil {
			t.Fatal(err)
		}
		it, err := ep.Iter(context.Background(), w.Worker)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for it.Next() {
			ids = append(ids, it.ID())
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		it.Close()
		out = append(out, ids)
	}
	return out
}

func TestIterateMatchesStream(t *testing.T) {
	h := startAgent(t, 200, nil)
	c := h.dial()
	ctx := context.Background()
	world := agentapi.World{Rank: 1, WorldSize: 2, LocalWorldSize: 2, Worker: 1, NumWorkers: 2}
	op, err := c.Open(ctx, agentapi.Open{Dataset: h.dataset(), Job: "j", World: world})
	if err != nil {
		t.Fatal(err)
	}
	if op.NumSamples != 200 || op.Length != 100 {
		t.Errorf("NumSamples, Length = %d, %d; want 200, 100", op.NumSamples, op.Length)
	}
	if len(op.Schemas) != 1 || !slices.Equal(op.Schemas[0].ColumnNames, []string{"id", "text"}) {
		t.Errorf("schemas = %+v", op.Schemas)
	}
	want := planIDs(t, h, 2, world)
	for epoch, inline := range []int{0, 1 << 20} {
		b, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: world})
		if err != nil {
			t.Fatal(err)
		}
		if b.Epoch != int64(epoch) {
			t.Errorf("epoch = %d, want %d", b.Epoch, epoch)
		}
		got := drain(t, c, b.Iter, inline)
		if diff := cmp.Diff(want[epoch], got); diff != "" {
			t.Errorf("epoch %d (inline %d) differs from the stream package (-want +got):\n%s", epoch, inline, diff)
		}
	}
}

func TestAllWorkersCoverEpochOnce(t *testing.T) {
	h := startAgent(t, 150, nil)
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	for rank := range 2 {
		for worker := range 3 {
			c := h.dial()
			w := agentapi.World{Rank: rank, WorldSize: 2, LocalWorldSize: 1, Worker: worker, NumWorkers: 3}
			op, err := c.Open(ctx, agentapi.Open{Dataset: h.dataset(), Job: "j", World: w})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: w})
				if err != nil {
					t.Error(err)
					return
				}
				ids := drain(t, c, b.Iter, 0)
				mu.Lock()
				for _, id := range ids {
					seen[id]++
				}
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for i := range int64(150) {
		if seen[i] != 1 {
			t.Errorf("sample %d seen %d times", i, seen[i])
		}
	}
	if len(seen) != 150 {
		t.Errorf("%d distinct samples, want 150", len(seen))
	}
}

func TestResume(t *testing.T) {
	h := startAgent(t, 120, nil)
	c := h.dial()
	ctx := context.Background()
	w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	op, err := c.Open(ctx, agentapi.Open{Dataset: h.dataset(), Job: "j", World: w})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: w})
	if err != nil {
		t.Fatal(err)
	}
	full := drain(t, c, b.Iter, 0)
	// A second job resumes epoch 0 after 40 samples on a bigger world.
	var got []int64
	for worker := range 2 {
		w2 := agentapi.World{WorldSize: 1, LocalWorldSize: 1, Worker: worker, NumWorkers: 2}
		op2, err := c.Open(ctx, agentapi.Open{Dataset: h.dataset(), Job: "j2", World: w2})
		if err != nil {
			t.Fatal(err)
		}
		st := agentapi.State{Epoch: 0, SampleInEpoch: 40, NumCanonicalNodes: 2, ShuffleSeed: 9176}
		b2, err := c.Begin(ctx, agentapi.Begin{Handle: op2.Handle, World: w2, Resume: &st})
		if err != nil {
			t.Fatal(err)
		}
		if b2.Epoch != 0 || b2.SampleInEpoch != 40 {
			t.Fatalf("resumed at epoch %d sample %d", b2.Epoch, b2.SampleInEpoch)
		}
		got = append(got, drain(t, c, b2.Iter, 0)...)
	}
	slices.Sort(got)
	rest := slices.Clone(full[40:])
	slices.Sort(rest)
	if diff := cmp.Diff(rest, got); diff != "" {
		t.Errorf("resumed samples differ from the rest of the epoch (-want +got):\n%s", diff)
	}
}

func TestCloseReleasesLeases(t *testing.T) {
	h := startAgent(t, 100, nil)
	ctx := context.Background()
	c := h.dial()
	w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	op, err := c.Open(ctx, agentapi.Open{Dataset: h.dataset(), Job: "j", World: w})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: w})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Next(ctx, agentapi.Next{Iter: b.Iter, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.ID == 0 || len(r.Entries) == 0 {
		t.Fatalf("batch %d with %d entries", r.ID, len(r.Entries))
	}
	s := h.a.stats()
	if s.Leases == 0 || s.Iterations != 1 || s.Jobs != 1 {
		t.Fatalf("while held: %+v", s)
	}
	c.Close()
	h.waitConns(0)
	s = h.a.stats()
	if s.Leases != 0 || s.Iterations != 0 || s.Jobs != 0 || s.Datasets != 0 {
		t.Fatalf("after close: %+v", s)
	}
	// The job's state went with it: a new connection starts at epoch 0.
	c2 := h.dial()
	op, err = c2.Open(ctx, agentapi.Open{Dataset: h.dataset(), Job: "j", World: w})
	if err != nil {
		t.Fatal(err)
	}
	b, err = c2.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: w})
	if err != nil {
		t.Fatal(err)
	}
	if b.Epoch != 0 {
		t.Errorf("epoch after the job ended = %d, want 0", b.Epoch)
	}
}

func TestErrors(t *testing.T) {
	h := startAgent(t, 10, nil)
	ctx := context.Background()
	c := h.dial()
	w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"missing dataset", func() error {
			_, err := c.Open(ctx, agentapi.Open{Dataset: agentapi.Dataset{Remote: filepath.Join(h.remote, "nope"), Local: h.local + "2"}, Job: "j", World: w})
			return err
		}, agentapi.ErrNotFound},
		{"bad algorithm", func() error {
			ds := h.dataset()
			ds.ShuffleAlgo = "nope"
			_, err := c.Open(ctx, agentapi.Open{Dataset: ds, Job: "j", World: w})
			return err
		}, agentapi.ErrInvalid},
		{"relative local", func() error {
			ds := h.dataset()
			ds.Local = "rel"
			_, err := c.Open(ctx, agentapi.Open{Dataset: ds, Job: "j", World: w})
			return err
		}, agentapi.ErrBadRequest},
		{"bad world", func() error {
			_, err := c.Open(ctx, agentapi.Open{Dataset: h.dataset(), Job: "j", World: agentapi.World{Rank: 2, WorldSize: 2}})
			return err
		}, agentapi.ErrBadRequest},
		{"unknown handle", func() error {
			_, err := c.Begin(ctx, agentapi.Begin{Handle: 99, World: w})
			return err
		}, agentapi.ErrBadRequest},
		{"unknown iteration", func() error {
			_, err := c.Next(ctx, agentapi.Next{Iter: 99, Max: 1})
			return err
		}, agentapi.ErrBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestHelloRequired(t *testing.T) {
	h := startAgent(t, 10, nil)
	nc, err := net.Dial("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, _ := agentapi.AppendFrame(nil, agentapi.StatsQuery{Op: agentapi.OpStats}, nil)
	nc.Write(b)
	f, _, err := agentapi.ReadFrame(nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if op, _ := f.Op(); op != agentapi.OpError {
		t.Fatalf("reply %s to a request before hello", f.Header)
	}
	// Garbage closes the connection instead of hanging it.
	nc.Write([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	if _, _, err := agentapi.ReadFrame(nc, nil); err == nil {
		t.Fatal("connection survived a malformed frame")
	}
}

func TestLockAndSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a")
	l, err := AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AcquireLock(dir); !errors.Is(err, ErrRunning) {
		t.Fatalf("second lock: %v, want ErrRunning", err)
	}
	// A stale socket file (from a killed agent) does not block Listen.
	if err := os.WriteFile(SocketPath(dir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := l.Listen()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, SocketPath(dir): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
	ln.Close()
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := AcquireLock(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.Release()
}

func TestIdleTimeout(t *testing.T) {
	a, err := New(&Options{IdleTimeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	// Serve returns by itself: nobody connects.
	if err := a.Serve(context.Background(), ln); err != nil {
		t.Fatal(err)
	}
}
