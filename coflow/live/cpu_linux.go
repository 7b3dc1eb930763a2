//go:build linux

package live

import (
	"syscall"
	"time"
	"unsafe"
)

// threadCPU returns the calling thread's CPU time
// (clock_gettime(CLOCK_THREAD_CPUTIME_ID)); ok is false when the system
// does not report it.
func threadCPU() (time.Duration, bool) {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
