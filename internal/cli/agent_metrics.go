package cli

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicedata/sluice/agent"
	"github.com/sluicedata/sluice/metrics"
)

// agentMetrics serves an agent's Prometheus metrics on the address the
// user enabled with --metrics-addr.
type agentMetrics struct {
	ln    net.Listener
	reg   *prometheus.Registry
	store *metrics.Store
	srv   *http.Server
}

// listenAgentMetrics opens the metrics address (nil, nil without one).
func listenAgentMetrics(addr string, allowRemote bool) (*agentMetrics, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := metrics.Listen(addr, allowRemote)
	if err != nil {
		return nil, err
	}
	m := &agentMetrics{ln: ln, reg: prometheus.NewRegistry(), store: metrics.NewStore()}
	if err := m.store.Register(m.reg); err != nil {
		ln.Close()
		return nil, err
	}
	return m, nil
}

// storeMetrics returns the store metrics served, for the agent to time
// its stores' requests with (nil without --metrics-addr: the agent keeps
// its own).
func (m *agentMetrics) storeMetrics() *metrics.Store {
	if m == nil {
		return nil
	}
	return m.store
}

// close releases the listener of metrics that were never served.
func (m *agentMetrics) close() {
	if m != nil {
		m.ln.Close()
	}
}

// serve starts serving a's figures; stop ends it.
func (m *agentMetrics) serve(a *agent.Agent, log *slog.Logger) (stop func(), err error) {
	if m == nil {
		return func() {}, nil
	}
	if err := m.reg.Register(metrics.NewCollector(a.MetricsSnapshot)); err != nil {
		m.ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(m.reg))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := m.srv.Serve(m.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server", "err", err)
		}
	}()
	log.Info("metrics listening", "addr", m.ln.Addr().String(), "path", "/metrics")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = m.srv.Shutdown(ctx)
	}, nil
}
