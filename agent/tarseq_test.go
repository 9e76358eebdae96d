package agent

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/format/wds"
)

// writeTarDir writes shards tars of per samples each (keys s000000...).
func writeTarDir(t *testing.T, dir string, shards, per int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for k := range shards {
		var buf bytes.Buffer
		w := wds.NewWriter(&buf)
		for j := range per {
			id := k*per + j
			if err := w.Write(fmt.Sprintf("s%06d", id), map[string][]byte{"cls": []byte(fmt.Sprint(id)), "bin": bytes.Repeat([]byte{byte(id)}, 100+id%5)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("shard-%06d.tar", k)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// recordKey is the WebDataset key of a sample record's first member.
func recordKey(t *testing.T, rec []byte) string {
	t.Helper()
	h, err := tar.NewReader(bytes.NewReader(rec)).Next()
	if err != nil {
		t.Fatalf("record: %v", err)
	}
	k, _, _ := strings.Cut(h.Name, ".")
	return k
}

type tarSeqReaderT struct {
	c    *agentapi.Client
	iter int
}

func beginSeq(t *testing.T, c *agentapi.Client, handle int, req agentapi.TarSeqBegin) tarSeqReaderT {
	t.Helper()
	req.Handle = handle
	b, err := c.TarSeqBegin(context.Background(), req)
	if err != nil {
		t.Fatalf("begin %+v: %v", req, err)
	}
	return tarSeqReaderT{c: c, iter: b.Iter}
}

// take reads up to n samples (all when n < 0) and their keys.
func (r tarSeqReaderT) take(t *testing.T, n int) []string {
	t.Helper()
	var keys []string
	for n < 0 || len(keys) < n {
		max := 7
		if n >= 0 {
			max = min(max, n-len(keys))
		}
		b, recs, err := r.c.TarSeqNext(context.Background(), agentapi.TarSeqNext{Iter: r.iter, Max: max})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			keys = append(keys, recordKey(t, rec))
		}
		if b.Done {
			break
		}
	}
	return keys
}

func TestTarSeqOps(t *testing.T) {
	h := startAgent(t, 1, nil)
	data := filepath.Join(t.TempDir(), "tars")
	const shards, per = 7, 5
	writeTarDir(t, data, shards, per)
	ctx := context.Background()
	seed := int64(3)
	open := func(c *agentapi.Client, job string) int {
		o, err := c.TarSeqOpen(ctx, agentapi.TarSeqOpen{Job: job, Remote: data, Shuffle: true, ShuffleSeed: &seed})
		if err != nil {
			t.Fatal(err)
		}
		if len(o.ShardURLs) != shards {
			t.Fatalf("%d shard URLs, want %d", len(o.ShardURLs), shards)
		}
		return o.Handle
	}
	// Two ranks × two workers, two epochs: each epoch every sample once,
	// and the epochs in different orders.
	c := h.dial()
	hd := open(c, "j1")
	var orders [][]string
	for epoch := range 2 {
		var all []string
		for rank := range 2 {
			for w := range 2 {
				r := beginSeq(t, c, hd, agentapi.TarSeqBegin{Rank: rank, Ranks: 2, Worker: w, Workers: 2})
				all = append(all, r.take(t, -1)...)
				if err := c.TarSeqEnd(ctx, r.iter); err != nil {
					t.Fatal(err)
				}
			}
		}
		sorted := slices.Clone(all)
		slices.Sort(sorted)
		for i, k := range sorted {
			if want := fmt.Sprintf("s%06d", i); k != want || len(sorted) != shards*per {
				t.Fatalf("epoch %d: %d samples, sample %d is %s, want %s", epoch, len(sorted), i, k, want)
			}
		}
		orders = append(orders, all)
	}
	if slices.Equal(orders[0], orders[1]) {
		t.Fatal("epochs 0 and 1 came in the same order with shuffle")
	}

	// Resume: one rank, two workers, a loader batch of 3 taken in turn;
	// after 8 samples consumed (batches w0, w1, w0[:2]) the states resume
	// exactly.
	c2 := h.dial()
	hd2 := open(c2, "j2")
	full := make([][]string, 2)
	for w := range 2 {
		r := beginSeq(t, c2, hd2, agentapi.TarSeqBegin{Worker: w, Workers: 2})
		full[w] = r.take(t, -1)
		c2.TarSeqEnd(ctx, r.iter)
	}
	c3 := h.dial()
	hd3 := open(c3, "j3")
	for w := range 2 {
		r := beginSeq(t, c3, hd3, agentapi.TarSeqBegin{Worker: w, Workers: 2})
		if got := r.take(t, 5); !slices.Equal(got, full[w][:5]) {
			t.Fatalf("worker %d: %v, want %v", w, got, full[w][:5])
		}
	}
	st, err := c3.TarSeqState(ctx, agentapi.TarSeqStateQuery{Handle: hd3, Workers: 2, BatchSize: 3, NumSamples: 8})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Workers) != 2 {
		t.Fatalf("%d states", len(st.Workers))
	}
	c4 := h.dial()
	hd4 := open(c4, "j4")
	for w, consumed := range []int{5, 3} {
		r := beginSeq(t, c4, hd4, agentapi.TarSeqBegin{Worker: w, Workers: 2, Resume: &st.Workers[w]})
		if got := r.take(t, -1); !slices.Equal(got, full[w][consumed:]) {
			t.Fatalf("worker %d resumed: %v, want %v", w, got, full[w][consumed:])
		}
	}
	// Another shape is refused with CodeInvalid.
	_, err = c4.TarSeqBegin(ctx, agentapi.TarSeqBegin{Handle: hd4, Worker: 0, Workers: 1, Resume: &st.Workers[0]})
	var ae *agentapi.Error
	if !errors.As(err, &ae) || ae.Code != agentapi.CodeInvalid || !strings.Contains(ae.Message, "shape") {
		t.Fatalf("resume on another shape: %v", err)
	}
	// More consumed than delivered is an error, not a wrong state.
	if _, err := c3.TarSeqState(ctx, agentapi.TarSeqStateQuery{Handle: hd3, Workers: 2, BatchSize: 3, NumSamples: 11}); err == nil {
		t.Fatal("state past the delivered samples: no error")
	}
}

func TestSplitConsumed(t *testing.T) {
	runs := []*tarSeqRun{{total: 4, done: true}, {total: 10}}
	got, next, err := splitConsumed(runs, 12, 3)
	if err != nil {
		t.Fatal(err)
	}
	// w0 3, w1 3, w0 1 (its last, short), w1 3, then w1 only: 2 of 3.
	if want := []int64{4, 8}; !slices.Equal(got, want) || next != 1 {
		t.Fatalf("split %v, next %d; want %v, 1", got, next, want)
	}
	if got, next, _ := splitConsumed(runs, 6, 3); !slices.Equal(got, []int64{3, 3}) || next != 0 {
		t.Fatalf("split %v, next %d; want [3 3], 0", got, next)
	}
	if got, next, _ := splitConsumed(runs, 3, 3); !slices.Equal(got, []int64{3, 0}) || next != 1 {
		t.Fatalf("split %v, next %d; want [3 0], 1", got, next)
	}
	if _, _, err := splitConsumed([]*tarSeqRun{{total: 2, done: true}}, 3, 3); err == nil {
		t.Fatal("more than delivered: no error")
	}
}

func TestTarSeqReadersBounded(t *testing.T) {
	var j tarSeqJobs
	j.reader("keep").nextEpoch = 5
	for i := range tarSeqMaxReaders + 10 {
		j.reader(fmt.Sprint(i))
		if i%100 == 0 {
			j.reader("keep") // recently used: never the oldest
		}
	}
	if len(j.readers) != tarSeqMaxReaders {
		t.Fatalf("%d readers remembered, want %d", len(j.readers), tarSeqMaxReaders)
	}
	if _, ok := j.readers["0"]; ok {
		t.Fatal("the oldest reader was kept")
	}
	if j.reader("keep").nextEpoch != 5 {
		t.Fatal("a recently used reader was forgotten")
	}
}
