// Package cputime reads the CPU time the running process has used, for
// benchmarks on shared machines: wall time there also counts the time
// spent waiting for a core, CPU time does not.
package cputime

import "time"

// Process returns the user plus system CPU time of the whole process
// (every goroutine and thread), or 0 where the system does not say.
func Process() time.Duration { return process() }
