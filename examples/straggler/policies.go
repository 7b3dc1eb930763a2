package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/straggler"
)

// Study parameters shared by every policy. They were fixed before the
// comparison was run; none is tuned per policy.
const (
	// sspStaleness is the bound of the plain SSP baseline and of
	// EPSP's slack mode (ours: a common SSP setting; the paper gives no
	// value for slack EPSP).
	sspStaleness = 3

	// simNoise is the simulator's per-round compute-time noise
	// (sim.Config.ComputeNoise), calibrated on the live runtime, not on any
	// ranking: live, the homogeneous scenario under BSP spends 0.029 of
	// worker time blocked (mean of seeds 1-3, `-live -scenario homogeneous
	// -policies bsp -seeds 3`) because equal workers finish a clock a few
	// ms apart; the noiseless simulator spends 0, and a round CV of 0.05
	// gives 0.028 (0.10: 0.055, 0.20: 0.106). It was added after the first
	// multi-seed live comparison showed that equal simulated workers run in
	// lockstep, which live workers never do; see the README.
	simNoise = 0.05
)

// simLatency is the simulator's one-way latency of a message (pull, push,
// transfer order and answer; sim.Network.Latency), calibrated like
// simNoise on the live runtime's throughput and not on any ranking: live,
// homogeneous BSP completes 5172 clocks in 10 s (mean of seeds 1-3, the
// same command as for simNoise), the simulator with sim.DefaultConfig's
// 100 µs 5420; each clock of the in-process runtime carries about a
// millisecond more of messaging, serialisation and coordinator work than
// the default network model. 600 µs gives 5184 (400 µs: 5279, 700 µs:
// 5137, 1 ms: 5010).
const simLatency = 600 * time.Microsecond

// policySpec names a policy and builds a fresh value of it for one run.
type policySpec struct {
	Name string // the short name printed in result lines
	// Source says where the defaults come from.
	Source string
	New    func(topo straggler.Model, workers int) (epsp.Policy, error)
}

// allPolicies lists every policy of the study in the order of the table.
// Baselines run at the defaults documented in
// shared/research/baselines-params.md.
func allPolicies() []policySpec {
	return []policySpec{
		{"bsp", "barrier per clock", func(straggler.Model, int) (epsp.Policy, error) { return epsp.NewBSP(), nil }},
		{"asp", "apply on arrival, never wait", func(straggler.Model, int) (epsp.Policy, error) { return epsp.NewASP(), nil }},
		{"ssp", fmt.Sprintf("s=%d (ours)", sspStaleness), func(straggler.Model, int) (epsp.Policy, error) { return epsp.NewSSP(sspStaleness), nil }},
		{"flexrr", "s=1, phi=0.5 of tail, helpee <=0.9 done (flexps reproduction)", func(straggler.Model, int) (epsp.Policy, error) {
			return epsp.NewFlexRR(epsp.DefaultFlexRRConfig())
		}},
		{"sync-opt", "b=max(1,round(0.04*M)) backup workers, drop stale (Chen et al. 96+4)", func(straggler.Model, int) (epsp.Policy, error) {
			return epsp.NewSyncOpt(epsp.DefaultSyncOptConfig())
		}},
		{"consgd", "lambda=1/M, SSP gate s=3 (both ours, unverified)", func(straggler.Model, int) (epsp.Policy, error) {
			return epsp.NewConSGD(epsp.DefaultConSGDConfig())
		}},
		{"dynsgd", "scale 1/(d+1), window 1, no gate (dist-keras rule)", func(straggler.Model, int) (epsp.Policy, error) {
			return epsp.NewDynSGD(epsp.DefaultDynSGDConfig())
		}},
		{"lb-bsp", "batch b_i proportional to EWMA speed (alpha=0.5), sum fixed", func(straggler.Model, int) (epsp.Policy, error) {
			return epsp.NewLBBSP(epsp.DefaultLBBSPConfig())
		}},
		{"dssp", "staleness range [3,15] (TF reimplementation)", func(straggler.Model, int) (epsp.Policy, error) {
			return epsp.NewDSSP(epsp.DefaultDSSPConfig())
		}},
		{"epsp-enforced", "s=0, elastic parallelism + task transfer", func(topo straggler.Model, _ int) (epsp.Policy, error) {
			c := epsp.DefaultEPSPConfig()
			c.Topology = topo
			return epsp.NewEPSP(c)
		}},
		{"epsp-slack", fmt.Sprintf("s=%d, elastic parallelism + task transfer", sspStaleness), func(topo straggler.Model, _ int) (epsp.Policy, error) {
			c := epsp.DefaultEPSPConfig()
			c.Staleness = sspStaleness
			c.Topology = topo
			return epsp.NewEPSP(c)
		}},
	}
}

// ablationPolicies are EPSP-enforced with one mechanism switched off. They
// are not part of "all"; name them in -policies.
func ablationPolicies() []policySpec {
	mk := func(elastic, transfer bool) func(straggler.Model, int) (epsp.Policy, error) {
		return func(topo straggler.Model, _ int) (epsp.Policy, error) {
			c := epsp.DefaultEPSPConfig()
			c.Elastic, c.Transfer, c.Topology = elastic, transfer, topo
			return epsp.NewEPSP(c)
		}
	}
	return []policySpec{
		{"epsp-enforced-noelastic", "s=0, task transfer only", mk(false, true)},
		{"epsp-enforced-notransfer", "s=0, elastic parallelism only", mk(true, false)},
	}
}

// selectPolicies returns the specs named in a comma-separated list ("all"
// for every one of the study; the ablations only by name).
func selectPolicies(list string) ([]policySpec, error) {
	if list == "" || list == "all" {
		return allPolicies(), nil
	}
	all := append(allPolicies(), ablationPolicies()...)
	var out []policySpec
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, p := range all {
			if p.Name == name {
				out = append(out, p)
				found = true
			}
		}
		if !found {
			var names []string
			for _, p := range all {
				names = append(names, p.Name)
			}
			return nil, fmt.Errorf("unknown policy %q (have %s)", name, strings.Join(names, ", "))
		}
	}
	return out, nil
}
