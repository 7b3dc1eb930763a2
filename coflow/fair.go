package coflow

import (
	"sort"
	"time"
)

// Fair is per-flow max-min fair sharing computed by progressive filling:
// all flows' rates rise together until a port saturates; flows through it
// freeze; repeat. It ignores coflows (the "per-flow fairness" baseline of
// Varys and Aalo; coflowsim's FAIR). It reschedules on every flow
// completion.
//
// Cost of one Schedule call: O(F + I·T) for T ports in use and I ≤ 2T
// filling rounds. Being called on every flow completion, a replay costs
// O(flows × F); it suits synthetic traces of moderate size, not the 706k
// flows of FB2010.
//
// It is Allocator.MaxMin over every flow with weight 1.
type Fair struct {
	alloc Allocator
}

var _ Scheduler = (*Fair)(nil)

// NewFair returns a per-flow max-min fair scheduler.
func NewFair() *Fair { return &Fair{} }

// Name returns "fair".
func (f *Fair) Name() string { return "fair" }

// Schedule implements Scheduler.
func (f *Fair) Schedule(now time.Duration, s *State) []Allocation {
	f.alloc.Reset(s)
	f.alloc.MaxMin(nil, nil)
	return f.alloc.Allocations()
}

// PFP is per-flow prioritisation, shortest remaining flow first (SRTF over
// flows, ignoring coflows; pFabric-like, coflowsim's PFP): flows sorted by
// remaining raw bytes (ties: arrival, coflow index, flow index) each take
// all the spare capacity on their path. It reschedules on every flow
// completion.
//
// Cost of one Schedule call: O(F·log F + P), once per flow completion (see
// Fair on large traces).
type PFP struct {
	book  rateBook
	order []int32
	rem   []float64
	cof   []int32
	fl    []int32
}

var _ Scheduler = (*PFP)(nil)

// NewPFP returns a per-flow shortest-remaining-first scheduler.
func NewPFP() *PFP { return &PFP{} }

// Name returns "pfp".
func (p *PFP) Name() string { return "pfp" }

// Schedule implements Scheduler.
func (p *PFP) Schedule(now time.Duration, s *State) []Allocation {
	b := &p.book
	b.reset(s)
	p.order, p.rem, p.cof, p.fl = p.order[:0], p.rem[:0], p.cof[:0], p.fl[:0]
	for i := range s.Coflows {
		for j := range s.Coflows[i].Flows {
			p.order = append(p.order, int32(len(p.rem)))
			p.rem = append(p.rem, s.Coflows[i].Flows[j].Remaining)
			p.cof = append(p.cof, int32(i))
			p.fl = append(p.fl, int32(j))
		}
	}
	sort.SliceStable(p.order, func(a, c int) bool { return p.rem[p.order[a]] < p.rem[p.order[c]] })
	for _, k := range p.order {
		f := &s.Coflows[p.cof[k]].Flows[p.fl[k]]
		if r := b.spare(f.Src, f.Dst); r > 0 {
			b.add(int(p.cof[k]), int(k), f.Src, f.Dst, r)
		}
	}
	return b.emit(s)
}
