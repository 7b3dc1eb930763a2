package main

import (
	"fmt"
	"strconv"
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

// family is an update-rule family of the study's learning-rate selection
// (PROTOCOL.md §2): the policies of a family share one learning rate.
type family string

const (
	averagedSync  family = "averaged-synchronous"
	dampedAsync   family = "damped-asynchronous"
	undampedAsync family = "undamped-asynchronous"
)

// families lists the families in the order of the tables.
var families = []family{averagedSync, dampedAsync, undampedAsync}

// policySpec names a policy and builds a fresh value of it for one run.
type policySpec struct {
	Name string // the short name printed in result lines
	// Source says where the defaults come from.
	Source string
	New    func(topo straggler.Model, workers int) (epsp.Policy, error)
	// Family is the policy's update-rule family.
	Family family
	// Candidate marks the policies the study judges (EPSP): each is
	// compared with every other policy of the run.
	Candidate bool
}

// allPolicies lists every policy of the study in the order of the table.
// Baselines run at the defaults documented in
// shared/research/baselines-params.md. Adding a policy to the study is one
// line here (name, source, constructor, family, candidate).
func allPolicies() []policySpec {
	return []policySpec{
		{"bsp", "barrier per clock", func(straggler.Model, int) (epsp.Policy, error) { return epsp.NewBSP(), nil }, averagedSync, false},
		{"asp", "apply on arrival, never wait", func(straggler.Model, int) (epsp.Policy, error) { return epsp.NewASP(), nil }, undampedAsync, false},
		{"ssp", fmt.Sprintf("s=%d (ours)", sspStaleness), func(straggler.Model, int) (epsp.Policy, error) { return epsp.NewSSP(sspStaleness), nil }, undampedAsync, false},
		{"flexrr", "s=1, phi=0.5 of tail, helpee <=0.9 done (flexps reproduction)", func(straggler.Model, int) (epsp.Policy, error) {
			return epsp.NewFlexRR(epsp.DefaultFlexRRConfig())
		}, undampedAsync, false},
		{"flexrr-behind", "flexrr, but a waiting helper also helps a helpee clocks behind (epsp.FlexRRConfig.HelpBehind; ours, amendment 4)", func(straggler.Model, int) (epsp.Policy, error) {
			c := epsp.DefaultFlexRRConfig()
			c.HelpBehind = true
			return epsp.NewFlexRR(c)
		}, undampedAsync, false},
		{"sync-opt", "b=max(1,round(0.04*M)) backup workers, drop stale (Chen et al. 96+4)", func(straggler.Model, int) (epsp.Policy, error) {
			return epsp.NewSyncOpt(epsp.DefaultSyncOptConfig())
		}, averagedSync, false},
		{"consgd", "lambda=1/M (ours, unverified), no gate as DynSGD (epsp default since 2026-12-05; RESULTS before it ran with an SSP gate s=3 of ours)", func(straggler.Model, int) (epsp.Policy, error) {
			return epsp.NewConSGD(epsp.DefaultConSGDConfig())
		}, dampedAsync, false},
		{"dynsgd", "scale 1/(d+1), window 1, no gate (dist-keras rule)", func(straggler.Model, int) (epsp.Policy, error) {
			return epsp.NewDynSGD(epsp.DefaultDynSGDConfig())
		}, dampedAsync, false},
		{"lb-bsp", "batch b_i proportional to EWMA speed (alpha=0.5), sum fixed", func(straggler.Model, int) (epsp.Policy, error) {
			return epsp.NewLBBSP(epsp.DefaultLBBSPConfig())
		}, averagedSync, false},
		{"dssp", "staleness range [3,15] (TF reimplementation)", func(straggler.Model, int) (epsp.Policy, error) {
			return epsp.NewDSSP(epsp.DefaultDSSPConfig())
		}, undampedAsync, false},
		{"epsp-v1", "today's EPSP: s=0, elastic parallelism + task transfer", epspV1(0, true, true), averagedSync, true},
		{"epsp-v1-slack", fmt.Sprintf("today's EPSP: s=%d, elastic parallelism + task transfer", sspStaleness), epspV1(sspStaleness, true, true), undampedAsync, true},
		{"epsp-v2", "clock-start planning, throughput controller, residual transfers (epsp.NewEPSPv2 defaults)", epspV2(true, true), averagedSync, true},
	}
}

// epspV2 builds EPSP v2 (epsp.NewEPSPv2) with its defaults and elastic
// control (on the scenario's topology) and residual transfers as given.
func epspV2(elastic, residual bool) func(straggler.Model, int) (epsp.Policy, error) {
	return func(topo straggler.Model, _ int) (epsp.Policy, error) {
		c := epsp.DefaultEPSPv2Config()
		if elastic {
			c.Elastic, c.Topology = true, topo
		}
		c.NoResidual = !residual
		return epsp.NewEPSPv2(c)
	}
}

// epspV1 builds today's EPSP (epsp.NewEPSP) with staleness s and the two
// mechanisms switched as given.
func epspV1(s int, elastic, transfer bool) func(straggler.Model, int) (epsp.Policy, error) {
	return func(topo straggler.Model, _ int) (epsp.Policy, error) {
		c := epsp.DefaultEPSPConfig()
		c.Staleness, c.Elastic, c.Transfer, c.Topology = s, elastic, transfer, topo
		return epsp.NewEPSP(c)
	}
}

// policyAliases maps the names earlier versions of the study used (and the
// README's older tables show) to today's.
var policyAliases = map[string]string{
	"epsp-enforced":            "epsp-v1",
	"epsp-slack":               "epsp-v1-slack",
	"epsp-enforced-noelastic":  "epsp-v1-noelastic",
	"epsp-enforced-notransfer": "epsp-v1-notransfer",
}

// ablationPolicies are epsp-v1 and epsp-v2 with one mechanism switched
// off, and EPSP v2's slack scheme (added after study v2's protocol, for
// study v3). They are not part of "all"; name them in -policies.
func ablationPolicies() []policySpec {
	return []policySpec{
		{"epsp-v1-noelastic", "s=0, task transfer only", epspV1(0, false, true), averagedSync, true},
		{"epsp-v1-notransfer", "s=0, elastic parallelism only", epspV1(0, true, false), averagedSync, true},
		{"epsp-v2-noelastic", "epsp-v2 without elastic parallelism", epspV2(false, true), averagedSync, true},
		{"epsp-v2-noresidual", "epsp-v2 without residual transfers", epspV2(true, false), averagedSync, true},
		{"epsp-v2-slack", "slack scheme: SSP gate s=3, DynSGD 1/(d+1)·b/B̄, batch sized to speed, throughput controller, residual transfers at the gate (epsp.DefaultEPSPv2SlackConfig)", epspV2Slack(epsp.DefaultSlackStaleness), dampedAsync, true},
		{"epsp-v2-slack-ungated", "slack scheme without a gate (s=-1, as DynSGD and ConSGD run): DynSGD 1/(d+1)·b/B̄, batch sized to speed, throughput controller (study v3's slack EPSP, PROTOCOL-v3.md §4)", epspV2Slack(-1), dampedAsync, true},
		{"sync-opt-b1", "sync-opt with b=1 backup worker (a candidate of study v3's selection of b)", syncOpt(1), averagedSync, false},
		{"sync-opt-b2", "sync-opt with b=2 backup workers (a candidate of study v3's selection of b)", syncOpt(2), averagedSync, false},
		{"sync-opt-b3", "sync-opt with b=3 backup workers (a candidate of study v3's selection of b)", syncOpt(3), averagedSync, false},
	}
}

// syncOpt builds Sync-opt with b backup workers.
func syncOpt(b int) func(straggler.Model, int) (epsp.Policy, error) {
	return func(straggler.Model, int) (epsp.Policy, error) {
		return epsp.NewSyncOpt(epsp.SyncOptConfig{Backup: b})
	}
}

// specFor is spec as run in scenario sc: "sync-opt" with the b that
// -syncopt-b selects for sc (study v3), spec itself otherwise.
func (o options) specFor(sc string, spec policySpec) policySpec {
	if b, ok := o.syncOptB[sc]; ok && spec.Name == "sync-opt" {
		spec.Source = fmt.Sprintf("sync-opt with b=%d backup workers (selected, -syncopt-b)", b)
		spec.New = syncOpt(b)
	}
	return spec
}

// parseSyncOptB reads -syncopt-b: "scenario=b,scenario=b".
func parseSyncOptB(s string) (map[string]int, error) {
	out := map[string]int{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		sc, bs, ok := strings.Cut(strings.TrimSpace(part), "=")
		b, err := strconv.Atoi(bs)
		if !ok || err != nil || b < 1 {
			return nil, fmt.Errorf("-syncopt-b: bad entry %q (want scenario=b, b >= 1)", part)
		}
		out[sc] = b
	}
	return out, nil
}

// epspV2Slack builds EPSP v2's slack scheme with its defaults, gate s
// (-1: none) and elastic control on the scenario's topology.
func epspV2Slack(s int) func(straggler.Model, int) (epsp.Policy, error) {
	return func(topo straggler.Model, _ int) (epsp.Policy, error) {
		c := epsp.DefaultEPSPv2SlackConfig()
		c.Staleness = s
		c.Elastic, c.Topology = true, topo
		return epsp.NewEPSPv2(c)
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
		if alias, ok := policyAliases[name]; ok {
			name = alias
		}
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
