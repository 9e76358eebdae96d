package agent

import (
	"context"
	"testing"
)

// TestWaitShardsBoundsBufferedShards: the producer may buffer locations
// of up to ahead shards the client has not finished taking, and waits for
// the client past that.
func TestWaitShardsBoundsBufferedShards(t *testing.T) {
	it := &iteration{ch: make(chan location, 16), taken: make(chan struct{}, 1)}
	var pushed int64
	push := func(n int) {
		for range n {
			it.ch <- location{}
			pushed++
		}
	}
	ctx := context.Background()
	var ends []int64
	push(3) // shard 0
	ends = append(ends, pushed)
	if !it.waitShards(ctx, &ends, pushed, 2) {
		t.Fatal("one shard buffered, ahead 2: waited")
	}
	push(2) // shard 1
	ends = append(ends, pushed)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if it.waitShards(cctx, &ends, pushed, 2) {
		t.Fatal("two shards buffered, ahead 2: did not wait")
	}
	for range 3 { // the client takes shard 0
		<-it.ch
	}
	if !it.waitShards(cctx, &ends, pushed, 2) {
		t.Fatal("shard 0 taken, one shard buffered, ahead 2: waited")
	}
	if len(ends) != 1 || ends[0] != 5 {
		t.Fatalf("ends %v, want [5]", ends)
	}
	// ahead 1 is the old bound: wait until the buffer is empty.
	if it.waitShards(cctx, &ends, pushed, 1) {
		t.Fatal("shard 1 still buffered, ahead 1: did not wait")
	}
}
