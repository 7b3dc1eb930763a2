//go:build !unix

package cputime

import "time"

// Process returns 0: CPU time is not read on this system, and callers fall
// back to wall time.
func Process() time.Duration { return 0 }
