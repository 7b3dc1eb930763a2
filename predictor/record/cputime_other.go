//go:build !linux

package record

import "time"

var origin = time.Now()

// threadCPU falls back to the wall clock where no per-thread CPU clock is
// wired in; CPU and wall columns are then equal.
func threadCPU() time.Duration { return time.Since(origin) }
