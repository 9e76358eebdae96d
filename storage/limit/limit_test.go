package limit_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/limit"
	"github.com/sluicedata/sluice/storage/memstore"
	"github.com/sluicedata/sluice/storage/storagetest"
)

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Bucket {
		b, err := limit.New(memstore.New("limit"), 3)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	})
}

func TestNewRejectsNonPositive(t *testing.T) {
	for _, n := range []int{0, -1} {
		if _, err := limit.New(memstore.New("x"), n); err == nil {
			t.Errorf("New(%d) succeeded", n)
		}
	}
}

// gate blocks every Stat until released and records how many run at once.
type gate struct {
	storage.Bucket
	entered chan struct{}
	release chan struct{}
	now     atomic.Int32
	peak    atomic.Int32
}

func (g *gate) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	n := g.now.Add(1)
	defer g.now.Add(-1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			break
		}
	}
	g.entered <- struct{}{}
	<-g.release
	return g.Bucket.Stat(ctx, key)
}

func TestBoundsRequestsInFlight(t *testing.T) {
	m := memstore.New("b")
	storagetest.Put(t, m, "k", []byte("x"))
	g := &gate{Bucket: m, entered: make(chan struct{}), release: make(chan struct{})}
	b, err := limit.New(g, 2)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if _, err := b.Stat(context.Background(), "k"); err != nil {
				t.Error(err)
			}
		})
	}
	<-g.entered
	<-g.entered
	// Both slots are taken: a caller whose context is done fails at once
	// rather than wait.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Stat(ctx, "k"); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "slot") {
		t.Errorf("Stat with full slots and a cancelled context = %v", err)
	}
	if got := b.InFlight(); got != 2 {
		t.Errorf("InFlight = %d, want 2", got)
	}
	go func() {
		for range 8 {
			<-g.entered
		}
	}()
	for range 10 {
		g.release <- struct{}{}
	}
	wg.Wait()
	if p := g.peak.Load(); p != 2 {
		t.Errorf("peak concurrency %d, want 2", p)
	}
	if got := b.InFlight(); got != 0 {
		t.Errorf("InFlight after all done = %d", got)
	}
}

func TestReaderHoldsSlotUntilClose(t *testing.T) {
	m := memstore.New("b")
	storagetest.Put(t, m, "k", []byte("x"))
	b, _ := limit.New(m, 1)
	r, err := b.NewRangeReader(t.Context(), "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if b.InFlight() != 1 {
		t.Errorf("InFlight with an open reader = %d", b.InFlight())
	}
	r.Close()
	r.Close() // a second Close must not free a second slot
	if b.InFlight() != 0 {
		t.Errorf("InFlight after Close = %d", b.InFlight())
	}
	if _, err := b.NewRangeReader(t.Context(), "missing", 0, -1); !errors.Is(err, storage.ErrNotExist) {
		t.Fatal(err)
	}
	if b.InFlight() != 0 {
		t.Errorf("a failed open kept its slot")
	}
	// List does not take a slot, so its callback may use the bucket.
	w, _ := b.NewWriter(t.Context(), "k2", nil)
	w.Close()
	err = b.List(t.Context(), "", func(info storage.ObjectInfo) error {
		_, err := b.Stat(t.Context(), info.Key)
		return err
	})
	if err != nil {
		t.Error(err)
	}
}
