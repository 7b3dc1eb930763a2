//go:build !unix

package main

import "time"

// processCPU is not wired in on this system; timings fall back to wall time.
func processCPU() time.Duration { return 0 }
