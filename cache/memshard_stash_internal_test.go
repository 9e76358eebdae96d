package cache

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"
)

// TestMemShardBlocksSurviveGC: the free blocks of a closed Cache serve the
// next Cache of the process after garbage collections (a sync.Pool, which
// held them before, is emptied by two: the next Cache then paid for fresh
// memory, its zeroing and page faults).
func TestMemShardBlocksSurviveGC(t *testing.T) {
	ctx := context.Background()
	// A size no other test's blocks fit (they would serve as well, but
	// could not be told from fresh ones).
	const n = 777*directAlign - 100
	c1, err := Open(ctx, t.TempDir(), &Options{Memory: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	blk := c1.memGet(n)
	if blk == nil {
		t.Fatal("no block for a shard within the Cache's memory")
	}
	marker := []byte("a block of the first Cache")
	copy(blk[len(blk)-len(marker):], marker)
	c1.memPut(blk)
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		runtime.GC()
	}
	c2, err := Open(ctx, t.TempDir(), &Options{Memory: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	got := c2.memGet(n)
	if got == nil {
		t.Fatal("no block for the second Cache")
	}
	defer c2.memPut(got)
	if !bytes.Equal(got[len(got)-len(marker):], marker) {
		t.Fatal("after three collections the second Cache got fresh memory, not the first Cache's block")
	}
	c2.mu.Lock()
	used := c2.mem.used
	c2.mu.Unlock()
	if used != int64(len(got)) {
		t.Fatalf("the second Cache counts %d bytes for its %d-byte block", used, len(got))
	}
}

// TestBlockStashBounded: the stash keeps at most the given Cache's memory
// (the oldest blocks go first), hands out the smallest block that fits
// within the room asked for, and drops everything once idle.
func TestBlockStashBounded(t *testing.T) {
	s := &blockStash{idleAfter: time.Hour} // no expiry while the bounds are checked
	s.put(make([]byte, 3000), 10000)
	s.put(make([]byte, 4000), 10000)
	s.put(make([]byte, 5000), 10000) // the 3000 one goes
	if h := s.held(); h != 9000 {
		t.Fatalf("stash holds %d bytes, want 9000 (bounded by 10000)", h)
	}
	s.put(make([]byte, 20000), 10000) // larger than the bound: not kept
	if h := s.held(); h != 9000 {
		t.Fatalf("stash holds %d bytes after a block over its bound, want 9000", h)
	}
	atLeast := func(n int) func([]byte) bool { return func(b []byte) bool { return len(b) >= n } }
	if b := s.take(atLeast(3500), 4500); len(b) != 4000 {
		t.Fatalf("took a %d-byte block, want the 4000 one", len(b))
	}
	if b := s.take(atLeast(3500), 4500); b != nil {
		t.Fatalf("took a %d-byte block beyond the room of 4500", len(b))
	}
	s = &blockStash{idleAfter: 20 * time.Millisecond}
	s.put(make([]byte, 3000), 10000)
	deadline := time.Now().Add(10 * time.Second)
	for s.held() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("idle stash still holds %d bytes after 10 s", s.held())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if b := s.take(atLeast(1), 1<<20); b != nil {
		t.Fatal("an expired stash handed out a block")
	}
}
