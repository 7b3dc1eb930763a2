//go:build !linux

package main

import "time"

func lockThread() {}

// threadCPU is 0 where per-thread CPU time is not read; the study then
// reports only the process total.
func threadCPU() time.Duration { return 0 }
