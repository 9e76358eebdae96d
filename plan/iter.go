package plan

import "slices"

// WorkerIter yields one worker's sample IDs lazily, in the order Worker
// returns them (generate_work()[node][rank][worker] flattened, -1 for
// padding). For random batching it holds only the worker's canonical
// positions (O(the worker's share), cheap to compute) and maps them to
// sample IDs a segment at a time: the first call maps only the first batch,
// so the first sample after a resume costs the shuffle's preparation plus
// the shuffle structures that one batch touches (a span, a block or, for
// py1e, one window), not the rest of the worker's epoch; the second call
// maps all the rest at once, at Worker's cost. Other
// batching methods are global: their arrangement is built once per Epoch
// and yielded as the first batch, then the rest.
//
// A WorkerIter is not safe for concurrent use; the Epoch it came from is.
type WorkerIter struct {
	r     *randomEpoch
	ids   []int64 // positions, mapped to sample IDs in place up to mapped
	done  int     // entries already returned
	batch int
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
		per := e.rnd.shape[3] * e.rnd.shape[4]
		it.ids = e.rnd.pt.AppendWorker(make([]int64, 0, per), node, rank, worker)
		return it, nil
	}
	ids, err := e.workerRO(node, rank, worker)
	if err != nil {
		return nil, err
	}
	it.ids = slices.Clone(ids)
	return it, nil
}

// Len returns the number of entries (padding included) the worker yields
// over the whole epoch: generate_work's batches per worker × batch size.
func (it *WorkerIter) Len() int { return len(it.ids) }

// Remaining returns the number of entries not yet returned by Next.
func (it *WorkerIter) Remaining() int { return len(it.ids) - it.done }

// Next returns the worker's next sample IDs in order (-1 = padding, to be
// skipped): the first call at most one batch, the second call the rest.
// It returns an empty slice once the worker is exhausted. The returned
// slice belongs to the caller: later calls never modify it.
func (it *WorkerIter) Next() ([]int64, error) {
	if it.done == len(it.ids) {
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
	seg := it.ids[it.done:end:end]
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
		return min(len(it.ids), max(it.batch, 1))
	}
	return len(it.ids)
}
