//go:build unix

package cputime

import (
	"testing"
	"time"
)

func TestProcess_Grows(t *testing.T) {
	before := Process()
	if before <= 0 {
		t.Fatalf("Process() = %v, want > 0 on a unix system", before)
	}
	// Busy work until the CPU time moves; the deadline is generous because
	// a loaded machine may give the process little CPU.
	x := 0.0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		for i := 0; i < 100000; i++ {
			x += float64(i)
		}
		if Process() > before {
			return
		}
	}
	t.Fatalf("Process() stayed at %v over 5 s of busy work (x=%v)", before, x)
}
