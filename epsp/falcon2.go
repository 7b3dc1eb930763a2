package epsp

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/falconml/falcon/straggler"
)

// EPSPv2Config configures [NewEPSPv2].
type EPSPv2Config struct {
	// Scheme is the synchronization scheme the throughput layer is
	// composed with: Enforced (the zero value: one averaged update per
	// clock behind a barrier, every EPSP v2 run before issue 27) or
	// Slack (bounded staleness, damped updates applied on arrival).
	Scheme Scheme
	// Staleness is the slack scheme's gate s: a worker may start clock c
	// only while c − EffectiveMinClock ≤ s. 0 means
	// DefaultSlackStaleness; -1 means no gate (DynSGD's setting). The
	// enforced scheme has a barrier and needs 0 here.
	Staleness int
	// NoBalance turns off the slack scheme's rate balancing (each
	// released worker's batch sized to its speed). The enforced scheme
	// plans by assignment instead and needs false here.
	NoBalance bool
	// Plan configures clock-start planning (margin, smallest piece). Its
	// Margin is also the slack scheme's dead-band: a released worker's
	// batch is lowered only if its projected clock time runs past the
	// balanced one by more than Margin, raised only if it ends early by
	// more than 2·Margin (0 means 0.05).
	Plan straggler.PlanConfig
	// Alpha is the weight of a new busy-speed sample in each worker's
	// EWMA. 0 means 0.5.
	Alpha float64
	// Elastic turns on the throughput-maximising parallelism controller.
	// It needs Topology: without one, NewEPSPv2 refuses Elastic.
	Elastic bool
	// Topology gives hosts and their cores ([straggler.Model] satisfies it).
	Topology Topology
	// Parallelism configures the controller (bounds, curve, minimum gain,
	// rounds of agreement). Its Curve also rescales speed estimates when a
	// worker's parallelism changes; nil means Amdahl with
	// straggler.DefaultSerial.
	Parallelism straggler.ThroughputConfig
	// ControlEvery is the number of ticks between control rounds. 0 means 1.
	ControlEvery int
	// Transient: a busy-speed sample off the worker's estimate by more
	// than this fraction is a change of speed (the estimate jumps to it),
	// and a host with a worker whose estimate is off its long-term
	// baseline by more is left alone by the controller. 0 means 0.3.
	Transient float64
	// NoResidual turns off residual transfers: by default, once a worker
	// blocks at the barrier while others still compute, the rest of their
	// own prefix is split among them and the blocked workers (the
	// multi-taker rule of [EPSP], Transfers), for slowdowns that begin
	// after the clock was planned.
	NoResidual bool
	// Transfers configures the residual transfers' planner; zero fields
	// take its defaults, and SplitAll is always set.
	Transfers straggler.TransferConfig
}

// DefaultEPSPv2Config returns the enforced scheme with clock-start
// planning at a 5 % margin and no elastic control (set Elastic and
// Topology to turn it on).
func DefaultEPSPv2Config() EPSPv2Config { return EPSPv2Config{} }

// DefaultEPSPv2SlackConfig returns the slack scheme with the gate
// DefaultSlackStaleness, rate balancing and residual transfers on and no
// elastic control (set Elastic and Topology to turn it on).
func DefaultEPSPv2SlackConfig() EPSPv2Config {
	return EPSPv2Config{Scheme: Slack, Staleness: DefaultSlackStaleness}
}

// Scheme is the synchronization scheme of [EPSPv2] (see the package doc,
// "EPSP as a throughput layer").
type Scheme uint8

const (
	// Enforced: pushes accumulate into their clock's buffer and a barrier
	// flushes one sample-weighted update per clock; planning assigns
	// samples among the workers released into a clock.
	Enforced Scheme = iota
	// Slack: bounded staleness (EPSPv2Config.Staleness); each push is
	// applied on arrival, damped by 1/(d+1) as DynSGD; planning sizes
	// each released worker's batch so that all push at the same rate.
	Slack
)

// String returns "enforced" or "slack".
func (s Scheme) String() string {
	switch s {
	case Enforced:
		return "enforced"
	case Slack:
		return "slack"
	}
	return fmt.Sprintf("Scheme(%d)", uint8(s))
}

// DefaultSlackStaleness is the slack scheme's default gate s = 3 [ours].
// It is the study's SSP bound and EPSP v1's slack setting, so that the
// slack schemes of both reconstructions and SSP are compared at one
// bound; and it is what balanced rates need: with every worker's clocks
// per second equal, leads stay at 0-1 clock, and the gate binds only
// after a change of speed, when the slowed worker's clock in progress,
// planned at the old speed, ends late (a 4x slowdown: about 3 clocks of
// the others) before its next release resizes its batch. s = 3 lets the
// others run through that clock instead of blocking, while bounding how
// far behind (and so how damped) a straggler's pushes can be.
const DefaultSlackStaleness = 3

// Validate checks the configuration.
func (c *EPSPv2Config) Validate() error {
	switch c.Scheme {
	case Enforced:
		if c.Staleness != 0 || c.NoBalance {
			return fmt.Errorf("%w: EPSP v2 enforced scheme with Staleness %d / NoBalance %v (slack-scheme fields)", ErrBadConfig, c.Staleness, c.NoBalance)
		}
	case Slack:
		if c.Staleness < -1 {
			return fmt.Errorf("%w: EPSP v2 slack staleness %d (want > 0, 0 for the default, or -1 for no gate)", ErrBadConfig, c.Staleness)
		}
	default:
		return fmt.Errorf("%w: EPSP v2 scheme %v", ErrBadConfig, c.Scheme)
	}
	if err := c.Plan.Validate(); err != nil {
		return fmt.Errorf("%w: EPSP v2 plan: %w", ErrBadConfig, err)
	}
	if !(c.Alpha >= 0 && c.Alpha <= 1) {
		return fmt.Errorf("%w: EPSP v2 alpha %v not in [0,1]", ErrBadConfig, c.Alpha)
	}
	if !(c.Transient >= 0 && c.Transient < 1) || c.ControlEvery < 0 {
		return fmt.Errorf("%w: EPSP v2 transient %v, ControlEvery %d", ErrBadConfig, c.Transient, c.ControlEvery)
	}
	if c.Elastic && c.Topology == nil {
		return fmt.Errorf("%w: EPSP v2 elastic control needs a Topology", ErrBadConfig)
	}
	if err := c.Parallelism.Validate(); err != nil {
		return fmt.Errorf("%w: EPSP v2 parallelism: %w", ErrBadConfig, err)
	}
	if err := c.Transfers.Validate(); err != nil {
		return fmt.Errorf("%w: EPSP v2 transfers: %w", ErrBadConfig, err)
	}
	return nil
}

// EPSPv2 is EPSP's throughput layer composed with a synchronization
// scheme [ours: a reconstruction of Falcon's EPSP (Zhou et al., IEEE TC
// 2020), whose formulas are not public; [EPSP] is the first
// reconstruction and stays available as "epsp-v1"]. The layer is the
// same under both schemes:
//
//   - Speed: each worker's speed is the EWMA (Alpha) of one sample per
//     clock, Σ Push.Samples / Σ Push.Busy over the pushes it made since
//     its previous clock (its own batch, assigned and transferred
//     pieces): samples per busy compute second, carried on its pushes
//     (so push latency and waits do not bias it), kept per parallelism
//     by the speed-up curve. Summing before dividing weights each push
//     by the work it covers, so a one-sample piece that took almost
//     nothing cannot set the estimate.
//
//   - Changes of speed: a busy-speed sample off the estimate by more
//     than Transient replaces the estimate instead of being averaged in,
//     so planning follows a slowdown from the next clock on.
//
//   - Elastic parallelism (Elastic, with a Topology): every ControlEvery
//     ticks the [straggler.ThroughputController] moves each host's cores
//     to where they add the most samples/s and fills idle cores, with a
//     minimum gain and rounds of agreement; a host is left alone while
//     one of its workers is in a transient slowdown (its speed estimate
//     off its long-term EWMA, weight 0.05, by more than Transient).
//
//   - Residual transfers (unless NoResidual): once a worker blocks (at
//     the barrier, or at the slack gate) while workers that block it
//     still compute, the rest of their own prefix is split among them and
//     the blocked workers, for slowdowns that begin after the clock was
//     planned.
//
// The enforced scheme (Scheme Enforced, "epsp-v2"): a barrier each clock
// and one sample-weighted update per clock, as [Barrier]; planning is at
// the clock's start: at each barrier release, with every released
// worker's speed known, [straggler.PlanClock] computes the balanced clock
// time T* = ΣB/Σr; a worker projected past (1+margin)·T* keeps ⌈r·T*⌉
// samples and its tail goes, tail first, to workers with room, as
// Output.Assign: the pieces ride on the releases (no message is added)
// and each taker pushes its own and its assigned samples in one push.
// With all workers equally fast, nothing exceeds the margin: it orders
// exactly what BSP orders.
//
// The slack scheme (Scheme Slack, "epsp-v2-slack"): a worker may start
// clock c while c − EffectiveMinClock ≤ s (Staleness, default
// [DefaultSlackStaleness]; [GateRelease], as SSP), and each push is
// applied on arrival with
//
//	Scale = 1/(d+1) · b/B̄,   d = Version() − BaseVersion
//
// DynSGD's staleness damping ([DynSGDScale]) times the owner's batch b
// over the mean initial batch B̄ = ΣB/N, so that every sample weighs
// 1/(B̄·(d+1)) whoever computed it and whatever its batch (with every
// batch at its initial size, b/B̄ = 1 and the scale is DynSGD's, bit for
// bit; a transferred part's Samples/BatchSamples carries the rest).
// Planning balances the push rates (rate balancing, unless NoBalance): at
// each release, with every member's speed known, T* = ΣB₀/Σr over the
// members (ΣB₀ the total initial batch, kept fixed), and a released
// worker whose projected clock time b/r runs past T* by more than the
// margin, or ends before it by more than twice the margin, gets the
// batch round(r·T*) ≥ 1, from that clock on (a BatchOrder; a worker is
// resized only when it is released, never while it computes). The band
// is wider below because runtimes compute in rounds of claims: a batch
// that stops on a partial round takes the time of a whole one (RESULTS
// §11), so the busy speed measured at the larger of two neighbouring
// batches is lower, and a symmetric band let a worker oscillate between
// the batch that ends on a round and the one past it (with rounds of 8
// samples and r·T* = 17: at 17 samples, three rounds, the measured speed
// is 17/24 of the true one, so the next batch is 12; its two rounds
// measure 12/16 of the true speed, and a symmetric band raises it step by
// step, 13, 14, 16, 17, and drops it again; each clock at 17 is 40 %
// longer than planned, and the gate binds). Every worker then completes 1/T* clocks per second, so
// leads stay at 0-1 clock and the gate rarely binds. The batches are the
// loads the enforced plan gives the same workers (keep r·T*, take up to
// r·T*), held by each worker in its own clock instead of moved within
// one clock (see the package doc for why). With all workers equally fast
// nothing is resized, and the slack scheme orders what SSP(s) orders
// while applying DynSGD's scale.
type EPSPv2 struct {
	throughputLayer
	name    string
	flushed int
	gate    int    // the slack scheme's s (math.MaxInt: no gate)
	total   int    // ΣB at the first call: the slack scheme's fixed total batch
	left    []bool // workers that left (EventLeave): out of the balance
}

var _ Policy = (*EPSPv2)(nil)

// NewEPSPv2 validates cfg and returns the policy.
func NewEPSPv2(cfg EPSPv2Config) (*EPSPv2, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Alpha == 0 {
		cfg.Alpha = 0.5
	}
	if cfg.ControlEvery == 0 {
		cfg.ControlEvery = 1
	}
	if cfg.Transient == 0 {
		cfg.Transient = 0.3
	}
	gate := 0
	if cfg.Scheme == Slack {
		if cfg.Staleness == 0 {
			cfg.Staleness = DefaultSlackStaleness
		}
		gate = cfg.Staleness
		if gate < 0 {
			gate = math.MaxInt
		}
	}
	curve := cfg.Parallelism.Curve
	if curve == nil {
		curve = func(int) straggler.Speedup { return straggler.Amdahl{Serial: straggler.DefaultSerial} }
	}
	cfg.Parallelism.Curve = curve
	ctl, err := straggler.NewThroughputController(cfg.Parallelism)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	cfg.Transfers.SplitAll = true
	pl, err := straggler.NewPlanner(cfg.Transfers)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	p := &EPSPv2{name: v2Name(cfg), gate: gate}
	p.throughputLayer = throughputLayer{cfg: cfg, ctl: ctl, curve: curve, refused: map[[2]int]int{}}
	p.st.planner = pl
	return p, nil
}

// v2Name is "epsp-v2" or "epsp-v2-slack" with the ablations and a
// non-default gate in parentheses.
func v2Name(cfg EPSPv2Config) string {
	if cfg.Scheme == Enforced {
		name := "epsp-v2"
		switch {
		case !cfg.Elastic && cfg.NoResidual:
			name += "(no-elastic,no-residual)"
		case !cfg.Elastic:
			name += "(no-elastic)"
		case cfg.NoResidual:
			name += "(no-residual)"
		}
		return name
	}
	var opts []string
	switch {
	case cfg.Staleness < 0:
		opts = append(opts, "s=inf")
	case cfg.Staleness != DefaultSlackStaleness:
		opts = append(opts, fmt.Sprintf("s=%d", cfg.Staleness))
	}
	if !cfg.Elastic {
		opts = append(opts, "no-elastic")
	}
	if cfg.NoBalance {
		opts = append(opts, "no-balance")
	}
	if cfg.NoResidual {
		opts = append(opts, "no-residual")
	}
	if len(opts) == 0 {
		return "epsp-v2-slack"
	}
	return "epsp-v2-slack(" + strings.Join(opts, ",") + ")"
}

// Name returns "epsp-v2", with "(no-elastic)", "(no-residual)" or both
// for the ablations; under the slack scheme "epsp-v2-slack", with a gate
// other than the default ("s=2", "s=inf") and the ablations
// ("no-elastic", "no-balance", "no-residual") in parentheses, e.g.
// "epsp-v2-slack(s=1,no-elastic)".
func (p *EPSPv2) Name() string { return p.name }

// Config returns the configuration with defaults filled in.
func (p *EPSPv2) Config() EPSPv2Config { return p.cfg }

// Stats returns the policy's counters (TransfersPlanned and SamplesPlanned
// count residual transfers; the coordinator's Stats count assignments;
// BatchChanges counts the slack scheme's resizes).
func (p *EPSPv2) Stats() EPSPStats { return p.stats }

// Speed returns worker w's speed estimate (samples per busy second at its
// current parallelism), 0 if unknown.
func (p *EPSPv2) Speed(w WorkerID) float64 {
	if p.tracker == nil {
		return 0
	}
	return p.tracker.Speed(int(w))
}

func (p *EPSPv2) init(v View) {
	if p.tracker != nil {
		return
	}
	p.throughputLayer.init(v)
	p.left = make([]bool, p.n)
	for w := range p.n {
		p.total += v.Batch(WorkerID(w))
	}
}

// Admit adds the push's samples and busy time to the worker's sum for its
// clock (folded into the speed estimate when the worker clocks). Under the
// enforced scheme it accumulates every push into its clock's buffer;
// under the slack scheme it applies it now with Scale 1/(d+1)·b/B̄.
func (p *EPSPv2) Admit(_ time.Duration, v View, x Push) PushDecision {
	p.init(v)
	p.observePush(v, x)
	if p.cfg.Scheme == Slack {
		return PushDecision{Action: ApplyNow, Scale: p.slackScale(v, x)}
	}
	return PushDecision{Action: Accumulate, Clock: x.Clock}
}

// slackScale is 1/(d+1)·b/B̄ for push x (see [EPSPv2]).
func (p *EPSPv2) slackScale(v View, x Push) float64 {
	var d uint64
	if now := v.Version(); now > x.BaseVersion {
		d = now - x.BaseVersion
	}
	s := DynSGDScale(d)
	if x.BatchSamples > 0 && p.total > 0 {
		s *= float64(x.BatchSamples) * float64(p.n) / float64(p.total)
	}
	return s
}

// Step implements [Policy].
func (p *EPSPv2) Step(now time.Duration, v View, e Event) Output {
	p.init(v)
	p.observe(now, v, e)
	if e.Kind == EventLeave && int(e.Worker) < p.n {
		p.left[e.Worker] = true
	}
	var out Output
	if p.cfg.Scheme == Slack {
		out.Release = GateRelease(v, p.gate)
		p.st.planner.Forget(EffectiveMinClock(v) - 1)
	} else {
		out = Barrier(v, &p.flushed, 1)
		p.st.planner.Forget(p.flushed - 1)
	}
	out.Release = p.start(now, v, out.Release)
	switch {
	case p.cfg.Scheme == Slack:
		out.SetBatch = p.balance(v, out.Release)
	case len(out.Release) > 1:
		out.Assign = p.plan(v, out.Release)
		for _, a := range out.Assign {
			p.keep[a.From] = min(p.keep[a.From], a.Lo)
			p.st.last[a.To] = ProgressReport{Clock: a.Clock, Extra: 1} // a taker cannot give until it reports
		}
	}
	out.Transfers = p.residual(now, v, out.Release, p.gate)
	out.SetParallelism = p.tick(v, e)
	return out
}

// plan assigns samples among the released workers (the enforced scheme).
func (p *EPSPv2) plan(v View, rel []WorkerID) []Assignment {
	loads := make([]straggler.ClockLoad, len(rel))
	for i, w := range rel {
		if !p.tracker.Known(int(w)) {
			return nil // the first clock: speeds unknown
		}
		loads[i] = straggler.ClockLoad{Batch: v.Batch(w), Speed: p.tracker.Speed(int(w))}
	}
	var out []Assignment
	for _, pc := range straggler.PlanClock(loads, p.cfg.Plan) {
		from, to := rel[pc.From], rel[pc.To]
		out = append(out, Assignment{From: from, To: to, Clock: v.Clock(from), Lo: pc.Lo, Hi: pc.Hi})
	}
	return out
}

// defaultPlanMargin is straggler.PlanConfig's default Margin, the slack
// scheme's dead-band when Plan.Margin is 0.
const defaultPlanMargin = 0.05

// balance is the slack scheme's rate balancing: the batch orders for the
// released workers (see [EPSPv2]). Nothing is resized until every
// member's speed is known.
func (p *EPSPv2) balance(v View, rel []WorkerID) []BatchOrder {
	if p.cfg.NoBalance || len(rel) == 0 {
		return nil
	}
	sum := 0.0
	for w := range p.n {
		if p.left[w] {
			continue
		}
		if !p.tracker.Known(w) {
			return nil
		}
		sum += p.tracker.Speed(w)
	}
	if !(sum > 0) {
		return nil
	}
	tstar := float64(p.total) / sum
	margin := p.cfg.Plan.Margin
	if margin == 0 {
		margin = defaultPlanMargin
	}
	var out []BatchOrder
	for _, w := range rel {
		want := p.tracker.Speed(int(w)) * tstar
		b := v.Batch(w)
		if float64(b) <= (1+margin)*want && float64(b) >= (1-2*margin)*want {
			continue // within the band: lowered past the margin, raised past twice it
		}
		nb := max(1, int(math.Round(want)))
		if nb == b {
			continue
		}
		out = append(out, BatchOrder{Worker: w, Size: nb})
		p.keep[w] = nb
		p.stats.BatchChanges++
	}
	return out
}
