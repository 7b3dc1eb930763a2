package sim

import (
	"fmt"
	"time"

	"github.com/falconml/falcon/straggler"
)

// Scenario is one cluster of the convergence study: where the workers run
// and how fast they are. The suite ([Scenarios]) was fixed before any
// policy was compared on it; every policy runs on the same scenario with
// the same model, data, batch size, learning rate and target.
type Scenario struct {
	Name string
	// Why says what real situation the scenario stands for.
	Why string
	// Hetero is the heterogeneity model's configuration.
	Hetero straggler.HeteroConfig
	// Parallelism is every worker's initial number of compute goroutines.
	Parallelism int
	// Workers is the cluster size; zero means SuiteWorkers. It equals
	// Hetero.NumWorkers.
	Workers int
	// Foreign is a foreign job on some hosts (see [ForeignConfig]); only
	// [Scenario.Model] models it.
	Foreign ForeignConfig
	// Contention, when enabled, replaces the speed model's Amdahl curve
	// with a USL curve and an oversubscription cost ([Contended]); only
	// [Scenario.Model] models it, and not with a foreign job.
	Contention ContentionConfig
	// SlowLink gives some workers a link of this fraction of the others'
	// (CostModel.SlowLink); it needs a cost model with links.
	SlowLink map[int]float64
}

// NumWorkers is the scenario's cluster size.
func (s Scenario) NumWorkers() int {
	if s.Workers == 0 {
		return SuiteWorkers
	}
	return s.Workers
}

// Speed builds the scenario's heterogeneity model. A scenario with a
// foreign job cannot be expressed by a [straggler.Hetero] alone: Speed
// then fails with ErrConfig, and [Scenario.Model] must be used.
func (s Scenario) Speed() (*straggler.Hetero, error) {
	if s.Foreign.Enabled() {
		return nil, fmt.Errorf("%w: scenario %q has a foreign job; use Scenario.Model", ErrConfig, s.Name)
	}
	return straggler.NewHetero(s.Hetero)
}

// Model builds the scenario's heterogeneity model, with its foreign job if
// it has one ([Foreign]); otherwise the [straggler.Hetero] of Speed.
func (s Scenario) Model() (straggler.Model, error) {
	h, err := straggler.NewHetero(s.Hetero)
	if err != nil {
		return nil, err
	}
	if h.NumWorkers() != s.NumWorkers() {
		return nil, fmt.Errorf("%w: scenario %q: %d workers in the speed model, %d in the scenario", ErrConfig, s.Name, h.NumWorkers(), s.NumWorkers())
	}
	if s.Contention.Enabled() {
		if s.Foreign.Enabled() {
			return nil, fmt.Errorf("%w: scenario %q: Contention with a foreign job is not modelled", ErrConfig, s.Name)
		}
		return NewContended(h, s.Contention)
	}
	if !s.Foreign.Enabled() {
		return h, nil
	}
	return NewForeign(h, s.Foreign)
}

// Suite constants. All of them are ours: Falcon's evaluation setup is not
// public (baselines-params.md §6) and FlexRR's injected-straggler
// parameters were not found (§1).
const (
	// SuiteWorkers is the cluster size: 12 workers, two per host.
	SuiteWorkers = 12
	// SuiteParallelism is the initial thread pool of every worker: 4
	// goroutines, so two workers fill an 8-core host. Policies without a
	// parallelism knob keep it; EPSP may move cores between the two
	// workers of a host but never adds hardware.
	SuiteParallelism = 4
	// suiteBaseRate is the samples/s of one goroutine at speed 1. It
	// stands for the per-sample cost of a network heavier than the
	// softmax regression the simulator actually trains (about 1 ms per
	// sample per core, a small CNN on a CPU core); the simulated time is
	// what such a cluster would take, the gradient math is the real
	// model's.
	suiteBaseRate = 1000
)

// suiteHosts places worker w of n on host w/2.
func suiteHosts(n int) []int {
	h := make([]int, n)
	for w := range h {
		h[w] = w / 2
	}
	return h
}

func suiteHetero(seed uint64) straggler.HeteroConfig { return suiteHeteroN(SuiteWorkers, seed) }

func suiteHeteroN(n int, seed uint64) straggler.HeteroConfig {
	return straggler.HeteroConfig{
		NumWorkers: n, BaseRate: suiteBaseRate, Hosts: suiteHosts(n),
		DefaultCores: 8, Seed: seed,
	}
}

// transientSlowdowns is the suite's FlexRR-style injection (our values):
// in every 2 s slot each worker independently, with probability 0.25,
// becomes 4x slower for 0.5 s at a random offset, so about 0.75 of the 12
// workers are slowed at any moment and a slowdown spans tens of clocks.
var transientSlowdowns = straggler.TransientConfig{
	Prob: 0.25, Period: 2 * time.Second, Duration: 500 * time.Millisecond, Factor: 0.25,
}

// Scenarios returns the scenario suite: homogeneous, static, straggler,
// transient and mixed. seed seeds the transient slowdowns.
func Scenarios(seed uint64) []Scenario {
	homo := suiteHetero(seed)

	static := suiteHetero(seed)
	static.Cores = []int{2, 2, 4, 4, 8, 8}

	strag := suiteHetero(seed)
	strag.Persistent = map[int]float64{0: 0.25}

	trans := suiteHetero(seed)
	trans.Transient = transientSlowdowns

	mixed := suiteHetero(seed)
	mixed.Cores = []int{4, 4, 8, 8, 8, 8}
	mixed.Persistent = map[int]float64{6: 0.5}
	mixed.Transient = straggler.TransientConfig{
		Prob: 0.15, Period: 2 * time.Second, Duration: 500 * time.Millisecond, Factor: 0.25,
	}

	return []Scenario{
		{Name: "homogeneous", Hetero: homo, Parallelism: SuiteParallelism,
			Why: "6 identical 8-core hosts, two workers each: a dedicated, uniform cluster; the control case where no policy should gain from straggler handling"},
		{Name: "static", Hetero: static, Parallelism: SuiteParallelism,
			Why: "hosts of 1x, 2x and 4x cores (2, 4 and 8 cores, two workers each, 4-goroutine pools oversubscribing the small hosts): a cluster assembled from machines of different sizes, as in shared or cloud fleets"},
		{Name: "straggler", Hetero: strag, Parallelism: SuiteParallelism,
			Why: "one persistent straggler 4x slower (a throttled or faulty machine, or a permanent noisy neighbour), sharing its host with a normal worker"},
		{Name: "transient", Hetero: trans, Parallelism: SuiteParallelism,
			Why: "random transient slowdowns (FlexRR-style injection with our parameters: p=0.25 per worker per 2 s, 4x slower for 0.5 s): interference from co-located jobs, GC pauses, OS noise"},
		{Name: "mixed", Hetero: mixed, Parallelism: SuiteParallelism,
			Why: "hosts of 4 and 8 cores, one worker persistently 2x slower, and transient 4x slowdowns (p=0.15 per 2 s, 0.5 s): the superposition seen in shared production clusters"},
	}
}

// WideWorkers is the cluster size of the study's scale scenario
// ("mixed-36"): 36 workers on 18 hosts.
const WideWorkers = 36

// StudyScenarios returns the scenarios of the study v2 protocol
// (cmd/falcon-study/PROTOCOL.md, 2026-12-01): the five of [Scenarios],
// then several-stragglers, spare-cores, spare-cores-control, foreign and
// mixed-36. seed seeds the transient slowdowns and the foreign job's
// phases. All values are ours.
func StudyScenarios(seed uint64) []Scenario {
	out := Scenarios(seed)
	for i := range out {
		out[i].Workers = SuiteWorkers
	}

	several := suiteHetero(seed)
	several.Persistent = map[int]float64{0: 0.5, 4: 1.0 / 3, 8: 0.25}

	spare := suiteHetero(seed)
	spare.Cores = []int{16, 16, 16, 8, 8, 8}

	foreign := suiteHetero(seed)

	wide := suiteHeteroN(WideWorkers, seed)
	wide.Cores = make([]int, WideWorkers/2)
	for h := range wide.Cores {
		wide.Cores[h] = 8
		if h < WideWorkers/6 {
			wide.Cores[h] = 4 // a third of the hosts, as in mixed
		}
	}
	wide.Persistent = map[int]float64{12: 0.5, 18: 0.5, 24: 0.5}
	wide.Transient = straggler.TransientConfig{
		Prob: 0.15, Period: 2 * time.Second, Duration: 500 * time.Millisecond, Factor: 0.25,
	}

	return append(out,
		Scenario{Name: "several-stragglers", Hetero: several, Parallelism: SuiteParallelism, Workers: SuiteWorkers,
			Why: "three persistent stragglers, 2x, 3x and 4x slower, on three different hosts: more slow machines than Sync-opt's one backup worker can hide"},
		Scenario{Name: "spare-cores", Hetero: spare, Parallelism: SuiteParallelism, Workers: SuiteWorkers,
			Why: "three 16-core and three 8-core hosts, two workers each with the default 4 goroutines: a job sized for the small machines leaves 8 cores idle on each large one"},
		Scenario{Name: "spare-cores-control", Hetero: spare, Parallelism: 2 * SuiteParallelism, Workers: SuiteWorkers,
			Why: "the spare-cores cluster with every worker at 8 goroutines (cores/2 of the large hosts; on the 8-core hosts 16 goroutines share 8 cores, which the contention model prices as 4 each): the baselines given the hardware that elastic parallelism can claim"},
		Scenario{Name: "foreign", Hetero: foreign, Parallelism: SuiteParallelism, Workers: SuiteWorkers,
			Foreign: ForeignConfig{Hosts: []int{1, 3}, Threads: 8, On: 1500 * time.Millisecond, Off: 1500 * time.Millisecond, Seed: seed},
			Why:     "the homogeneous cluster with another tenant's 8-thread job that runs 1.5 s and leaves 1.5 s on hosts 1 and 3 (seeded phases): four workers fall to the fair share of their cores, 2 of 4, while it runs"},
		Scenario{Name: "mixed-36", Hetero: wide, Parallelism: SuiteParallelism, Workers: WideWorkers,
			Why: "the mixed scenario at 36 workers on 18 hosts (a third with 4 cores, three workers 2x slower, transient 4x slowdowns with p=0.15 per 2 s): whether the policies' behaviour holds at three times the scale"},
	)
}

// SlowLinkFraction is the slow-link scenario's link speed relative to
// the others' (ours: as the straggler scenario's compute straggler, 4x
// slower).
const SlowLinkFraction = 0.25

// CostScenarios returns the scenarios that need a cost model with links
// (CostModel.ServerBandwidth > 0): "slow-link", the homogeneous cluster
// with worker 0's link at SlowLinkFraction of the others'.
func CostScenarios(seed uint64) []Scenario {
	return []Scenario{{Name: "slow-link", Hetero: suiteHetero(seed), Parallelism: SuiteParallelism, Workers: SuiteWorkers,
		SlowLink: map[int]float64{0: SlowLinkFraction},
		Why:      "6 identical 8-core hosts with worker 0's network link 4x slower than the others' (a degraded NIC, a congested top-of-rack port or a cross-rack path): a network straggler, where every other scenario's straggler is a compute straggler"}}
}

// ScenarioByName returns the study scenario ([StudyScenarios]) or cost
// scenario ([CostScenarios]) called name.
func ScenarioByName(name string, seed uint64) (Scenario, error) {
	var names []string
	for _, s := range append(StudyScenarios(seed), CostScenarios(seed)...) {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return Scenario{}, fmt.Errorf("%w: unknown scenario %q (have %v)", ErrConfig, name, names)
}
