package epsp

import (
	"fmt"
	"time"

	"github.com/falconml/falcon/straggler"
)

// EPSPv2Config configures [NewEPSPv2].
type EPSPv2Config struct {
	// Plan configures clock-start planning (margin, smallest piece).
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

// DefaultEPSPv2Config returns clock-start planning with a 5 % margin and
// no elastic control (set Elastic and Topology to turn it on).
func DefaultEPSPv2Config() EPSPv2Config { return EPSPv2Config{} }

// Validate checks the configuration.
func (c *EPSPv2Config) Validate() error {
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

// EPSPv2 is EPSP with a straggler projection that plans every clock
// [ours: a reconstruction of Falcon's EPSP (Zhou et al., IEEE TC 2020),
// whose formulas are not public; [EPSP] is the first reconstruction and
// stays available as "epsp-v1"]. Enforced synchronization only (a barrier
// each clock, one sample-weighted update per clock, as [Barrier]):
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
//   - Clock-start planning: at each barrier release, with every released
//     worker's speed known, [straggler.PlanClock] computes the balanced
//     clock time T* = ΣB/Σr; a worker projected past (1+margin)·T* keeps
//     ⌈r·T*⌉ samples and its tail goes, tail first, to workers with room,
//     as Output.Assign: the pieces ride on the releases (no message is
//     added) and each taker pushes its own and its assigned samples in one
//     push.
//
//   - Elastic parallelism (Elastic, with a Topology): every ControlEvery
//     ticks the [straggler.ThroughputController] moves each host's cores
//     to where they add the most samples/s and fills idle cores, with a
//     minimum gain and rounds of agreement; a host is left alone while
//     one of its workers is in a transient slowdown (its speed estimate
//     off its long-term EWMA, weight 0.05, by more than Transient).
//
//   - Changes of speed: a busy-speed sample off the estimate by more
//     than Transient replaces the estimate instead of being averaged in,
//     so planning follows a slowdown from the next clock on.
//
//   - Residual transfers (unless NoResidual): once a worker blocks at the
//     barrier while others still compute, the rest of their own prefix is
//     split among them and the blocked workers, for slowdowns that begin
//     after the clock was planned.
//
// With all workers equally fast, nothing exceeds the margin: EPSPv2 orders
// exactly what BSP orders. It has no slack mode (see the package doc).
type EPSPv2 struct {
	cfg     EPSPv2Config
	name    string
	n       int
	flushed int
	ticks   int
	tracker *straggler.Tracker
	slow    *straggler.Tracker // long-term speeds (EWMA weight 0.05): the baseline a transient is measured against
	ctl     *straggler.ThroughputController
	curve   func(w int) straggler.Speedup
	hosts   []int
	cores   []int
	stats   EPSPStats
	acc     []busyAcc // each worker's pushes since its last clock

	// residual transfers
	st      polState
	keep    []int          // each worker's own prefix end this clock
	refused map[[2]int]int // (giver, taker) -> clock of a refusal
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
	name := "epsp-v2"
	switch {
	case !cfg.Elastic && cfg.NoResidual:
		name += "(no-elastic,no-residual)"
	case !cfg.Elastic:
		name += "(no-elastic)"
	case cfg.NoResidual:
		name += "(no-residual)"
	}
	p := &EPSPv2{cfg: cfg, name: name, ctl: ctl, curve: curve, refused: map[[2]int]int{}}
	p.st.planner = pl
	return p, nil
}

// Name returns "epsp-v2", with "(no-elastic)", "(no-residual)" or both
// for the ablations.
func (p *EPSPv2) Name() string { return p.name }

// Config returns the configuration with defaults filled in.
func (p *EPSPv2) Config() EPSPv2Config { return p.cfg }

// Stats returns the policy's counters (TransfersPlanned and SamplesPlanned
// count residual transfers; the coordinator's Stats count assignments).
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
	p.n = v.NumWorkers()
	p.tracker, _ = straggler.NewTracker(p.n, straggler.TrackerConfig{Alpha: p.cfg.Alpha, Curve: p.curve})
	p.slow, _ = straggler.NewTracker(p.n, straggler.TrackerConfig{Alpha: 0.05, Curve: p.curve})
	for w := range p.n {
		p.tracker.SetParallelism(w, v.Parallelism(WorkerID(w)))
		p.slow.SetParallelism(w, v.Parallelism(WorkerID(w)))
	}
	p.acc = make([]busyAcc, p.n)
	p.keep = make([]int, p.n)
	for w := range p.n {
		p.keep[w] = v.Batch(WorkerID(w))
	}
	p.st.tracker = p.tracker
	p.st.start = make([]time.Duration, p.n)
	p.st.reportAt = make([]time.Duration, p.n)
	p.st.last = make([]ProgressReport, p.n)
	p.st.taking = map[WorkerID]int{}
	p.st.noTrack = true
	p.st.ownEnd = func(w WorkerID) int { return p.keep[w] }
	p.st.canGive = func(w WorkerID) bool { return p.st.last[w].Extra == 0 || p.st.last[w].Clock != v.Clock(w) }
}

// busyAcc sums a worker's pushes since its last clock: the samples, the
// busy time they took and the parallelism they were computed with.
type busyAcc struct {
	samples int
	busy    time.Duration
	p       int
}

// Admit accumulates every push into its clock's buffer and adds the
// push's samples and busy time to the worker's sum for its clock (folded
// into the speed estimate when the worker clocks).
func (p *EPSPv2) Admit(_ time.Duration, v View, x Push) PushDecision {
	p.init(v)
	if x.Busy > 0 && x.Samples > 0 {
		w := int(x.Worker)
		par := v.Parallelism(x.Worker)
		if a := &p.acc[w]; a.samples > 0 && a.p != par {
			p.foldBusy(w, par) // computed at another parallelism: a sample of its own
		}
		a := &p.acc[w]
		a.samples += x.Samples
		a.busy += x.Busy
		a.p = par
	}
	return PushDecision{Action: Accumulate, Clock: x.Clock}
}

// foldBusy folds worker w's accumulated pushes into its speed estimate as
// one sample, Σsamples/Σbusy, and empties the sum; the estimate is then
// kept at w's current parallelism cur. One sample per clock, weighted by
// the work it covers: a push of one transferred sample that took almost
// nothing must not read as the worker's speed.
func (p *EPSPv2) foldBusy(w, cur int) {
	a := p.acc[w]
	if a.samples == 0 || a.busy <= 0 {
		return
	}
	p.acc[w] = busyAcc{}
	r := float64(a.samples) / a.busy.Seconds()
	p.tracker.SetParallelism(w, a.p)
	if est := p.tracker.Speed(w); p.tracker.Known(w) && (r < (1-p.cfg.Transient)*est || r > est/(1-p.cfg.Transient)) {
		// a change of speed (a slowdown starting or ending), not
		// noise: the estimate jumps to the new speed instead of
		// averaging it in over several clocks
		p.tracker.Reset(w)
	}
	_ = p.tracker.ObserveRate(w, r, a.p)
	_ = p.slow.ObserveRate(w, r, a.p)
	p.tracker.SetParallelism(w, cur)
	p.slow.SetParallelism(w, cur)
}

// Step implements [Policy].
func (p *EPSPv2) Step(now time.Duration, v View, e Event) Output {
	p.init(v)
	if e.Kind == EventClock {
		p.foldBusy(int(e.Worker), v.Parallelism(e.Worker))
	}
	p.st.observe(now, v, e)
	if e.Kind == EventTransferResult && !e.Transfer.Accepted {
		p.stats.TransfersRefused++
		p.refused[[2]int{int(e.Transfer.From), int(e.Transfer.To)}] = e.Transfer.Clock
	}
	out := Barrier(v, &p.flushed, 1)
	p.st.planner.Forget(p.flushed - 1)
	out.Release = p.st.dropBusyTakers(out.Release)
	p.st.markStarts(now, out.Release)
	for _, w := range out.Release {
		p.keep[w] = v.Batch(w)
		p.st.last[w] = ProgressReport{}
	}
	if len(out.Release) > 1 {
		out.Assign = p.plan(v, out.Release)
		for _, a := range out.Assign {
			p.keep[a.From] = min(p.keep[a.From], a.Lo)
			p.st.last[a.To] = ProgressReport{Clock: a.Clock, Extra: 1} // a taker cannot give until it reports
		}
	}
	if !p.cfg.NoResidual {
		blocks := func(g, t WorkerID) bool { return v.Clock(g) < v.Clock(t) }
		blocksAfter := func(g, t WorkerID) bool { return v.Clock(g) < v.Clock(t)+1 }
		out.Transfers = p.st.plan(now, v, out.Release, blocks, blocksAfter, func(g, t WorkerID) bool {
			c, ok := p.refused[[2]int{int(g), int(t)}]
			return ok && c == v.Clock(g)
		}, true)
		for _, o := range out.Transfers {
			p.stats.TransfersPlanned++
			p.stats.SamplesPlanned += o.Samples()
		}
	}
	if p.cfg.Elastic && e.Kind == EventTick {
		p.ticks++
		if p.ticks%p.cfg.ControlEvery == 0 {
			out.SetParallelism = p.control(v)
		}
	}
	return out
}

// plan assigns samples among the released workers.
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

// inTransient reports whether w's speed is off its long-term baseline by
// more than Transient: a slowdown (or a recovery) the controller waits out.
func (p *EPSPv2) inTransient(w int) bool {
	est, base := p.tracker.Speed(w), p.slow.Speed(w)
	return p.slow.Known(w) && (est < (1-p.cfg.Transient)*base || base < (1-p.cfg.Transient)*est)
}

// control runs one throughput round and returns the changes.
func (p *EPSPv2) control(v View) []ParallelismOrder {
	p.stats.ControlRounds++
	if p.hosts == nil {
		t := p.cfg.Topology
		p.hosts = make([]int, p.n)
		p.cores = make([]int, t.NumHosts())
		for h := range p.cores {
			p.cores[h] = t.Cores(h)
		}
		for w := range p.n {
			p.hosts[w] = t.Host(w)
		}
	}
	loads := make([]straggler.WorkerLoad, p.n)
	for w := range p.n {
		sp := p.tracker.Speed(w)
		if p.inTransient(w) {
			sp = 0 // its host is left alone (and its agreement restarts) until the slowdown ends
		}
		loads[w] = straggler.WorkerLoad{Host: p.hosts[w], P: v.Parallelism(WorkerID(w)), Speed: sp, Batch: v.Batch(WorkerID(w))}
	}
	var out []ParallelismOrder
	for w, np := range p.ctl.Plan(loads, p.cores) {
		if np != loads[w].P {
			out = append(out, ParallelismOrder{Worker: WorkerID(w), P: np})
			p.tracker.SetParallelism(w, np)
			p.slow.SetParallelism(w, np)
			p.stats.ParallelismChanges++
		}
	}
	return out
}
