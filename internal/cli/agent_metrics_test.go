package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicedata/sluice/agent"
	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/internal/s3test"
	"github.com/sluicedata/sluice/metrics"
)

// waitFile waits for path to exist.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not appear within 20s", path)
}

// TestAgentMetricsScrape runs `sluice agent --metrics-addr unix:PATH`,
// reads an epoch through it with the Go client, scrapes /metrics and
// parses the answer with Prometheus's own text parser: the samples, the
// bytes and the downloads it reports are the epoch's.
func TestAgentMetricsScrape(t *testing.T) {
	dir := t.TempDir()
	remote := filepath.Join(dir, "remote")
	shards := writeMetricsDataset(t, remote)
	scrapeEpoch(t, dir, agentapi.Dataset{Remote: remote, Local: filepath.Join(dir, "cache"), BatchSize: 8}, nil, remote, shards)
}

// TestAgentMetricsScrapeS3JobEnv is the scrape of a job that sends its
// store settings, as the Python client always does (its AWS_* and
// S3_ENDPOINT_URL variables): the agent opens that job's store itself
// with them, and its requests are timed in sluice_store_request_seconds
// too, labelled with the dataset (they were not timed at all).
func TestAgentMetricsScrapeS3JobEnv(t *testing.T) {
	srv := s3test.Require(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	shards := writeMetricsDataset(t, src)
	prefix := s3test.NewPrefix("cli-metrics-env")
	s3test.UploadDir(t, srv.Open(t, prefix), src)
	remote := "s3://" + srv.Bucket + "/" + prefix
	env := map[string]string{"AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": srv.SecretKey,
		"AWS_REGION": srv.Region, "S3_ENDPOINT_URL": srv.Endpoint}
	scrapeEpoch(t, dir, agentapi.Dataset{Remote: remote, Local: filepath.Join(dir, "cache"), BatchSize: 8}, env, remote, shards)
}

// writeMetricsDataset writes 300 samples (id, 100 bytes) in small shards
// into dir and returns the number of shards.
func writeMetricsDataset(t *testing.T, dir string) int {
	t.Helper()
	w, err := mds.NewWriter(dir, &mds.WriterOptions{Columns: map[string]string{"id": "int", "pad": "bytes"}, SizeLimit: 4096})
	if err != nil {
		t.Fatal(err)
	}
	for i := range metricsSamples {
		if err := w.Write(format.Sample{"id": int64(i), "pad": make([]byte, 100)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return len(w.Shards())
}

const metricsSamples = 300

// scrapeEpoch starts `sluice agent --metrics-addr unix:PATH` under dir,
// reads one epoch of ds through it (as a job sending env), scrapes
// /metrics, parses it with Prometheus's text parser and checks the
// figures of the dataset named name (shards shards).
func scrapeEpoch(t *testing.T, dir string, ds agentapi.Dataset, env map[string]string, name string, shards int) {
	t.Helper()
	const n = metricsSamples
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ma, stop := startMetricsAgent(ctx, t, dir)
	defer stop()

	c, err := agentapi.Dial(ctx, agent.SocketPath(ma.dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	world := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	op, err := c.Open(ctx, agentapi.Open{Job: "metrics", World: world, Dataset: ds, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	it, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: world})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	var release []int64
	for {
		b, err := c.Next(ctx, agentapi.Next{Iter: it.Iter, Max: 32, Release: release})
		if err != nil {
			t.Fatal(err)
		}
		if b.Done {
			break
		}
		release = []int64{b.ID}
		got += len(b.Entries)
	}
	if got != n {
		t.Fatalf("read %d samples, want %d", got, n)
	}

	fams, err := ma.scrape()
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		f := fams[name]
		if f == nil {
			t.Fatalf("no %s in the scrape (have %d families)", name, len(fams))
		}
		var sum float64
		for _, m := range f.Metric {
			if !matches(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
		return sum
	}
	rank := map[string]string{"dataset": name, "rank": "0"}
	if v := value("sluice_samples_delivered_total", rank); v != n {
		t.Errorf("samples delivered %v, want %d", v, n)
	}
	if v := value("sluice_bytes_delivered_total", rank); v <= 100*n {
		t.Errorf("bytes delivered %v, want more than %d", v, 100*n)
	}
	if v := value("sluice_cache_misses_total", rank) + value("sluice_cache_hits_total", rank); v < float64(shards) {
		t.Errorf("hits + misses %v, want at least the %d shards", v, shards)
	}
	if v := value("sluice_time_to_first_sample_seconds", rank); v <= 0 {
		t.Errorf("time to first sample %v", v)
	}
	_ = value("sluice_consumer_wait_seconds_total", rank)
	_ = value("sluice_prefetch_ahead_shards", rank)
	if v := value("sluice_cache_downloads_total", nil); v != float64(shards) {
		t.Errorf("downloads %v, want %d shards", v, shards)
	}
	if v := value("sluice_store_request_seconds", map[string]string{"op": "get", "dataset": name}); v < float64(shards) {
		t.Errorf("%v timed GETs of %s, want at least %d", v, name, shards)
	}
	_ = value("sluice_cache_limit_bytes", nil)
	if v := value("sluice_cache_bytes", nil); v <= 0 {
		t.Errorf("cache bytes %v", v)
	}
}

func matches(m *dto.Metric, labels map[string]string) bool {
	for k, v := range labels {
		ok := false
		for _, lp := range m.Label {
			if lp.GetName() == k && lp.GetValue() == v {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func TestAgentMetricsRefusesPublicAddress(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := Run(ctx, []string{"agent", "--dir", dir, "--metrics-addr", "0.0.0.0:0"}, &bytes.Buffer{}, &bytes.Buffer{})
	if !errors.Is(err, metrics.ErrNotLoopback) {
		t.Fatalf("err %v, want ErrNotLoopback", err)
	}
	if _, err := metrics.Listen("8.8.8.8:9400", false); !errors.Is(err, metrics.ErrNotLoopback) {
		t.Errorf("8.8.8.8: %v", err)
	}
	ln, err := metrics.Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
}
