//go:build linux

package clusterbin

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// netLab is a set of hosts, each a network namespace with one veth link
// into a switch namespace (a Linux bridge), addresses 10.77.0.1/24 on;
// nothing is configured in the test machine's own namespace.
type netLab struct {
	t     *testing.T
	sw    string
	hosts []string // namespace per host
}

// ipCmd runs ip (or tc) with args and fails the test on error.
func (l *netLab) run(name string, args ...string) {
	l.t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		l.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// newNetLab makes n hosts, or skips the test (with the reason) where it
// cannot: not root, no iproute2, or no permission to make namespaces.
func newNetLab(t *testing.T, n int) *netLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes network namespaces, veth links and tc limits")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs iproute2 (%s not found): apt-get install -y iproute2", tool)
		}
	}
	prefix := fmt.Sprintf("flc%d", os.Getpid()%100000)
	l := &netLab{t: t, sw: prefix + "-sw"}
	if out, err := exec.Command("ip", "netns", "add", l.sw).CombinedOutput(); err != nil {
		t.Skipf("cannot make a network namespace here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		for _, ns := range append([]string{l.sw}, l.hosts...) {
			exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	l.run("ip", "-n", l.sw, "link", "add", "br0", "type", "bridge")
	l.run("ip", "-n", l.sw, "link", "set", "br0", "up")
	for k := range n {
		ns := fmt.Sprintf("%s-h%d", prefix, k)
		l.run("ip", "netns", "add", ns)
		l.hosts = append(l.hosts, ns)
		port := fmt.Sprintf("p%d", k)
		l.run("ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", l.sw)
		l.run("ip", "-n", l.sw, "link", "set", port, "master", "br0")
		l.run("ip", "-n", l.sw, "link", "set", port, "up")
		l.run("ip", "-n", ns, "addr", "add", l.ip(k)+"/24", "dev", "eth0")
		l.run("ip", "-n", ns, "link", "set", "eth0", "up")
		l.run("ip", "-n", ns, "link", "set", "lo", "up")
	}
	return l
}

func (l *netLab) ip(k int) string { return fmt.Sprintf("10.77.0.%d", k+1) }

// limit sets every host's egress to rate (tc syntax, e.g. 100mbit).
func (l *netLab) limit(rate string) {
	for _, ns := range l.hosts {
		l.run("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
			"rate", rate, "burst", "128kb", "latency", "100ms")
	}
}

// netRun is one run's summary.
type netRun struct {
	wire, raw float64
	clockS    float64 // wall_s / clocks
	acc       float64
	wallS     float64
	clocks    int
	summary   string
}

// runCluster runs the cluster binary with one node per host (coordinator,
// servers, workers in order) and extra flags, and parses the summary.
func (l *netLab) runCluster(bin string, servers, workers int, extra ...string) netRun {
	l.t.Helper()
	names := nodeNames(servers, workers)
	if len(names) > len(l.hosts) {
		l.t.Fatalf("%d nodes for %d hosts", len(names), len(l.hosts))
	}
	var peers []string
	for k, n := range names {
		peers = append(peers, fmt.Sprintf("%s=%s:7000", n, l.ip(k)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	outs := make([]bytes.Buffer, len(names))
	errs := make([]bytes.Buffer, len(names))
	rcs := make([]error, len(names))
	var wg sync.WaitGroup
	for k, n := range names {
		role, rank, _ := strings.Cut(string(n), "-")
		if rank == "" {
			rank = "0"
		}
		args := append([]string{"netns", "exec", l.hosts[k], bin, "-role=" + role, "-rank=" + rank,
			"-listen=" + l.ip(k) + ":7000", "-peers=" + strings.Join(peers, ","),
			fmt.Sprintf("-servers=%d", servers), fmt.Sprintf("-workers=%d", workers), "-timeout=90s", "-start-timeout=30s"}, extra...)
		cmd := exec.CommandContext(ctx, "ip", args...)
		cmd.Env = append(os.Environ(), "FALCON_SECRET=netns-test-secret")
		cmd.Stdout, cmd.Stderr = &outs[k], &errs[k]
		wg.Add(1)
		go func() {
			defer wg.Done()
			rcs[k] = cmd.Run()
		}()
	}
	wg.Wait()
	for k, err := range rcs {
		if err != nil {
			l.t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", names[k], err, outs[k].String(), errs[k].String())
		}
	}
	m := summaryRE.FindStringSubmatch(outs[0].String())
	if m == nil {
		l.t.Fatalf("no summary:\n%s", outs[0].String())
	}
	var r netRun
	r.summary = m[0]
	r.clocks, _ = strconv.Atoi(m[4])
	r.acc, _ = strconv.ParseFloat(m[5], 64)
	r.wallS, _ = strconv.ParseFloat(m[6], 64)
	r.wire, _ = strconv.ParseFloat(m[7], 64)
	r.raw, _ = strconv.ParseFloat(m[8], 64)
	r.clockS = r.wallS / float64(r.clocks)
	return r
}

// TestNetns_Cluster runs one configuration of NETNS.md's table on six
// namespace hosts at 100 Mbit/s: dense gradients, -compress auto.
func TestNetns_Cluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	lab := newNetLab(t, 6)
	lab.limit("100mbit")
	bin := buildBinary(t)
	r := lab.runCluster(bin, 2, 3, "-policy=bsp", "-clocks=20", "-batch=32", "-model=mlp", "-hidden=2048",
		"-dataset=synthetic", "-compress=auto", fmt.Sprintf("-bandwidth=%g", 100e6/8))
	t.Logf("%s", r.summary)
	if r.acc < 0.5 || r.wire <= 0 || r.wire > r.raw {
		t.Errorf("run: %s", r.summary)
	}
	// The busiest of the 6 hosts sends at least a sixth of the wire
	// bytes, at 12.5 MB/s after its 128 KB burst: faster would mean the
	// limit is not there.
	if bound := (r.wire/6 - 128<<10) / 12.5e6; r.wallS < bound {
		t.Errorf("wall %.3fs, below the %.3fs that 100 Mbit/s links allow", r.wallS, bound)
	}
}

// TestNetns_Table runs NETNS.md's protocol and prints the table (only
// with FALCON_NETNS_TABLE=1: about 60 runs).
func TestNetns_Table(t *testing.T) {
	if os.Getenv("FALCON_NETNS_TABLE") != "1" {
		t.Skip("set FALCON_NETNS_TABLE=1 to run the bandwidth table of NETNS.md")
	}
	lab := newNetLab(t, 6)
	bin := buildBinary(t)
	workloads := []struct {
		name  string
		flags []string
	}{
		{"dense", []string{"-model=mlp", "-hidden=512", "-dataset=synthetic"}},
		{"sparse", []string{"-model=softmax", "-dataset=sparse", "-pad=4000"}},
	}
	rates := []struct {
		name string
		tc   string
		bps  float64
	}{{"100 Mbit/s", "100mbit", 100e6}, {"1 Gbit/s", "1gbit", 1e9}}
	modes := []string{"never", "always", "auto"}
	seeds := []int{1, 2, 3, 4, 5}
	fmt.Println("| workload | link | -compress | wire MB (median, 95% CI) | wire / never | ms per clock (median, 95% CI) | time / never | final acc (min) |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, w := range workloads {
		for _, rt := range rates {
			lab.limit(rt.tc)
			res := map[string][]netRun{}
			for _, seed := range seeds {
				for _, mode := range modes {
					flags := append([]string{"-policy=bsp", "-clocks=30", "-batch=32", "-lr=0.5", "-compress=" + mode,
						fmt.Sprintf("-seed=%d", seed)}, w.flags...)
					if mode == "auto" {
						flags = append(flags, fmt.Sprintf("-bandwidth=%g", rt.bps/8))
					}
					r := lab.runCluster(bin, 2, 3, flags...)
					t.Logf("%s %s %s seed %d: %s", w.name, rt.name, mode, seed, r.summary)
					res[mode] = append(res[mode], r)
				}
			}
			for _, mode := range modes {
				rs := res[mode]
				wire, clk, rw, rc := make([]float64, len(rs)), make([]float64, len(rs)), make([]float64, len(rs)), make([]float64, len(rs))
				minAcc := 1.0
				for i, r := range rs {
					wire[i], clk[i] = r.wire/1e6, r.clockS*1e3
					rw[i], rc[i] = r.wire/res["never"][i].wire, r.clockS/res["never"][i].clockS
					minAcc = min(minAcc, r.acc)
				}
				ratio := func(x []float64) string {
					if mode == "never" {
						return "1"
					}
					m, lo, hi := medianCI(x)
					return fmt.Sprintf("%.3f [%.3f, %.3f]", m, lo, hi)
				}
				wm, wl, wh := medianCI(wire)
				cm, cl, ch := medianCI(clk)
				fmt.Printf("| %s | %s | %s | %.2f [%.2f, %.2f] | %s | %.1f [%.1f, %.1f] | %s | %.3f |\n",
					w.name, rt.name, mode, wm, wl, wh, ratio(rw), cm, cl, ch, ratio(rc), minAcc)
			}
		}
	}
}

// medianCI is the median of xs and its 95 % percentile-bootstrap interval
// (10,000 resamples, resampling seed 1).
func medianCI(xs []float64) (med, lo, hi float64) {
	med = medianOf(xs)
	rng := rand.New(rand.NewPCG(1, 0))
	meds := make([]float64, 10000)
	buf := make([]float64, len(xs))
	for i := range meds {
		for j := range buf {
			buf[j] = xs[rng.IntN(len(xs))]
		}
		meds[i] = medianOf(buf)
	}
	slices.Sort(meds)
	return med, meds[249], meds[9749]
}

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
