package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/internal/cputime"
	"github.com/falconml/falcon/internal/testbed"
	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/model/mnist"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/straggler"
	"github.com/falconml/falcon/transport"
)

// The live bed (PROTOCOL-live.md): workers as processes, one per port of
// an internal/testbed bed, each under a CFS quota that is its real speed
// and behind a tbf-limited link, training LeNet-5 with real compute (no
// sleeps) over TCP against a server, a coordinator and an evaluator in
// the calling process. Every constant below is the protocol's.
const (
	// bedBaseCores is a normal worker's quota; bedPeriod the CFS period
	// (20 ms, so that the straggler's 1/16 core is 1.25 ms a period, over
	// the kernel's 1 ms minimum); bedShares the ports' CPU weight
	// (8 nice-0 tasks), so the quotas hold on a machine busy with others.
	bedBaseCores = 0.25
	bedPeriod    = 20 * time.Millisecond
	bedShares    = 8192
	// bedCtlShares is the CPU weight of the calling process's own cgroup
	// (server, coordinator, evaluator): no quota, ordered before the
	// machine's other nice-0 work.
	bedCtlShares = 4096
	// bedRate is a normal worker's link each way: 0.25 MB per pull and per
	// push take 20.6 ms each at 100 Mbit/s, against 64 × 218 µs / 0.25 =
	// 55.8 ms of compute per step: communication is 42 % of a lone
	// normal worker's step (the 30–70 % of published PS training).
	bedRate = 100e6
	// bedTrain training rows and bedTest evaluation rows per seed (MNIST,
	// sampled as the study's loadData); bedEvery the evaluation period of
	// wall time; bedDuration a judging run's cap; bedSelectDuration the
	// selection run's length.
	bedTrain          = 10000
	bedTest           = 500
	bedEvery          = 250 * time.Millisecond
	bedDuration       = 60 * time.Second
	bedSelectDuration = 40 * time.Second
	// bedBatch samples per worker per clock, bedChunk per claim, one
	// compute goroutine per worker (a quota under one core gains nothing
	// from more).
	bedBatch = 64
	bedChunk = 8
	// bedWorkerPort is every worker's TCP port in its namespace.
	bedWorkerPort = 7000
)

// Targets and the twin's compute rate, from the selection run
// (-live-bed-select, seed 0, homogeneous, BSP; PROTOCOL-live.md §3).
// -live-bed-select, 2026-12-06 03:48 UTC (results-live/live-select.csv,
// load 8.5): a₀ 0.0740, plateau 0.9759; compute rates 1207.5–1243.4
// samples/s.
var (
	bedSteep, bedHigh = 0.93, 0.965
	// bedSampleRate is a worker's measured samples per second of compute
	// (wall time inside Gradient) at bedBaseCores.
	bedSampleRate = 1219.5
)

// bedScenario is one scenario of the live bed: per worker its quota in
// cores and its link in bit/s each way.
type bedScenario struct {
	Name     string
	Cores    []float64
	RateBits []float64
}

func (s bedScenario) workers() int { return len(s.Cores) }

// bedScenarios are the live bed's scenarios (PROTOCOL-live.md §1).
func bedScenarios() []bedScenario {
	four := func(v float64) []float64 { return []float64{v, v, v, v} }
	return []bedScenario{
		{Name: "homogeneous", Cores: four(bedBaseCores), RateBits: four(bedRate)},
		{Name: "straggler", Cores: []float64{bedBaseCores / 4, bedBaseCores, bedBaseCores, bedBaseCores}, RateBits: four(bedRate)},
		{Name: "slow-link", Cores: four(bedBaseCores), RateBits: []float64{bedRate / 4, bedRate, bedRate, bedRate}},
	}
}

func bedScenarioByName(name string) (bedScenario, error) {
	var names []string
	for _, s := range bedScenarios() {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return bedScenario{}, fmt.Errorf("unknown live-bed scenario %q (have %s)", name, strings.Join(names, ", "))
}

// bedFlags are the live bed's command-line modes.
type bedFlags struct {
	run, sel, twin, report bool
	duration               time.Duration
}

func (f *bedFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.run, "live-bed", false, "the live bed (PROTOCOL-live.md, root only): workers as processes under CPU quotas and tbf links; -scenario (straggler, slow-link, homogeneous), -policies, -seeds (a list), -out; appends to <out>/live-runs.csv")
	fs.BoolVar(&f.sel, "live-bed-select", false, "the live bed's selection run (seed 0, homogeneous, BSP): targets and compute rate")
	fs.BoolVar(&f.twin, "live-bed-sim", false, "the live bed's simulated twins: the same scenario, policies and seeds in ps/sim; appends to <out>/sim-runs.csv")
	fs.BoolVar(&f.report, "live-bed-report", false, "the live-against-simulated tables from <out>/live-runs.csv and <out>/sim-runs.csv")
	fs.DurationVar(&f.duration, "live-bed-duration", 0, "override a live-bed run's cap (tests); 0 means the protocol's")
}

func (f bedFlags) any() bool { return f.run || f.sel || f.twin || f.report }

// bedPolicyLR is a policy's learning rate: study v3's family rates
// (FlexRR's, the undamped-asynchronous family's, from v3's amendment 4:
// PROTOCOL-live.md, amendment 2).
func bedPolicyLR(spec policySpec) float64 {
	if lr, ok := v3CNN.LR[spec.Family]; ok {
		return lr
	}
	return v3CNN.LR[averagedSync]
}

// bedSyncOptB is Sync-opt's backups on the bed: the number of stragglers
// (one; study v3's candidates were {1, 2, 3, stragglers} of 12 workers,
// and on 4 workers b = 1 is the only one that leaves a majority).
const bedSyncOptB = 1

// bedSpec is spec as run on the bed (Sync-opt with bedSyncOptB).
func bedSpec(spec policySpec) policySpec {
	if spec.Name == "sync-opt" {
		spec.Source = fmt.Sprintf("sync-opt with b=%d backup worker (the number of stragglers)", bedSyncOptB)
		spec.New = syncOpt(bedSyncOptB)
	}
	return spec
}

// bedTopology is what every policy is told of the cluster: nw workers on
// hosts of one core each, equal speed priors at bedSampleRate (the
// policies measure the real speeds themselves).
func bedTopology(nw int) (straggler.Model, error) {
	c := straggler.DefaultHeteroConfig(nw)
	c.DefaultCores = 1
	c.BaseRate = cmpOr(bedSampleRate, 1000)
	return straggler.NewHetero(c)
}

func cmpOr(x, def float64) float64 {
	if x > 0 {
		return x
	}
	return def
}

// ---------------------------------------------------------------------
// The worker process.

// bedWorkerEnv carries a worker process's spec (JSON); a program that
// finds it runs as a bed worker (bedWorkerMain).
const bedWorkerEnv = "FALCON_STUDY_BED_WORKER"

type bedWorkerSpec struct {
	ID, Workers int
	Peers       map[string]string
	Secret      string // hex
	Seed        uint64
	Listen      string
	MaxWall     time.Duration // the process exits after this whatever happens
}

// bedReportPrefix starts the line a worker prints when it stops;
// bedReadyLine is the line it prints when its data and model are loaded
// (it then waits for a line on stdin before joining).
const (
	bedReportPrefix = "bedworker "
	bedReadyLine    = "bedworker-ready"
)

// bedWorkerMain runs this process as a bed worker when bedWorkerEnv is
// set: it returns false at once otherwise. The worker loads the seed's
// training rows, joins the cluster at the given peers and trains until
// SIGTERM (or its MaxWall), then prints one line: samples computed, wall
// seconds inside Gradient, process CPU seconds and wall seconds from its
// first Gradient to the stop.
func bedWorkerMain() (bool, error) {
	js := os.Getenv(bedWorkerEnv)
	if js == "" {
		return false, nil
	}
	var s bedWorkerSpec
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		return true, fmt.Errorf("bed worker spec: %w", err)
	}
	return true, runBedWorker(s)
}

// countingModel counts a worker's computed samples and its wall time
// inside Gradient (one compute goroutine: no overlap).
type countingModel struct {
	inner           ps.Model
	samples, busyNs atomic.Int64
	firstNs         atomic.Int64 // unix ns of the first call
	cpuAtFirst      atomic.Int64 // process CPU ns at the first call
	once            sync.Once
}

func (c *countingModel) Gradient(params []float32, samples []int, grad []float32) float64 {
	c.once.Do(func() {
		c.firstNs.Store(time.Now().UnixNano())
		c.cpuAtFirst.Store(int64(cputime.Process()))
	})
	t0 := time.Now()
	loss := c.inner.Gradient(params, samples, grad)
	c.busyNs.Add(int64(time.Since(t0)))
	c.samples.Add(int64(len(samples)))
	return loss
}

func runBedWorker(s bedWorkerSpec) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	ctx, cancelWall := context.WithTimeout(ctx, s.MaxWall)
	defer cancelWall()
	dir, err := mnist.Locate()
	if err != nil {
		return err
	}
	train, _, err := bedData(dir, s.Seed)
	if err != nil {
		return err
	}
	m, err := newCNN(train)
	if err != nil {
		return err
	}
	secret, err := hex.DecodeString(s.Secret)
	if err != nil {
		return err
	}
	// Loaded: tell the caller and wait for its word, so that every
	// worker joins at about the same time (a straggler under 1/16 core
	// loads MNIST for seconds while the others would already train).
	fmt.Println(bedReadyLine)
	goLine := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(os.Stdin).ReadString('\n')
		goLine <- err
	}()
	select {
	case err := <-goLine:
		if err != nil {
			return fmt.Errorf("waiting for the caller's go: %w", err)
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	peers := map[transport.NodeID]string{}
	for k, v := range s.Peers {
		peers[transport.NodeID(k)] = v
	}
	id := ps.WorkerNode(s.ID)
	c, err := ps.NewCluster(ctx, ps.ClusterConfig{
		Servers: 1, Workers: s.Workers, TCP: true, Local: []transport.NodeID{id},
		Listen: s.Listen, Peers: peers, Secret: secret,
		EPSP:  epsp.Config{Batch: bedBatch, Parallelism: 1},
		Chunk: bedChunk, ProgressEvery: 1, StartTimeout: time.Minute,
	})
	if err != nil {
		return err
	}
	defer c.Close()
	keys, lens := bedKeys(m.NumParams())
	cm := &countingModel{inner: ps.FromModel(m, train)}
	_, terr := c.Train(ctx, cm, newLiveSampler(train.N, s.Workers, s.Seed), ps.TrainConfig{Keys: keys, Lens: lens, Clocks: 1 << 16})
	cpu := float64(int64(cputime.Process())-cm.cpuAtFirst.Load()) / 1e9
	wall := float64(time.Now().UnixNano()-cm.firstNs.Load()) / 1e9
	if cm.firstNs.Load() == 0 {
		cpu, wall = 0, 0
	}
	fmt.Printf("%ssamples=%d compute_s=%.4f cpu_s=%.4f wall_s=%.4f\n", bedReportPrefix, cm.samples.Load(), float64(cm.busyNs.Load())/1e9, cpu, wall)
	if terr != nil && ctx.Err() == nil {
		return terr
	}
	return nil
}

// bedData is the seed's training and evaluation rows (the study's
// sampling rule: PCG(seed, 0xd474), training rows first).
func bedData(dir string, seed uint64) (train, test *model.Dataset, err error) {
	tr, te, err := mnist.Load(dir)
	if err != nil {
		return nil, nil, err
	}
	rng := mrand.New(mrand.NewPCG(seed, 0xd474))
	return tr.Sample(bedTrain, rng), te.Sample(bedTest, rng), nil
}

// bedKeys cuts n parameters into keys of liveKeyLen values.
func bedKeys(n int) (keys []uint64, lens []int) {
	for off, k := 0, uint64(0); off < n; off, k = off+liveKeyLen, k+1 {
		keys = append(keys, k)
		lens = append(lens, min(liveKeyLen, n-off))
	}
	return keys, lens
}

// ---------------------------------------------------------------------
// One live run.

// bedRun is one run's record (a row of live-runs.csv).
type bedRun struct {
	Scenario, Policy string
	Seed             uint64
	LR               float64
	TSteep, THigh    float64 // s from the workers' start; +Inf if never
	End              float64 // s of training measured
	FinalAcc         float64
	Clocks           []int     // releases per worker
	Samples          []int     // samples each worker computed
	Compute          []float64 // s inside Gradient per worker
	CPU              []float64 // process CPU s per worker over its training span
	Wall             []float64 // each worker's training span, s
	Throttled        []float64 // s its cgroup was throttled
	Load1            float64   // load average at the start
	Note             string    // why it ended, or what failed
	Evals            []float64 // accuracy per evaluation (every bedEvery)
}

// coresGot is worker w's CPU over its training span, in cores.
func (r *bedRun) coresGot(w int) float64 { return r.CPU[w] / r.Wall[w] }

// rate is worker w's samples per second of compute.
func (r *bedRun) rate(w int) float64 { return float64(r.Samples[w]) / r.Compute[w] }

// bedObserver counts each worker's releases (clocks) and notes the time
// of the first: the run's start. It also counts the transfers the
// coordinator ordered, the givers accepted and the takers finished (the
// run's note gives them).
type bedObserver struct {
	mu                      sync.Mutex
	releases                []int
	first                   time.Time
	ordered, accepted, done int
}

func (b *bedObserver) Observe(e event.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e.Kind {
	case event.Release:
		if b.first.IsZero() {
			b.first = time.Now()
		}
		if int(e.Worker) < len(b.releases) {
			b.releases[e.Worker]++
		}
	case event.TransferOrdered:
		b.ordered++
	case event.TransferResult:
		if e.Result.Accepted {
			b.accepted++
		}
	case event.TransferDone:
		b.done++
	}
}

// syncBuf is a process's output, safe to read while it runs; ready is
// closed when the output holds bedReadyLine.
type syncBuf struct {
	mu    sync.Mutex
	b     bytes.Buffer
	ready chan struct{}
	seen  bool
}

func newSyncBuf() *syncBuf { return &syncBuf{ready: make(chan struct{})} }

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	if !s.seen && bytes.Contains(s.b.Bytes(), []byte(bedReadyLine+"\n")) {
		s.seen = true
		close(s.ready)
	}
	return n, err
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runBedOne makes a bed, runs one policy on it for seed and removes the
// bed. stopAt > 0 stops the run once the smoothed accuracy reaches it;
// the run otherwise lasts d.
func runBedOne(ctx context.Context, exe, mnistDir string, sc bedScenario, spec policySpec, seed uint64, stopAt float64, d time.Duration) (*bedRun, error) {
	nw := sc.workers()
	train, test, err := bedData(mnistDir, seed)
	if err != nil {
		return nil, err
	}
	m, err := newCNN(train)
	if err != nil {
		return nil, err
	}
	topo, err := bedTopology(nw)
	if err != nil {
		return nil, err
	}
	pol, err := spec.New(topo, nw)
	if err != nil {
		return nil, err
	}
	lr := bedPolicyLR(spec)
	run := &bedRun{Scenario: sc.Name, Policy: spec.Name, Seed: seed, LR: lr, TSteep: math.Inf(1), THigh: math.Inf(1),
		Clocks: make([]int, nw), Samples: make([]int, nw), Compute: make([]float64, nw), CPU: make([]float64, nw),
		Wall: make([]float64, nw), Throttled: make([]float64, nw), Load1: loadAvg()}

	bed, err := testbed.New(testbed.Config{Ports: nw, RateBits: sc.RateBits, Cores: sc.Cores, Period: bedPeriod, Shares: bedShares})
	if err != nil {
		return nil, err
	}
	defer bed.Close()

	var sec [32]byte
	if _, err := rand.Read(sec[:]); err != nil {
		return nil, err
	}
	peers := map[transport.NodeID]string{}
	for w := range nw {
		peers[ps.WorkerNode(w)] = fmt.Sprintf("%s:%d", bed.Addr(w), bedWorkerPort)
	}
	obs := &bedObserver{releases: make([]int, nw)}
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	cluster, err := ps.NewCluster(cctx, ps.ClusterConfig{
		Servers: 1, Workers: nw, TCP: true, Local: []transport.NodeID{ps.CoordinatorNode, ps.ServerNode(0)},
		Listen: testbed.ControlAddr + ":0", Peers: peers, Secret: sec[:], Policy: pol, Observer: obs,
		EPSP:  epsp.Config{Batch: bedBatch, Parallelism: 1},
		Store: store.Config{Optimizer: store.SGD{LR: float32(lr)}},
		Chunk: bedChunk, ProgressEvery: 1, StartTimeout: time.Minute, CloseTimeout: 5 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	closeCluster := sync.OnceFunc(func() { cluster.Close() })
	defer closeCluster()
	keys, lens := bedKeys(m.NumParams())
	init := make(liveInit, m.NumParams())
	m.Init(init, mrand.New(mrand.NewPCG(seed, 0x1417)))
	eval := cluster.Client()
	if err := eval.InitWith(cctx, keys, lens, init); err != nil {
		return nil, err
	}
	wspec := bedWorkerSpec{Workers: nw, Secret: hex.EncodeToString(sec[:]), Seed: seed, MaxWall: d + 2*time.Minute,
		Peers: map[string]string{
			string(ps.CoordinatorNode): cluster.Addr(ps.CoordinatorNode),
			string(ps.ServerNode(0)):   cluster.Addr(ps.ServerNode(0)),
		}}
	for n, a := range peers {
		wspec.Peers[string(n)] = a
	}
	cmds := make([]*exec.Cmd, nw)
	outs := make([]*syncBuf, nw)
	stdins := make([]io.WriteCloser, nw)
	done := make([]chan error, nw)
	stopWorkers := func() {
		for w, c := range cmds {
			if c != nil && c.Process != nil {
				_ = c.Process.Signal(syscall.SIGTERM)
				_ = w
			}
		}
	}
	waitWorkers := func() {
		for w, c := range cmds {
			if c == nil {
				continue
			}
			select {
			case <-done[w]:
			case <-time.After(15 * time.Second):
				_ = c.Process.Kill()
				<-done[w]
				run.Note += fmt.Sprintf(" worker %d killed after 15 s;", w)
			}
		}
	}
	defer func() { stopWorkers(); waitWorkers() }()
	for w := range nw {
		s := wspec
		s.ID = w
		s.Listen = peers[ps.WorkerNode(w)]
		js, _ := json.Marshal(s)
		c := bed.Command(w, exe)
		c.Env = append(os.Environ(), bedWorkerEnv+"="+string(js), mnist.EnvDir+"="+mnistDir, "GOMAXPROCS=1")
		outs[w] = newSyncBuf()
		c.Stdout, c.Stderr = outs[w], outs[w]
		if stdins[w], err = c.StdinPipe(); err != nil {
			return nil, err
		}
		if err := c.Start(); err != nil {
			return nil, fmt.Errorf("start worker %d: %w", w, err)
		}
		cmds[w] = c
		done[w] = make(chan error, 1)
		go func() { done[w] <- c.Wait() }()
	}
	readyBy := time.After(90 * time.Second)
	for w := range nw {
		select {
		case <-outs[w].ready:
		case e := <-done[w]:
			done[w] <- e
			return nil, fmt.Errorf("worker %d exited before it was ready: %v (%s)", w, e, workerOutputs(outs))
		case <-readyBy:
			return nil, fmt.Errorf("workers not ready in 90 s (%s)", workerOutputs(outs))
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	for w := range nw {
		if _, err := io.WriteString(stdins[w], "go\n"); err != nil {
			return nil, fmt.Errorf("worker %d: go: %w", w, err)
		}
	}
	wctx, wcancel := context.WithTimeout(cctx, 90*time.Second)
	err = cluster.Coordinator().WaitWorkers(wctx)
	wcancel()
	if err != nil {
		return nil, fmt.Errorf("workers did not join: %w (%s)", err, workerOutputs(outs))
	}
	// The run starts at the coordinator's first release (an asynchronous
	// policy releases each worker as it joins).
	joined := time.Now()
	obs.mu.Lock()
	start := obs.first
	obs.mu.Unlock()
	if start.IsZero() {
		start = joined
	}
	run.Note += fmt.Sprintf(" joined %.2fs after the first release;", joined.Sub(start).Seconds())
	params := make([]float32, m.NumParams())
	em := m.Clone()
	var accs []float64
	var times []float64
	next := joined
	for {
		at := time.Since(start)
		if err := eval.Pull(cctx, keys, params, lens); err != nil {
			run.Note += fmt.Sprintf(" evaluator pull: %v;", err)
			break
		}
		_, acc := em.Evaluate(params, test, nil)
		accs = append(accs, acc)
		times = append(times, at.Seconds())
		if t := windowTime(accs, times, bedSteep); !math.IsInf(t, 1) && math.IsInf(run.TSteep, 1) {
			run.TSteep = t
		}
		if t := windowTime(accs, times, stopAt); stopAt > 0 && !math.IsInf(t, 1) {
			run.THigh = t
			run.Note += " reached the target;"
			break
		}
		if at >= d {
			run.Note += fmt.Sprintf(" cap %v;", d)
			break
		}
		if err := cluster.Coordinator().Err(); err != nil {
			run.Note += fmt.Sprintf(" coordinator: %v;", err)
			break
		}
		exited := -1
		for w := range nw {
			select {
			case e := <-done[w]:
				done[w] <- e
				exited = w
			default:
			}
		}
		if exited >= 0 {
			run.Note += fmt.Sprintf(" worker %d exited early: %s;", exited, lastLine(outs[exited]))
			break
		}
		next = next.Add(bedEvery)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Until(next)):
		}
	}
	run.End = time.Since(start).Seconds()
	run.Evals = accs
	if k := len(accs); k > 0 {
		run.FinalAcc = accs[k-1]
	}
	obs.mu.Lock()
	copy(run.Clocks, obs.releases)
	if obs.ordered > 0 {
		run.Note += fmt.Sprintf(" transfers ordered %d, accepted %d, done %d;", obs.ordered, obs.accepted, obs.done)
	}
	obs.mu.Unlock()
	for w := range nw {
		_, thr := bed.Throttled(w)
		run.Throttled[w] = thr.Seconds()
	}
	stopWorkers()
	waitWorkers()
	closeCluster()
	for w := range nw {
		if err := parseWorkerReport(outs[w].String(), w, run); err != nil {
			run.Note += fmt.Sprintf(" worker %d: %v;", w, err)
		}
	}
	run.Note = strings.TrimSpace(run.Note)
	cmds = nil // waited
	return run, nil
}

// windowTime is the study's time to target: the first evaluation where
// the mean of the last studyWindow accuracies reaches target (+Inf if
// never, or no target).
func windowTime(accs, times []float64, target float64) float64 {
	if !(target > 0) {
		return math.Inf(1)
	}
	for i := studyWindow - 1; i < len(accs); i++ {
		var sum float64
		for _, a := range accs[i+1-studyWindow : i+1] {
			sum += a
		}
		if sum/float64(studyWindow) >= target {
			return times[i]
		}
	}
	return math.Inf(1)
}

func parseWorkerReport(out string, w int, r *bedRun) error {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), bedReportPrefix)
		if !ok {
			continue
		}
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("report %q: %v", line, err)
			}
			switch k {
			case "samples":
				r.Samples[w] = int(x)
			case "compute_s":
				r.Compute[w] = x
			case "cpu_s":
				r.CPU[w] = x
			case "wall_s":
				r.Wall[w] = x
			}
		}
		return nil
	}
	return fmt.Errorf("no report (output: %s)", lastLine(bytes.NewBufferString(out)))
}

func lastLine(b fmt.Stringer) string {
	s := strings.TrimSpace(b.String())
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

func workerOutputs(outs []*syncBuf) string {
	var parts []string
	for w, b := range outs {
		if b != nil {
			parts = append(parts, fmt.Sprintf("worker %d: %s", w, lastLine(b)))
		}
	}
	return strings.Join(parts, "; ")
}

// loadAvg is the machine's 1-minute load average (NaN if unreadable).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return math.NaN()
	}
	x, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return math.NaN()
	}
	return x
}

// ctlGroup puts the calling process in a CPU cgroup of weight
// bedCtlShares without a quota (cgroup v1 only; nothing elsewhere), so
// that its server, coordinator and evaluator are not starved by the
// machine's other work; the returned function moves it back and removes
// the group.
func ctlGroup() (func(), error) {
	root := "/sys/fs/cgroup/cpu"
	if _, err := os.Stat(filepath.Join(root, "cpu.shares")); err != nil {
		return func() {}, nil
	}
	dir := filepath.Join(root, fmt.Sprintf("fls%d-ctl", os.Getpid()%100000))
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return nil, err
	}
	undo := func() {
		_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644)
		for range 20 {
			if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.shares"), []byte(strconv.Itoa(bedCtlShares)), 0o644); err != nil {
		undo()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		undo()
		return nil, err
	}
	return undo, nil
}

// ---------------------------------------------------------------------
// CSV of the live runs.

var bedRunHeader = []string{"scenario", "policy", "seed", "lr", "t_steep_s", "t_high_s", "end_s", "final_acc",
	"clocks", "samples", "compute_s", "cpu_s", "wall_s", "throttled_s", "cores_got", "rate_sps", "load1", "note", "evals"}

func joinF(xs []float64, prec int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', prec, 64)
	}
	return strings.Join(s, ";")
}

func joinI(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ";")
}

func splitF(s string) []float64 {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ";")
	out := make([]float64, len(parts))
	for i, p := range parts {
		out[i], _ = strconv.ParseFloat(p, 64)
	}
	return out
}

func splitI(s string) []int {
	fs := splitF(s)
	out := make([]int, len(fs))
	for i, f := range fs {
		out[i] = int(f)
	}
	return out
}

func (r *bedRun) record() []string {
	nw := len(r.Samples)
	got, rate := make([]float64, nw), make([]float64, nw)
	for w := range nw {
		got[w], rate[w] = r.coresGot(w), r.rate(w)
	}
	return []string{r.Scenario, r.Policy, strconv.FormatUint(r.Seed, 10), csvF(r.LR), csvF(r.TSteep), csvF(r.THigh), csvF(r.End), csvF(r.FinalAcc),
		joinI(r.Clocks), joinI(r.Samples), joinF(r.Compute, 3), joinF(r.CPU, 3), joinF(r.Wall, 3), joinF(r.Throttled, 3),
		joinF(got, 4), joinF(rate, 1), csvF(r.Load1), r.Note, joinF(r.Evals, 4)}
}

func parseBedRun(rec []string) (*bedRun, error) {
	if len(rec) != len(bedRunHeader) {
		return nil, fmt.Errorf("live-runs.csv: %d fields, want %d", len(rec), len(bedRunHeader))
	}
	f := func(s string) float64 {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return math.NaN()
		}
		return x
	}
	seed, err := strconv.ParseUint(rec[2], 10, 64)
	if err != nil {
		return nil, err
	}
	return &bedRun{Scenario: rec[0], Policy: rec[1], Seed: seed, LR: f(rec[3]), TSteep: f(rec[4]), THigh: f(rec[5]), End: f(rec[6]),
		FinalAcc: f(rec[7]), Clocks: splitI(rec[8]), Samples: splitI(rec[9]), Compute: splitF(rec[10]), CPU: splitF(rec[11]),
		Wall: splitF(rec[12]), Throttled: splitF(rec[13]), Load1: f(rec[16]), Note: rec[17], Evals: splitF(rec[18])}, nil
}

// appendCSV appends one record to path, writing header first when the
// file is new.
func appendCSV(path string, header, rec []string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if errors.Is(statErr, os.ErrNotExist) {
		_ = w.Write(header)
	}
	_ = w.Write(rec)
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readCSV(path string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) > 0 {
		rows = rows[1:]
	}
	return rows, nil
}
