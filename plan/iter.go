package plan

import "slices"

// WorkerIter yields one worker's sample IDs lazily, in the order Worker
// returns them (generate_work()[node][rank][worker] flattened, -1 for
// padding). For random batching it maps the worker's canonical positions
// to sample IDs a segment at a time: the first call takes only the first
// batch's positions (from the partition, one by one) and maps them, so the
// first sample after a resume costs the shuffle's preparation plus the
// shuffle structures that one batch touches (a span, a block or, for
// py1e, one window), not the rest of the worker's epoch (nor its
// positions: 15.6k of them, about 0.3 ms, at 90% of 10M over 64
// workers); the second call computes and maps all the rest at once, at
// Worker's cost. Other
// batching methods are global: their arrangement is built once per Epoch
// and yielded as the first batch, then the rest.
//
// A WorkerIter is not safe for concurrent use; the Epoch it came from is.
type WorkerIter struct {
	r     *randomEpoch
	ids   []int64 // positions, mapped to sample IDs in place up to mapped
	done  int     // entries already returned
	batch int
	// Random batching: the worker's entries are n; ids holds them all
	// only from the second call (the first batch's come from the
	// partition one by one), so the first batch of a resume does not wait
	// for the rest of the worker's positions.
	n                  int
	node, rank, worker int
}

// WorkerIter returns a lazy iterator over one worker's samples. It fails
// for a worker outside the epoch's shape. Unlike Worker it leaves the
// rank's cache alone: it is meant for a consumer that starts streaming at
// once (a resume) rather than for one that needs the whole list up front.
func (e *Epoch) WorkerIter(node, rank, worker int) (*WorkerIter, error) {
	if err := e.checkWorker(node, rank, worker); err != nil {
		return nil, err
	}
	it := &WorkerIter{batch: e.c.batchSize}
	if e.rnd != nil {
		it.r = e.rnd
		it.n = e.rnd.shape[3] * e.rnd.shape[4]
		it.node, it.rank, it.worker = node, rank, worker
		return it, nil
	}
	ids, err := e.workerRO(node, rank, worker)
	if err != nil {
		return nil, err
	}
	it.ids = slices.Clone(ids)
	it.n = len(it.ids)
	return it, nil
}

// Len returns the number of entries (padding included) the worker yields
// over the whole epoch: generate_work's batches per worker × batch size.
func (it *WorkerIter) Len() int { return it.n }

// Remaining returns the number of entries not yet returned by Next.
func (it *WorkerIter) Remaining() int { return it.n - it.done }

// Next returns the worker's next sample IDs in order (-1 = padding, to be
// skipped): the first call at most one batch, the second call the rest.
// It returns an empty slice once the worker is exhausted. The returned
// slice belongs to the caller: later calls never modify it.
func (it *WorkerIter) Next() ([]int64, error) {
	if it.done == it.n {
		return nil, nil
	}
	if it.r == nil {
		// Already materialised: the first batch, then the rest.
		end := len(it.ids)
		if it.done == 0 {
			end = min(end, max(it.batch, 1))
		}
		seg := it.ids[it.done:end:end]
		it.done = end
		return seg, nil
	}
	end := it.segmentEnd()
	var seg []int64
	if it.done == 0 {
		// The first batch's positions alone (entry k is slot k%B of
		// batch k/B).
		pt, b := it.r.pt, it.r.shape[4]
		seg = make([]int64, end)
		for k := range seg {
			seg[k] = pt.At(it.node, it.rank, it.worker, k/b, k%b)
		}
	} else {
		if it.ids == nil {
			it.ids = it.r.pt.AppendWorker(make([]int64, 0, it.n), it.node, it.rank, it.worker)
		}
		seg = it.ids[it.done:end:end]
	}
	if err := it.r.mapIDs(seg); err != nil {
		return nil, err
	}
	it.done = end
	return seg, nil
}

// segmentEnd chooses the end of the next segment: the first batch alone
// (latency), then everything else in one request. A worker's positions
// interleave the canonical nodes (every step takes a batch from each), so
// any shorter segment would touch most of the shuffle's spans, blocks or
// py1e windows again; one request for the rest keeps the total cost that
// of Worker plus one batch.
func (it *WorkerIter) segmentEnd() int {
	if it.done == 0 {
		return min(it.n, max(it.batch, 1))
	}
	return it.n
}
