package epsp

import (
	"math"
	"time"

	"github.com/falconml/falcon/straggler"
)

// throughputLayer is EPSP's throughput layer [ours: a reconstruction of
// Falcon's straggler projection, elastic training-parallelism control and
// task transfer, falcon.md §1-§4, as one piece that a synchronization
// scheme is composed with (see [Scheme] and the package doc)]:
//
//   - speed tracking: each worker's busy speed, one sample per clock,
//     Σ Push.Samples / Σ Push.Busy over the pushes it made since its
//     previous clock, an EWMA (Alpha) with jumps on changes of speed
//     (Transient) and a long-term baseline (weight 0.05);
//   - the parallelism controller ([straggler.ThroughputController]) every
//     ControlEvery ticks, hosts in a transient left alone;
//   - residual transfers: the multi-taker split of a blocking worker's
//     unclaimed prefix among it and the workers it blocks.
//
// The scheme decides how pushes are applied, whom to release, and how the
// layer's speeds plan a clock: the enforced scheme assigns samples among
// the workers released into one clock ([straggler.PlanClock]), the slack
// scheme sizes each released worker's batch so that every worker's clocks
// per second are equal (EPSPv2.balance). Both read the same speeds, and
// the controller maximises Σ r on every host under both, because under
// both a balanced clock takes ΣB / Σr.
type throughputLayer struct {
	cfg     EPSPv2Config
	n       int
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

func (p *throughputLayer) init(v View) {
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

// observePush adds the push's samples and busy time to the worker's sum
// for its clock (folded into the speed estimate when the worker clocks).
func (p *throughputLayer) observePush(v View, x Push) {
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
}

// foldBusy folds worker w's accumulated pushes into its speed estimate as
// one sample, Σsamples/Σbusy, and empties the sum; the estimate is then
// kept at w's current parallelism cur. One sample per clock, weighted by
// the work it covers: a push of one transferred sample that took almost
// nothing must not read as the worker's speed.
func (p *throughputLayer) foldBusy(w, cur int) {
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

// observe folds an event into the speeds and the transfer ledger: a
// clock's pushes into the worker's speed, the event into the residual
// transfers' bookkeeping, a refusal into the pairs not asked again this
// clock.
func (p *throughputLayer) observe(now time.Duration, v View, e Event) {
	if e.Kind == EventClock {
		p.foldBusy(int(e.Worker), v.Parallelism(e.Worker))
	}
	p.st.observe(now, v, e)
	if e.Kind == EventTransferResult && !e.Transfer.Accepted {
		p.stats.TransfersRefused++
		p.refused[[2]int{int(e.Transfer.From), int(e.Transfer.To)}] = e.Transfer.Clock
	}
}

// start drops from rel the workers still computing a transferred range
// and marks the others as starting their next clock now, owning their
// whole batch; it returns the workers released.
func (p *throughputLayer) start(now time.Duration, v View, rel []WorkerID) []WorkerID {
	rel = p.st.dropBusyTakers(rel)
	p.st.markStarts(now, rel)
	for _, w := range rel {
		p.keep[w] = v.Batch(w)
		p.st.last[w] = ProgressReport{}
	}
	return rel
}

// residual plans the residual transfers (unless NoResidual) for a scheme
// whose gate lets a worker run at most s clocks ahead of the slowest (s =
// 0: a barrier each clock): a giver blocks a waiting taker if its clock is
// below the taker's minus s, and a computing one if below its clock plus
// one minus s (the clock it will wait at).
func (p *throughputLayer) residual(now time.Duration, v View, rel []WorkerID, s int) []TransferOrder {
	if p.cfg.NoResidual || s == math.MaxInt {
		return nil
	}
	blocks := func(g, t WorkerID) bool { return v.Clock(g) < v.Clock(t)-s }
	blocksAfter := func(g, t WorkerID) bool { return v.Clock(g) < v.Clock(t)+1-s }
	out := p.st.plan(now, v, rel, blocks, blocksAfter, func(g, t WorkerID) bool {
		c, ok := p.refused[[2]int{int(g), int(t)}]
		return ok && c == v.Clock(g)
	}, true)
	for _, o := range out {
		p.stats.TransfersPlanned++
		p.stats.SamplesPlanned += o.Samples()
	}
	return out
}

// tick runs the parallelism controller on every ControlEvery-th tick when
// Elastic is set.
func (p *throughputLayer) tick(v View, e Event) []ParallelismOrder {
	if !p.cfg.Elastic || e.Kind != EventTick {
		return nil
	}
	p.ticks++
	if p.ticks%p.cfg.ControlEvery != 0 {
		return nil
	}
	return p.control(v)
}

// inTransient reports whether w's speed is off its long-term baseline by
// more than Transient: a slowdown (or a recovery) the controller waits out.
func (p *throughputLayer) inTransient(w int) bool {
	est, base := p.tracker.Speed(w), p.slow.Speed(w)
	return p.slow.Known(w) && (est < (1-p.cfg.Transient)*base || base < (1-p.cfg.Transient)*est)
}

// control runs one throughput round and returns the changes.
func (p *throughputLayer) control(v View) []ParallelismOrder {
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
