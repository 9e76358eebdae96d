package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicedata/sluice/agent"
	"github.com/sluicedata/sluice/agentapi"
)

// TestAgentMetricsScrapeWhileIterating scrapes `sluice agent
// --metrics-addr` over and over while three clients begin iterations,
// read part of an epoch or all of it, end them and close (the rank
// figures' sources come and go under the scrape): every scrape answers
// 200 and parses with Prometheus's text parser, no series appears twice,
// and a rank's delivered samples never go down between scrapes.
func TestAgentMetricsScrapeWhileIterating(t *testing.T) {
	dir := t.TempDir()
	remote := filepath.Join(dir, "remote")
	writeMetricsDataset(t, remote)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ma, stopAgent := startMetricsAgent(ctx, t, dir)
	defer stopAgent()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for j := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- churn(ctx, ma.dir, agentapi.Dataset{Remote: remote, Local: filepath.Join(dir, "cache"), BatchSize: 8}, j, stop)
		}()
	}
	last := map[string]float64{}
	scrapes := 0
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end) || scrapes < 20; scrapes++ {
		fams, err := ma.scrape()
		if err != nil {
			t.Fatalf("scrape %d: %v", scrapes, err)
		}
		for name, f := range fams {
			seen := map[string]bool{}
			for _, m := range f.Metric {
				key := fmt.Sprint(m.Label)
				if seen[key] {
					t.Fatalf("scrape %d: %s has the series %s twice", scrapes, name, key)
				}
				seen[key] = true
				if name == "sluice_samples_delivered_total" {
					v := m.Counter.GetValue()
					if v < last[key] {
						t.Fatalf("scrape %d: %s%s went from %v to %v", scrapes, name, key, last[key], v)
					}
					last[key] = v
				}
			}
		}
	}
	close(stop)
	wg.Wait()
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if len(last) == 0 {
		t.Fatalf("no sluice_samples_delivered_total in %d scrapes", scrapes)
	}
}

// churn opens ds as job j and, until stop, begins an iteration, reads a
// part of the epoch (all of it every third time), ends it, and closes the
// connection every other round.
func churn(ctx context.Context, agentDir string, ds agentapi.Dataset, j int, stop <-chan struct{}) error {
	world := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	for round := 0; ; round++ {
		select {
		case <-stop:
			return nil
		default:
		}
		c, err := agentapi.Dial(ctx, agent.SocketPath(agentDir), nil)
		if err != nil {
			return err
		}
		op, err := c.Open(ctx, agentapi.Open{Job: fmt.Sprintf("churn-%d", j), World: world, Dataset: ds})
		if err != nil {
			c.Close()
			return err
		}
		for k := range 2 {
			it, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: world})
			if err != nil {
				c.Close()
				return err
			}
			var release []int64
			for n := 0; (round+k)%3 == 0 || n < 3; n++ {
				b, err := c.Next(ctx, agentapi.Next{Iter: it.Iter, Max: 8, Release: release})
				if err != nil {
					c.Close()
					return err
				}
				if b.Done {
					break
				}
				release = []int64{b.ID}
			}
			if err := c.End(ctx, it.Iter); err != nil {
				c.Close()
				return err
			}
		}
		if err := c.Close(); err != nil {
			return err
		}
	}
}
