//go:build !linux

package live

import "time"

// threadCPU is not available here: codec jobs are timed by wall clock.
func threadCPU() (time.Duration, bool) { return 0, false }
