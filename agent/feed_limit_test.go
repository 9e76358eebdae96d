package agent

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
)

// limitFor returns a cache limit of room shards of the dataset under
// remote (its largest shard times room, plus its index) and the data's
// total size.
func limitFor(t *testing.T, remote string, room int) (limit, total int64, shards int) {
	t.Helper()
	ents, err := os.ReadDir(remote)
	if err != nil {
		t.Fatal(err)
	}
	var most, index int64
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "index.json" {
			index = fi.Size()
			continue
		}
		shards++
		total += fi.Size()
		most = max(most, fi.Size())
	}
	return index + int64(room)*most, total, shards
}

// TestFeedUnderCacheLimit feeds batches that each span more shards than
// a cache limit of a few shards holds, with one and two workers read in
// turn: every worker's samples in the plan's order, each once, every
// record intact, and no wait past its deadline. A batch that held its
// shards' leases until it was full deadlocked here: every worker's
// pending samples pinned the cache full and no producer could fetch its
// next shard.
func TestFeedUnderCacheLimit(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d workers", workers), func(t *testing.T) {
			h := startAgentShards(t, 2000, 1<<10, nil)
			// The smallest limit begin accepts for this shape: each worker
			// may hold servedShards shards, plus one being fetched.
			limit, total, shards := limitFor(t, h.remote, workers*servedShards+1)
			const bs = 400 // samples per feed batch: ~10 shards, more than the limit holds
			if limit >= total {
				t.Fatalf("limit %d not under the data %d", limit, total)
			}
			spec := h.dataset()
			spec.CacheLimit = fmt.Sprint(limit)
			fc := dialFeed(t, h.sock)
			iters := make([]int, workers)
			worlds := make([]agentapi.World, workers)
			for w := range workers {
				worlds[w] = agentapi.World{Worker: w, NumWorkers: workers}
				var op agentapi.Opened
				fc.call(agentapi.Open{Op: agentapi.OpOpen, Dataset: spec, Job: "limit", World: worlds[w]}, &op)
				var bg agentapi.Begun
				fc.call(agentapi.Begin{Op: agentapi.OpBegin, Handle: op.Handle, World: worlds[w]}, &bg)
				iters[w] = bg.Iter
			}
			starts := shardStarts(t, h.remote)
			got := make([][]int64, workers)
			short := make([]bool, workers)
			live := make([]bool, workers)
			for w := range live {
				live[w] = true
			}
			spans := 0
			deadline := time.Now().Add(60 * time.Second)
			for slices.Contains(live, true) {
				if time.Now().After(deadline) {
					t.Fatalf("no progress within 60 s: fed %v samples so far (limit %d bytes, %d shards of data)", lens(got), limit, shards)
				}
				for w := range workers {
					if !live[w] {
						continue
					}
					v, done := fc.next(iters[w], bs)
					b := v.Batch
					if b.Done {
						live[w] = false
					}
					if b.N > 0 && short[w] {
						t.Fatalf("worker %d: a short batch before the end", w)
					}
					short[w] = b.N > 0 && b.N < bs
					seen := map[int]bool{}
					for i := range b.N {
						id := v.Sample(i)
						if got := int64(binary.LittleEndian.Uint64(v.Value(0, i))); got != id {
							t.Fatalf("sample %d: id column %d", id, got)
						}
						if got, want := string(v.Value(1, i)), fmt.Sprintf("sample %d", id); got != want {
							t.Fatalf("sample %d: text %q, want %q", id, got, want)
						}
						k, _ := slices.BinarySearch(starts, id+1)
						seen[k-1] = true
						got[w] = append(got[w], id)
					}
					if len(seen) > workers*servedShards+1 {
						spans++
					}
					done()
				}
			}
			all := map[int64]bool{}
			for w := range workers {
				want := planIDs(t, h, 1, worlds[w])[0]
				if !slices.Equal(got[w], want) {
					t.Fatalf("worker %d: fed %d samples %v..., plan %d %v...", w, len(got[w]), got[w][:min(8, len(got[w]))], len(want), want[:min(8, len(want))])
				}
				for _, id := range got[w] {
					if all[id] {
						t.Fatalf("sample %d fed twice", id)
					}
					all[id] = true
				}
			}
			if len(all) != 2000 {
				t.Fatalf("%d distinct samples fed, want 2000", len(all))
			}
			if spans == 0 {
				t.Fatalf("no batch spanned more shards than the limit holds: the test does not test the limit")
			}
			if used := shardBytes(t, h.local); used > limit {
				t.Fatalf("cache holds %d bytes, over its limit %d", used, limit)
			}
		})
	}
}

func lens(s [][]int64) []int {
	out := make([]int, len(s))
	for i := range s {
		out[i] = len(s[i])
	}
	return out
}

// shardBytes sums the sizes of the shard files under dir.
func shardBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".mds" {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// shardStarts returns the first sample ID of each shard of the dataset
// under dir, from its index.
func shardStarts(t *testing.T, dir string) []int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx struct {
		Shards []struct {
			Samples int64 `json:"samples"`
		} `json:"shards"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	var out []int64
	var at int64
	for _, s := range idx.Shards {
		out = append(out, at)
		at += s.Samples
	}
	return out
}

// BenchmarkFeedCopyOut measures a batch of 32 records of 48 KB assembled
// into a reused slot: read from the leased shard straight into the batch
// (no cache limit), and copied out of the shard first so the lease can go
// (copyRecords, under a limit): the price of the extra copy.
func BenchmarkFeedCopyOut(b *testing.B) {
	h := startAgent(b, 1, nil)
	remote := filepath.Join(b.TempDir(), "large")
	w, err := mds.NewWriter(remote, &mds.WriterOptions{Columns: map[string]string{"id": "int", "x": "ndarray:float32:12288"}, SizeLimit: 4 << 20})
	if err != nil {
		b.Fatal(err)
	}
	const n = 32
	x := make([]byte, 4*12288)
	for i := range n {
		if err := w.Write(format.Sample{"id": int64(i), "x": x}); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		b.Fatal(err)
	}
	sd, err := h.a.acquireDataset(b.Context(), "copyout", agentapi.Dataset{Remote: remote, Local: filepath.Join(b.TempDir(), "c"), BatchSize: n}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer h.a.releaseDataset(sd)
	ep, err := sd.ds.NewEpoch(b.Context(), planWorld(agentapi.World{}, 0), 1)
	if err != nil {
		b.Fatal(err)
	}
	it, err := startIteration(ep, 0, 0, iterShards{sizes: sd.shardBytes, schemas: sd.shardSchema}, 0, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer it.stop()
	var locs []location
	for len(locs) < n {
		more, done, err := it.take(b.Context(), n-len(locs), agentTestWait)
		if err != nil || (done && len(locs)+len(more) < n) {
			b.Fatalf("take: %d, %v", len(locs)+len(more), err)
		}
		locs = append(locs, more...)
	}
	defer releaseLocs(locs)
	for _, copyOut := range []bool{false, true} {
		b.Run(fmt.Sprintf("copyOut=%v", copyOut), func(b *testing.B) {
			fi := &feedIter{ds: sd, copyOut: copyOut}
			defer fi.close()
			if err := fi.configure(nil, nil); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(n * int64(len(x)))
			b.ReportAllocs()
			for b.Loop() {
				batch := slices.Clone(locs)
				var recs [][]byte
				if copyOut {
					for i := range batch {
						batch[i].release = func() {} // the real leases stay with locs
					}
					if err := fi.copyRecords(batch); err != nil {
						b.Fatal(err)
					}
					recs = fi.recs
				}
				hdr, fd, err := fi.assemble(batch, recs)
				if err != nil {
					b.Fatal(err)
				}
				if fd > 0 {
					unix.Close(fd)
				}
				fi.free([]int{hdr.Slot})
				fi.recs, fi.held = fi.recs[:0], fi.held[:0]
			}
		})
	}
}
