package nprand

import (
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
)

// TestSkipsPreemptible: a long SkipShuffles on the vector kernel lets the
// runtime stop the world between kernel calls. Signals cannot preempt the
// assembly, and SkipShuffles' loop calls nothing but the kernel and its
// callbacks (leaf functions without a stack check), so the kernel's own
// stack check is the only point where the goroutine can be stopped
// synchronously: without it a GC that starts during a resume's skip
// stops every goroutine of the process until the whole skip ends (median
// 5-6 ms, up to 25 ms measured). The child runs with asynchronous
// preemption off, so only that check can stop the skip.
func TestSkipsPreemptible(t *testing.T) {
	needVec(t)
	if os.Getenv("SLUICE_PREEMPT_CHILD") != "" {
		t.Skip("run by the parent")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSkipsPreemptibleChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "SLUICE_PREEMPT_CHILD=1", "GODEBUG=asyncpreemptoff=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestSkipsPreemptibleChild is TestSkipsPreemptible's child process.
func TestSkipsPreemptibleChild(t *testing.T) {
	if os.Getenv("SLUICE_PREEMPT_CHILD") == "" {
		t.Skip("run by TestSkipsPreemptible")
	}
	runtime.GOMAXPROCS(2)
	// A million spans of 4096 (2-3 s on the kernel), cut short once
	// the GC is done: later spans report size 1 (no draws).
	const spans = 1 << 20
	var started, stop, finished atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		g := New(1)
		g.SkipShuffles(spans, func(int) int {
			if stop.Load() {
				return 1
			}
			return 4096
		}, func(k int, _ Generator) {
			if k == 8 {
				started.Store(true)
			}
		})
		finished.Store(true)
	}()
	for !started.Load() {
		runtime.Gosched()
	}
	runtime.GC()
	ended := finished.Load()
	stop.Store(true)
	<-done
	if ended {
		t.Fatal("runtime.GC returned only after the whole skip: the kernel calls are not preemption points")
	}
}
