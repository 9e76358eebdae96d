package stream

import (
	"context"
	"fmt"

	"github.com/sluicedata/sluice/plan"
)

// Epoch is one epoch of one rank: the plan dealt to the current world,
// from the resume position. Iterators are made from it per worker (or
// for the whole rank). An Epoch is safe for concurrent use.
type Epoch struct {
	d     *Dataset
	ep    *plan.Epoch
	spec  plan.EpochSpec
	node  int
	rank  int // rank of node, in the parallel world
	works int
}

// NewEpoch begins the next epoch for world w with workers DataLoader
// workers per rank, as MosaicML's __iter__ does: the epoch counter
// advances now, and a loaded resume state that is not stale sets the
// epoch, the position and the order's parameters. It fails when the cache
// limit cannot hold one leased shard per worker plus one being fetched.
func (d *Dataset) NewEpoch(ctx context.Context, w plan.World, workers int) (*Epoch, error) {
	if workers <= 0 {
		workers = 1
	}
	if w.Nodes == 0 && w.RanksPerNode == 0 {
		w = plan.World{Nodes: 1, RanksPerNode: 1}
	}
	pw, err := w.Parallel()
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	shape, err := w.Shape(workers)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	if err := d.checkLimit(workers); err != nil {
		return nil, err
	}
	d.mu.Lock()
	spec, err := d.tracker.Begin(shape)
	if err == nil {
		d.world = &w
	}
	d.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	ep, err := d.planner.Epoch(spec)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	return &Epoch{d: d, ep: ep, spec: ep.Spec(), node: pw.Node(), rank: pw.RankOfNode(), works: workers}, nil
}

// Number returns the epoch number.
func (e *Epoch) Number() int64 { return e.spec.Epoch }

// SampleInEpoch returns the global position the epoch resumes from.
func (e *Epoch) SampleInEpoch() int64 { return e.spec.SampleInEpoch }

// Spec returns the epoch's resolved plan parameters.
func (e *Epoch) Spec() plan.EpochSpec { return e.spec }

// Plan returns the epoch's plan.
func (e *Epoch) Plan() *plan.Epoch { return e.ep }

// ResumeCheck returns nil unless this epoch resumes a stopped run in a way
// that is not exactly-once (MosaicML's order repeats or skips samples on
// this shape); then an error matching plan.ErrInexactResume names why. See
// plan.Epoch.ResumeCheck.
func (e *Epoch) ResumeCheck() error { return e.ep.ResumeCheck() }

// Iter returns an iterator over one DataLoader worker's samples (worker
// in [0, workers)), in the order that worker yields them. ctx bounds the
// whole iteration and its prefetching.
func (e *Epoch) Iter(ctx context.Context, worker int) (*Iterator, error) {
	if worker < 0 || worker >= e.works {
		return nil, fmt.Errorf("stream: worker %d out of range [0, %d)", worker, e.works)
	}
	src, err := e.ep.WorkerIter(e.node, e.rank, worker)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	first, err := src.Next()
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	var t *workerTurns
	if e.works > 1 && e.d.opts.OrderAdmissions && e.d.cache != nil && e.d.cache.Limit() > 0 {
		// Under a limit the workers' shard changes may take turns in
		// the rank's order (see WorkerGroup).
		id := turnID{epoch: e.spec.Epoch, from: e.spec.SampleInEpoch, node: e.node, rank: e.rank, works: e.works,
			nodes: e.ep.Spec().Shape.Nodes, ranks: e.ep.Spec().Shape.RanksPerNode}
		t = e.d.workerGroup().join(id, worker, e.d.opts.BatchSize)
	}
	if src.Remaining() == 0 {
		return newIterator(ctx, e.d, first, t), nil
	}
	return newLazyIterator(ctx, e.d, first, src, t), nil
}

// RankIter returns an iterator over the whole rank's samples in the order
// an in-order PyTorch DataLoader yields them: batches taken round-robin
// over the workers.
func (e *Epoch) RankIter(ctx context.Context) (*Iterator, error) {
	if e.works == 1 {
		// One worker: its order is the rank's (padding is skipped).
		return e.Iter(ctx, 0)
	}
	batches, err := e.ep.RankBatches(e.node, e.rank)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	n := 0
	for _, b := range batches {
		n += len(b)
	}
	ids := make([]int64, 0, n)
	for _, b := range batches {
		ids = append(ids, b...)
	}
	return newIterator(ctx, e.d, ids, nil), nil
}
