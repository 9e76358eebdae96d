package retry

import (
	"errors"
	"sort"
	"sync"

	"github.com/sluicedata/sluice/storage"
)

// Causes of a retry (Event.Cause), the values of the "cause" label of
// sluice_store_retries_total.
const (
	// CauseThrottled: the store asked to slow down (HTTP 429, 503).
	CauseThrottled = "throttled"
	// CauseTimeout: the attempt timeout ended the attempt (no response in
	// time), or the attempt ended with a context error of its own.
	CauseTimeout = "timeout"
	// CauseStall: a body stopped flowing for the stall timeout.
	CauseStall = "stall"
	// CauseServer: another server error (HTTP 5xx).
	CauseServer = "server"
	// CauseOther: anything else retryable (a reset connection, a
	// truncated body, a network error).
	CauseOther = "other"
)

// Cause classifies the error of a failed attempt into one of the Cause
// constants.
func Cause(err error) string {
	switch {
	case errors.Is(err, errStalled):
		return CauseStall
	case errors.Is(err, errAttemptTimeout), errors.Is(err, errAttemptAborted):
		return CauseTimeout
	case storage.IsThrottled(err):
		return CauseThrottled
	case storage.HTTPStatus(err) >= 500:
		return CauseServer
	}
	return CauseOther
}

// Count is the number of retries of one operation for one cause.
type Count struct {
	Op    string // as Event.Op: "stat", "get", "list", "delete", "upload"
	Cause string // as Event.Cause
	N     int64
}

// Counts counts the retries of the buckets whose Options it hooks (see
// Hook), by operation and cause. The zero value is ready; it is safe for
// concurrent use. A retry is a failed attempt followed by another one;
// the attempt that spends the budget is not counted.
type Counts struct {
	mu sync.Mutex
	m  map[[2]string]int64
}

// Observe counts ev.
func (c *Counts) Observe(ev Event) {
	cause := ev.Cause
	if cause == "" {
		cause = Cause(ev.Err)
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[[2]string]int64{}
	}
	c.m[[2]string{ev.Op, cause}]++
	c.mu.Unlock()
}

// Hook returns a copy of opts (nil: the defaults) whose OnRetry counts
// every retry in c before it calls opts' own OnRetry, if any.
func (c *Counts) Hook(opts *Options) *Options {
	var o Options
	if opts != nil {
		o = *opts
	}
	next := o.OnRetry
	o.OnRetry = func(ev Event) {
		c.Observe(ev)
		if next != nil {
			next(ev)
		}
	}
	return &o
}

// Snapshot returns the counts, sorted by operation then cause.
func (c *Counts) Snapshot() []Count {
	c.mu.Lock()
	out := make([]Count, 0, len(c.m))
	for k, n := range c.m {
		out = append(out, Count{Op: k[0], Cause: k[1], N: n})
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Op != out[j].Op {
			return out[i].Op < out[j].Op
		}
		return out[i].Cause < out[j].Cause
	})
	return out
}

// Total returns the number of retries counted.
func (c *Counts) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, v := range c.m {
		n += v
	}
	return n
}
