package cli

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/retry"
)

// The retry policy of the commands that open a store and read a little of
// it (inspect, verify, ls, dump, cp, plan, index): a person waits on them, so a
// server that accepts and never answers must fail them in seconds, not in
// the ten minutes of the library's defaults (10 attempts of 1 minute).
// With these defaults a request gives up after at most
// 3 × 10 s + the backoffs (under 1 s) ≈ 31 s. sluice stream keeps the
// library's defaults (a training run rides out longer outages); the flag
// names are the same.
const (
	cliDownloadTimeout = 10 * time.Second
	cliStallTimeout    = 10 * time.Second
	cliRetryAttempts   = 3
)

// storeFlags are the per-request deadline and retry flags of a command that
// opens stores.
type storeFlags struct {
	downloadTimeout time.Duration
	stallTimeout    time.Duration
	retryAttempts   int
}

// defaultStoreFlags is the policy of a command that registered no flags.
var defaultStoreFlags = storeFlags{downloadTimeout: cliDownloadTimeout, stallTimeout: cliStallTimeout, retryAttempts: cliRetryAttempts}

// addStoreFlags registers --download-timeout, --stall-timeout and
// --retry-attempts on cmd (the names sluice stream uses).
func addStoreFlags(cmd *cobra.Command, f *storeFlags) {
	fl := cmd.Flags()
	fl.DurationVar(&f.downloadTimeout, "download-timeout", cliDownloadTimeout, "timeout of one request attempt's wait for the store to answer")
	fl.DurationVar(&f.stallTimeout, "stall-timeout", cliStallTimeout, "resume a download that receives nothing for this long")
	fl.IntVar(&f.retryAttempts, "retry-attempts", cliRetryAttempts, "consecutive failed attempts per request before giving up")
}

// check rejects values no request can run with.
func (f *storeFlags) check() error {
	if f.downloadTimeout <= 0 {
		return fmt.Errorf("--download-timeout must be positive, got %s", f.downloadTimeout)
	}
	if f.stallTimeout <= 0 {
		return fmt.Errorf("--stall-timeout must be positive, got %s", f.stallTimeout)
	}
	if f.retryAttempts < 1 {
		return fmt.Errorf("--retry-attempts must be at least 1, got %d", f.retryAttempts)
	}
	return nil
}

// retryOptions is the retry policy of f, reporting each retry on w.
func (f *storeFlags) retryOptions(e *env) *retry.Options {
	var mu sync.Mutex
	return &retry.Options{
		MaxAttempts:    f.retryAttempts,
		AttemptTimeout: f.downloadTimeout,
		StallTimeout:   f.stallTimeout,
		OnRetry: func(ev retry.Event) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(e.stderr, "retrying %s %s in %s after attempt %d failed: %v\n",
				ev.Op, ev.URL, ev.Delay.Round(time.Millisecond), ev.Attempt, ev.Err)
		},
	}
}

type storeFlagsKey struct{}

// withStoreFlags returns ctx carrying f for openStore and openDataset, so
// that a command's flags reach every store it opens, however deep.
func withStoreFlags(ctx context.Context, f *storeFlags) context.Context {
	return context.WithValue(ctx, storeFlagsKey{}, f)
}

// storeFlagsFrom returns the flags ctx carries, else the CLI defaults.
func storeFlagsFrom(ctx context.Context) *storeFlags {
	if f, ok := ctx.Value(storeFlagsKey{}).(*storeFlags); ok && f != nil {
		return f
	}
	f := defaultStoreFlags
	return &f
}

// storeRunE wraps a command's RunE: it checks f and hands it on in the
// context.
func storeRunE(f *storeFlags, run func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := f.check(); err != nil {
			return fmt.Errorf("%s: %w", cmd.Name(), err)
		}
		cmd.SetContext(withStoreFlags(cmd.Context(), f))
		return run(cmd, args)
	}
}

// openStore opens rawURL with the standard decorators (request limit and
// retries) under the policy of the command's store flags (see
// withStoreFlags), reporting each retry on standard error so that a slow
// or failing store is visible while it is retried.
func openStore(ctx context.Context, e *env, rawURL string) (storage.Bucket, error) {
	return stores.Open(ctx, e.registry, rawURL, &stores.Options{Retry: storeFlagsFrom(ctx).retryOptions(e)})
}
