// Package pscoflowlab runs parameter-server jobs that share a machine's
// link, either as coflows of the live coflow runtime (package ps/coflowtr
// over coflow/live, under a scheduler) or on the plain transport with a
// per-message compression policy over an emulated fabric of the same rate,
// and measures each job's time per clock. cmd/falcon-pscoflow is its
// command; ps/coflowtr/PROTOCOL.md the comparison it serves.
//
// Layout (one process, one shared machine): port 0 is the machine holding
// every job's server; port i ≥ 1 holds worker i−1 of every job. So every
// job's pushes enter port 0 and its pull replies leave it: the jobs
// contend on port 0's ingress and egress whenever their transfers overlap.
// Each job is its own ps cluster (coordinator, 1 server, its workers) on
// its own in-process network for control; its data goes either through
// the ports' live agents (TCP on loopback with a shared secret, paced at
// the allocated rates; the live coordinator's fabric has Rate each way per
// port) or, in the baseline, through the emulated fabric (shaper.go) after
// the transport's compression policy.
package pscoflowlab

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/live"
	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/fvdf"
	"github.com/falconml/falcon/fvdf/codecprof"
	"github.com/falconml/falcon/internal/testbed"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/coflowtr"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
)

// JobConfig is one training job.
type JobConfig struct {
	// Name names the job ("A").
	Name string
	// Workers is the job's worker count (at least 1).
	Workers int
	// Params is the model's size in float32 values (one key): a push and
	// a pull reply each carry 4·Params bytes.
	Params int
	// Clocks is the number of clocks the job runs (at least 3).
	Clocks int
}

// Config is one run: every job at once under one arm.
type Config struct {
	// Arm is "live:NAME" (the live runtime under scheduler NAME as
	// testbed.NewScheduler takes it: sebf, fvdf, sebf+lz4, ...) or
	// "plain:POLICY" (the transport's per-message compression policy
	// alone over the emulated fabric: none, lz4 — lz4 above 64 KiB — or
	// fvdf, fvdf.Policy with the fabric's rate as its bandwidth).
	Arm string
	// Rate is each port's capacity each way, bytes/s.
	Rate float64
	// Cores is each port's cores as the live fabric declares them (the
	// cores FVDF may spend on codecs); zero means 1.
	Cores float64
	// Density is the fraction of parameters that get gradient (1: dense,
	// incompressible floats; 0.1: codecprof's SparseGrad).
	Density float64
	// Compute is the emulated compute time of one worker's batch.
	Compute time.Duration
	// Batch is each worker's samples per clock; zero means 4.
	Batch int
	// Jobs are the jobs that share the machine.
	Jobs []JobConfig
	// Seed draws the models' masks and gradients.
	Seed uint64
	// Inmem puts the live agents on an in-process network instead of TCP
	// on loopback.
	Inmem bool
}

// JobResult is one job's outcome.
type JobResult struct {
	Name string
	// PerClock is the job's mean time per clock over its contended clocks:
	// clocks 1 … k−1, k the last clock boundary (a clock's start, or the
	// job's end) not after the first job's end (clock 0, with its
	// registrations and first pull, is warm-up).
	PerClock time.Duration
	// Contended is k − 1, the clocks PerClock averages.
	Contended int
	// Wall is the job's whole Train time.
	Wall time.Duration
	// Coflow is the job's registry counters (live arms).
	Coflow coflowtr.Stats
}

// Result is one run's outcome.
type Result struct {
	Arm  string
	Jobs []JobResult
	// LZ4 is the lz4 profile the live coordinator's schedulers saw last
	// (predicted from the agents' measurements; live arms only), and
	// Calls the scheduler calls.
	LZ4   coflow.CodecProfile
	Calls int
}

// Line is the result as one line of text.
func (r Result) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "arm=%s", r.Arm)
	for _, j := range r.Jobs {
		fmt.Fprintf(&b, " %s_ms_per_clock=%.1f %s_clocks=%d", j.Name, float64(j.PerClock)/1e6, j.Name, j.Contended)
		if j.Coflow.Registered > 0 {
			fmt.Fprintf(&b, " %s_coflows=%d %s_direct=%d", j.Name, j.Coflow.Registered, j.Name, j.Coflow.DirectMsgs)
		}
	}
	if r.Calls > 0 {
		fmt.Fprintf(&b, " sched_calls=%d lz4_compress_MBps=%.0f lz4_ratio=%.3f", r.Calls, r.LZ4.CompressSpeed/1e6, r.LZ4.Ratio)
	}
	return b.String()
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	kind, name, ok := strings.Cut(c.Arm, ":")
	if !ok || (kind != "live" && kind != "plain") || name == "" {
		return fmt.Errorf("pscoflowlab: arm %q (want live:SCHED or plain:POLICY)", c.Arm)
	}
	if kind == "plain" && !slices.Contains([]string{"none", "lz4", "fvdf"}, name) {
		return fmt.Errorf("pscoflowlab: policy %q (want none, lz4 or fvdf)", name)
	}
	if !(c.Rate > 0) || c.Cores < 0 || !(c.Density > 0 && c.Density <= 1) || c.Compute < 0 || c.Batch < 0 || len(c.Jobs) == 0 {
		return errors.New("pscoflowlab: Rate > 0, Cores ≥ 0, 0 < Density ≤ 1, Compute ≥ 0 and at least one job")
	}
	for _, j := range c.Jobs {
		if j.Name == "" || j.Workers < 1 || j.Params < 1 || j.Clocks < 3 {
			return fmt.Errorf("pscoflowlab: job %+v (want a name, ≥ 1 worker, ≥ 1 param, ≥ 3 clocks)", j)
		}
	}
	return nil
}

func (c *Config) ports() int {
	n := 0
	for _, j := range c.Jobs {
		n = max(n, j.Workers)
	}
	return n + 1
}

func machine(i int) transport.NodeID { return transport.NodeID(fmt.Sprintf("m%d", i)) }

// runtime is the live coordinator and one agent per port.
type runtime struct {
	coord  *live.Coordinator
	agents []*live.Agent
	trs    []transport.Transport
	net    *transport.InmemNetwork
}

func (r *runtime) close() {
	for _, a := range r.agents {
		a.Close()
	}
	if r.coord != nil {
		r.coord.Close()
	}
	for _, t := range r.trs {
		t.Close()
	}
	if r.net != nil {
		r.net.Close()
	}
}

func startRuntime(ctx context.Context, cfg Config, sched string) (_ *runtime, err error) {
	s, err := testbed.NewScheduler(sched)
	if err != nil {
		return nil, err
	}
	class := codecprof.SparseGrad
	if cfg.Density >= 1 {
		class = codecprof.Float32Grad
	}
	cores := cfg.Cores
	if cores == 0 {
		cores = 1
	}
	n := cfg.ports()
	lc := live.DefaultConfig()
	for i := range n {
		lc.Agents = append(lc.Agents, machine(i))
	}
	lc.Fabric, lc.Scheduler = testbed.Fabric(n, []codecprof.Class{class}, cfg.Rate, cores), s
	r := &runtime{}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if r.coord, err = live.NewCoordinator(lc); err != nil {
		return nil, err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	join := func(name transport.NodeID, h transport.Handler) (transport.Transport, error) {
		if cfg.Inmem {
			return r.net.Join(name, h)
		}
		tc := transport.DefaultTCPConfig()
		tc.ID, tc.Secret, tc.ListenAddr, tc.Compression = name, secret, "127.0.0.1:0", transport.Never
		t, err := transport.NewTCP(tc, h)
		if err != nil {
			return nil, err
		}
		r.trs = append(r.trs, t)
		return t, nil
	}
	if cfg.Inmem {
		r.net = transport.NewInmemNetwork()
	}
	ctr, err := join("coord", r.coord)
	if err != nil {
		return nil, err
	}
	ac := live.DefaultAgentConfig()
	ac.Coordinator = "coord"
	var atrs []transport.Transport
	for range n {
		a, err := live.NewAgent(ac)
		if err != nil {
			return nil, err
		}
		r.agents = append(r.agents, a)
	}
	for i, a := range r.agents {
		t, err := join(machine(i), a)
		if err != nil {
			return nil, err
		}
		atrs = append(atrs, t)
	}
	if !cfg.Inmem { // every node dials every other by name
		all := append([]transport.Transport{ctr}, atrs...)
		for _, x := range all {
			for _, y := range all {
				if x != y {
					x.(*transport.TCP).AddPeer(y.LocalID(), y.(*transport.TCP).Addr().String())
				}
			}
		}
	}
	if err := r.coord.Start(ctr); err != nil {
		return nil, err
	}
	for i, a := range r.agents {
		if err := a.Start(ctx, atrs[i]); err != nil {
			return nil, fmt.Errorf("pscoflowlab: agent %s: %w", machine(i), err)
		}
	}
	return r, nil
}

// job is one running ps cluster.
type job struct {
	cfg     JobConfig
	net     *transport.InmemNetwork
	reg     *coflowtr.Registry
	coord   *ps.Coordinator
	srv     *ps.Server
	workers []*ps.Worker

	mu     sync.Mutex
	starts map[int]time.Time // worker-0's clock starts
}

func (j *job) close() {
	for _, w := range j.workers {
		w.Close()
	}
	if j.coord != nil {
		j.coord.Close()
	}
	if j.srv != nil {
		j.srv.Close()
	}
	if j.reg != nil {
		j.reg.Close()
	}
	j.net.Close()
}

func startJob(ctx context.Context, cfg Config, jc JobConfig, rt *runtime, fab *fabric, policy transport.CompressionPolicy) (_ *job, err error) {
	j := &job{cfg: jc, net: transport.NewInmemNetwork(), starts: map[int]time.Time{}}
	defer func() {
		if err != nil {
			j.close()
		}
	}()
	obs := ps.WithObserver(event.Func(func(e event.Event) {
		if e.Kind == event.ClockStart && e.Worker == 0 {
			j.mu.Lock()
			j.starts[e.Clock] = time.Now()
			j.mu.Unlock()
		}
	}))
	servers := []transport.NodeID{"server-0"}
	var workers []transport.NodeID
	ports := map[transport.NodeID]int{"server-0": 0}
	for i := range jc.Workers {
		w := ps.WorkerNode(i)
		workers = append(workers, w)
		ports[w] = i + 1
	}
	if rt != nil {
		if j.reg, err = coflowtr.NewRegistry(coflowtr.RegistryConfig{Job: jc.Name, Workers: workers, Servers: servers, Ports: ports}); err != nil {
			return nil, err
		}
	}
	wrapCfg := func(port int) coflowtr.Config {
		return coflowtr.Config{Registry: j.reg, Agent: rt.agents[port], AgentName: machine(port)}
	}
	if j.srv, err = ps.NewServer("server-0", ps.ServerConfig{Store: store.Config{Optimizer: store.SGD{LR: 0.01}}}); err != nil {
		return nil, err
	}
	var h transport.Handler = j.srv
	if rt != nil {
		if h, err = coflowtr.NewHandler(j.srv, "server-0", wrapCfg(0)); err != nil {
			return nil, err
		}
	}
	if _, err := j.net.Join("server-0", h); err != nil {
		return nil, err
	}
	batch := cfg.Batch
	if batch == 0 {
		batch = 4
	}
	if j.coord, err = ps.NewCoordinator(ps.CoordinatorConfig{EPSP: epsp.Config{NumWorkers: jc.Workers, Batch: batch, Parallelism: 1},
		Servers: servers, Workers: workers}, epsp.NewBSP()); err != nil {
		return nil, err
	}
	ctr, err := j.net.Join(ps.CoordinatorNode, j.coord)
	if err != nil {
		return nil, err
	}
	if err := j.coord.Start(ctx, ctr); err != nil {
		return nil, err
	}
	for i, name := range workers {
		wc := ps.DefaultWorkerConfig()
		wc.ID, wc.Coordinator, wc.Chunk = epsp.WorkerID(i), ps.CoordinatorNode, batch
		wc.Client.Servers = servers
		w, err := ps.NewWorker(string(name), wc, obs)
		if err != nil {
			return nil, err
		}
		j.workers = append(j.workers, w)
		inner, err := j.net.Join(name, w)
		if err != nil {
			return nil, err
		}
		var tr transport.Transport = inner
		if rt != nil {
			if tr, err = coflowtr.Wrap(inner, wrapCfg(i+1)); err != nil {
				return nil, err
			}
		} else {
			tr = &shaped{Transport: inner, fab: fab, policy: policy, self: i + 1, port: func(n transport.NodeID) (int, bool) {
				p, ok := ports[n]
				return p, ok && n == "server-0"
			}}
		}
		if err := w.Start(ctx, tr); err != nil {
			return nil, fmt.Errorf("pscoflowlab: job %s %s: %w", jc.Name, name, err)
		}
	}
	return j, nil
}

// Run runs every job of cfg at once under cfg.Arm and returns each job's
// time per clock.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	kind, name, _ := strings.Cut(cfg.Arm, ":")
	var rt *runtime
	var fab *fabric
	var policy transport.CompressionPolicy
	if kind == "live" {
		var err error
		if rt, err = startRuntime(ctx, cfg, name); err != nil {
			return Result{}, err
		}
		defer rt.close()
	} else {
		fab = newFabric(cfg.ports(), cfg.Rate)
		switch name {
		case "lz4":
			policy = transport.AboveSize(64<<10, transport.CodecLZ4)
		case "fvdf":
			pc := fvdf.DefaultPolicyConfig()
			pc.Bandwidth = cfg.Rate
			p, err := fvdf.NewPolicy(pc)
			if err != nil {
				return Result{}, err
			}
			policy = p
		}
	}
	var jobs []*job
	defer func() {
		for _, j := range jobs {
			j.close()
		}
	}()
	for _, jc := range cfg.Jobs {
		j, err := startJob(ctx, cfg, jc, rt, fab, policy)
		if err != nil {
			return Result{}, err
		}
		jobs = append(jobs, j)
	}
	ends := make([]time.Time, len(jobs))
	begin := time.Now()
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	for k, j := range jobs {
		model := newSparseModel(j.cfg.Params, cfg.Density, cfg.Seed*1000+uint64(k), cfg.Compute)
		tc := ps.TrainConfig{Keys: []uint64{0}, Lens: []int{j.cfg.Params}, Init: store.Zeros{}, Clocks: j.cfg.Clocks}
		var jwg sync.WaitGroup
		for _, w := range j.workers {
			jwg.Add(1)
			go func() {
				defer jwg.Done()
				if _, err := w.Train(ctx, model, ps.ShardSampler{N: 1 << 20, Workers: len(j.workers)}, tc); err != nil {
					errs <- fmt.Errorf("job %s: %w", j.cfg.Name, err)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			jwg.Wait()
			ends[k] = time.Now()
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return Result{}, err
	}
	first := slices.MinFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	res := Result{Arm: cfg.Arm}
	if rt != nil {
		res.LZ4, res.Calls = rt.coord.Profile(0, 1), rt.coord.Calls()
	}
	for k, j := range jobs {
		jr := JobResult{Name: j.cfg.Name, Wall: ends[k].Sub(begin)}
		j.mu.Lock()
		bound := func(c int) (time.Time, bool) {
			if c == j.cfg.Clocks {
				return ends[k], true
			}
			t, ok := j.starts[c]
			return t, ok
		}
		t1, ok := bound(1)
		last := 1
		for c := 2; c <= j.cfg.Clocks; c++ {
			if t, ok := bound(c); ok && !t.After(first) {
				last = c
			}
		}
		tk, _ := bound(last)
		j.mu.Unlock()
		if ok && last > 1 {
			jr.Contended = last - 1
			jr.PerClock = tk.Sub(t1) / time.Duration(last-1)
		}
		if j.reg != nil {
			jr.Coflow = j.reg.Stats()
		}
		res.Jobs = append(res.Jobs, jr)
	}
	return res, nil
}
