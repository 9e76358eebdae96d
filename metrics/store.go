package metrics

import (
	"context"
	"errors"
	"io"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicedata/sluice/storage"
)

// Store times the requests of the buckets it instruments:
// sluice_store_request_seconds{dataset,op} (a histogram of the time to the
// first byte of a read, or to the answer of a stat or list) and
// sluice_store_errors_total{dataset,op}. The dataset label is the name
// the bucket was instrumented under (Bucket): the agent gives the one its
// per-rank figures use, Registry the URL opened.
type Store struct {
	latency *prometheus.HistogramVec
	errs    *prometheus.CounterVec
}

// NewStore returns store metrics; register them with Register.
func NewStore() *Store {
	return &Store{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_store_request_seconds",
			Help:    "Store request latency: time to the first byte of a read, or to a stat's or list's answer.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1 ms .. 33 s
		}, []string{"dataset", "op"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_store_errors_total",
			Help: "Store requests that failed (each failed attempt before a retry counts).",
		}, []string{"dataset", "op"}),
	}
}

// Register adds the metrics to reg.
func (s *Store) Register(reg prometheus.Registerer) error {
	return errors.Join(reg.Register(s.latency), reg.Register(s.errs))
}

// OpTotals are the requests of one operation to the stores instrumented
// under one dataset name: how many (each attempt of a retried request
// counts), how many failed, and their time to the first byte or answer,
// summed.
type OpTotals struct {
	Op       string
	Requests int64
	Errors   int64
	Seconds  float64
}

// Totals returns the figures of the stores instrumented under dataset,
// per operation that has any, in the order stat, get, list.
func (s *Store) Totals(dataset string) []OpTotals {
	var byOp [nOps]OpTotals
	for i, op := range opNames() {
		byOp[i].Op = op
	}
	collect := func(c prometheus.Collector, add func(i int, m *dto.Metric)) {
		ch := make(chan prometheus.Metric, 16)
		go func() { c.Collect(ch); close(ch) }()
		for pm := range ch {
			var m dto.Metric
			if pm.Write(&m) != nil {
				continue
			}
			var ds, op string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "dataset":
					ds = l.GetValue()
				case "op":
					op = l.GetValue()
				}
			}
			if ds != dataset {
				continue
			}
			for i, name := range opNames() {
				if name == op {
					add(i, &m)
				}
			}
		}
	}
	collect(s.latency, func(i int, m *dto.Metric) {
		byOp[i].Requests += int64(m.GetHistogram().GetSampleCount())
		byOp[i].Seconds += m.GetHistogram().GetSampleSum()
	})
	collect(s.errs, func(i int, m *dto.Metric) { byOp[i].Errors += int64(m.GetCounter().GetValue()) })
	var out []OpTotals
	for _, t := range byOp {
		if t.Requests > 0 || t.Errors > 0 {
			out = append(out, t)
		}
	}
	return out
}

// The operations a bucket times, numbering its series (see Bucket).
const (
	opStat = iota
	opGet
	opList
	nOps
)

// opNames names the operations by their numbers.
func opNames() [nOps]string { return [nOps]string{opStat: "stat", opGet: "get", opList: "list"} }

// Registry returns a registry that opens every scheme of r and
// instruments the buckets it opens, each under its URL (credentials in
// it redacted) as the dataset label. Open stores through the result only. The
// standard decorators (storage/stack: retries, the bound on requests in
// flight) that a stream adds over an undecorated store then sit above the
// timing, so each attempt of a retried request is timed.
func (s *Store) Registry(r *storage.Registry) *storage.Registry {
	out := &storage.Registry{}
	for _, scheme := range r.Schemes() {
		out.Register(scheme, func(ctx context.Context, u *url.URL) (storage.Bucket, error) {
			b, err := r.Open(ctx, u.String())
			if err != nil {
				return nil, err
			}
			return s.Bucket(storage.RedactURL(u.String()), b), nil
		})
	}
	return out
}

// Bucket returns b with its requests timed under the dataset label
// dataset.
func (s *Store) Bucket(dataset string, b storage.Bucket) storage.Bucket {
	out := &bucket{Bucket: b}
	for i, op := range opNames() {
		out.latency[i] = s.latency.WithLabelValues(dataset, op)
		out.errs[i] = s.errs.WithLabelValues(dataset, op)
	}
	return out
}

type bucket struct {
	storage.Bucket
	latency [nOps]prometheus.Observer
	errs    [nOps]prometheus.Counter
}

func (b *bucket) observe(op int, start time.Time, err error) {
	b.latency[op].Observe(time.Since(start).Seconds())
	if err != nil && !errors.Is(err, context.Canceled) {
		b.errs[op].Inc()
	}
}

// Unwrap returns the instrumented bucket (so the decorator stack sees
// what is underneath).
func (b *bucket) Unwrap() storage.Bucket { return b.Bucket }

func (b *bucket) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	start := time.Now()
	info, err := b.Bucket.Stat(ctx, key)
	b.observe(opStat, start, err)
	return info, err
}

func (b *bucket) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	start := time.Now()
	r, err := b.Bucket.NewRangeReader(ctx, key, off, length)
	b.observe(opGet, start, err)
	return r, err
}

func (b *bucket) List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) error {
	start := time.Now()
	err := b.Bucket.List(ctx, prefix, fn)
	b.observe(opList, start, err)
	return err
}
