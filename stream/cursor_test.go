package stream_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream"
)

// epochIDs plays one epoch of rank r of w on d (two workers) and returns
// the sample IDs in order, then d's resume state after them.
func epochIDs(t *testing.T, d *stream.Dataset, w plan.World) ([]int64, plan.State) {
	t.Helper()
	ctx := context.Background()
	ep, err := d.NewEpoch(ctx, w, 2)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for wk := range 2 {
		it, err := ep.Iter(ctx, wk)
		if err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			ids = append(ids, recordID(it.Record()))
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		it.Close()
	}
	st, err := d.State(int64(len(ids)))
	if err != nil {
		t.Fatal(err)
	}
	return ids, st
}

// TestCursorPlaysLikeOpen checks that cursors of one opened dataset play
// the same epochs as datasets opened separately, each with its own epoch
// counter and resume state, and that closing a cursor leaves the dataset
// (and the other cursors) working; the index is read once.
func TestCursorPlaysLikeOpen(t *testing.T) {
	reg, cb := memDataset(t, spec{samples: 300, payload: 64, sizeLimit: 2000})
	seed := int64(7)
	opts := func() *stream.Options {
		return &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg, BatchSize: 4, Shuffle: true, ShuffleSeed: &seed}
	}
	ctx := context.Background()
	o := opts()
	d, err := stream.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	before := cb.counts()["index.json"]
	a, b := d.Cursor(), d.Cursor()
	if got := cb.counts()["index.json"]; got != before {
		t.Fatalf("cursors read index.json %d more times", got-before)
	}
	ref, err := stream.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	w0 := plan.World{Nodes: 1, RanksPerNode: 2, Rank: 0}
	w1 := plan.World{Nodes: 1, RanksPerNode: 2, Rank: 1}
	// Cursor a plays two epochs of rank 0, b one of rank 1: the counters
	// are the cursors' own.
	refIDs0, refSt0 := epochIDs(t, ref, w0)
	refIDs1, _ := epochIDs(t, ref, w0)
	gotA0, stA0 := epochIDs(t, a, w0)
	gotB0, _ := epochIDs(t, b, w1)
	gotA1, _ := epochIDs(t, a, w0)
	if !slices.Equal(gotA0, refIDs0) || !slices.Equal(gotA1, refIDs1) {
		t.Fatalf("cursor epochs differ from an opened dataset's:\n%v\n%v", gotA0, refIDs0)
	}
	if stA0 != refSt0 {
		t.Fatalf("cursor state %+v, opened dataset's %+v", stA0, refSt0)
	}
	if slices.Equal(gotA1, refIDs0) {
		t.Fatal("epoch 1 repeats epoch 0: the cursor's counter did not advance")
	}
	ref1, err := stream.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer ref1.Close()
	wantB0, _ := epochIDs(t, ref1, w1)
	if !slices.Equal(gotB0, wantB0) {
		t.Fatalf("cursor b's epoch 0 of rank 1 differs:\n%v\n%v", gotB0, wantB0)
	}
	// Resume a new cursor mid-epoch 1 (rank 0 of 2 yielded 10 samples),
	// as an opened dataset resumes from the same state.
	mid, err := a.State(10)
	if err != nil {
		t.Fatal(err)
	}
	c := d.Cursor()
	ref2, err := stream.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer ref2.Close()
	if err := c.Load(mid); err != nil {
		t.Fatal(err)
	}
	if err := ref2.Load(mid); err != nil {
		t.Fatal(err)
	}
	gotC, _ := epochIDs(t, c, w0)
	wantC, _ := epochIDs(t, ref2, w0)
	if !slices.Equal(gotC, wantC) || len(gotC) == 0 || len(gotC) >= len(refIDs1) {
		t.Fatalf("resumed cursor plays %v, an opened dataset %v", gotC, wantC)
	}
	// Closing cursors closes nothing shared.
	a.Close()
	c.Close()
	if got, _ := epochIDs(t, b, w1); len(got) == 0 {
		t.Fatal("cursor b yields nothing after a was closed")
	}
	if _, err := d.Get(ctx, 5); err != nil {
		t.Fatalf("dataset after its cursors closed: %v", err)
	}
	if n := b.Cursor().NumShards(); n != d.NumShards() {
		t.Fatalf("cursor of a cursor has %d shards, want %d", n, d.NumShards())
	}
}
