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
	// Transient: a busy-speed sample below (1−Transient) of the worker's
	// estimate marks a transient slowdown, during which the controller
	// holds (its agreement counts restart). 0 means 0.3.
	Transient float64
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
	return nil
}

// EPSPv2 is EPSP with a straggler projection that plans every clock
// [ours: a reconstruction of Falcon's EPSP (Zhou et al., IEEE TC 2020),
// whose formulas are not public; [EPSP] is the first reconstruction and
// stays available as "epsp-v1"]. Enforced synchronization only (a barrier
// each clock, one sample-weighted update per clock, as [Barrier]):
//
//   - Speed: each worker's speed is the EWMA (Alpha) of
//     Push.Samples / Push.Busy, samples per busy compute second, carried
//     on its push (so push latency and waits do not bias it), kept per
//     parallelism by the speed-up curve.
//   - Clock-start planning: at each barrier release, with every released
//     worker's speed known, [straggler.PlanClock] computes the balanced
//     clock time T* = ΣB/Σr; a worker projected past (1+margin)·T* keeps
//     ⌈r·T*⌉ samples and its tail goes, tail first, to workers with room,
//     as Output.Assign: the pieces ride on the releases (no message is
//     added) and each taker pushes its own and its assigned samples in one
//     push.
//   - Elastic parallelism (Elastic, with a Topology): every ControlEvery
//     ticks the [straggler.ThroughputController] moves each host's cores
//     to where they add the most samples/s and fills idle cores, with a
//     minimum gain and rounds of agreement; it holds while a transient
//     slowdown is seen (a speed sample below (1−Transient) of the
//     estimate).
//
// With all workers equally fast, nothing exceeds the margin: EPSPv2 orders
// exactly what BSP orders. Not built (issue 17 items 2 and 5): residual
// transfers for slowdowns that start mid-clock, and a slack mode.
type EPSPv2 struct {
	cfg     EPSPv2Config
	name    string
	n       int
	flushed int
	ticks   int
	tracker *straggler.Tracker
	ctl     *straggler.ThroughputController
	curve   func(w int) straggler.Speedup
	hosts   []int
	cores   []int
	hold    bool // a transient slowdown was seen since the last control round
	stats   EPSPStats
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
	name := "epsp-v2"
	if !cfg.Elastic {
		name += "(no-elastic)"
	}
	return &EPSPv2{cfg: cfg, name: name, ctl: ctl, curve: curve}, nil
}

// Name returns "epsp-v2" or "epsp-v2(no-elastic)".
func (p *EPSPv2) Name() string { return p.name }

// Config returns the configuration with defaults filled in.
func (p *EPSPv2) Config() EPSPv2Config { return p.cfg }

// Stats returns the policy's counters (TransfersPlanned and SamplesPlanned
// count assignments).
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
	for w := range p.n {
		p.tracker.SetParallelism(w, v.Parallelism(WorkerID(w)))
	}
}

// Admit accumulates every push into its clock's buffer and folds the
// push's busy speed into the worker's estimate.
func (p *EPSPv2) Admit(_ time.Duration, v View, x Push) PushDecision {
	p.init(v)
	if x.Busy > 0 && x.Samples > 0 {
		w := int(x.Worker)
		r := float64(x.Samples) / x.Busy.Seconds()
		par := v.Parallelism(x.Worker)
		p.tracker.SetParallelism(w, par)
		if p.tracker.Known(w) && r < (1-p.cfg.Transient)*p.tracker.Speed(w) {
			p.hold = true
		}
		_ = p.tracker.ObserveRate(w, r, par)
	}
	return PushDecision{Action: Accumulate, Clock: x.Clock}
}

// Step implements [Policy].
func (p *EPSPv2) Step(_ time.Duration, v View, e Event) Output {
	p.init(v)
	out := Barrier(v, &p.flushed, 1)
	if len(out.Release) > 1 {
		out.Assign = p.plan(v, out.Release)
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
		p.stats.TransfersPlanned++
		p.stats.SamplesPlanned += pc.Hi - pc.Lo
	}
	return out
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
	if p.hold {
		p.hold = false
		p.ctl.Hold()
		return nil
	}
	loads := make([]straggler.WorkerLoad, p.n)
	for w := range p.n {
		loads[w] = straggler.WorkerLoad{Host: p.hosts[w], P: v.Parallelism(WorkerID(w)), Speed: p.tracker.Speed(w), Batch: v.Batch(WorkerID(w))}
	}
	var out []ParallelismOrder
	for w, np := range p.ctl.Plan(loads, p.cores) {
		if np != loads[w].P {
			out = append(out, ParallelismOrder{Worker: WorkerID(w), P: np})
			p.tracker.SetParallelism(w, np)
			p.stats.ParallelismChanges++
		}
	}
	return out
}
