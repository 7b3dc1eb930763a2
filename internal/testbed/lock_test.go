package testbed

import (
	"errors"
	"os"
	"path/filepath"
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

// TestRemoveStaleCgroups: a killed bed's empty port cgroups are removed,
// one still holding something and anything not of the default prefix
// stay.
func TestRemoveStaleCgroups(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"flb123-p0", "flb123-sw", "flb123-p1", "user.slice", "flbx-p0"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "flb123-p1", "tasks"), []byte("42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := removeStaleCgroups(root); n != 2 {
		t.Errorf("removed %d, want 2", n)
	}
	for d, want := range map[string]bool{"flb123-p0": false, "flb123-sw": false, "flb123-p1": true, "user.slice": true, "flbx-p0": true} {
		if _, err := os.Stat(filepath.Join(root, d)); (err == nil) != want {
			t.Errorf("%s exists = %v, want %v", d, err == nil, want)
		}
	}
}
