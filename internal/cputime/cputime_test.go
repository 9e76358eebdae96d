package cputime_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/sluicedata/sluice/internal/cputime"
)

// TestProcessCountsWork: spinning for 50 ms of wall time adds CPU time
// (on systems that report it), and the figure never goes backwards.
func TestProcessCountsWork(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no process CPU time here")
	}
	before := cputime.Process()
	x := uint64(1)
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	after := cputime.Process()
	if after <= before {
		t.Fatalf("CPU time went from %v to %v over a busy loop (%d)", before, after, x)
	}
}

func ExampleProcess() {
	start := cputime.Process()
	_ = make([]byte, 1<<20)
	used := cputime.Process() - start
	_ = used // report it beside the wall time
}
