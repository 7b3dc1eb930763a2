package etcd

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// proc is one process of the cluster binary, its output kept by line.
type proc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  []string
	news chan struct{} // a line arrived (capacity 1)
	done chan struct{} // closed once the process exited and its output was read
	err  error         // the exit status, once done
}

func startProc(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), news: make(chan struct{}, 1), done: make(chan struct{})}
	// exactly env, and what a Go binary needs to run
	p.cmd.Env = append(append([]string(nil), env...), "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME"))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.out = append(p.out, sc.Text())
			p.mu.Unlock()
			select {
			case p.news <- struct{}{}:
			default:
			}
		}
		r.Close()
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.out, "\n")
}

// line returns the first line matching re and its submatches, if any.
func (p *proc) line(re *regexp.Regexp) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.out {
		if m := re.FindStringSubmatch(l); m != nil {
			return m
		}
	}
	return nil
}

// waitLine waits up to d for a line matching re.
func (p *proc) waitLine(t *testing.T, re *regexp.Regexp, d time.Duration) []string {
	t.Helper()
	deadline := time.After(d)
	for {
		if m := p.line(re); m != nil {
			return m
		}
		select {
		case <-p.news:
		case <-p.done:
			if m := p.line(re); m != nil {
				return m
			}
			t.Fatalf("%s exited (%v) without a line matching %q:\n%s", p.name, p.err, re, p.output())
		case <-deadline:
			t.Fatalf("%s: no line matching %q within %v:\n%s", p.name, re, d, p.output())
		}
	}
}

// wait waits up to d for the process to exit and returns its status.
func (p *proc) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		t.Fatalf("%s still running %v later:\n%s", p.name, d, p.output())
		return nil
	}
}

// buildClusterBinary builds cmd/falcon-cluster-etcd into dir. It is built
// without the race detector even under go test -race: the processes'
// code is the core module's, raced by its own tests, and a race build of
// the etcd client takes minutes on a loaded 2-core machine.
func buildClusterBinary(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "falcon-cluster-etcd")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/falcon-cluster-etcd").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// freeAddrs returns n distinct free ports on 127.0.0.1 (each held until
// all are chosen).
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	addrs := make([]string, n)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		addrs[i] = l.Addr().String()
	}
	return addrs
}

var (
	crcRE     = regexp.MustCompile(`coordinator: final parameters crc32c=([0-9a-f]{8}) \((\d+) values\)`)
	flushesRE = regexp.MustCompile(`coordinator: policy stats: .* flushes=(\d+) `)
	samplesRE = regexp.MustCompile(`server-0: samples per clock (.*)$`)
	leadingRE = regexp.MustCompile(`coordinator: leading \(lease ([0-9a-f]+), fencing token (\d+)\): (.*)$`)
	lostRE    = regexp.MustCompile(`coordinator: lost the leadership \(.*\); standing by again`)
	standbyRE = regexp.MustCompile(`coordinator: standing by for the leadership`)
	overRE    = regexp.MustCompile(`coordinator: the run is over \(another coordinator finished it\); exiting`)
)

// binRun is one run of the cluster binary over TCP loopback: a server,
// procWorkers workers and one or two coordinator processes on etcd.
type binRun struct {
	bin, endpoint, runID string
	kill                 bool // kill -9 the leader mid-run
	// depose, with kill, revokes the leader's lease in etcd instead (as
	// when it is cut off from etcd for a TTL, or its store gave up): the
	// leader's process lives, stops its coordinator as a crash would and
	// stands by again
	depose bool
}

const (
	procWorkers = 3
	procClocks  = 30
	// the leader is killed once it has reported clock 8 or a later one
	// (its progress lines come every 2 clocks; the pattern in run)
)

type binResult struct {
	crc, flushes, samples string
	takeover              time.Duration // from the kill to the standby leading
	resumed               string        // what the standby said it resumed from
}

func (r binRun) run(t *testing.T) binResult {
	t.Helper()
	addrs := freeAddrs(t, 2+procWorkers)
	book := fmt.Sprintf("coordinator=%s,server-0=%s", addrs[0], addrs[1])
	for i := range procWorkers {
		book += fmt.Sprintf(",worker-%d=%s", i, addrs[2+i])
	}
	common := []string{"-peers=" + book, "-servers=1", fmt.Sprintf("-workers=%d", procWorkers),
		"-policy=bsp", "-deterministic", fmt.Sprintf("-clocks=%d", procClocks), "-batch=16", "-dataset=synthetic",
		"-train=3000", "-test=500", "-sample-time=2ms", "-eval-every=2", "-timeout=3m", "-start-timeout=30s",
		"-run-id=" + r.runID}
	// TTL: the embedded server's minimum; the workers' and server's wait
	// for a coordinator is -coordinator-wait's default (60 s), far above
	// the TTL plus a new process's start on a loaded machine
	env := []string{"FALCON_SECRET=a-secret-for-the-takeover-test", "FALCON_ETCD_ENDPOINTS=" + r.endpoint,
		fmt.Sprintf("FALCON_ETCD_TTL=%v", testTTL)}
	coord := func(name string) *proc {
		return startProc(t, name, r.bin, env, append([]string{"-role=coordinator", "-listen=" + addrs[0]}, common...)...)
	}
	leader := coord("coordinator-a")
	lease := leader.waitLine(t, leadingRE, slack)[1]
	standby := coord("coordinator-b")
	standby.waitLine(t, standbyRE, slack)
	idle := standby // stands by to the end, then exits
	others := []*proc{startProc(t, "server-0", r.bin, env, append([]string{"-role=server", "-rank=0"}, common...)...)}
	for i := range procWorkers {
		others = append(others, startProc(t, fmt.Sprintf("worker-%d", i), r.bin, env, append([]string{"-role=worker", fmt.Sprintf("-rank=%d", i)}, common...)...))
	}
	var res binResult
	final := leader
	if r.kill {
		// the first progress line at or past clock 8 (a loaded
		// machine may skip a line)
		leader.waitLine(t, regexp.MustCompile(fmt.Sprintf(`coordinator: clock ([89]|[12][0-9])/%d `, procClocks)), 6*slack)
		killed := time.Now()
		if r.depose {
			id, err := strconv.ParseInt(lease, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := newBackend(t, "/", "revoker").Client().Revoke(testCtx(t, slack), clientv3.LeaseID(id)); err != nil {
				t.Fatal(err)
			}
		} else if err := leader.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		m := standby.waitLine(t, leadingRE, testTTL+2*slack)
		res.takeover = time.Since(killed)
		res.resumed = m[3]
		if n := strings.Count(standby.output(), "the address is still bound"); n > 0 {
			t.Logf("the standby found the coordinator's address still bound %d times (the deposed leader stopping)", n)
		}
		final = standby
		if r.depose {
			// it stops its coordinator and stands by again
			leader.waitLine(t, lostRE, slack)
			idle = leader
		} else {
			// the killed one's command again, as restartPolicy
			// OnFailure runs it: it stands by
			idle = coord("coordinator-a-restarted")
			idle.waitLine(t, standbyRE, slack)
		}
	}
	m := final.waitLine(t, crcRE, 12*slack)
	res.crc = m[1] + " over " + m[2] + " values"
	res.flushes = final.waitLine(t, flushesRE, slack)[1]
	if err := final.wait(t, 2*slack); err != nil {
		t.Fatalf("%s: exit %v:\n%s", final.name, err, final.output())
	}
	for _, p := range others {
		if err := p.wait(t, 2*slack); err != nil {
			t.Fatalf("%s: exit %v:\n%s", p.name, err, p.output())
		}
	}
	res.samples = others[0].waitLine(t, samplesRE, slack)[1]
	// the standby leads once the leader resigns, finds the run over and
	// exits 0 (a Job's pod completes)
	if err := idle.wait(t, 2*slack); err != nil {
		t.Fatalf("%s: exit %v:\n%s", idle.name, err, idle.output())
	}
	idle.waitLine(t, overRE, slack)
	return res
}

// TestProcess_TakeoverOverTCP runs the cluster binary with a standby
// coordinator on etcd as separate processes over TCP loopback (a server,
// 3 workers, deterministic BSP, 30 clocks, two coordinator processes
// given the same -listen), once uninterrupted and once with the leading
// coordinator killed with kill -9 at clock 8 or later and its command run
// again: the standby, bound to the address only once it leads, takes
// over from the state in etcd within the lease TTL (plus a new leader's
// start), and the run ends with the server's own count of samples per
// clock, the number of flushes and the final parameters (their CRC-32C)
// identical to the uninterrupted run's: no push lost or counted twice.
// Then the same with the leader deposed instead (its lease revoked in
// etcd while its process lives, as when it is cut off from etcd): it
// stops its coordinator as a crash would, the standby leads at once
// (binding the address once the deposed one has let it go) and the run
// ends the same. In every run the coordinator left standing by exits 0
// once the run is over.
func TestProcess_TakeoverOverTCP(t *testing.T) {
	endpoint := needEtcd(t)
	if testing.Short() {
		t.Skip("builds the cluster binary and runs processes")
	}
	bin := buildClusterBinary(t, t.TempDir())
	// a new run each time (the etcd server lives as long as the test
	// binary: -count=N repeats the test against it)
	runID := fmt.Sprintf("takeover-%d-%d", os.Getpid(), prefixSeq.Add(1))
	want := binRun{bin: bin, endpoint: endpoint, runID: runID + "-a"}.run(t)
	if want.flushes != fmt.Sprint(procClocks) {
		t.Fatalf("uninterrupted run: %s flushes, want %d", want.flushes, procClocks)
	}
	per := fmt.Sprintf("%d", 16*procWorkers)
	for _, f := range strings.Fields(want.samples) {
		if !strings.HasSuffix(f, ":"+per) {
			t.Fatalf("uninterrupted run: server-0 counted %q, want %s samples in every clock", want.samples, per)
		}
	}
	for _, depose := range []bool{false, true} {
		how := "kill -9"
		if depose {
			how = "lease revoked"
		}
		got := binRun{bin: bin, endpoint: endpoint, runID: fmt.Sprintf("%s-%s", runID, strings.Fields(how)[0]), kill: true, depose: depose}.run(t)
		t.Logf("%s: the standby led %v later (TTL %v): %s", how, got.takeover.Round(time.Millisecond), testTTL, got.resumed)
		t.Logf("uninterrupted: crc %s, flushes %s; %s: crc %s, flushes %s", want.crc, want.flushes, how, got.crc, got.flushes)
		if !strings.HasPrefix(got.resumed, "resuming from") {
			t.Errorf("%s: the standby did not resume a state: %q", how, got.resumed)
		}
		if got.samples != want.samples {
			t.Errorf("%s: server-0's samples per clock:\n  with the takeover %s\n  uninterrupted     %s", how, got.samples, want.samples)
		}
		if got.flushes != want.flushes || got.crc != want.crc {
			t.Errorf("%s: crc %s, %s flushes; uninterrupted: crc %s, %s flushes", how, got.crc, got.flushes, want.crc, want.flushes)
		}
	}
}
