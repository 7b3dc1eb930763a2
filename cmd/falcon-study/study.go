package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/falconml/falcon/internal/cputime"
	"github.com/falconml/falcon/internal/study"
	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/model/mnist"
	"github.com/falconml/falcon/ps/sim"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/straggler"
)

// The study v2 (PROTOCOL.md, 2026-12-01). Every constant below is the
// protocol's; none may change after a comparison has been seen.
const (
	studyTrain  = 20000
	studyTest   = 2000
	studyBatch  = 64
	studyChunk  = 2
	studyEvery  = 50 * time.Millisecond
	studyWindow = 5
	// studyBandwidth is sim.DefaultConfig's network bandwidth, bytes/s.
	studyBandwidth = 125e6
	// sampleBytes is what moving one MNIST sample costs: 784 float32
	// pixels and a label byte.
	sampleBytes = 784*4 + 1
	// lrSeed is the seed of the learning-rate selection (not a study
	// seed).
	lrSeed = 0
)

// lrGrid is the learning-rate grid of the selection (PROTOCOL.md §2).
var lrGrid = []float64{0.1, 0.3, 1, 3}

// studySeeds are the study's seeds (PROTOCOL.md §5).
var studySeeds = []uint64{1, 2, 3, 4, 5}

// workload is one model of the study. Steep, High and LR are the output of
// the learning-rate selection (-study -lr-select), recorded in RESULTS.md;
// zero means not selected yet, and the study refuses to run.
type workload struct {
	Name     string
	Model    string // "softmax" or "mlp"
	Hidden   int
	Duration time.Duration
	Steep    float64
	High     float64
	LR       map[family]float64
	// Tuned, when not nil, holds a learning rate per (scenario, policy)
	// that replaces the family's (-lr-from, PROTOCOL.md amendment 7).
	Tuned map[tuneKey]float64

	// Study v3 (PROTOCOL-v3.md); the zero values keep study v2's
	// settings.
	//
	// Every is the evaluation period; zero means studyEvery.
	Every time.Duration
	// EvalN evaluates on the first EvalN rows of the seed's test sample;
	// zero means all of them.
	EvalN int
	// Stop ends a run at its high target (sim.Config.StopAtTarget);
	// steps/s, blocked fraction and the ideal are then over the run's
	// own span.
	Stop bool
	// Cost, when not nil, is the workload's cost model and speed-up
	// curve, replacing the -cost-net and -curve flags.
	Cost *costOptions
	// Protocol names the protocol the workload belongs to, for the
	// tables' title; empty means study v2's PROTOCOL.md.
	Protocol string
}

// every is the workload's evaluation period.
func (w workload) every() time.Duration {
	if w.Every > 0 {
		return w.Every
	}
	return studyEvery
}

// costOpts is the workload's cost model, or the flags' when it has none.
func (w workload) costOpts(flags costOptions) costOptions {
	if w.Cost != nil {
		return *w.Cost
	}
	return flags
}

// studyWorkloads are the study's workloads (PROTOCOL.md §1). Steep, High
// and LR are the selection's results (RESULTS.md, 2026-12-01).
var studyWorkloads = []workload{
	{Name: "softmax", Model: "softmax", Duration: 5 * time.Second,
		Steep: 0.7, High: 0.865, LR: map[family]float64{averagedSync: 1, dampedAsync: 1, undampedAsync: 3}},
	{Name: "mlp", Model: "mlp", Hidden: 64, Duration: 10 * time.Second,
		Steep: 0.72, High: 0.885, LR: map[family]float64{averagedSync: 0.3, dampedAsync: 0.3, undampedAsync: 0.1}},
}

func (w workload) selected() bool {
	if !(w.Steep > 0 && w.High > w.Steep) {
		return false
	}
	for _, f := range families {
		if !(w.LR[f] > 0) {
			return false
		}
	}
	return true
}

// extraWorkloads are workloads outside the v2 protocol, run only when
// named (-workload cnn); they have no selected learning rates or targets
// yet, so the study refuses them until -lr-select's are recorded here.
var extraWorkloads = []workload{
	{Name: "cnn", Model: "cnn", Duration: 10 * time.Second},
}

func (w workload) newModel(d *model.Dataset) (model.Model, error) {
	switch w.Model {
	case "mlp":
		return model.NewMLP(d.D, w.Hidden, d.Classes), nil
	case "cnn":
		return newCNN(d)
	}
	return model.NewSoftmax(d.D, d.Classes), nil
}

// studyJob is one simulation of the study.
type studyJob struct {
	wl       workload
	scenario string
	spec     policySpec
	seed     uint64
	lr       float64
}

// studyRun is the outcome of one simulation.
type studyRun struct {
	Workload, Scenario, Policy string
	Family                     family
	Seed                       uint64
	LR                         float64
	Steep, High                float64 // targets
	TSteep, THigh              float64 // seconds, +Inf if not reached
	Clocks                     int
	Ideal                      float64 // ideal clocks in Duration
	Duration                   float64 // seconds
	Blocked                    float64
	Transfers                  int
	Moved                      int // samples computed by a non-owner
	Dropped, PChanges          int
	FinalAcc, MeanAcc          float64
	Wall, CPU                  float64 // seconds
	Diverged                   bool    // study v3: the run ended on a non-finite step
	Evals                      []sim.EvalPoint
}

func (r *studyRun) stepsPerSec() float64 { return float64(r.Clocks) / r.Duration }
func (r *studyRun) pctIdeal() float64    { return 100 * float64(r.Clocks) / r.Ideal }

// parseSeeds reads a seed list: "N" (N seeds from first), "a-b" or
// "a,b,c".
func parseSeeds(s string, first uint64) ([]uint64, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 {
			return nil, fmt.Errorf("-seeds %d: want >= 1", n)
		}
		out := make([]uint64, n)
		for i := range out {
			out[i] = first + uint64(i)
		}
		return out, nil
	}
	var out []uint64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if a, b, ok := strings.Cut(part, "-"); ok {
			lo, err1 := strconv.ParseUint(a, 10, 64)
			hi, err2 := strconv.ParseUint(b, 10, 64)
			if err1 != nil || err2 != nil || hi < lo || hi-lo > 1000 {
				return nil, fmt.Errorf("-seeds: bad range %q", part)
			}
			for k := lo; k <= hi; k++ {
				out = append(out, k)
			}
			continue
		}
		k, err := strconv.ParseUint(part, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("-seeds: bad seed %q", part)
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// selectWorkloads returns the named workloads ("all" for both).
func selectWorkloads(list string) ([]workload, error) {
	if list == "" || list == "all" {
		return slices.Clone(studyWorkloads), nil
	}
	var out []workload
	for _, name := range strings.Split(list, ",") {
		all := append(slices.Clone(studyWorkloads), extraWorkloads...)
		i := slices.IndexFunc(all, func(w workload) bool { return w.Name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("unknown workload %q (have softmax, mlp, cnn)", name)
		}
		out = append(out, all[i])
	}
	return out, nil
}

// selectScenarios returns the named study scenarios ("all" for every one).
func selectScenarios(list string) ([]string, error) {
	var all []string
	for _, sc := range sim.StudyScenarios(1) {
		all = append(all, sc.Name)
	}
	if list == "" || list == "all" {
		return all, nil
	}
	named := slices.Clone(all)
	for _, sc := range sim.CostScenarios(1) {
		named = append(named, sc.Name) // by name only: they need a cost model
	}
	var out []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(named, name) {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", name, strings.Join(named, ", "))
		}
		out = append(out, name)
	}
	return out, nil
}

// dataCache holds the seeded MNIST samples, one per seed, shared read-only
// by the simulations.
type dataCache struct {
	train, test   *model.Dataset // the whole of MNIST
	nTrain, nTest int            // rows sampled per seed
	mu            sync.Mutex
	bySeed        map[uint64][2]*model.Dataset
}

func loadMNIST() (*dataCache, error) {
	dir, err := mnist.Locate()
	if err != nil {
		return nil, fmt.Errorf("the study needs MNIST (PROTOCOL.md §1): %w", err)
	}
	train, test, err := mnist.Load(dir)
	if err != nil {
		return nil, err
	}
	return &dataCache{train: train, test: test, nTrain: studyTrain, nTest: studyTest, bySeed: map[uint64][2]*model.Dataset{}}, nil
}

// get returns seed's sample: the same rule as the main run's loadData.
func (c *dataCache) get(seed uint64) (train, test *model.Dataset) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.bySeed[seed]; ok {
		return d[0], d[1]
	}
	rng := rand.New(rand.NewPCG(seed, 0xd474))
	train = c.train.Sample(c.nTrain, rng)
	test = c.test.Sample(c.nTest, rng)
	c.bySeed[seed] = [2]*model.Dataset{train, test}
	return train, test
}

// idealClocks is PROTOCOL.md §7's ideal: ∫₀ᴰ M/(M·B/Σ_w r_w(t) + m) dt
// with every worker on host h at cores(h)/n_h goroutines, the noiseless
// rates of m (with core contention if m models it) and msg the messages
// of one clock.
//
// scale is the cost model's ComputeScale (speed-model samples per
// trained sample; 1 without one).
func idealClocks(m straggler.Model, batch int, msg, d time.Duration, scale float64) float64 {
	n := m.NumWorkers()
	perHost := make([]int, m.NumHosts())
	for w := range n {
		perHost[m.Host(w)]++
	}
	ps := make([]int, n)
	for w := range ps {
		h := m.Host(w)
		ps[w] = max(1, m.Cores(h)/perHost[h])
	}
	ra, contention := m.(interface {
		RateAll(ps []int, now time.Duration, dst []float64) []float64
	})
	var rates []float64
	var total float64
	for t := time.Duration(0); t < d; {
		var sum float64
		if contention {
			rates = ra.RateAll(ps, t, rates)
			for _, r := range rates {
				sum += r
			}
		} else {
			for w := range n {
				sum += m.Rate(w, ps[w], t)
			}
		}
		next := d
		for w := range n {
			next = min(next, m.NextChange(w, t))
		}
		if next <= t {
			next = d
		}
		if sum > 0 {
			total += float64(n) / (float64(n*batch)*scale/sum + msg.Seconds()) * (next - t).Seconds()
		}
		t = next
	}
	return total
}

// runStudyJob runs one simulation.
func runStudyJob(o options, data *dataCache, j studyJob) (*studyRun, error) {
	sc, err := sim.ScenarioByName(j.scenario, j.seed)
	if err != nil {
		return nil, err
	}
	speed, err := sc.Model()
	if err != nil {
		return nil, err
	}
	spec := o.specFor(j.scenario, j.spec)
	pol, err := spec.New(speed, sc.NumWorkers())
	if err != nil {
		return nil, err
	}
	train, test := data.get(j.seed)
	m, err := j.wl.newModel(train)
	if err != nil {
		return nil, err
	}
	copts := j.wl.costOpts(o.cost)
	sc, err = copts.withCurve(sc)
	if err != nil {
		return nil, err
	}
	if sc.Contention.Enabled() {
		if speed, err = sc.Model(); err != nil {
			return nil, err
		}
		if pol, err = spec.New(speed, sc.NumWorkers()); err != nil {
			return nil, err
		}
	}
	cfg := sim.DefaultConfig()
	cfg.Workers = sc.NumWorkers()
	cfg.Batch = studyBatch
	cfg.Chunk = studyChunk
	cfg.Parallelism = sc.Parallelism
	cfg.ComputeNoise = simNoise
	cfg.Network = sim.Network{Latency: simLatency, Bandwidth: studyBandwidth}
	cfg.LR = float32(j.lr)
	cfg.Duration = j.wl.Duration
	cfg.EvalEvery = j.wl.every()
	cfg.EvalSamples = j.wl.EvalN
	cfg.Target = j.wl.High
	cfg.TargetWindow = studyWindow
	cfg.StopAtTarget = j.wl.Stop && j.wl.High > 0
	cfg.Seed = j.seed
	var sample time.Duration
	if cfg.Cost, sample, err = copts.costModel(sc, m, speed); err != nil {
		return nil, err
	}
	wall := time.Now()
	cpu := threadCPU()
	res, err := sim.Run(cfg, sim.Job{Model: m, Train: train, Test: test, Speed: speed, Policy: pol})
	if err != nil {
		if j.wl.Protocol == "" || !errors.Is(err, store.ErrNonFinite) {
			return nil, err
		}
		// Study v3: a run whose step is not finite diverged; it never
		// reaches a target (PROTOCOL-v3.md §2).
		return &studyRun{Workload: j.wl.Name, Scenario: j.scenario, Policy: j.spec.Name, Family: j.spec.Family,
			Seed: j.seed, LR: j.lr, Steep: j.wl.Steep, High: j.wl.High, TSteep: math.Inf(1), THigh: math.Inf(1),
			Duration: cfg.Duration.Seconds(), Ideal: math.NaN(), Diverged: true,
			Wall: time.Since(wall).Seconds(), CPU: (threadCPU() - cpu).Seconds()}, nil
	}
	span := cfg.Duration
	if j.wl.Stop && res.End > 0 {
		span = res.End
	}
	r := &studyRun{
		Workload: j.wl.Name, Scenario: j.scenario, Policy: j.spec.Name, Family: j.spec.Family,
		Seed: j.seed, LR: j.lr, Steep: j.wl.Steep, High: j.wl.High,
		Duration: span.Seconds(), Blocked: res.BlockedFraction(), Transfers: res.AcceptedTransfers(),
		Dropped: res.Dropped, PChanges: res.Stats.ParallelismChanges, FinalAcc: res.FinalAccuracy,
		Evals: res.Evals, Wall: time.Since(wall).Seconds(), CPU: (threadCPU() - cpu).Seconds(),
	}
	r.TSteep, r.THigh = targetSeconds(res.Evals, j.wl.Steep), targetSeconds(res.Evals, j.wl.High)
	for _, w := range res.Workers {
		r.Clocks += w.Clocks
		r.Moved += w.Taken
	}
	for _, e := range res.Evals {
		r.MeanAcc += e.Accuracy / float64(len(res.Evals))
	}
	msg := 2 * cfg.Network.Delay(4*m.NumParams())
	scale := 1.0
	if cfg.Cost.Enabled() {
		// the cost model: a lone worker's pull and push, and compute
		// scaled to the network's per-sample time
		est, err := sim.EstimateStep(cfg, nil, sample)
		if err != nil {
			return nil, err
		}
		msg = est.Alone
		if cfg.Cost.ComputeScale > 0 {
			scale = cfg.Cost.ComputeScale
		}
	}
	r.Ideal = idealClocks(speed, studyBatch, msg, span, scale)
	return r, nil
}

// targetSeconds is the protocol's time to target (+Inf if never; 0 or
// less means no target).
func targetSeconds(evals []sim.EvalPoint, target float64) float64 {
	if !(target > 0) {
		return math.Inf(1)
	}
	// The mean of each window is summed afresh, in order, exactly as the
	// simulator's own test that stops a run at its target
	// (sim.Config.StopAtTarget); sim.TargetTime's running sum can differ
	// from it in the last bit when a window's mean equals the target, and
	// then a run stopped at its target read as never reaching it
	// (PROTOCOL-v3.md amendment 2).
	for i := studyWindow - 1; i < len(evals); i++ {
		var sum float64
		for _, e := range evals[i+1-studyWindow : i+1] {
			sum += e.Accuracy
		}
		if sum/float64(studyWindow) >= target {
			return evals[i].Time.Seconds()
		}
	}
	return math.Inf(1)
}

// runJobs runs the jobs on o.jobs goroutines, printing one progress line
// per finished simulation to progress. Results come back in job order.
func runJobs(o options, data *dataCache, jobs []studyJob, progress io.Writer) ([]*studyRun, error) {
	return runJobsThen(o, data, jobs, progress, nil)
}

// runJobsThen is runJobs calling onDone (under a lock, in completion
// order) with every finished simulation.
func runJobsThen(o options, data *dataCache, jobs []studyJob, progress io.Writer, onDone func(*studyRun)) ([]*studyRun, error) {
	out := make([]*studyRun, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var mu sync.Mutex
	done := 0
	start := time.Now()
	var wg sync.WaitGroup
	for range max(o.jobs, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lockThread()
			for i := range next {
				r, err := runStudyJob(o, data, jobs[i])
				mu.Lock()
				done++
				j := jobs[i]
				if err != nil {
					errs[i] = fmt.Errorf("%s/%s/%s seed %d lr %g: %w", j.wl.Name, j.scenario, j.spec.Name, j.seed, j.lr, err)
					fmt.Fprintf(progress, "[%d/%d] %s %s %s seed=%d lr=%g: ERROR %v\n", done, len(jobs), j.wl.Name, j.scenario, j.spec.Name, j.seed, j.lr, err)
				} else {
					out[i] = r
					if onDone != nil {
						onDone(r)
					}
					tt := "targets after the selection"
					if j.wl.High > 0 {
						tt = fmt.Sprintf("steep %s high %s", fmtT(r.TSteep), fmtT(r.THigh))
					}
					fmt.Fprintf(progress, "[%d/%d] %s %s %s seed=%d lr=%g: %s, steps/s %.0f (%.0f%% of ideal), blocked %.3f, mean acc %.3f, %.1fs cpu, %s elapsed\n",
						done, len(jobs), j.wl.Name, j.scenario, j.spec.Name, j.seed, j.lr, tt,
						r.stepsPerSec(), r.pctIdeal(), r.Blocked, r.MeanAcc, r.CPU, time.Since(start).Round(time.Second))
				}
				mu.Unlock()
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	return out, errors.Join(errs...)
}

// runStudy is -study: the learning-rate selection with -lr-select, the
// study otherwise.
func runStudy(o options) error {
	specs, err := selectPolicies(o.policies)
	if err != nil {
		return err
	}
	if o.jobs < 1 {
		return fmt.Errorf("-j %d: want >= 1", o.jobs)
	}
	var wls []workload
	if o.v3 {
		if o.workloads != "all" && o.workloads != "cnn" {
			return fmt.Errorf("-v3: the workload is cnn (PROTOCOL-v3.md cuts the MLP)")
		}
		if o.cost != (costOptions{}) && o.cost != defaultCostFlags() {
			return fmt.Errorf("-v3 fixes the cost model (PROTOCOL-v3.md §1): drop the cost flags")
		}
		if o.lrSelect {
			data, err := loadMNIST()
			if err != nil {
				return err
			}
			return lrSelectV3(o, data)
		}
		wls = []workload{v3CNN}
	} else if wls, err = selectWorkloads(o.workloads); err != nil {
		return err
	}
	if o.lrSelect {
		data, err := loadMNIST()
		if err != nil {
			return err
		}
		return lrSelectWith(o, data, wls, specs)
	}
	for _, wl := range wls {
		if !wl.selected() {
			return fmt.Errorf("workload %s: no selected learning rates and targets; run -study -lr-select and record them in studyWorkloads (PROTOCOL.md §2)", wl.Name)
		}
	}
	scs, err := selectScenarios(o.scenario)
	if err != nil {
		return err
	}
	if o.lrTune {
		data, err := loadMNIST()
		if err != nil {
			return err
		}
		return tuneLRWith(o, data, wls, scs, specs)
	}
	if o.lrFrom != "" {
		if err := readTuned(o.lrFrom, wls, scs, specs); err != nil {
			return err
		}
	}
	seeds := studySeeds
	if o.seedList != "" {
		if seeds, err = parseSeeds(o.seedList, o.seed); err != nil {
			return err
		}
	}
	if o.from != "" {
		return renderFrom(o, wls, scs, seeds, specs)
	}
	data, err := loadMNIST()
	if err != nil {
		return err
	}
	return studyWith(o, data, wls, scs, seeds, specs)
}

// studyWith runs the study's simulations for the given subset and writes
// its outputs.
func studyWith(o options, data *dataCache, wls []workload, scs []string, seeds []uint64, specs []policySpec) error {
	var jobs []studyJob
	for _, wl := range wls {
		for _, sc := range scs {
			for _, seed := range seeds {
				for _, spec := range specs {
					jobs = append(jobs, studyJob{wl: wl, scenario: sc, spec: spec, seed: seed, lr: wl.lrFor(sc, spec)})
				}
			}
		}
	}
	cpu0 := cputime.Process()
	t0 := time.Now()
	fmt.Fprintf(os.Stderr, "study: %d simulations (%d workloads x %d scenarios x %d seeds x %d policies), -j %d\n", len(jobs), len(wls), len(scs), len(seeds), len(specs), o.jobs)
	// runs.csv is rewritten in job order at the end.
	runs, err := runJobsRecording(o, data, jobs, "runs.csv")
	if err != nil {
		return err
	}
	cost := costOf(runs, cputime.Process()-cpu0, time.Since(t0))
	subset := subsetLabel(o, wls, scs, seeds, specs)
	return writeStudy(o, wls, scs, seeds, specs, runs, cost, subset)
}

// runJobsRecording runs jobs as runJobs does and writes each finished
// run as a row of the runs.csv-shaped file name in o.out as it ends, so
// that an interrupted run leaves its finished rows (render them with
// -from).
func runJobsRecording(o options, data *dataCache, jobs []studyJob, name string) ([]*studyRun, error) {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	pf, pw, err := createIn(o.out, name)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(pw, runsHeader)
	runs, err := runJobsThen(o, data, jobs, os.Stderr, func(r *studyRun) {
		writeRunRow(pw, r)
		pw.Flush()
	})
	if cerr := closeOut(pf, pw); err == nil {
		err = cerr
	}
	return runs, err
}

// subsetLabel says which part of the full study ran ("" for all of it).
func subsetLabel(o options, wls []workload, scs []string, seeds []uint64, specs []policySpec) string {
	var parts []string
	if len(wls) < len(studyWorkloads) {
		var names []string
		for _, w := range wls {
			names = append(names, w.Name)
		}
		parts = append(parts, "workload "+strings.Join(names, ","))
	}
	if len(scs) < len(sim.StudyScenarios(1)) {
		parts = append(parts, "scenarios "+strings.Join(scs, ","))
	}
	if !slices.Equal(seeds, studySeeds) {
		parts = append(parts, fmt.Sprintf("seeds %v", seeds))
	}
	if o.policies != "" && o.policies != "all" {
		parts = append(parts, "policies "+o.policies)
	}
	return strings.Join(parts, "; ")
}

type studyCost struct {
	Sims             int
	ProcessCPU, Wall time.Duration
	SimCPU           map[string]float64 // workload -> summed CPU s of its simulations
	SimCount         map[string]int
}

func costOf(runs []*studyRun, cpu, wall time.Duration) studyCost {
	c := studyCost{Sims: len(runs), ProcessCPU: cpu, Wall: wall, SimCPU: map[string]float64{}, SimCount: map[string]int{}}
	for _, r := range runs {
		c.SimCPU[r.Workload+"/"+r.Scenario] += r.CPU
		c.SimCount[r.Workload+"/"+r.Scenario]++
		c.SimCPU[r.Workload] += r.CPU
		c.SimCount[r.Workload]++
	}
	return c
}

func (c studyCost) perSim(key string) float64 {
	if c.SimCount[key] == 0 {
		return math.NaN()
	}
	return c.SimCPU[key] / float64(c.SimCount[key])
}

// ---- outputs ----

func createIn(dir, name string) (*os.File, *bufio.Writer, error) {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return nil, nil, err
	}
	return f, bufio.NewWriter(f), nil
}

func closeOut(f *os.File, bw *bufio.Writer) error {
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func csvF(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case math.IsNaN(v):
		return "nan"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

const runsHeader = "workload,scenario,policy,family,seed,lr,target_steep,target_high,t_steep_s,t_high_s,steps,steps_per_s,ideal_steps,pct_ideal,blocked_frac,transfers,moved_samples,moved_bytes,dropped,p_changes,final_acc,mean_acc,duration_s,wall_s,cpu_s"

func writeRunsCSV(w io.Writer, runs []*studyRun) {
	fmt.Fprintln(w, runsHeader)
	for _, r := range runs {
		writeRunRow(w, r)
	}
}

func writeRunRow(w io.Writer, r *studyRun) {
	fmt.Fprintf(w, "%s,%s,%s,%s,%d,%s,%s,%s,%s,%s,%d,%s,%s,%s,%s,%d,%d,%d,%d,%d,%s,%s,%s,%s,%s\n",
		r.Workload, r.Scenario, r.Policy, r.Family, r.Seed, csvF(r.LR), csvF(r.Steep), csvF(r.High), csvF(r.TSteep), csvF(r.THigh),
		r.Clocks, csvF(r.stepsPerSec()), csvF(r.Ideal), csvF(r.pctIdeal()), csvF(r.Blocked), r.Transfers, r.Moved, r.Moved*sampleBytes,
		r.Dropped, r.PChanges, csvF(r.FinalAcc), csvF(r.MeanAcc), csvF(r.Duration), csvF(r.Wall), csvF(r.CPU))
}

func writeEvalsCSV(w io.Writer, runs []*studyRun) {
	fmt.Fprintln(w, "workload,scenario,policy,seed,lr,time_s,accuracy,loss,version")
	for _, r := range runs {
		for _, e := range r.Evals {
			fmt.Fprintf(w, "%s,%s,%s,%d,%s,%s,%s,%s,%d\n", r.Workload, r.Scenario, r.Policy, r.Seed, csvF(r.LR),
				csvF(e.Time.Seconds()), csvF(e.Accuracy), csvF(e.Loss), e.Version)
		}
	}
}

// cell gathers the runs of one workload, scenario and policy by seed.
type cell struct {
	bySeed map[uint64]*studyRun
}

func (c *cell) series(seeds []uint64, f func(*studyRun) float64) []float64 {
	var out []float64
	for _, s := range seeds {
		if r, ok := c.bySeed[s]; ok {
			out = append(out, f(r))
		}
	}
	return out
}

type cells map[[3]string]*cell

func index(runs []*studyRun) cells {
	cs := cells{}
	for _, r := range runs {
		k := [3]string{r.Workload, r.Scenario, r.Policy}
		if cs[k] == nil {
			cs[k] = &cell{bySeed: map[uint64]*studyRun{}}
		}
		cs[k].bySeed[r.Seed] = r
	}
	return cs
}

func (cs cells) median(wl, sc, pol string, seeds []uint64, f func(*studyRun) float64) float64 {
	c := cs[[3]string{wl, sc, pol}]
	if c == nil {
		return math.NaN()
	}
	return study.Median(c.series(seeds, f))
}

// comparison is one row of compare.csv.
type comparison struct {
	Workload, Scenario, Target, Candidate, Baseline string
	BaseMedian, CandMedian                          float64
	Iv                                              study.Interval
	Verdict                                         study.Verdict
}

func tSteep(r *studyRun) float64 { return r.TSteep }
func tHigh(r *studyRun) float64  { return r.THigh }

var targets = []struct {
	name string
	f    func(*studyRun) float64
}{{"steep", tSteep}, {"high", tHigh}}

// compareAll pairs every candidate with every other policy.
func compareAll(cs cells, wls []workload, scs []string, seeds []uint64, specs []policySpec) ([]comparison, error) {
	var out []comparison
	cfg := study.DefaultBootstrapConfig()
	for _, wl := range wls {
		for _, sc := range scs {
			for _, tg := range targets {
				for _, cand := range specs {
					if !cand.Candidate {
						continue
					}
					cc := cs[[3]string{wl.Name, sc, cand.Name}]
					for _, base := range specs {
						bc := cs[[3]string{wl.Name, sc, base.Name}]
						if base.Name == cand.Name || cc == nil || bc == nil {
							continue
						}
						var b, c []float64
						for _, s := range seeds {
							br, ok1 := bc.bySeed[s]
							cr, ok2 := cc.bySeed[s]
							if ok1 && ok2 {
								b = append(b, tg.f(br))
								c = append(c, tg.f(cr))
							}
						}
						if len(b) == 0 {
							continue
						}
						iv, v, err := study.Compare(b, c, cfg)
						if err != nil {
							return nil, err
						}
						out = append(out, comparison{wl.Name, sc, tg.name, cand.Name, base.Name, study.Median(b), study.Median(c), iv, v})
					}
				}
			}
		}
	}
	return out, nil
}

func pct(v float64) string {
	switch {
	case math.IsInf(v, -1):
		return "−inf"
	case math.IsNaN(v):
		return "n/a"
	}
	return fmt.Sprintf("%.1f", 100*v)
}

func writeStudy(o options, wls []workload, scs []string, seeds []uint64, specs []policySpec, runs []*studyRun, cost studyCost, subset string) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	cs := index(runs)
	comps, err := compareAll(cs, wls, scs, seeds, specs)
	if err != nil {
		return err
	}
	// runs.csv, evals.csv
	for name, write := range map[string]func(io.Writer){
		"runs.csv":  func(w io.Writer) { writeRunsCSV(w, runs) },
		"evals.csv": func(w io.Writer) { writeEvalsCSV(w, runs) },
	} {
		f, bw, err := createIn(o.out, name)
		if err != nil {
			return err
		}
		write(bw)
		if err := closeOut(f, bw); err != nil {
			return err
		}
	}
	// summary.csv
	f, bw, err := createIn(o.out, "summary.csv")
	if err != nil {
		return err
	}
	fmt.Fprintln(bw, "workload,scenario,policy,family,lr,seeds,t_steep_median_s,t_high_median_s,steps_per_s_median,pct_ideal_median,blocked_median,transfers_median,moved_bytes_median,dropped_median,p_changes_median,final_acc_median,cpu_s_mean")
	for _, wl := range wls {
		for _, sc := range scs {
			for _, sp := range specs {
				c := cs[[3]string{wl.Name, sc, sp.Name}]
				if c == nil {
					continue
				}
				med := func(f func(*studyRun) float64) string { return csvF(study.Median(c.series(seeds, f))) }
				cpus := c.series(seeds, func(r *studyRun) float64 { return r.CPU })
				var cpuMean float64
				for _, x := range cpus {
					cpuMean += x / float64(len(cpus))
				}
				fmt.Fprintf(bw, "%s,%s,%s,%s,%s,%d,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", wl.Name, sc, sp.Name, sp.Family, csvF(wl.lrFor(sc, sp)), len(cpus),
					med(tSteep), med(tHigh), med((*studyRun).stepsPerSec), med((*studyRun).pctIdeal), med(func(r *studyRun) float64 { return r.Blocked }),
					med(func(r *studyRun) float64 { return float64(r.Transfers) }), med(func(r *studyRun) float64 { return float64(r.Moved * sampleBytes) }),
					med(func(r *studyRun) float64 { return float64(r.Dropped) }), med(func(r *studyRun) float64 { return float64(r.PChanges) }),
					med(func(r *studyRun) float64 { return r.FinalAcc }), csvF(cpuMean))
			}
		}
	}
	if err := closeOut(f, bw); err != nil {
		return err
	}
	// compare.csv
	if f, bw, err = createIn(o.out, "compare.csv"); err != nil {
		return err
	}
	fmt.Fprintln(bw, "workload,scenario,target,candidate,baseline,seeds,t_base_median_s,t_cand_median_s,reduction_median,ci_lo,ci_hi,verdict")
	for _, c := range comps {
		fmt.Fprintf(bw, "%s,%s,%s,%s,%s,%d,%s,%s,%s,%s,%s,%s\n", c.Workload, c.Scenario, c.Target, c.Candidate, c.Baseline, c.Iv.N,
			csvF(c.BaseMedian), csvF(c.CandMedian), csvF(c.Iv.Median), csvF(c.Iv.Lo), csvF(c.Iv.Hi), c.Verdict)
	}
	if err := closeOut(f, bw); err != nil {
		return err
	}
	// study.md
	if f, bw, err = createIn(o.out, "study.md"); err != nil {
		return err
	}
	writeStudyMarkdown(bw, o, wls, scs, seeds, specs, cs, comps, cost, subset)
	if err := closeOut(f, bw); err != nil {
		return err
	}
	writeStudyMarkdown(o.stdout, o, wls, scs, seeds, specs, cs, comps, cost, subset)
	fmt.Fprintf(os.Stderr, "study: wrote runs.csv, evals.csv, summary.csv, compare.csv and study.md in %s\n", o.out)
	return nil
}

func writeStudyMarkdown(w io.Writer, o options, wls []workload, scs []string, seeds []uint64, specs []policySpec, cs cells, comps []comparison, cost studyCost, subset string) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	title := "Convergence study v2 (protocol PROTOCOL.md, 2026-12-01)"
	if len(wls) > 0 && wls[0].Protocol != "" {
		title = "Convergence " + wls[0].Protocol
	}
	p("# %s\n\n", title)
	p("Command: `%s`\n\n", strings.Join(os.Args, " "))
	if subset != "" {
		p("**Subset of the full study:** %s.\n\n", subset)
	}
	if cost.Wall > 0 {
		p("Seeds %v, paired by seed. %d simulations, %.0f CPU-seconds (process), %s wall.\n\n", seeds, cost.Sims, cost.ProcessCPU.Seconds(), cost.Wall.Round(time.Second))
	} else {
		p("Seeds %v, paired by seed. %d simulations, %.0f CPU-seconds summed over the simulations (rendered from recorded runs).\n\n", seeds, cost.Sims, cost.ProcessCPU.Seconds())
	}
	for _, wl := range wls {
		p("## Workload %s (D = %v; targets: steep %.3f, high %.3f; lr: %s", wl.Name, wl.Duration, wl.Steep, wl.High, wl.familyRates())
		if wl.Tuned != nil {
			p("; **every policy at its own rate per scenario** instead, chosen by amendment 7 (%s)", o.lrFrom)
		}
		p(")\n\nCPU per simulation: %.1f s (mean over %d).\n\n", cost.perSim(wl.Name), cost.SimCount[wl.Name])
		head := func(first string) {
			p("| %s |", first)
			for _, sp := range specs {
				p(" %s |", sp.Name)
			}
			p("\n|---|")
			for range specs {
				p("---|")
			}
			p("\n")
		}
		for _, tg := range targets {
			p("### Median time to the %s target (s); bold = fastest\n\n", tg.name)
			head("scenario")
			for _, sc := range scs {
				var ts []float64
				for _, sp := range specs {
					ts = append(ts, cs.median(wl.Name, sc, sp.Name, seeds, tg.f))
				}
				best := fastest(ts)
				p("| %s |", sc)
				for _, sp := range specs {
					t := cs.median(wl.Name, sc, sp.Name, seeds, tg.f)
					if t == best && !math.IsInf(t, 1) {
						p(" **%s** |", fmtT(t))
					} else {
						p(" %s |", fmtT(t))
					}
				}
				p("\n")
			}
			p("\n")
		}
		p("### Steps/s as %% of ideal (median), blocked fraction (median)\n\n")
		head("scenario")
		for _, sc := range scs {
			p("| %s |", sc)
			for _, sp := range specs {
				p(" %.0f%% / %.2f |", cs.median(wl.Name, sc, sp.Name, seeds, (*studyRun).pctIdeal), cs.median(wl.Name, sc, sp.Name, seeds, func(r *studyRun) float64 { return r.Blocked }))
			}
			p("\n")
		}
		p("\n### Transfers and bytes moved (medians)\n\n")
		head("scenario")
		for _, sc := range scs {
			p("| %s |", sc)
			for _, sp := range specs {
				p(" %.0f / %.1f MB |", cs.median(wl.Name, sc, sp.Name, seeds, func(r *studyRun) float64 { return float64(r.Transfers) }),
					cs.median(wl.Name, sc, sp.Name, seeds, func(r *studyRun) float64 { return float64(r.Moved*sampleBytes) / 1e6 }))
			}
			p("\n")
		}
		p("\n")
		for _, cand := range specs {
			if !cand.Candidate {
				continue
			}
			p("### %s: median paired reduction %% [95 %% CI], verdict\n\n", cand.Name)
			var others []policySpec
			for _, sp := range specs {
				if sp.Name != cand.Name {
					others = append(others, sp)
				}
			}
			p("| scenario | target | strongest baseline |")
			for _, sp := range others {
				p(" vs %s |", sp.Name)
			}
			p("\n|---|---|---|")
			for range others {
				p("---|")
			}
			p("\n")
			for _, sc := range scs {
				for _, tg := range targets {
					strongest, bt := "", math.Inf(1)
					for _, sp := range specs {
						if sp.Candidate {
							continue
						}
						if t := cs.median(wl.Name, sc, sp.Name, seeds, tg.f); t < bt || strongest == "" {
							strongest, bt = sp.Name, t
						}
					}
					p("| %s | %s |", sc, tg.name)
					cellFor := func(base string) string {
						for _, c := range comps {
							if c.Workload == wl.Name && c.Scenario == sc && c.Target == tg.name && c.Candidate == cand.Name && c.Baseline == base {
								return fmt.Sprintf("%s [%s, %s] %s", pct(c.Iv.Median), pct(c.Iv.Lo), pct(c.Iv.Hi), c.Verdict)
							}
						}
						return "—"
					}
					p(" %s: %s |", strongest, cellFor(strongest))
					for _, sp := range others {
						p(" %s |", cellFor(sp.Name))
					}
					p("\n")
				}
			}
			p("\n")
		}
	}
	p("Reduction = (T_base − T_cand)/T_base per seed; median over seeds; percentile bootstrap, 10000 resamples, seed 20261201; win/loss only where the interval excludes 0. inf = target not reached within D.\n")
}

// renderFrom is -from: the tables of the runs recorded in earlier runs.csv
// files (comma-separated paths), narrowed to the selected subset; no
// simulation runs. A later row for the same simulation replaces an
// earlier one.
func renderFrom(o options, wls []workload, scs []string, seeds []uint64, specs []policySpec) error {
	keep := map[string]bool{}
	for _, w := range wls {
		keep["w/"+w.Name] = true
	}
	for _, sc := range scs {
		keep["s/"+sc] = true
	}
	for _, sp := range specs {
		keep["p/"+sp.Name] = true
	}
	byKey := map[string]*studyRun{}
	var order []string
	for _, path := range strings.Split(o.from, ",") {
		rs, err := readRunsCSV(path)
		if err != nil {
			return err
		}
		if o.v3 {
			if err := retarget(filepath.Join(filepath.Dir(path), "evals.csv"), rs); err != nil {
				return err
			}
		}
		for _, r := range rs {
			if !keep["w/"+r.Workload] || !keep["s/"+r.Scenario] || !keep["p/"+r.Policy] || !slices.Contains(seeds, r.Seed) {
				continue
			}
			k := fmt.Sprintf("%s/%s/%s/%d", r.Workload, r.Scenario, r.Policy, r.Seed)
			if byKey[k] == nil {
				order = append(order, k)
			}
			byKey[k] = r
		}
	}
	if o.v3 {
		order = completeCells(order, byKey, len(seeds), os.Stderr)
	}
	var runs []*studyRun
	var cpu float64
	for _, k := range order {
		runs = append(runs, byKey[k])
		cpu += byKey[k].CPU
	}
	if len(runs) == 0 {
		return fmt.Errorf("-from %s: no recorded simulation in the selected subset", o.from)
	}
	cost := costOf(runs, time.Duration(cpu*float64(time.Second)), 0)
	subset := subsetLabel(o, wls, scs, seeds, specs)
	if subset == "" {
		subset = "none; rendered from " + o.from
	} else {
		subset += "; rendered from " + o.from
	}
	return writeStudy(o, wls, scs, seeds, specs, runs, cost, subset)
}

// readRunsCSV reads a runs.csv written by the study.
func readRunsCSV(path string) ([]*studyRun, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) == 0 || lines[0] != runsHeader {
		return nil, fmt.Errorf("%s: not a study runs.csv (header %q)", path, lines[0])
	}
	num := func(s string) float64 {
		switch s {
		case "inf":
			return math.Inf(1)
		case "-inf":
			return math.Inf(-1)
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return math.NaN()
		}
		return v
	}
	var out []*studyRun
	ncol := len(strings.Split(runsHeader, ","))
	for i, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) != ncol {
			return nil, fmt.Errorf("%s:%d: %d fields, want %d", path, i+2, len(f), ncol)
		}
		seed, err := strconv.ParseUint(f[4], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: seed %q", path, i+2, f[4])
		}
		r := &studyRun{Workload: f[0], Scenario: f[1], Policy: f[2], Family: family(f[3]), Seed: seed,
			LR: num(f[5]), Steep: num(f[6]), High: num(f[7]), TSteep: num(f[8]), THigh: num(f[9]),
			Clocks: int(num(f[10])), Ideal: num(f[12]), Blocked: num(f[14]), Transfers: int(num(f[15])),
			Moved: int(num(f[16])), Dropped: int(num(f[18])), PChanges: int(num(f[19])),
			FinalAcc: num(f[20]), MeanAcc: num(f[21]), Duration: num(f[22]), Wall: num(f[23]), CPU: num(f[24])}
		out = append(out, r)
	}
	return out, nil
}

// completeCells keeps the runs (keys of byKey, in order) of the cells
// (workload, scenario, policy) that have all n seeds, and names the
// others on w: study v3 judges a cell only with every seed
// (PROTOCOL-v3.md §8).
func completeCells(order []string, byKey map[string]*studyRun, n int, w io.Writer) []string {
	count := map[[3]string]int{}
	for _, k := range order {
		r := byKey[k]
		count[[3]string{r.Workload, r.Scenario, r.Policy}]++
	}
	var out []string
	seen := map[[3]string]bool{}
	for _, k := range order {
		r := byKey[k]
		c := [3]string{r.Workload, r.Scenario, r.Policy}
		if count[c] >= n {
			out = append(out, k)
		} else if !seen[c] {
			seen[c] = true
			fmt.Fprintf(w, "study v3: %s/%s/%s has %d of %d seeds: not run (not judged)\n", c[0], c[1], c[2], count[c], n)
		}
	}
	return out
}

// retarget recomputes the runs' times to target from the evaluations
// recorded beside them (an evals.csv of the same study step), with
// targetSeconds (PROTOCOL-v3.md amendment 2). A run without recorded
// evaluations keeps its times; a missing file changes nothing.
func retarget(path string, rs []*studyRun) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	evals := map[string][]sim.EvalPoint{}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) == 0 || lines[0] != "workload,scenario,policy,seed,lr,time_s,accuracy,loss,version" {
		return fmt.Errorf("%s: not a study evals.csv", path)
	}
	for i, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) != 9 {
			return fmt.Errorf("%s:%d: %d fields", path, i+2, len(f))
		}
		ts, err1 := strconv.ParseFloat(f[5], 64)
		acc, err2 := strconv.ParseFloat(f[6], 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("%s:%d: bad time or accuracy", path, i+2)
		}
		k := strings.Join(f[:4], ",")
		evals[k] = append(evals[k], sim.EvalPoint{Time: time.Duration(math.Round(ts * 1e9)), Accuracy: acc})
	}
	for _, r := range rs {
		ev, ok := evals[fmt.Sprintf("%s,%s,%s,%d", r.Workload, r.Scenario, r.Policy, r.Seed)]
		if !ok {
			continue
		}
		r.TSteep, r.THigh = targetSeconds(ev, r.Steep), targetSeconds(ev, r.High)
	}
	return nil
}

// fastest is the smallest of the medians ts, skipping NaN (a cell with no
// runs): min would return NaN for the whole row, and no cell of a row
// with a missing cell would be marked fastest.
func fastest(ts []float64) float64 {
	best := math.Inf(1)
	for _, t := range ts {
		if !math.IsNaN(t) {
			best = min(best, t)
		}
	}
	return best
}
