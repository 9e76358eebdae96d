package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/agentapi"
)

// TestMappedCopiesWarmReplies: under a cache limit that holds the data, a
// warm shuffled epoch read by a client that maps copies and reads its
// records quickly (the benchmark's client, a training loop over a light
// column) comes in replies of about mapBudget of records, whatever the
// producer made while the client read the last reply (iteration.fill);
// every record is a copy in the memory file, none leased (a shard's
// mapping a reply: iteration_map.go, "Local records"); and a reply lists
// the memory file once for the dataset's one record layout, not once for
// each shard its records came from. In the plan's order, each record its
// own. The old agent answered what was buffered (~5 records a reply
// here, 15 in BenchmarkAgentWarmShuffled/100KB), leased a shard in each
// reply and listed the file with each record's shard.
func TestMappedCopiesWarmReplies(t *testing.T) {
	rc := recordCase{"40KB mapped", 40 << 10, 600, 1 << 20, 0, true}
	h := rc.start(t, nil)
	_, total, _ := limitFor(t, h.remote, 0)
	w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	want := planIDs(t, h, 2, w)
	c := h.dial()
	// The first epoch fetches the shards (leased as they come).
	rc.reader(t, c, begin(t, h, c, 2*total, "j", "", w), 512).epoch(0, want[0])

	ctx := context.Background()
	spec := h.dataset()
	spec.CacheLimit = fmt.Sprint(2 * total)
	op, err := c.Open(ctx, agentapi.Open{Dataset: spec, Job: "j", World: w})
	if err != nil {
		t.Fatal(err)
	}
	// Asked at Begin: the copies go to the file from the first sample.
	begun, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: w, MapCopies: true})
	if err != nil {
		t.Fatal(err)
	}
	iter := begun.Iter
	var ids []int64
	var out []byte
	var prev int64
	replies, leased, lists := 0, 0, 0
	for {
		req := agentapi.Next{Iter: iter, Max: 512, MapCopies: true}
		if prev != 0 {
			req.Release = []int64{prev}
		}
		b, err := c.Next(ctx, req)
		if err != nil {
			t.Fatalf("next after %d samples: %v", len(ids), err)
		}
		if b.Done {
			break
		}
		prev = b.ID
		if len(b.Entries) == 0 {
			continue
		}
		replies++
		mems := 0
		for _, s := range b.Shards {
			if s.Mem != 0 {
				mems++
			}
		}
		lists = max(lists, mems)
		for _, e := range b.Entries {
			if e.Ref&agentapi.InlineFlag != 0 || b.Shards[e.Ref].Mem == 0 {
				leased++ // a warm record not copied into the file
				continue
			}
			// Record: u32 len(text), i64 id, text.
			rec := b.Mapped[e.Ref][e.Offset : e.Offset+uint64(e.Length)]
			if got := int64(binary.LittleEndian.Uint64(rec[4:12])); got != e.Sample {
				t.Fatalf("record of sample %d holds id %d", e.Sample, got)
			}
			out = append(out[:0], rec...) // as a client decoding a bytes column
			ids = append(ids, e.Sample)
		}
	}
	per := float64(len(ids)+leased) / float64(max(replies, 1))
	t.Logf("%d samples in %d replies (%.1f a reply), %d not copied into the file, the file listed up to %d times a reply", len(ids)+leased, replies, per, leased, lists)
	if leased > 0 {
		t.Errorf("%d records of the warm epoch leased or inline, want every one copied into the memory file", leased)
	} else if !slices.Equal(ids, want[1]) {
		t.Errorf("%d samples not in the plan's order (%d planned)", len(ids), len(want[1]))
	}
	if lists != 1 {
		t.Errorf("a reply listed the memory file %d times, want once (one record layout)", lists)
	}
	// mapBudget holds 102 of these records: half of that, on average,
	// leaves the race detector and a loaded machine room.
	if fill := mapBudget / (rc.size + 12) / 2; per < float64(fill) {
		t.Errorf("%.1f samples a reply, want at least %d (batches of 512, %d bytes of copies a reply)", per, fill, mapBudget)
	}
}

// TestMappedIterationRefusesFeed: an iteration begun with MapCopies under
// a cache limit has its copies in a memory file that the feed does not
// read (it assembles leased records and heap copies), so a feed request
// on it is refused as a bad request naming map_copies, not answered with
// records read from a path the location does not have.
func TestMappedIterationRefusesFeed(t *testing.T) {
	h := startAgent(t, 40, nil)
	_, total, _ := limitFor(t, h.remote, 0)
	fc := dialFeed(t, h.sock)
	spec := h.dataset()
	spec.CacheLimit = fmt.Sprint(max(2*total, 64<<10))
	w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	var op agentapi.Opened
	fc.call(agentapi.Open{Op: agentapi.OpOpen, Dataset: spec, Job: "feed", World: w}, &op)
	var bg agentapi.Begun
	fc.call(agentapi.Begin{Op: agentapi.OpBegin, Handle: op.Handle, World: w, MapCopies: true}, &bg)
	fc.send(agentapi.FeedNext{Op: agentapi.OpFeed, Iter: bg.Iter, Max: 4})
	f, _, err := agentapi.ReadFrame(fc.uc, make([]byte, 1<<16))
	if err != nil {
		t.Fatal(err)
	}
	var e agentapi.Error
	if err := json.Unmarshal(f.Header, &e); err != nil || e.Op != agentapi.OpError || e.Code != agentapi.CodeBadRequest || !strings.Contains(e.Message, "map_copies") {
		t.Fatalf("feed on a mapped iteration answered %s", f.Header)
	}
}
