package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/agent"
	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestAgentMetricsRetries: `sluice agent --metrics-addr` reads a dataset
// from a real HTTP server through the fault proxy, which fails the first
// two shard downloads with a 500. The metrics request answers the rank's
// samples, the dataset's downloads and exactly those two retries (op get,
// cause server), and the Prometheus scrape, parsed with the official
// parser, reports sluice_store_retries_total{op="get",cause="server"} 2.
func TestAgentMetricsRetries(t *testing.T) {
	dir := t.TempDir()
	remote := filepath.Join(dir, "remote")
	w, err := mds.NewWriter(remote, &mds.WriterOptions{Columns: map[string]string{"id": "int", "pad": "bytes"}, SizeLimit: 4096})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		if err := w.Write(format.Sample{"id": int64(i), "pad": make([]byte, 100)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	shards := len(w.Shards())
	srv := httptest.NewServer(http.FileServer(http.Dir(remote)))
	defer srv.Close()
	proxy, err := storagetest.NewFaultProxy(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Status, Method: "GET", Times: 2, Status: 500,
		Match: func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, ".mds") }})

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
	op, err := c.Open(ctx, agentapi.Open{Job: "retries", World: world,
		Dataset: agentapi.Dataset{Remote: proxy.URL, Local: filepath.Join(dir, "cache"), BatchSize: 8}})
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
	if k := proxy.Injected(storagetest.Status); k != 2 {
		t.Fatalf("the proxy injected %d faults, want 2", k)
	}
	rank := 0
	m, err := c.Metrics(ctx, agentapi.MetricsQuery{Handle: op.Handle, Rank: &rank})
	if err != nil {
		t.Fatal(err)
	}
	if m.Samples != n || m.Workers != 1 || m.Downloads != int64(shards) || m.CacheBytes <= 0 || m.FirstSampleSeconds <= 0 {
		t.Errorf("metrics: %+v; want %d samples, 1 worker, %d downloads, cache bytes and a first sample", m, n, shards)
	}
	if m.CacheHits+m.CacheMisses < int64(shards) {
		t.Errorf("hits %d + misses %d, want at least the %d shards", m.CacheHits, m.CacheMisses, shards)
	}
	if diff := cmp.Diff([]agentapi.RetryCount{{Op: "get", Cause: "server", N: 2}}, m.RetriesBy); diff != "" || m.StoreRetries != 2 {
		t.Errorf("retries %d (-want +got):\n%s", m.StoreRetries, diff)
	}
	other := 1
	if m, err := c.Metrics(ctx, agentapi.MetricsQuery{Handle: op.Handle, Rank: &other}); err != nil || m.Samples != 0 || m.Workers != 0 {
		t.Errorf("rank 1 (no consumer): %+v, %v", m, err)
	}

	fams, err := ma.scrape()
	if err != nil {
		t.Fatal(err)
	}
	f := fams["sluice_store_retries_total"]
	if f == nil {
		t.Fatalf("no sluice_store_retries_total in the scrape")
	}
	var sum float64
	for _, mm := range f.Metric {
		if matches(mm, map[string]string{"op": "get", "cause": "server"}) {
			sum += mm.Counter.GetValue()
		} else {
			t.Errorf("unexpected retry series %v = %v", mm.Label, mm.Counter.GetValue())
		}
	}
	if sum != 2 {
		t.Errorf("sluice_store_retries_total{op=get,cause=server} = %v, want 2", sum)
	}
}
