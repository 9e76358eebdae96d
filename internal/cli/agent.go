package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/agent"
)

// agentOptions are the flags of sluice agent.
type agentOptions struct {
	dir         string
	idleTimeout time.Duration
	detach      bool
	readyFD     int
	verbose     bool
	// metricsAddr serves Prometheus metrics (agent_metrics.go).
	metricsAddr   string
	metricsRemote bool
}

func newAgentCommand(e *env) *cobra.Command {
	var o agentOptions
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the per-node agent that serves datasets to PyTorch processes",
		Long: `Run the per-node agent: one process per user and node that owns the cache and
the prefetching for every training process on the node (all local ranks, all
their DataLoader workers, several jobs) and serves them over a Unix socket
(<dir>/agent.sock, owner-only). The Python client starts it on demand with
--detach; it exits after --idle-timeout without clients.

Only one agent runs per directory: the live agent holds an flock on
<dir>/agent.lock, which the kernel drops when it dies, so a crashed agent
never blocks the next start. A second agent started on the same directory
exits at once with status 0 and says so.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.dir == "" {
				o.dir = agent.DefaultDir()
			}
			// Absolute: the detached agent runs in / (a relative --dir
			// put its socket under / where no client looked).
			abs, err := filepath.Abs(o.dir)
			if err != nil {
				return fmt.Errorf("agent: --dir %s: %w", o.dir, err)
			}
			o.dir = abs
			if o.detach {
				return runAgentDetached(cmd.Context(), e, o)
			}
			return runAgent(cmd.Context(), e, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "agent directory holding the lock and the socket (default $SLUICE_AGENT_DIR, $XDG_RUNTIME_DIR/sluice or /tmp/sluice-<uid>)")
	f.DurationVar(&o.idleTimeout, "idle-timeout", agent.DefaultIdleTimeout, "exit after this long without clients (negative: never)")
	f.BoolVar(&o.detach, "detach", false, "start the agent in the background and return once one serves the directory")
	f.IntVar(&o.readyFD, "ready-fd", 0, "file descriptor on which to report readiness (used by --detach)")
	f.BoolVar(&o.verbose, "verbose", false, "log every connection")
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at /metrics on this loopback HOST:PORT or unix:PATH (default: off)")
	f.BoolVar(&o.metricsRemote, "metrics-allow-remote", false, "allow a --metrics-addr other than loopback (exposes the figures to the network)")
	cmd.Flags().MarkHidden("ready-fd")
	return cmd
}

// runAgent runs the agent in the foreground until ctx ends or it is idle.
func runAgent(ctx context.Context, e *env, o agentOptions) error {
	var ready *os.File
	if o.readyFD > 0 {
		ready = os.NewFile(uintptr(o.readyFD), "ready")
		defer ready.Close()
	}
	say := func(msg string) {
		if ready != nil {
			fmt.Fprintln(ready, msg)
			ready.Close()
			ready = nil
		}
	}
	lock, err := agent.AcquireLock(o.dir)
	if errors.Is(err, agent.ErrRunning) {
		say("running")
		fmt.Fprintf(e.stderr, "sluice agent: already running for %s\n", o.dir)
		return nil
	}
	if err != nil {
		return err
	}
	defer lock.Release()
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	// The watchdog re-creates the socket if something removes it while the
	// agent lives, so a live agent is never unreachable.
	ln, err := lock.ListenHealing(time.Second, log.Warn)
	if err != nil {
		return err
	}
	m, err := listenAgentMetrics(o.metricsAddr, o.metricsRemote)
	if err != nil {
		ln.Close()
		return err
	}
	a, err := agent.New(&agent.Options{Registry: e.registry, StoreMetrics: m.storeMetrics(), Logger: log, IdleTimeout: o.idleTimeout})
	if err != nil {
		ln.Close()
		m.close()
		return err
	}
	stopMetrics, err := m.serve(a, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopMetrics()
	log.Info("agent listening", "socket", agent.SocketPath(o.dir), "pid", os.Getpid(), "idle_timeout", o.idleTimeout)
	say("ready")
	err = a.Serve(ctx, ln)
	log.Info("agent stopped", "err", err)
	return err
}

// detachWait bounds how long --detach waits for the background agent to
// report.
const detachWait = 30 * time.Second

// runAgentDetached starts the agent as a background process in its own
// session and returns when it serves the directory, or when it found
// another agent serving it.
func runAgentDetached(ctx context.Context, e *env, o agentOptions) error {
	if err := agent.PrepareDir(o.dir); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("agent: find own executable: %w", err)
	}
	logPath := filepath.Join(o.dir, agent.LogName)
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("agent: open log: %w", err)
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("agent: pipe: %w", err)
	}
	defer r.Close()
	args := []string{"agent", "--dir", o.dir, "--idle-timeout", o.idleTimeout.String(), "--ready-fd", "3"}
	if o.verbose {
		args = append(args, "--verbose")
	}
	if o.metricsAddr != "" {
		args = append(args, "--metrics-addr", o.metricsAddr)
		if o.metricsRemote {
			args = append(args, "--metrics-allow-remote")
		}
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("agent: start %s: %w", exe, err)
	}
	w.Close()
	type result struct {
		line string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		got <- result{strings.TrimSpace(line), err}
	}()
	timer := time.NewTimer(detachWait)
	defer timer.Stop()
	select {
	case res := <-got:
		switch {
		case res.line == "ready" || res.line == "running":
			// Leave the agent running on its own; reap a loser that exits.
			if res.line == "running" {
				cmd.Wait()
			} else {
				cmd.Process.Release()
			}
			fmt.Fprintf(e.stdout, "%s %s\n", res.line, agent.SocketPath(o.dir))
			return nil
		case errors.Is(res.err, io.EOF):
			cmd.Wait()
			return fmt.Errorf("agent: background agent exited before serving; see %s", logPath)
		default:
			cmd.Process.Kill()
			cmd.Wait()
			return fmt.Errorf("agent: background agent: %v", res.err)
		}
	case <-timer.C:
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("agent: background agent did not come up within %s; see %s", detachWait, logPath)
	case <-ctx.Done():
		cmd.Process.Kill()
		cmd.Wait()
		return ctx.Err()
	}
}
