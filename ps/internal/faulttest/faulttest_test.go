// Package faulttest runs a parameter-server cluster as separate processes
// on loopback TCP (the role binary in ./role, built by the test) and
// injects the faults an operator meets: kill -9 of a worker in the middle
// of a clock, SIGSTOP of a worker, kill -9 of the coordinator, kill -9 of
// a server that is then restarted from its durable state, and one
// blackholed worker ↔ server link (a proxy that drops everything). With
// -cluster the role binary runs each node through ps.NewCluster, as
// cmd/falcon-cluster does, and the ContinueWithout tests kill a random
// worker at a random clock. Each run either finishes with the fault-free
// result (under ContinueWithout: each sample counted once, the loss within
// a stated tolerance) or fails within its stated bound with an error that
// names the lost peer; every bound derives from the configured lease.
package faulttest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// roleBin builds the role binary once per test run.
func roleBin(t *testing.T) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("signals: unix only")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "faulttest")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "role")
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "./role")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is one running role process.
type proc struct {
	name  string
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	seen  chan string // every stdout line
	done  chan struct{}
	err   error
	at    time.Time // when it exited
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// waitLine waits for a stdout line with the prefix and returns it.
func (p *proc) waitLine(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l := <-p.seen:
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-p.done:
			// drain what it printed before exiting
			for {
				select {
				case l := <-p.seen:
					if strings.HasPrefix(l, prefix) {
						return l
					}
				default:
					t.Fatalf("%s exited (%v) before printing %q; output:\n%s", p.name, p.err, prefix, p.output())
				}
			}
		case <-deadline:
			t.Fatalf("%s did not print %q within %v; output:\n%s", p.name, prefix, within, p.output())
		}
	}
}

// wait waits for the process to exit.
func (p *proc) wait(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("%s still running after %v; output:\n%s", p.name, within, p.output())
	}
}

// cluster is the address book and processes of one run.
type cluster struct {
	t       *testing.T
	bin     string
	peers   string
	common  []string
	procs   map[string]*proc
	servers int
	workers int
	// peersOf overrides -peers for a node (a link through a proxy)
	peersOf map[string]string
}

// freeAddrs gives n distinct free loopback addresses: every port is held
// open until all are chosen (a port closed at once can be handed out again
// for the next node, as the cluster binary's local mode once saw).
func freeAddrs(t *testing.T, n int) []string {
	out := make([]string, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		out = append(out, ln.Addr().String())
	}
	return out
}

func newCluster(t *testing.T, servers, workers int, common ...string) *cluster {
	c := &cluster{t: t, bin: roleBin(t), procs: map[string]*proc{}, servers: servers, workers: workers}
	var book []string
	names := c.names()
	addrs := freeAddrs(t, len(names))
	for i, n := range names {
		book = append(book, n+"="+addrs[i])
	}
	c.peers = strings.Join(book, ",")
	c.common = append([]string{"-servers", fmt.Sprint(servers), "-workers", fmt.Sprint(workers), "-peers", c.peers}, common...)
	t.Cleanup(func() {
		for _, p := range c.procs {
			p.cmd.Process.Signal(syscall.SIGCONT)
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return c
}

func (c *cluster) names() []string {
	n := []string{"coordinator"}
	for i := range c.servers {
		n = append(n, fmt.Sprintf("server-%d", i))
	}
	for i := range c.workers {
		n = append(n, fmt.Sprintf("worker-%d", i))
	}
	return n
}

// start runs role name with extra flags.
func (c *cluster) start(role, name string, extra ...string) *proc {
	c.t.Helper()
	args := append([]string{"-role", role, "-id", name}, c.common...)
	if p := c.peersOf[name]; p != "" {
		args = append(args, "-peers", p)
	}
	cmd := exec.Command(c.bin, append(args, extra...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout // the log lines too: the tests look for names in them
	p := &proc{name: name, cmd: cmd, seen: make(chan string, 1024), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			select {
			case p.seen <- sc.Text():
			default:
			}
		}
		p.err = cmd.Wait()
		p.at = time.Now()
		close(p.done)
	}()
	c.procs[name] = p
	return p
}

// up starts the servers (extra flags each), the coordinator and the
// workers, and waits until every server and the coordinator are ready.
func (c *cluster) up(serverFlags func(i int) []string) {
	c.t.Helper()
	for i := range c.servers {
		var extra []string
		if serverFlags != nil {
			extra = serverFlags(i)
		}
		c.start("server", fmt.Sprintf("server-%d", i), extra...).waitLine(c.t, "ready", 10*time.Second)
	}
	c.start("coordinator", "coordinator").waitLine(c.t, "ready", 10*time.Second)
	for i := range c.workers {
		c.start("worker", fmt.Sprintf("worker-%d", i))
	}
}

// The lease of the kill tests and the bounds derived from it. A run of
// go test ./... compiles other packages beside these processes, and on a
// loaded 2-core machine a heartbeat's round trip took longer than the
// 400 ms lease these tests had (TestMultiProcess_LostWorker failed in a
// fresh clone, 1.52 s in, and passed on every rerun): a live peer must
// never look dead, so the lease is 1 s and the workers' coordinator
// timeout 4 leases (the role binary's), and the slack is 2 s.
const (
	lease = time.Second
	// slack for process scheduling and TCP on a loaded 2-core machine
	slack = 2 * time.Second
	// detection bound: Timeout + Interval (ps/lease.go) + slack
	bound = lease + lease/4 + slack
	// coordBound: a worker finds its coordinator gone at once (its
	// requests fail) or after CoordinatorTimeout, 4 leases, of unanswered
	// heartbeats
	coordBound = 4*lease + slack
)

// failedNaming checks that p exited with an error naming peer within
// bound of since.
func failedNaming(t *testing.T, p *proc, peer string, since time.Time) {
	t.Helper()
	failedNamingWithin(t, p, peer, since, bound)
}

// failedNamingWithin is failedNaming with the detection bound of another
// lease.
func failedNamingWithin(t *testing.T, p *proc, peer string, since time.Time, bound time.Duration) {
	t.Helper()
	p.wait(t, 10*time.Second)
	out := p.output()
	t.Logf("%s exited %v after the fault: %s", p.name, p.at.Sub(since).Round(time.Millisecond), out[strings.LastIndex(out, "\n")+1:])
	if p.err == nil || !strings.Contains(out, "error:") || !strings.Contains(out, peer) {
		t.Errorf("%s: exit %v, want an error naming %s; output:\n%s", p.name, p.err, peer, out)
	}
	if d := p.at.Sub(since); d > bound {
		t.Errorf("%s exited %v after the fault, bound %v", p.name, d, bound)
	}
}

// TestMultiProcess_LostWorker: a worker killed with kill -9 in the middle
// of a clock, or stopped with SIGSTOP, is detected by its lease: the
// coordinator and every other worker exit with an error naming it within
// Timeout + Interval + slack (the BSP survivors used to wait forever).
func TestMultiProcess_LostWorker(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGSTOP} {
		t.Run(sig.String(), func(t *testing.T) {
			c := newCluster(t, 2, 3, "-lease", lease.String(), "-delay", "20ms", "-clocks", "50")
			c.up(nil)
			victim := c.procs["worker-1"]
			victim.waitLine(t, "clock 2", 20*time.Second)
			at := time.Now()
			victim.cmd.Process.Signal(sig)
			for _, n := range []string{"coordinator", "worker-0", "worker-2"} {
				failedNaming(t, c.procs[n], "worker-1", at)
			}
		})
	}
}

// TestMultiProcess_LostCoordinator: workers whose coordinator is killed
// exit with an error naming it within their CoordinatorTimeout + slack
// (coordBound).
func TestMultiProcess_LostCoordinator(t *testing.T) {
	c := newCluster(t, 2, 2, "-lease", lease.String(), "-delay", "20ms", "-clocks", "50")
	c.up(nil)
	c.procs["worker-0"].waitLine(t, "clock 2", 20*time.Second)
	at := time.Now()
	c.procs["coordinator"].cmd.Process.Kill()
	for _, n := range []string{"worker-0", "worker-1"} {
		failedNamingWithin(t, c.procs[n], "coordinator", at, coordBound)
	}
}

// durableRun trains 2 workers for 8 clocks against 2 durable servers and
// returns worker-0's final parameters and the coordinator's flush count;
// restart, if true, kills server-1 with kill -9 in worker-0's clock 3 and
// starts it again on the same address from the same directory.
func durableRun(t *testing.T, restart bool) (final, flushes string) {
	c := newCluster(t, 2, 2, "-lease", "2s", "-retry", "20s", "-delay", "5ms", "-clocks", "8")
	dirs := []string{t.TempDir(), t.TempDir()}
	c.up(func(i int) []string { return []string{"-dir", dirs[i]} })
	if restart {
		c.procs["worker-0"].waitLine(t, "clock 3", 20*time.Second)
		srv := c.procs["server-1"]
		srv.cmd.Process.Kill()
		srv.wait(t, 5*time.Second)
		time.Sleep(100 * time.Millisecond)
		c.start("server", "server-1", "-dir", dirs[1]).waitLine(t, "ready", 10*time.Second)
	}
	final = c.procs["worker-0"].waitLine(t, "final", 60*time.Second)
	t.Logf("restart %v: worker-0 ran clocks: %s", restart, strings.Join(strings.Fields(strings.ReplaceAll(c.procs["worker-0"].output(), "clock ", "")), " "))
	flushes = c.procs["coordinator"].waitLine(t, "flushes", 10*time.Second)
	for _, n := range []string{"worker-0", "worker-1"} {
		c.procs[n].wait(t, 10*time.Second)
		if c.procs[n].err != nil {
			t.Fatalf("%s: %v\n%s", n, c.procs[n].err, c.procs[n].output())
		}
	}
	return final, flushes
}

// TestMultiProcess_ServerRestartBitIdentical: a server killed with
// kill -9 in the middle of a BSP run and restarted from its checkpoint and
// request log lets the run finish with parameters bit-identical to the
// fault-free run and the same number of flushes: no update lost, none
// applied twice.
func TestMultiProcess_ServerRestartBitIdentical(t *testing.T) {
	want, wantFlushes := durableRun(t, false)
	got, gotFlushes := durableRun(t, true)
	if got != want || gotFlushes != wantFlushes || wantFlushes != "flushes 8" {
		t.Fatalf("with the restart: %q, %q; without: %q, %q", got, gotFlushes, want, wantFlushes)
	}
}

// TestMultiProcess_RestartedWorkerRefused: a worker killed with kill -9
// and started again at once (the finding: it was re-admitted and ran its
// clocks a second time, 708 flushes for 600 clocks) is refused with a
// clear error; its first incarnation's lease then expires and the run
// aborts naming it, instead of counting its clocks twice.
//
// The lease is longer than the other tests': the restarted process
// must start and say hello before its first incarnation's lease expires,
// and a process built with -race on a loaded 2-core machine took 410–463
// ms to do so (the run then aborted before the hello, and the hello got
// ErrAborted instead of ErrRestarted).
func TestMultiProcess_RestartedWorkerRefused(t *testing.T) {
	const lease = 3 * time.Second
	c := newCluster(t, 2, 2, "-lease", lease.String(), "-delay", "20ms", "-clocks", "50")
	c.up(nil)
	old := c.procs["worker-1"]
	old.waitLine(t, "clock 2", 20*time.Second)
	at := time.Now()
	old.cmd.Process.Kill()
	old.wait(t, 5*time.Second)
	again := c.start("worker", "worker-1")
	again.wait(t, 10*time.Second)
	if out := again.output(); again.err == nil || !strings.Contains(out, "restarted worker refused") || strings.Contains(out, "clock ") {
		t.Errorf("restarted worker-1: exit %v, want a refusal before any clock; output:\n%s", again.err, out)
	}
	for _, n := range []string{"coordinator", "worker-0"} {
		failedNamingWithin(t, c.procs[n], "worker-1", at, lease+lease/4+slack)
	}
}

// TestMultiProcess_LostWorkerContinue: with -lost continue a worker killed
// with kill -9 in the middle of its clock 2 leaves the run; its
// unprocessed samples of that clock are computed by a survivor, and each
// server's count of samples it received is exactly the survivors' 6
// clocks and the victim's clocks 0 to 2: none lost, none counted twice.
func TestMultiProcess_LostWorkerContinue(t *testing.T) {
	const clocks, batch = 6, 8
	c := newCluster(t, 2, 3, "-lease", lease.String(), "-delay", "20ms", "-clocks", fmt.Sprint(clocks), "-lost", "continue")
	c.up(nil)
	victim := c.procs["worker-1"]
	victim.waitLine(t, "clock 2", 20*time.Second)
	victim.cmd.Process.Kill()
	for _, n := range []string{"worker-0", "worker-2"} {
		c.procs[n].waitLine(t, "final", 30*time.Second)
	}
	c.procs["coordinator"].waitLine(t, "flushes", 10*time.Second)
	want := fmt.Sprintf("applied %d", 2*clocks*batch+3*batch)
	for i := range 2 {
		s := c.procs[fmt.Sprintf("server-%d", i)]
		s.cmd.Process.Signal(syscall.SIGTERM)
		if got := s.waitLine(t, "applied", 10*time.Second); got != want {
			t.Errorf("server-%d: %q, want %q", i, got, want)
		}
	}
}

// TestMultiProcess_LostServer: a server without durable state killed
// with kill -9 ends the run: the coordinator and the workers exit with an
// error naming it within the lease bound.
func TestMultiProcess_LostServer(t *testing.T) {
	c := newCluster(t, 2, 2, "-lease", lease.String(), "-delay", "20ms", "-clocks", "50")
	c.up(nil)
	c.procs["worker-0"].waitLine(t, "clock 2", 20*time.Second)
	at := time.Now()
	c.procs["server-1"].cmd.Process.Kill()
	for _, n := range []string{"coordinator", "worker-0", "worker-1"} {
		failedNaming(t, c.procs[n], "server-1", at)
	}
}
