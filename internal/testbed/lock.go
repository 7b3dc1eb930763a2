package testbed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// ErrBusy: another bed stayed in use on this machine for LockWait. Every
// bed takes the machine's one control address (ControlAddr) and its
// namespaces' names, so beds are made one at a time, across processes:
// `go test ./...` runs packages in parallel, and two of them may each
// want a bed.
var ErrBusy = errors.New("testbed: another bed is in use on this machine")

// LockWait bounds how long New waits for another process's bed to close.
var LockWait = 5 * time.Minute

// lockPath is the machine-wide lock file of the beds.
func lockPath() string { return filepath.Join(os.TempDir(), "falcon-testbed.lock") }

// lockMachine takes the machine-wide bed lock (flock, released by the
// kernel if the process dies), polling until LockWait has passed.
func lockMachine() (*os.File, error) {
	f, err := os.OpenFile(lockPath(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: lock file: %v", ErrUnsupported, err)
	}
	deadline := time.Now().Add(LockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("%w: lock %s: %v", ErrUnsupported, lockPath(), err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%w (waited %v for %s)", ErrBusy, LockWait, lockPath())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
