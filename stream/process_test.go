package stream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/stream"
)

// The child processes of the multi-process tests are this test binary,
// re-executed with SLUICE_STREAM_CHILD set.
func TestMain(m *testing.M) {
	if os.Getenv("SLUICE_STREAM_CHILD") != "" {
		if err := childMain(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if code == 0 {
		// Every goroutine an Iterator or the cache starts ends with Close.
		// (Idle keep-alive connections of the S3 benchmark's HTTP client
		// are the SDK's, not ours.)
		if err := goleak.Find(
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// lockedWriter serialises lines written from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}

// blockingBucket serves half of one object and then blocks until its
// context ends, announcing it: a download stuck mid-way.
type blockingBucket struct {
	storage.Bucket
	key string
	out *lockedWriter
}

func (b *blockingBucket) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	r, err := b.Bucket.NewRangeReader(ctx, key, off, n)
	if err != nil || key != b.key {
		return r, err
	}
	fi, err := b.Bucket.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	return &stuckReader{ctx: ctx, r: io.LimitReader(r, fi.Size/2), c: r, out: b.out}, nil
}

type stuckReader struct {
	ctx context.Context
	r   io.Reader
	c   io.Closer
	out *lockedWriter
	hit bool
}

func (s *stuckReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err == io.EOF {
		if !s.hit {
			s.hit = true
			s.out.printf("MIDDOWNLOAD\n")
		}
		<-s.ctx.Done()
		return n, s.ctx.Err()
	}
	return n, err
}

func (s *stuckReader) Close() error { return s.c.Close() }

func childOptions(reg *storage.Registry, shuffle bool) *stream.Options {
	limit, _ := strconv.ParseInt(os.Getenv("CHILD_LIMIT"), 10, 64)
	return &stream.Options{
		Remote: os.Getenv("CHILD_REMOTE"), Local: os.Getenv("CHILD_LOCAL"), Registry: reg,
		CacheLimit: limit, BatchSize: 4, Shuffle: shuffle, Predownload: 32,
	}
}

// childMain streams one rank and reports every batch with the state
// after it, then how often it fetched each key.
func childMain() error {
	ctx := context.Background()
	out := &lockedWriter{w: os.Stdout}
	rank, _ := strconv.Atoi(os.Getenv("CHILD_RANK"))
	world, _ := strconv.Atoi(os.Getenv("CHILD_WORLD"))
	shuffle := os.Getenv("CHILD_SHUFFLE") == "1"
	counting := &countingBucket{gets: map[string]int{}}
	block := os.Getenv("CHILD_BLOCK") == "1"
	var blocker *blockingBucket
	reg := &storage.Registry{}
	reg.Register("file", func(ctx context.Context, u *url.URL) (storage.Bucket, error) {
		b, err := filestore.Open(ctx, u)
		if err != nil {
			return nil, err
		}
		counting.Bucket = b
		if block {
			blocker = &blockingBucket{Bucket: counting, out: out}
			return blocker, nil
		}
		return counting, nil
	})
	ds, err := stream.Open(ctx, childOptions(reg, shuffle))
	if err != nil {
		return err
	}
	defer ds.Close()
	if p := os.Getenv("CHILD_RESUME"); p != "" {
		st, err := plan.ParseState([]byte(p))
		if err != nil {
			return err
		}
		if err := ds.Load(st); err != nil {
			return err
		}
	}
	w := plan.World{Nodes: 1, RanksPerNode: world, Rank: rank}
	ep, err := ds.NewEpoch(ctx, w, 1)
	if err != nil {
		return err
	}
	if blocker != nil {
		// Block the shard of the sample half-way through this rank's
		// share (its compressed file, as the dataset is compressed).
		batches, _ := ep.Plan().RankBatches(0, rank)
		ids := slices.Concat(batches...)
		shard, _, _ := ds.Planner().Locate(ids[len(ids)/2])
		info := ds.ShardInfo(shard)
		blocker.key = info.RawData.Basename
		if info.ZipData != nil {
			blocker.key = info.ZipData.Basename
		}
	}
	it, err := ep.RankIter(ctx)
	if err != nil {
		return err
	}
	defer it.Close()
	var batch []string
	for it.Next() {
		batch = append(batch, strconv.FormatInt(it.ID(), 10))
		if len(batch) == 4 {
			st, err := ds.State(it.Yielded())
			if err != nil {
				return err
			}
			b, _ := st.MarshalJSON()
			out.printf("BATCH %s %s\n", strings.Join(batch, ","), b)
			batch = batch[:0]
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		out.printf("BATCH %s {}\n", strings.Join(batch, ","))
	}
	g, _ := json.Marshal(counting.counts())
	out.printf("GETS %s\n", g)
	out.printf("DONE\n")
	return nil
}

// child is a running child process.
type child struct {
	cmd   *exec.Cmd
	lines chan string
}

func startChild(t *testing.T, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"SLUICE_STREAM_CHILD=1"}, env...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c
}

// result collects a child's output.
type result struct {
	ids     []int64 // every sample, in order
	batches [][]int64
	states  []string // state after each batch
	gets    map[string]int
	done    bool
}

func (r *result) add(line string) {
	switch {
	case strings.HasPrefix(line, "BATCH "):
		f := strings.Fields(line)
		var b []int64
		for _, s := range strings.Split(f[1], ",") {
			n, _ := strconv.ParseInt(s, 10, 64)
			b = append(b, n)
		}
		r.batches = append(r.batches, b)
		r.ids = append(r.ids, b...)
		r.states = append(r.states, strings.Join(f[2:], " "))
	case strings.HasPrefix(line, "GETS "):
		json.Unmarshal([]byte(strings.TrimPrefix(line, "GETS ")), &r.gets)
	case line == "DONE":
		r.done = true
	}
}

func (c *child) wait(t *testing.T) *result {
	t.Helper()
	r := &result{}
	for line := range c.lines {
		r.add(line)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if !r.done {
		t.Fatal("child ended without DONE")
	}
	return r
}

// rankPlan is what rank should read, from the plan alone.
func rankPlan(t *testing.T, remote string, world, rank int, shuffle bool, state *plan.State) []int64 {
	t.Helper()
	ds, err := stream.Open(context.Background(), &stream.Options{Local: remote, BatchSize: 4, Shuffle: shuffle})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if state != nil {
		if err := ds.Load(*state); err != nil {
			t.Fatal(err)
		}
	}
	ep, err := ds.NewEpoch(context.Background(), plan.World{Nodes: 1, RanksPerNode: world, Rank: rank}, 1)
	if err != nil {
		t.Fatal(err)
	}
	batches, err := ep.Plan().RankBatches(0, rank)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Concat(batches...)
}

func TestProcessesShareOneCache(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, tc := range []struct {
		name    string
		limit   int64
		shuffle bool
	}{
		{"unlimited-sequential", 0, false},
		{"limited-shuffled", 8 * (16 << 10), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remote, local := t.TempDir(), t.TempDir()
			writeDataset(t, remote, spec{samples: 900, payload: 200, sizeLimit: 8 << 10, compression: "zstd"})
			const world = 3
			stop := func() int64 { return 0 }
			if tc.limit > 0 {
				stop = watchLimit(t, local, tc.limit)
			}
			shuffle := "0"
			if tc.shuffle {
				shuffle = "1"
			}
			var children []*child
			for r := range world {
				children = append(children, startChild(t, "CHILD_REMOTE="+remote, "CHILD_LOCAL="+local,
					fmt.Sprint("CHILD_RANK=", r), fmt.Sprint("CHILD_WORLD=", world),
					fmt.Sprint("CHILD_LIMIT=", tc.limit), "CHILD_SHUFFLE="+shuffle))
			}
			gets := map[string]int{}
			for r, c := range children {
				res := c.wait(t)
				if want := rankPlan(t, remote, world, r, tc.shuffle, nil); !slices.Equal(res.ids, want) {
					t.Errorf("rank %d read %d samples, its plan has %d (or the order differs)", r, len(res.ids), len(want))
				}
				for k, n := range res.gets {
					gets[k] += n
				}
			}
			stop()
			if tc.limit == 0 {
				// index.json is small and read by each process that
				// finds it missing; shards are what must come once.
				for k, n := range gets {
					if n != 1 && k != "index.json" {
						t.Errorf("%s downloaded %d times by the 3 processes, want once", k, n)
					}
				}
			}
			checkConsistent(t, local)
		})
	}
}

// checkConsistent opens the cache as a restarted process would and checks
// that no temporary file is left and the byte count matches the files.
func checkConsistent(t *testing.T, local string) {
	t.Helper()
	c, err := cache.Open(context.Background(), local, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	u, err := c.Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := dirBytes(local); u != d {
		t.Errorf("cache counts %d bytes, its files hold %d", u, d)
	}
	filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".part") {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}

func TestKilledMidDownloadResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	remote, local := t.TempDir(), t.TempDir()
	writeDataset(t, remote, spec{samples: 400, payload: 200, sizeLimit: 8 << 10, compression: "zstd"})
	env := []string{"CHILD_REMOTE=" + remote, "CHILD_LOCAL=" + local, "CHILD_RANK=0", "CHILD_WORLD=1",
		"CHILD_LIMIT=0", "CHILD_SHUFFLE=1"}
	c := startChild(t, append(env, "CHILD_BLOCK=1")...)
	first := &result{}
	mid := false
	for line := range c.lines {
		first.add(line)
		mid = mid || line == "MIDDOWNLOAD"
		if mid && len(first.batches) > 0 {
			break
		}
	}
	if !mid || len(first.batches) == 0 {
		t.Fatal("child ended before it was mid-download")
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for line := range c.lines { // batches printed before the kill landed
		first.add(line)
	}
	c.cmd.Wait()
	var parts []string
	filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".part") {
			parts = append(parts, p)
		}
		return nil
	})
	if len(parts) == 0 {
		t.Fatal("no partial download in the cache after the kill")
	}
	// Resume from the last saved state.
	last := first.states[len(first.states)-1]
	st, err := plan.ParseState([]byte(last))
	if err != nil {
		t.Fatal(err)
	}
	second := startChild(t, append(env, "CHILD_RESUME="+last)...).wait(t)
	want := rankPlan(t, remote, 1, 0, true, nil)
	got := append(slices.Clone(first.ids), second.ids...)
	if !slices.Equal(got, want) {
		t.Errorf("before the kill %d samples (state at %d), after %d: together they are not the epoch's %d samples in order",
			len(first.ids), st.SampleInEpoch, len(second.ids), len(want))
	}
	checkConsistent(t, local)
}
