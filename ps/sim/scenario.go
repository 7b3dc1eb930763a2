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
}

// Speed builds the scenario's heterogeneity model.
func (s Scenario) Speed() (*straggler.Hetero, error) { return straggler.NewHetero(s.Hetero) }

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

// suiteHosts places worker w on host w/2.
func suiteHosts() []int {
	h := make([]int, SuiteWorkers)
	for w := range h {
		h[w] = w / 2
	}
	return h
}

func suiteHetero(seed uint64) straggler.HeteroConfig {
	return straggler.HeteroConfig{
		NumWorkers: SuiteWorkers, BaseRate: suiteBaseRate, Hosts: suiteHosts(),
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

// ScenarioByName returns the suite scenario called name.
func ScenarioByName(name string, seed uint64) (Scenario, error) {
	var names []string
	for _, s := range Scenarios(seed) {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return Scenario{}, fmt.Errorf("%w: unknown scenario %q (have %v)", ErrConfig, name, names)
}
