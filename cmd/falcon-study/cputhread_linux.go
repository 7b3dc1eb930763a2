//go:build linux

package main

import (
	"runtime"
	"syscall"
	"time"
)

// rusageThread is Linux's RUSAGE_THREAD.
const rusageThread = 1

// lockThread pins the calling goroutine to its OS thread, so that
// threadCPU measures the simulations it runs (a simulation is one
// goroutine; the garbage collector's background work on other threads is
// not counted).
func lockThread() { runtime.LockOSThread() }

// threadCPU is the user+system CPU time of the calling thread, or 0 if the
// system does not report it.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
