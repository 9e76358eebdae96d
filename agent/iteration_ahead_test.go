package agent

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
)

// reader reads one worker's iteration batch by batch as the Python client
// does without a feed: each request releases the batch before it. It checks
// every record (inline or read from its shard file at the announced
// offset) and counts the replies and the shards a reply leases.
type reader struct {
	t       *testing.T
	c       *agentapi.Client
	iter    int
	max     int
	prev    int64
	ids     []int64
	replies int // replies with samples
	leased  int // the most shards one reply leased (entries not inline)
	done    bool
	files   map[string][]byte
	size    int   // the records' text size (recordText); 0: "sample N"
	inline  int   // the requests' InlineMax
	mapCopy bool  // the requests' MapCopies
	mapped  int   // records read from a memory file of copies (iteration_map.go)
	mems    []int // the memory files' ids the replies listed, in order of first listing
	memFDs  []int // the ids of the memory files whose descriptors came, in order
}

func newReader(t *testing.T, c *agentapi.Client, iter, max int) *reader {
	return &reader{t: t, c: c, iter: iter, max: max, files: map[string][]byte{}}
}

// recordText is the text of sample id in a dataset of records of size
// bytes of text (writeRecords; writeDataset's "sample N" when size is 0);
// a negative size -k mixes both: every third sample has k bytes of text.
func recordText(id int64, size int) string {
	if size < 0 {
		size = -size
		if id%3 != 0 {
			size = 0
		}
	}
	s := fmt.Sprintf("sample %d", id)
	if size > len(s) {
		s += strings.Repeat("x", size-len(s))
	}
	return s
}

// recordCase is a record size the read-ahead tests run at: small (~25
// bytes, like tokenized text), over 16 KiB (the largest record the
// read-ahead copied before), and both mixed, the client asking for records
// up to 64 KiB inline (a reply then carries copies under and over the size
// gathered in one buffer, and leased records read into it).
type recordCase struct {
	name   string
	size   int   // bytes of text a record (recordText); 0: writeDataset's
	n      int   // samples
	cut    int64 // the shards' size limit
	inline int   // the requests' InlineMax
	// mapCopies asks for the copies in memory files (agentapi.Next.MapCopies).
	mapCopies bool
}

var recordCases = []recordCase{
	{"small", 0, 2000, 1 << 10, 0, false},
	{"40KB", 40 << 10, 400, 1 << 20, 0, false},
	{"mixed", -40 << 10, 600, 512 << 10, 64 << 10, false},
	{"40KB mapped", 40 << 10, 400, 1 << 20, 0, true},
	{"mixed mapped", -40 << 10, 600, 512 << 10, 16 << 10, true},
	{"300KB mapped", 300 << 10, 80, 2 << 20, 0, true},
}

// reader is newReader for records of rc's size.
func (rc recordCase) reader(t *testing.T, c *agentapi.Client, iter, max int) *reader {
	r := newReader(t, c, iter, max)
	r.size, r.inline, r.mapCopy = rc.size, rc.inline, rc.mapCopies
	return r
}

// start serves an agent over a dataset of rc's records.
func (rc recordCase) start(t *testing.T, opts *Options) *harness {
	t.Helper()
	if rc.size == 0 {
		return startAgentShards(t, rc.n, rc.cut, opts)
	}
	h := startAgentShards(t, 1, 1<<10, opts)
	h.remote = t.TempDir()
	writeRecords(t, h.remote, rc.n, rc.size, rc.cut)
	return h
}

// writeRecords writes n samples {id, text: recordText(id, size)} in shards
// of at most sizeLimit bytes.
func writeRecords(t *testing.T, dir string, n, size int, sizeLimit int64) {
	t.Helper()
	w, err := mds.NewWriter(dir, &mds.WriterOptions{Columns: map[string]string{"id": "int", "text": "str"}, SizeLimit: sizeLimit})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := w.Write(format.Sample{"id": int64(i), "text": recordText(int64(i), size)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// next asks for one batch and reports how many samples it carried (0: the
// agent had none ready within its wait, or the iteration ended).
func (r *reader) next() int {
	r.t.Helper()
	req := agentapi.Next{Iter: r.iter, Max: r.max, InlineMax: r.inline, MapCopies: r.mapCopy}
	if r.prev != 0 {
		req.Release = []int64{r.prev}
	}
	b, err := r.c.Next(context.Background(), req)
	if err != nil {
		r.t.Fatalf("next of iteration %d after %d samples: %v", r.iter, len(r.ids), err)
	}
	r.prev = b.ID
	if b.MemFD != 0 {
		r.memFDs = append(r.memFDs, b.MemFD)
	}
	for _, s := range b.Shards {
		if s.Mem != 0 && !slices.Contains(r.mems, s.Mem) {
			r.mems = append(r.mems, s.Mem)
		}
	}
	if b.Done {
		r.done = true
		return 0
	}
	if len(b.Entries) > 0 {
		r.replies++
	}
	leased := map[uint32]bool{}
	files := map[string][]byte{} // this reply's files, read once
	for _, e := range b.Entries {
		var rec []byte
		if e.Ref&agentapi.InlineFlag != 0 {
			rec = b.Inline[e.Offset : e.Offset+uint64(e.Length)]
		} else if b.Shards[e.Ref].Mem != 0 {
			r.mapped++
			rec = b.Mapped[e.Ref][e.Offset : e.Offset+uint64(e.Length)]
		} else {
			p := b.Shards[e.Ref].Path
			leased[e.Ref] = true
			// Read while leased: the file may be evicted once released.
			data, ok := files[p]
			if !ok {
				var err error
				if data, err = os.ReadFile(p); err != nil {
					r.t.Fatalf("iteration %d, sample %d (%d taken, reply of %d with %d shards, batch %d): %v", r.iter, e.Sample, len(r.ids), len(b.Entries), len(b.Shards), b.ID, err)
				}
				files[p] = data
			}
			rec = data[e.Offset : e.Offset+uint64(e.Length)]
		}
		// Record: u32 len(text), i64 id, text.
		if got := int64(binary.LittleEndian.Uint64(rec[4:12])); got != e.Sample {
			r.t.Fatalf("record of sample %d holds id %d", e.Sample, got)
		}
		if got, want := string(rec[12:]), recordText(e.Sample, r.size); got != want {
			r.t.Fatalf("record of sample %d holds a text of %d bytes beginning %q", e.Sample, len(got), got[:min(len(got), 20)])
		}
		r.ids = append(r.ids, e.Sample)
	}
	r.leased = max(r.leased, len(leased))
	return len(b.Entries)
}

// epoch reads the iteration to its end within 60 s and checks that it
// gave want, in that order.
func (r *reader) epoch(epoch int, want []int64) {
	r.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !r.done; {
		if time.Now().After(deadline) {
			r.t.Fatalf("epoch %d: %d samples in 60 s", epoch, len(r.ids))
		}
		r.next()
	}
	if !slices.Equal(r.ids, want) {
		r.t.Fatalf("epoch %d: %d samples not in the plan's order (%d planned)", epoch, len(r.ids), len(want))
	}
}

// begin opens the harness's dataset under limit on c for world in job and
// begins its next epoch.
func begin(t *testing.T, h *harness, c *agentapi.Client, limit int64, job, round string, w agentapi.World) int {
	t.Helper()
	ctx := context.Background()
	spec := h.dataset()
	spec.CacheLimit = fmt.Sprint(limit)
	op, err := c.Open(ctx, agentapi.Open{Dataset: spec, Job: job, World: w})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: w, Round: round})
	if err != nil {
		t.Fatal(err)
	}
	return b.Iter
}

// TestLimitedShuffledRepliesCarryManySamples: under a cache limit a
// shuffled epoch (py1e changes shard at nearly every sample) is served in
// replies of many samples, in the plan's order, each record intact, while
// a reply leases at most one shard (the rest is copied inline); under a
// limit of a few shards that evicts through the epoch, the same order and
// lease bound. Small records and records of 40 KB. The agent used to
// answer about one sample a reply there (1.0 in
// BenchmarkAgentWarmShuffled/limited), and for records over 16 KiB until
// they were copied too.
func TestLimitedShuffledRepliesCarryManySamples(t *testing.T) {
	for _, rc := range recordCases {
		for _, room := range []int{0, servedShards + 2} {
			name := rc.name + "/holds the data"
			if room > 0 {
				name = fmt.Sprintf("%s/%d shards", rc.name, room)
			}
			t.Run(name, func(t *testing.T) {
				h := rc.start(t, nil)
				limit, total, _ := limitFor(t, h.remote, room)
				if room == 0 {
					limit = 2 * total
				} else if limit >= total {
					t.Fatalf("limit %d not under the data %d", limit, total)
				}
				w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
				want := planIDs(t, h, 2, w)
				c := h.dial()
				for epoch := range 2 {
					r := rc.reader(t, c, begin(t, h, c, limit, "j", "", w), 256)
					r.epoch(epoch, want[epoch])
					per := float64(len(r.ids)) / float64(r.replies)
					t.Logf("epoch %d: %d samples in %d replies (%.1f a reply), at most %d shards leased a reply", epoch, len(r.ids), r.replies, per, r.leased)
					// Evicting, the producer waits for a download at nearly
					// every sample and a reply carries what is ready.
					// Records over copyMax: mapped copies only, and a reply
					// carries up to mapBudget of them.
					if many := min(16, mapBudget/max(rc.size, 1)/2); room == 0 && per < float64(many) {
						t.Errorf("epoch %d: %.1f samples a reply, want at least %d (batches of 256)", epoch, per, many)
					}
					if r.leased > 1 {
						t.Errorf("epoch %d: a reply leased %d shards, want at most 1", epoch, r.leased)
					}
					if rc.mapCopies && room == 0 && r.mapped == 0 {
						t.Errorf("epoch %d: no record of %d read from a memory file of copies", epoch, len(r.ids))
					}
				}
			})
		}
	}
}

// limitedPlan returns, for each worker of a rank's iteration of workers
// workers, its samples of epoch in the plan's order.
func limitedPlan(t *testing.T, h *harness, epoch, workers int) [][]int64 {
	t.Helper()
	out := make([][]int64, workers)
	for w := range workers {
		out[w] = planIDs(t, h, epoch+1, agentapi.World{WorldSize: 1, LocalWorldSize: 1, Worker: w, NumWorkers: workers})[epoch]
	}
	return out
}

// TestLimitedShapesShareTheCache plays what stalled a worker when the
// read-ahead under a limit was sized to the room the limit leaves for an
// iteration's shape: on one limited cache, a 0-worker iteration in the
// training process that took a batch and stays open (next(iter(ds))), a
// 2-worker DataLoader epoch read strictly in turn (the training loop waits
// for worker 0's batch, then worker 1's), and another job's 1-worker epoch
// beside them. The limit holds what each iteration may lease
// (servedShards) plus one shard being fetched, not more: read-ahead that
// leased shards filled it and a worker's next shard found no room. Both
// epochs complete, each worker's samples in the plan's order, every
// sample once.
func TestLimitedShapesShareTheCache(t *testing.T) {
	for _, rc := range recordCases {
		t.Run(rc.name, func(t *testing.T) {
			h := rc.start(t, &Options{Wait: 100 * time.Millisecond})
			limit, total, _ := limitFor(t, h.remote, (1+2+1)*servedShards+1)
			if limit >= total {
				t.Fatalf("limit %d not under the data %d", limit, total)
			}
			// The training process's peek: one batch taken and held.
			pc := h.dial()
			peek := rc.reader(t, pc, begin(t, h, pc, limit, "train", "peek", agentapi.World{WorldSize: 1, LocalWorldSize: 1}), 4)
			for peek.next() == 0 {
				if peek.done {
					t.Fatal("the peek's iteration ended empty")
				}
			}
			workers := make([]*reader, 2)
			for w := range workers {
				c := h.dial()
				workers[w] = rc.reader(t, c, begin(t, h, c, limit, "train", "loader", agentapi.World{WorldSize: 1, LocalWorldSize: 1, Worker: w, NumWorkers: 2}), 8)
			}
			oc := h.dial()
			other := rc.reader(t, oc, begin(t, h, oc, limit, "other", "", agentapi.World{WorldSize: 1, LocalWorldSize: 1}), 8)
			deadline := time.Now().Add(60 * time.Second)
			for turn := 0; !workers[0].done || !workers[1].done || !other.done; {
				if time.Now().After(deadline) {
					t.Fatalf("no end within 60 s: workers at %d and %d samples (worker %d's turn), the other job at %d (limit %d bytes)",
						len(workers[0].ids), len(workers[1].ids), turn, len(other.ids), limit)
				}
				if !other.done {
					other.next()
				}
				w := workers[turn]
				if w.done || w.next() > 0 {
					turn = 1 - turn
				}
			}
			// The peek began epoch 0 of the training job's rank; the loader's
			// workers play epoch 1.
			want := limitedPlan(t, h, 1, 2)
			for w, r := range workers {
				if !slices.Equal(r.ids, want[w]) {
					t.Errorf("worker %d: %d samples not in the plan's order (%d planned)", w, len(r.ids), len(want[w]))
				}
			}
			all := slices.Concat(workers[0].ids, workers[1].ids)
			slices.Sort(all)
			n := len(all)
			if distinct := len(slices.Compact(all)); n != rc.n || distinct != rc.n {
				t.Errorf("the loader's epoch gave %d samples, %d distinct; want %d once each", n, distinct, rc.n)
			}
			if want := limitedPlan(t, h, 0, 1)[0]; !slices.Equal(other.ids, want) {
				t.Errorf("the other job: %d samples not in the plan's order (%d planned)", len(other.ids), len(want))
			}
		})
	}
}

// TestLimitedSlowWorkerDoesNotStallOthers: under the smallest limit begin
// accepts for 2 workers, worker 1 takes a batch and then stops asking (a
// DataLoader worker whose batches the training loop does not want yet)
// while worker 0 reads its whole epoch; then worker 1 goes on. Worker 1's
// read-ahead must not keep worker 0's shards from the cache meanwhile.
func TestLimitedSlowWorkerDoesNotStallOthers(t *testing.T) {
	for _, rc := range recordCases {
		t.Run(rc.name, func(t *testing.T) {
			h := rc.start(t, &Options{Wait: 100 * time.Millisecond})
			limit, total, _ := limitFor(t, h.remote, 2*servedShards+1)
			if limit >= total {
				t.Fatalf("limit %d not under the data %d", limit, total)
			}
			workers := make([]*reader, 2)
			for w := range workers {
				c := h.dial()
				workers[w] = rc.reader(t, c, begin(t, h, c, limit, "j", "loader", agentapi.World{WorldSize: 1, LocalWorldSize: 1, Worker: w, NumWorkers: 2}), 16)
			}
			read := func(r *reader, stopAt int) {
				t.Helper()
				for deadline := time.Now().Add(60 * time.Second); !r.done && len(r.ids) < stopAt; {
					if time.Now().After(deadline) {
						t.Fatalf("no progress within 60 s: workers at %d and %d samples (limit %d bytes)", len(workers[0].ids), len(workers[1].ids), limit)
					}
					r.next()
				}
			}
			read(workers[1], 1)
			time.Sleep(200 * time.Millisecond) // worker 1's producer runs ahead meanwhile, as far as it may
			read(workers[0], 1<<30)
			read(workers[1], 1<<30)
			want := limitedPlan(t, h, 0, 2)
			for w, r := range workers {
				if !slices.Equal(r.ids, want[w]) {
					t.Errorf("worker %d: %d samples not in the plan's order (%d planned)", w, len(r.ids), len(want[w]))
				}
			}
		})
	}
}
