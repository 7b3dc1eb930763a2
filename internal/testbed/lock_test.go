package testbed

import (
	"errors"
	"testing"
	"time"
)

// TestLockMachine: a second bed waits for the first and gives up with
// ErrBusy after LockWait; once the first is closed the lock is taken.
func TestLockMachine(t *testing.T) {
	first, err := lockMachine()
	if err != nil {
		t.Skipf("no lock file here: %v", err)
	}
	old := LockWait
	LockWait = 300 * time.Millisecond
	defer func() { LockWait = old }()
	start := time.Now()
	if f, err := lockMachine(); !errors.Is(err, ErrBusy) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("second lock: %v, want ErrBusy", err)
	}
	if waited := time.Since(start); waited < LockWait {
		t.Fatalf("gave up after %v, before LockWait %v", waited, LockWait)
	}
	b := &Bed{lock: first}
	b.unlock()
	second, err := lockMachine()
	if err != nil {
		t.Fatalf("lock after the first was released: %v", err)
	}
	second.Close()
}
