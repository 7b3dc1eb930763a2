//go:build unix

package predictor

import (
	"syscall"
	"time"
)

// processCPU returns the user+system CPU time of the process. Benchmarks
// report it per op beside ns/op, because on a shared machine the wall time
// includes time the benchmark was not running.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
