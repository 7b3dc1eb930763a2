//go:build linux

package testbed

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors; New's errors wrap them with the reason.
var (
	// ErrUnsupported: the bed cannot be made here (not root, no iproute2,
	// no permission to make namespaces, no cgroup CPU controller). Tests
	// skip with the error's text.
	ErrUnsupported = errors.New("testbed: unsupported here")
	// ErrConfig marks a Config that fails Validate.
	ErrConfig = errors.New("testbed: invalid config")
)

// Config describes a bed. Zero fields take the defaults of DefaultConfig.
type Config struct {
	// Ports is the number of ports (agents), 1..200.
	Ports int
	// RateBits is each port's link rate in bit/s, the same each way (port
	// → switch and switch → port): one value for every port, or one per
	// port. Required.
	RateBits []float64
	// Cores is each port's CPU quota in cores (one value, or one per
	// port); 0 means no quota. A quota must be at least 1 ms per period
	// (the kernel's minimum).
	Cores []float64
	// Period is the CFS period. Zero means 10 ms, short so that processes
	// running for seconds see the quota rather than the throttler's
	// bursts.
	Period time.Duration
	// Shares is the CPU weight of every port's cgroup against the other
	// groups and the root group's tasks (cgroup v1 cpu.shares; on v2,
	// cpu.weight = Shares·100/1024, at least 1). Zero leaves the kernel's
	// default (1024: one nice-0 task). On a machine busy with other work,
	// a higher weight lets the ports get their quotas: the quota still
	// caps them, the weight only orders them before other work.
	Shares int
	// Prefix names the namespaces and cgroups. Empty means "flb" and the
	// process id (at most 8 characters are used).
	Prefix string
}

// DefaultConfig returns a 10 ms CFS period (Ports and RateBits still need
// setting).
func DefaultConfig() Config { return Config{Period: 10 * time.Millisecond} }

func (c Config) withDefaults() Config {
	if c.Period == 0 {
		c.Period = 10 * time.Millisecond
	}
	if c.Prefix == "" {
		c.Prefix = fmt.Sprintf("flb%d", os.Getpid()%100000)
	}
	if len(c.Prefix) > 8 {
		c.Prefix = c.Prefix[:8]
	}
	return c
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	x := c.withDefaults()
	if x.Ports < 1 || x.Ports > 200 {
		return fmt.Errorf("%w: %d ports (want 1..200)", ErrConfig, x.Ports)
	}
	if n := len(x.RateBits); n != 1 && n != x.Ports {
		return fmt.Errorf("%w: %d rates for %d ports", ErrConfig, n, x.Ports)
	}
	for _, r := range x.RateBits {
		if !(r >= 8e3) || math.IsInf(r, 0) {
			return fmt.Errorf("%w: rate %v bit/s (want ≥ 8 kbit/s)", ErrConfig, r)
		}
	}
	if n := len(x.Cores); n > 1 && n != x.Ports {
		return fmt.Errorf("%w: %d quotas for %d ports", ErrConfig, n, x.Ports)
	}
	if x.Shares < 0 || x.Shares > 262144 {
		return fmt.Errorf("%w: shares %d (want 0..262144)", ErrConfig, x.Shares)
	}
	if x.Period < time.Millisecond || x.Period > time.Second {
		return fmt.Errorf("%w: period %v (want 1 ms..1 s)", ErrConfig, x.Period)
	}
	for _, q := range x.Cores {
		if q < 0 || math.IsNaN(q) || math.IsInf(q, 0) || q > 0 && time.Duration(q*float64(x.Period)) < time.Millisecond {
			return fmt.Errorf("%w: quota %v cores of a %v period (want 0, or ≥ 1 ms per period)", ErrConfig, q, x.Period)
		}
	}
	for _, r := range x.Prefix {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return fmt.Errorf("%w: prefix %q (lower-case letters and digits)", ErrConfig, x.Prefix)
		}
	}
	return nil
}

// Bed is a fabric of ports on one machine: each port a network namespace
// with a veth link (eth0, address Addr(k)) into a switch namespace holding a
// Linux bridge, rate-limited each way by a tbf qdisc (on eth0 for port →
// switch, on the switch's end of the link for switch → port), and a CPU
// cgroup with the port's quota. The machine's own namespace gets one
// unlimited link into the bridge too (ControlAddr), so the test process can
// reach every port (a coordinator runs there).
type Bed struct {
	cfg     Config
	sw      string
	ns      []string
	cgroups []string // "" where no quota
	v2      bool
	hostIf  string
	lock    *os.File // the machine-wide bed lock, held until Close
}

// ControlAddr is the machine's own address on the bed's bridge.
const ControlAddr = "10.79.0.250"

// Addr is port k's address.
func (b *Bed) Addr(k int) string { return fmt.Sprintf("10.79.0.%d", k+1) }

// Namespace is port k's network namespace.
func (b *Bed) Namespace(k int) string { return b.ns[k] }

// Ports is the number of ports.
func (b *Bed) Ports() int { return len(b.ns) }

func pick(v []float64, k int) float64 {
	switch len(v) {
	case 0:
		return 0
	case 1:
		return v[0]
	}
	return v[k]
}

// RateBits is port k's configured rate, bit/s each way.
func (b *Bed) RateBits(k int) float64 { return pick(b.cfg.RateBits, k) }

// Cores is port k's configured quota (0: none).
func (b *Bed) Cores(k int) float64 { return pick(b.cfg.Cores, k) }

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// New makes the bed; Close removes it. It needs root, iproute2 (ip, tc)
// and a cgroup CPU controller (v1 cpu.cfs_quota_us, or v2 cpu.max) when
// a quota is asked for; otherwise it fails with ErrUnsupported.
func New(cfg Config) (_ *Bed, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: needs root (network namespaces, tc, cgroups)", ErrUnsupported)
	}
	for _, tool := range []string{"ip", "tc", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: %s not found (iproute2)", ErrUnsupported, tool)
		}
	}
	lock, err := lockMachine()
	if err != nil {
		return nil, err
	}
	removeStale()
	b := &Bed{cfg: cfg, sw: cfg.Prefix + "-sw", hostIf: cfg.Prefix + "-c", lock: lock}
	if err := run("ip", "netns", "add", b.sw); err != nil {
		b.unlock()
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	steps := [][]string{
		{"ip", "-n", b.sw, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", b.sw, "link", "set", "br0", "up"},
		{"ip", "link", "add", b.hostIf, "type", "veth", "peer", "name", "ctl", "netns", b.sw},
		{"ip", "-n", b.sw, "link", "set", "ctl", "master", "br0"},
		{"ip", "-n", b.sw, "link", "set", "ctl", "up"},
		{"ip", "addr", "add", ControlAddr + "/24", "dev", b.hostIf},
		{"ip", "link", "set", b.hostIf, "up"},
	}
	for k := range cfg.Ports {
		ns, port := fmt.Sprintf("%s-p%d", cfg.Prefix, k), fmt.Sprintf("p%d", k)
		b.ns = append(b.ns, ns)
		rate := strconv.FormatFloat(b.RateBits(k), 'f', 0, 64) + "bit"
		// Burst: at least 64 KiB (a GSO segment) or 4 ms at the rate.
		burst := strconv.Itoa(int(math.Max(64<<10, b.RateBits(k)/8*0.004)))
		tbf := []string{"root", "tbf", "rate", rate, "burst", burst, "latency", "50ms"}
		steps = append(steps,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", b.sw},
			[]string{"ip", "-n", b.sw, "link", "set", port, "master", "br0"},
			[]string{"ip", "-n", b.sw, "link", "set", port, "up"},
			[]string{"ip", "-n", ns, "addr", "add", b.Addr(k) + "/24", "dev", "eth0"},
			[]string{"ip", "-n", ns, "link", "set", "eth0", "up"},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
			append([]string{"ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", "eth0"}, tbf...),
			append([]string{"ip", "netns", "exec", b.sw, "tc", "qdisc", "replace", "dev", port}, tbf...),
		)
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
	}
	for k := range cfg.Ports {
		dir, err := b.makeCgroup(k)
		if err != nil {
			return nil, err
		}
		b.cgroups = append(b.cgroups, dir)
	}
	return b, nil
}

// makeCgroup makes port k's CPU cgroup with its quota ("" when none).
func (b *Bed) makeCgroup(k int) (string, error) {
	q := b.Cores(k)
	if q == 0 {
		return "", nil
	}
	period := b.cfg.Period.Microseconds()
	quota := int64(math.Round(q * float64(period)))
	name := fmt.Sprintf("%s-p%d", b.cfg.Prefix, k)
	if _, err := os.Stat("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"); err == nil {
		dir := filepath.Join("/sys/fs/cgroup/cpu", name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", fmt.Errorf("%w: cgroup v1: %v", ErrUnsupported, err)
		}
		files := map[string]int64{"cpu.cfs_period_us": period, "cpu.cfs_quota_us": quota}
		if b.cfg.Shares > 0 {
			files["cpu.shares"] = int64(b.cfg.Shares)
		}
		for f, v := range files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(strconv.FormatInt(v, 10)), 0o644); err != nil {
				os.Remove(dir)
				return "", fmt.Errorf("%w: cgroup v1 %s: %v", ErrUnsupported, f, err)
			}
		}
		return dir, nil
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		b.v2 = true
		// Enable the cpu controller for children (harmless if on already).
		_ = os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+cpu"), 0o644)
		dir := filepath.Join("/sys/fs/cgroup", name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", fmt.Errorf("%w: cgroup v2: %v", ErrUnsupported, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cpu.max"), fmt.Appendf(nil, "%d %d", quota, period), 0o644); err != nil {
			os.Remove(dir)
			return "", fmt.Errorf("%w: cgroup v2 cpu.max: %v", ErrUnsupported, err)
		}
		if b.cfg.Shares > 0 {
			w := max(1, min(10000, b.cfg.Shares*100/1024))
			if err := os.WriteFile(filepath.Join(dir, "cpu.weight"), fmt.Appendf(nil, "%d", w), 0o644); err != nil {
				os.Remove(dir)
				return "", fmt.Errorf("%w: cgroup v2 cpu.weight: %v", ErrUnsupported, err)
			}
		}
		return dir, nil
	}
	return "", fmt.Errorf("%w: no cgroup CPU controller (v1 /sys/fs/cgroup/cpu or v2 cpu.max)", ErrUnsupported)
}

// Command returns a command that runs name with args in port k's namespace
// and CPU cgroup: a shell moves itself into the cgroup and then execs
// ip netns exec, so the program runs under the quota from its first
// instruction. The caller starts and waits for it, and must have waited for
// every command before Close.
func (b *Bed) Command(k int, name string, args ...string) *exec.Cmd {
	all := append([]string{"netns", "exec", b.ns[k], name}, args...)
	if b.cgroups[k] == "" {
		return exec.Command("ip", all...)
	}
	script := `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`
	return exec.Command("sh", append([]string{"-c", script, "sh", b.cgroups[k], "ip"}, all...)...)
}

// Throttled returns how many CFS periods port k's cgroup was throttled in
// and for how long in total (cpu.stat), zeros without a quota.
func (b *Bed) Throttled(k int) (periods int64, total time.Duration) {
	if b.cgroups[k] == "" {
		return 0, 0
	}
	data, err := os.ReadFile(filepath.Join(b.cgroups[k], "cpu.stat"))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "nr_throttled":
			periods = v
		case "throttled_time": // v1, ns
			total = time.Duration(v)
		case "throttled_usec": // v2
			total = time.Duration(v) * time.Microsecond
		}
	}
	return periods, total
}

// Close removes the namespaces, links and cgroups. Processes started with
// Command must have ended (a cgroup with a process in it cannot be
// removed; Close retries for a second, then reports it).
func (b *Bed) Close() error {
	var errs []error
	for _, ns := range append(append([]string(nil), b.ns...), b.sw) {
		if err := run("ip", "netns", "del", ns); err != nil && !strings.Contains(err.Error(), "No such file") {
			errs = append(errs, err)
		}
	}
	_ = run("ip", "link", "del", b.hostIf) // gone with the switch namespace's peer
	for _, dir := range b.cgroups {
		if dir == "" {
			continue
		}
		var err error
		for range 20 {
			if err = os.Remove(dir); err == nil || os.IsNotExist(err) {
				err = nil
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	b.ns, b.cgroups = nil, nil
	b.unlock()
	return errors.Join(errs...)
}

// unlock releases the machine-wide bed lock (closing the file releases
// the flock).
func (b *Bed) unlock() {
	if b.lock != nil {
		b.lock.Close()
		b.lock = nil
	}
}
