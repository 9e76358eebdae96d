package agentapi

import "context"

// OpMetrics asks for one rank's live figures on a dataset (MetricsQuery,
// answered by Metrics). An agent that predates it answers with an error
// of code CodeBadRequest ("unknown op").
const OpMetrics = "metrics"

// MetricsQuery asks for the figures of a job's consumers on the dataset
// of Handle: the workers of Rank together, or of every rank of the job
// on this node when Rank is nil.
type MetricsQuery struct {
	Op     string `json:"op"`
	Handle int    `json:"handle"`
	Rank   *int   `json:"rank,omitempty"`
}

// RetryCount is the number of store retries of one operation ("get",
// "stat", "list"...) for one cause ("throttled", "timeout", "stall",
// "server", "other").
type RetryCount struct {
	Op    string `json:"op"`
	Cause string `json:"cause"`
	N     int64  `json:"n"`
}

// Metrics answers MetricsQuery. Counters are cumulative since the job's
// first iteration on the dataset (the job's state goes with its last
// connection).
type Metrics struct {
	Op string `json:"op"`
	// Workers is the number of (rank, worker) iterations counted.
	Workers int `json:"workers"`
	// Samples and Bytes count what the consumers were handed.
	Samples int64 `json:"samples"`
	Bytes   int64 `json:"bytes"`
	// WaitSeconds is the time the agent's iterations for them waited for
	// shards (downloads, leases), summed over the workers.
	WaitSeconds float64 `json:"wait_seconds"`
	// FirstSampleSeconds is the shortest time from an iteration's start
	// to its first sample (0 before any).
	FirstSampleSeconds float64 `json:"first_sample_seconds"`
	// CacheHits and CacheMisses count shard openings that found the shard
	// local or waited for it.
	CacheHits   int64 `json:"cache_hits"`
	CacheMisses int64 `json:"cache_misses"`
	// PrefetchedShards is the number of shards fetched ahead of the
	// consumers and not reached yet (now): the data-readiness signal.
	PrefetchedShards int64 `json:"prefetched_shards"`
	// Downloads, BytesFetched and Evictions are the agent's for the
	// dataset's files (shared by every job reading it).
	Downloads    int64 `json:"downloads"`
	BytesFetched int64 `json:"bytes_fetched"`
	Evictions    int64 `json:"evictions"`
	// CacheBytes and CacheLimit are the dataset's cache directory's use
	// and limit (0: none, or no cache).
	CacheBytes int64 `json:"cache_bytes"`
	CacheLimit int64 `json:"cache_limit"`
	// StoreRetries counts the retries of every store the agent opened
	// (all datasets: stores are shared), RetriesBy by operation and cause.
	StoreRetries int64        `json:"store_retries"`
	RetriesBy    []RetryCount `json:"retries_by,omitempty"`
	// Store is the requests the agent made to the dataset's stores, per
	// operation that had any (agents before this field send none).
	Store []StoreOp `json:"store,omitempty"`
}

// StoreOp is one operation's requests to a dataset's stores: how many
// (each attempt of a retried request counts), how many failed, and their
// time to the first byte (a read) or to the answer (a stat, a list),
// summed.
type StoreOp struct {
	Op       string  `json:"op"`
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	Seconds  float64 `json:"seconds"`
}

// Metrics returns the live figures q asks for.
func (c *Client) Metrics(ctx context.Context, q MetricsQuery) (Metrics, error) {
	q.Op = OpMetrics
	var out Metrics
	err := c.call(ctx, q, OpMetrics, &out)
	return out, err
}
