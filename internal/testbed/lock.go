package testbed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
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

// staleNS matches the namespaces of beds made with the default prefix.
var staleNS = regexp.MustCompile(`^flb[0-9]+-(sw|p[0-9]+)$`)

// removeStale removes what a bed whose process was killed left behind:
// the link holding ControlAddr, default-prefix namespaces and their CPU
// cgroups. It runs under the machine-wide lock, when no other bed can be
// up, so whatever it finds is a leftover (a killed run cannot remove its
// own).
func removeStale() {
	removeStaleCgroups("/sys/fs/cgroup/cpu") // v1
	removeStaleCgroups("/sys/fs/cgroup")     // v2
	if out, err := exec.Command("ip", "-o", "addr", "show", "to", ControlAddr+"/32").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) >= 2 {
				_ = run("ip", "link", "del", strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":"))
			}
		}
	}
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) >= 1 && staleNS.MatchString(f[0]) {
				_ = run("ip", "netns", "del", f[0])
			}
		}
	}
}

// removeStaleCgroups removes the default-prefix port cgroups directly
// under root (a cgroup directory is removed with rmdir once it holds no
// task; one that still does is left). It reports how many it removed.
func removeStaleCgroups(root string) int {
	ents, err := os.ReadDir(root)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() && staleNS.MatchString(e.Name()) && os.Remove(filepath.Join(root, e.Name())) == nil {
			n++
		}
	}
	return n
}
