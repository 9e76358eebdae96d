package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicedata/sluice/agent"
)

// metricsAgent is a `sluice agent --metrics-addr unix:PATH` a test runs.
type metricsAgent struct {
	// dir is the agent's --dir: agent.SocketPath(dir) is its socket.
	dir string
	// hc reaches the metrics endpoint through its unix socket.
	hc *http.Client
}

// startMetricsAgent runs `sluice agent` with its --dir under dir (the
// agent directory) and its metrics on the unix socket dir/metrics.sock,
// until ctx ends or stop is called, and returns once both sockets are
// there. stop (also run at the test's cleanup; only its first call
// counts) ends the agent and fails the test on an error it returned.
func startMetricsAgent(ctx context.Context, t *testing.T, dir string) (m *metricsAgent, stop func()) {
	t.Helper()
	msock := filepath.Join(dir, "metrics.sock")
	m = &metricsAgent{dir: filepath.Join(dir, "agent"), hc: &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", msock)
		}},
		Timeout: 20 * time.Second,
	}}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		done <- Run(ctx, []string{"agent", "--dir", m.dir, "--idle-timeout", "-1s", "--metrics-addr", "unix:" + msock}, &bytes.Buffer{}, &stderr)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("agent: %v\n%s", err, stderr.String())
			}
		})
	}
	t.Cleanup(stop)
	waitFile(t, agent.SocketPath(m.dir))
	waitFile(t, msock)
	return m, stop
}

// scrape GETs /metrics and parses the answer with Prometheus's own text
// parser; an answer other than 200 is an error.
func (m *metricsAgent) scrape() (map[string]*dto.MetricFamily, error) {
	resp, err := m.hc.Get("http://agent/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape: status %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape: official parser: %w", err)
	}
	return fams, nil
}
