package stream

import (
	"sync/atomic"
	"time"
)

// Stats are a consumer's figures.
type Stats struct {
	// Samples counts samples delivered.
	Samples int64
	// Bytes counts record bytes delivered.
	Bytes int64
	// Hits counts shard openings that found the shard local.
	Hits int64
	// Misses counts shard openings that waited for a fetch.
	Misses int64
	// Wait is the time spent waiting for shards (fetches, leases).
	Wait time.Duration
	// FirstSample is the time from the start (Open for a Dataset, creation
	// for an Iterator) to the first sample; zero before it.
	FirstSample time.Duration
	// Elapsed is the time from the start to the last sample.
	Elapsed time.Duration
	// BytesFetched counts bytes this process downloaded for the dataset.
	BytesFetched int64
	// Downloads counts files this process downloaded for the dataset.
	Downloads int64
	// Evictions counts shards this process evicted (any dataset).
	Evictions int64
	// Prefetched is the number of shards the prefetchers fetched ahead of
	// their consumers that the consumers have not reached yet (now, not
	// cumulative): how far the data is ready ahead of consumption.
	Prefetched int64
}

// SamplesPerSecond returns Samples / Elapsed (0 when nothing elapsed).
func (s Stats) SamplesPerSecond() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Samples) / s.Elapsed.Seconds()
}

// BytesPerSecond returns Bytes / Elapsed.
func (s Stats) BytesPerSecond() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Bytes) / s.Elapsed.Seconds()
}

// InputWaitFraction returns the fraction of a training loop's time spent
// waiting for input, for a loop that computes for stepTime per batch of
// batchSize samples: Wait / (Wait + steps·stepTime).
func (s Stats) InputWaitFraction(stepTime time.Duration, batchSize int) float64 {
	if batchSize <= 0 {
		batchSize = 1
	}
	steps := (s.Samples + int64(batchSize) - 1) / int64(batchSize)
	total := s.Wait + time.Duration(steps)*stepTime
	if total <= 0 {
		return 0
	}
	return float64(s.Wait) / float64(total)
}

// counters accumulate Stats concurrently.
type counters struct {
	samples, bytes, hits, misses, wait atomic.Int64
	ahead                              atomic.Int64 // shards prefetched, not reached
	start                              atomic.Int64 // unix nanos
	first, last                        atomic.Int64 // unix nanos
}

func (c *counters) begin(t time.Time) { c.start.Store(t.UnixNano()) }

func (c *counters) hit(hit bool) {
	if hit {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
}

func (c *counters) delivered(n int, now time.Time) {
	c.samples.Add(1)
	c.bytes.Add(int64(n))
	t := now.UnixNano()
	c.first.CompareAndSwap(0, t)
	c.last.Store(t)
}

func (c *counters) snapshot() Stats {
	s := Stats{
		Samples: c.samples.Load(), Bytes: c.bytes.Load(), Hits: c.hits.Load(),
		Misses: c.misses.Load(), Wait: time.Duration(c.wait.Load()), Prefetched: c.ahead.Load(),
	}
	if st, f := c.start.Load(), c.first.Load(); st != 0 && f != 0 {
		s.FirstSample = time.Duration(f - st)
		s.Elapsed = time.Duration(c.last.Load() - st)
	}
	return s
}

// Stats returns the dataset's figures in this process: every Get and
// Iterator together, plus the cache's downloads and evictions for the
// dataset's streams. The clock starts at the first iteration.
func (d *Dataset) Stats() Stats {
	s := d.stats.snapshot()
	for _, st := range d.streams {
		if st.cds != nil {
			cs := st.cds.Stats()
			s.BytesFetched += cs.BytesFetched
			s.Downloads += cs.Downloads
			s.Evictions += cs.Evictions
		}
	}
	return s
}
