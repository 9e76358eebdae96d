package stack_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/limit"
	"github.com/sluicedata/sluice/storage/memstore"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/stack"
)

type handle struct{ storage.Bucket }

func (h handle) Unwrap() storage.Bucket { return h.Bucket }

func TestWrapOnce(t *testing.T) {
	raw := memstore.New("m")
	b, err := stack.Wrap(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	rb, ok := b.(*retry.Bucket)
	if !ok {
		t.Fatalf("Wrap returned %T", b)
	}
	if _, ok := rb.Unwrap().(*limit.Bucket); !ok {
		t.Fatalf("under retry: %T, want *limit.Bucket", rb.Unwrap())
	}
	if again, _ := stack.Wrap(b, nil); again != b {
		t.Error("a wrapped Bucket was wrapped again")
	}
	h := handle{b}
	if again, _ := stack.Wrap(h, nil); again != storage.Bucket(h) {
		t.Error("a handle over a wrapped Bucket was wrapped again")
	}
	lb, _ := limit.New(raw, 2)
	if !func() bool { x, _ := stack.Wrap(lb, nil); _, ok := x.(*retry.Bucket); return ok }() {
		t.Error("a limit alone was taken for the stack")
	}
}

func TestOpenerCarriesOptions(t *testing.T) {
	var r storage.Registry
	r.Register("m", stack.Opener(func(context.Context, *url.URL) (storage.Bucket, error) { return memstore.New("m"), nil }))
	ctx := stack.WithOptions(context.Background(), &stack.Options{MaxInFlight: -1})
	b, err := r.Open(ctx, "m://x")
	if err != nil {
		t.Fatal(err)
	}
	rb, ok := b.(*retry.Bucket)
	if !ok {
		t.Fatalf("opened %T", b)
	}
	if _, ok := rb.Unwrap().(*memstore.Bucket); !ok {
		t.Errorf("MaxInFlight -1 from the context: under retry %T, want the driver", rb.Unwrap())
	}
}

// TestOptionsKey: Options that decorate alike share a key; any figure of
// the policy, or a hook being set, changes it.
func TestOptionsKey(t *testing.T) {
	base := func() *stack.Options {
		return &stack.Options{MaxInFlight: 8, Retry: &retry.Options{MaxAttempts: 3, AttemptTimeout: time.Second}}
	}
	if a, b := base(), base(); a.Key() != b.Key() {
		t.Error("equal Options have different keys")
	}
	if (*stack.Options)(nil).Key() != (&stack.Options{}).Key() {
		t.Error("nil Options and zero Options have different keys")
	}
	for name, change := range map[string]func(o *stack.Options){
		"inflight": func(o *stack.Options) { o.MaxInFlight = 9 },
		"attempts": func(o *stack.Options) { o.Retry.MaxAttempts = 4 },
		"backoff":  func(o *stack.Options) { o.Retry.InitialBackoff = time.Millisecond },
		"max":      func(o *stack.Options) { o.Retry.MaxBackoff = time.Millisecond },
		"throttle": func(o *stack.Options) { o.Retry.ThrottleBackoff = time.Millisecond },
		"after":    func(o *stack.Options) { o.Retry.MaxRetryAfter = time.Millisecond },
		"attempt":  func(o *stack.Options) { o.Retry.AttemptTimeout = 2 * time.Second },
		"stall":    func(o *stack.Options) { o.Retry.StallTimeout = time.Second },
		"onretry":  func(o *stack.Options) { o.Retry.OnRetry = func(retry.Event) {} },
		"noretry":  func(o *stack.Options) { o.Retry = nil },
	} {
		o := base()
		change(o)
		if o.Key() == base().Key() {
			t.Errorf("%s: changed Options keep the key %q", name, o.Key())
		}
	}
}
