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
	x := 0.0
	for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); {
		for i := 0; i < 1000; i++ {
			x += float64(i)
		}
	}
	if after := Process(); after <= before {
		t.Fatalf("Process() did not grow over 50 ms of busy work: %v then %v (x=%v)", before, after, x)
	}
}
