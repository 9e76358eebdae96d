package stream_test

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/storage"
)

// flightMeter is a bucket that measures how many whole-object reads it
// has in flight over time: the mean over a pass is how well a reader
// keeps the store busy (a gap at the start, between shards or at the end
// of a pass lowers it). A read counts from its request to its reader's
// Close.
type flightMeter struct {
	storage.Bucket
	mu     sync.Mutex
	now    int           // reads in flight
	last   time.Time     // of the last change of now
	area   time.Duration // integral of now over time since reset
	start  time.Time     // of the reset
	first  time.Duration // from the reset to the first shard read's request
	shards int           // shard reads (not the index) since the reset
	// indexAsked and indexRead are the times from the reset to the
	// first index read's request and to its reader's Close.
	indexAsked, indexRead time.Duration
}

// Close leaves the shared bucket open.
func (m *flightMeter) Close() error { return nil }

// reset starts a new measurement.
func (m *flightMeter) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.start, m.last, m.area, m.first, m.shards = time.Now(), time.Now(), 0, 0, 0
	m.indexAsked, m.indexRead = -1, -1
}

// gaps returns, since the reset, the time before the index was asked for
// and the time from the end of its read to the first shard read's
// request: what a reader spends besides the two requests of its first
// sample (both -1 when either request was not seen).
func (m *flightMeter) gaps() (beforeIndex, between time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.indexAsked < 0 || m.indexRead < 0 || m.shards == 0 {
		return -1, -1
	}
	return m.indexAsked, m.first - m.indexRead
}

// mean returns the mean number of reads in flight from the reset to d
// after it (reads that ended later count to their end: d is the time a
// pass counts, which may end before its Close), and the time from the
// reset to the first shard read's request.
func (m *flightMeter) mean(d time.Duration) (float64, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	area := m.area + time.Duration(m.now)*time.Since(m.last)
	return float64(area) / float64(d), m.first
}

func (m *flightMeter) change(d int, key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := time.Now()
	m.area += time.Duration(m.now) * t.Sub(m.last)
	m.last = t
	m.now += d
	switch {
	case key == format.IndexFile && d > 0 && m.indexAsked < 0:
		m.indexAsked = t.Sub(m.start)
	case key == format.IndexFile && d < 0 && m.indexRead < 0:
		m.indexRead = t.Sub(m.start)
	case d > 0 && key != format.IndexFile:
		if m.shards == 0 {
			m.first = t.Sub(m.start)
		}
		m.shards++
	}
}

// NewRangeReader counts the read until its reader's Close.
func (m *flightMeter) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	m.change(1, key)
	r, err := m.Bucket.NewRangeReader(ctx, key, off, n)
	if err != nil {
		m.change(-1, "")
		return nil, err
	}
	return &meteredReader{ReadCloser: r, m: m, key: key}, nil
}

// meteredReader ends its read's count at its first Close.
type meteredReader struct {
	io.ReadCloser
	m    *flightMeter
	key  string
	once sync.Once
}

func (r *meteredReader) Close() error {
	r.once.Do(func() { r.m.change(-1, r.key) })
	return r.ReadCloser.Close()
}

// ObjectInfo passes on what the store's answer said of the object.
func (r *meteredReader) ObjectInfo() (storage.ObjectInfo, bool) {
	return storage.ReaderInfo(r.ReadCloser)
}
