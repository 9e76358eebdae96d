package agent

import (
	"context"
	"errors"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/stack"
)

// TestPoolKeyedBySettings: a store pooled for one dataset's retry
// settings is not handed to a later dataset that asks for others (each
// gets the attempts and attempt timeout it asked for against a server that
// never answers), while equal settings share one pooled store.
func TestPoolKeyedBySettings(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	u, _ := url.Parse("http://" + ln.Addr().String() + "/data")
	p := &bucketPool{base: stores.Default()}
	defer p.close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	policy := func(attempts int) context.Context {
		return stack.WithOptions(ctx, &stack.Options{Retry: &retry.Options{MaxAttempts: attempts,
			InitialBackoff: time.Millisecond, AttemptTimeout: 100 * time.Millisecond}})
	}
	for _, attempts := range []int{2, 3, 2} {
		c := policy(attempts)
		b, err := p.registry().Open(c, u.String())
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Stat(c, "index.json")
		var re *retry.Error
		if !errors.As(err, &re) || ctx.Err() != nil {
			t.Fatalf("Stat against a silent server = %v, want a *retry.Error", err)
		}
		if re.Attempts != attempts {
			t.Errorf("pooled store gave up after %d attempts, want the %d this dataset asked for", re.Attempts, attempts)
		}
	}
	p.mu.Lock()
	n := len(p.buckets)
	p.mu.Unlock()
	if n != 2 {
		t.Errorf("%d pooled stores for two settings, want 2", n)
	}
}
