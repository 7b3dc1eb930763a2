package faulttest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A restartable coordinator (ClusterConfig.CoordinatorStore, the role
// binary's -coord-dir) through ps.NewCluster, one node per process, as
// cmd/falcon-cluster runs it.
const (
	crWorkers, crServers, crClocks = 3, 2, 20
	// crWait is the coordinator wait of the restart runs: far above the
	// time the test takes to start a new coordinator process (0.5 s down,
	// then its start-up, a few seconds at most under -race on a loaded
	// machine)
	crWait = 30 * time.Second
)

// coordRestartRun runs a deterministic BSP job of crWorkers workers with
// a durable coordinator and returns the coordinator's "final" line (the
// parameters in hex) and its flush count; with kill, the coordinator is
// killed with kill -9 once worker-0 has started clock killAt, and a new
// coordinator process is started 0.5 s later on the same address and
// state directory.
func coordRestartRun(t *testing.T, kill bool, killAt int) (final, flushes string) {
	t.Helper()
	c := newCluster(t, crServers, crWorkers, "-cluster", "-det", "-lease", "2s", "-retry", "20s", "-delay", "20ms",
		"-clocks", fmt.Sprint(crClocks), "-coord-wait", crWait.String(), "-coord-dir", t.TempDir())
	c.up(nil)
	if kill {
		c.procs["worker-0"].waitLine(t, fmt.Sprintf("clock %d", killAt), 60*time.Second)
		old := c.procs["coordinator"]
		old.cmd.Process.Kill()
		old.wait(t, 5*time.Second)
		time.Sleep(500 * time.Millisecond)
		c.start("coordinator", "coordinator").waitLine(t, "ready", 20*time.Second)
	}
	co := c.procs["coordinator"]
	final = co.waitLine(t, "final", 120*time.Second)
	flushes = co.waitLine(t, "flushes", 20*time.Second)
	co.wait(t, 20*time.Second)
	if co.err != nil {
		t.Fatalf("coordinator: exit %v; output:\n%s", co.err, co.output())
	}
	for _, n := range c.names()[1:] {
		p := c.procs[n]
		p.wait(t, 20*time.Second)
		if p.err != nil {
			t.Errorf("%s: exit %v; output:\n%s", n, p.err, p.output())
		}
	}
	return final, flushes
}

// TestMultiProcess_CoordinatorRestart: a coordinator killed with kill -9
// in the middle of a deterministic BSP run and started again from its
// state directory lets the run finish; the workers and servers keep
// their processes and state, and the parameters are bit-identical to
// those of a run that was not interrupted, with the same number of
// flushes (no push lost, none counted twice).
func TestMultiProcess_CoordinatorRestart(t *testing.T) {
	want, wantFlushes := coordRestartRun(t, false, 0)
	if wantFlushes != fmt.Sprintf("flushes %d", crClocks) {
		t.Fatalf("fault-free run: %q", wantFlushes)
	}
	for _, at := range []int{3, 11} {
		got, gotFlushes := coordRestartRun(t, true, at)
		if got != want || gotFlushes != wantFlushes {
			t.Errorf("killed at clock %d and restarted: %q, %q; uninterrupted: %q, %q", at, got, gotFlushes, want, wantFlushes)
		}
	}
}

// TestMultiProcess_CoordinatorNeverBack: a durable coordinator killed and
// never started again: every worker and server waits the coordinator
// wait (7 s, above their own timeouts) — none exits before it — and then
// exits with an error naming the coordinator, within the wait plus a ping
// period and its 2 s timeout plus slack.
func TestMultiProcess_CoordinatorNeverBack(t *testing.T) {
	// above the workers' coordinator timeout (4 leases) and the servers'
	// PeerTimeout (5 s): without the wait they would exit earlier
	const wait = 7 * time.Second
	c := newCluster(t, 2, 2, "-cluster", "-lease", lease.String(), "-delay", "20ms", "-clocks", "200",
		"-coord-wait", wait.String(), "-coord-dir", t.TempDir())
	c.up(nil)
	// late enough that the servers' pings (every second) have reached the
	// coordinator: a peer never heard from is waited for StartTimeout
	// first
	c.procs["worker-0"].waitLine(t, "clock 40", 30*time.Second)
	at := time.Now()
	c.procs["coordinator"].cmd.Process.Kill()
	for _, n := range []string{"worker-0", "worker-1", "server-0", "server-1"} {
		p := c.procs[n]
		failedNamingWithin(t, p, "coordinator", at, wait+time.Second+2*time.Second+slack)
		// a server counts the wait from its last answered ping, at most
		// a ping period (1 s) before the kill
		if d := p.at.Sub(at); d < wait-time.Second-100*time.Millisecond {
			t.Errorf("%s exited %v after the kill, before the coordinator wait (%v)", n, d, wait)
		}
		if out := p.output(); !strings.Contains(out, "error:") {
			t.Errorf("%s: no error line:\n%s", n, out)
		}
	}
}
