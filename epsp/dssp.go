package epsp

import (
	"fmt"
	"time"
)

// DSSPConfig configures [NewDSSP].
type DSSPConfig struct {
	// Lower and Upper are the staleness range [s_L, s_U]. Zero values
	// mean 3 and 15, the values of the public TF reimplementation
	// (SL = 3, r_max = 12; baselines-params.md §5), not verified against
	// the paper.
	Lower, Upper int
}

// DefaultDSSPConfig returns s_L = 3, s_U = 15.
func DefaultDSSPConfig() DSSPConfig { return DSSPConfig{Lower: 3, Upper: 15} }

// Validate checks 0 <= Lower <= Upper.
func (c *DSSPConfig) Validate() error {
	lo, hi := c.Lower, c.Upper
	if lo == 0 && hi == 0 {
		return nil
	}
	if hi == 0 {
		hi = 15
	}
	if lo < 0 || lo > hi {
		return fmt.Errorf("%w: DSSP range [%d,%d]", ErrBadConfig, c.Lower, c.Upper)
	}
	return nil
}

// DSSP is dynamic stale synchronous parallel (Zhao, An, Liu, Chen,
// "Dynamic Stale Synchronous Parallel Distributed Training for Deep
// Learning", ICDCS 2019), following the algorithm of the public
// reimplementations (baselines-params.md §5). Pushes apply on arrival.
// When worker p pushes (EventClock) with t_p = Clock(p):
//
//  1. if it holds extra-iteration credit r_p > 0, r_p−− and it proceeds;
//  2. else if t_p − t_min ≤ s_L it proceeds;
//  3. else if p is the fastest (t_p = MaxClock), r ← controller(); if
//     r > 0 it proceeds and keeps r−1 credit;
//  4. else it waits until the gate t − t_min ≤ s_L lets it through.
//
// The controller predicts, from the last push interval of the fastest
// worker (I_f) and of the slowest (I_s) and the slowest's last push time
// T_s, the wait after r extra iterations, for r = 0 … s_U − s_L:
//
//	wait(r) = next_s(now + r·I_f) − (now + r·I_f),   next_s(t) = min{T_s + k·I_s ≥ t, k ≥ 1}
//
// and picks the r with the smallest wait (ties: smallest r). Whatever the
// credit, no worker is released more than s_U clocks ahead of
// EffectiveMinClock. Timestamps are EventClock times; an unknown interval
// gives r = 0.
type DSSP struct {
	lo, hi   int
	credit   []int
	lastPush []time.Duration
	interval []time.Duration // last push interval; 0 unknown
	stats    DSSPStats
}

// DSSPStats counts DSSP's decisions.
type DSSPStats struct {
	Credited    int // controller calls that granted r > 0
	CreditTotal int // Σ r granted
}

var _ Policy = (*DSSP)(nil)

// NewDSSP validates cfg and returns the policy.
func NewDSSP(cfg DSSPConfig) (*DSSP, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lo, hi := cfg.Lower, cfg.Upper
	if lo == 0 && hi == 0 {
		lo, hi = 3, 15
	} else if hi == 0 {
		hi = 15
	}
	return &DSSP{lo: lo, hi: hi}, nil
}

// Name returns e.g. "dssp(3..15)".
func (p *DSSP) Name() string { return fmt.Sprintf("dssp(%d..%d)", p.lo, p.hi) }

// Bounds returns s_L and s_U.
func (p *DSSP) Bounds() (lower, upper int) { return p.lo, p.hi }

// Stats returns the counters.
func (p *DSSP) Stats() DSSPStats { return p.stats }

// Admit applies every push now.
func (*DSSP) Admit(time.Duration, View, Push) PushDecision { return PushDecision{} }

// Step implements [Policy].
func (p *DSSP) Step(now time.Duration, v View, e Event) Output {
	n := v.NumWorkers()
	if p.credit == nil {
		p.credit = make([]int, n)
		p.lastPush = make([]time.Duration, n)
		p.interval = make([]time.Duration, n)
	}
	min := EffectiveMinClock(v)
	var out Output
	released := -1
	if e.Kind == EventClock && v.Waiting(e.Worker) {
		w := e.Worker
		p.interval[w] = now - p.lastPush[w]
		p.lastPush[w] = now
		lead := v.Clock(w) - min
		ok := false
		switch {
		case lead > p.hi:
		case p.credit[w] > 0:
			p.credit[w]--
			ok = true
		case lead <= p.lo:
			ok = true
		case v.Clock(w) == v.MaxClock():
			if r := p.controller(now, v, w); r > 0 {
				p.stats.Credited++
				p.stats.CreditTotal += r
				p.credit[w] = r - 1
				ok = true
			}
		}
		if ok {
			out.Release = append(out.Release, w)
			released = int(w)
		}
	}
	for i := range n {
		w := WorkerID(i)
		if i != released && v.Waiting(w) && v.Clock(w)-min <= p.lo {
			out.Release = append(out.Release, w)
		}
	}
	return out
}

// controller returns the extra iterations r in [0, s_U − s_L] for the
// fastest worker f.
func (p *DSSP) controller(now time.Duration, v View, f WorkerID) int {
	slow := WorkerID(0)
	for i := range v.NumWorkers() {
		w := WorkerID(i)
		if v.Clock(w) < v.Clock(slow) {
			slow = w
		}
	}
	If, Is := p.interval[f], p.interval[slow]
	if If <= 0 || Is <= 0 {
		return 0
	}
	ts := p.lastPush[slow]
	next := func(t time.Duration) time.Duration { // first slowest push at or after t
		if t <= ts {
			return ts + Is
		}
		k := (t - ts + Is - 1) / Is
		return ts + k*Is
	}
	best, bestWait := 0, time.Duration(-1)
	for r := 0; r <= p.hi-p.lo; r++ {
		t := now + time.Duration(r)*If
		if w := next(t) - t; bestWait < 0 || w < bestWait {
			best, bestWait = r, w
		}
	}
	return best
}
