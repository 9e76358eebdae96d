package agent

import "github.com/sluicedata/sluice/stream"

// epochRound is the epoch a rank's DataLoader workers are playing: its
// number, the worker count of the iteration that began it and the workers
// that have begun it so far.
//
// MosaicML keeps one next_epoch for the node's workers (in shared memory,
// read by every worker at a barrier before the leader moves it on). The
// agent gives each (rank, worker) a cursor with an epoch counter of its own
// and no barrier, so the counters drift apart whenever the workers of an
// iteration are not the workers of the one before: a StreamingDataset
// iterated once in the training process (next(iter(ds)), num_workers=0)
// and then by a DataLoader with 2 workers put worker 0 in epoch 1 and
// worker 1 in epoch 0, a quarter of every epoch's samples twice and
// another quarter never. The round restores MosaicML's rule: a worker that
// has not begun the rank's current round (same worker count) joins its
// epoch; any other begin starts the next round, one epoch on.
type epochRound struct {
	epoch   int64
	workers int
	// token is the client's name of the iteration (agentapi.Begin.Round):
	// a worker of another iteration never joins this round.
	token string
	begun map[int]bool
	// provisional: the epoch was presumed before the first worker's
	// NewEpoch (a loaded state may still move it; settleRound fixes it).
	provisional bool
}

// presumeRound aligns cur, the cursor of (rank, worker) of an iteration
// with workers workers named token by its client, with its rank's round
// and records the worker in it. It returns whether the worker started a
// new round.
//
// Without a token a worker that has not begun the current round joins it,
// which guesses wrong when an iteration ended before some of its workers
// began and the next iteration's late-numbered workers begin first; the
// token (the DataLoader iteration's base seed) tells them apart.
func (a *Agent) presumeRound(j *job, rank, worker, workers int, token string, cur *stream.Dataset) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if j.rounds == nil {
		j.rounds = map[int]*epochRound{}
	}
	r := j.rounds[rank]
	if r != nil && r.workers == workers && r.token == token && !r.begun[worker] {
		r.begun[worker] = true
		cur.PresumeEpoch(r.epoch)
		return false
	}
	next := cur.NextEpoch()
	if r != nil {
		next = r.epoch + 1
	}
	cur.PresumeEpoch(next)
	j.rounds[rank] = &epochRound{epoch: next, workers: workers, token: token, begun: map[int]bool{worker: true}, provisional: true}
	return true
}

// settleRound records the epoch the first worker of a new round actually
// began (a loaded state can put it past the presumed one).
func (a *Agent) settleRound(j *job, rank int, epoch int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r := j.rounds[rank]; r != nil && r.provisional {
		r.epoch, r.provisional = epoch, false
	}
}
