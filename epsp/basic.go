package epsp

import (
	"fmt"
	"math"
	"time"
)

// BSP is bulk synchronous parallel: a barrier after every clock. Pushes of
// clock c are accumulated; once every worker has finished clock c and no
// transfer of clock c is pending, the sample-weighted average
//
//	w ← w − η · Σ_i n_i·g_i / Σ_i n_i
//
// is applied as one update (a FlushOrder) and every waiting worker is
// released into clock c+1.
//
// Reference: Valiant 1990; falcon.md §5 (BSP). It has no parameters.
type BSP struct {
	flushed int // clocks flushed so far: the next clock to flush
}

var _ Policy = (*BSP)(nil)

// NewBSP returns a BSP policy.
func NewBSP() *BSP { return &BSP{} }

// Name returns "bsp".
func (*BSP) Name() string { return "bsp" }

// Admit accumulates every push into its clock's buffer.
func (*BSP) Admit(_ time.Duration, _ View, p Push) PushDecision {
	return PushDecision{Action: Accumulate, Clock: p.Clock}
}

// AcceptsJoins reports true: a joiner waits at its join clock, and the
// barrier (MinClock over the members) counts it from that clock on.
func (*BSP) AcceptsJoins() bool { return true }

// Step flushes each clock whose barrier is complete and releases waiting
// workers whose previous clock is flushed.
func (b *BSP) Step(_ time.Duration, v View, _ Event) Output {
	return Barrier(v, &b.flushed, 1)
}

// Barrier is the barrier step shared by barrier-style policies (BSP,
// enforced EPSP, LB-BSP): while every worker has finished clock *flushed
// and no transfer of it is pending, it orders a flush of that clock with
// the given scale and advances *flushed; then it releases every waiting
// worker whose finished clock has been flushed.
func Barrier(v View, flushed *int, scale float64) Output {
	var out Output
	for v.MinClock() > *flushed && v.PendingTransfers(*flushed) == 0 {
		out.Flush = append(out.Flush, FlushOrder{Clock: *flushed, Scale: scale})
		*flushed++
	}
	for w := range v.NumWorkers() {
		id := WorkerID(w)
		if v.Waiting(id) && v.Clock(id) <= *flushed {
			out.Release = append(out.Release, id)
		}
	}
	return out
}

// ASP is asynchronous parallel (Hogwild/Downpour style): every push is
// applied on arrival, w ← w − η·g_i, and no worker ever waits.
//
// Reference: falcon.md §5 (ASP). It has no parameters; it is SSP with
// s = ∞.
type ASP struct{}

var _ Policy = ASP{}

// NewASP returns an ASP policy.
func NewASP() ASP { return ASP{} }

// Name returns "asp".
func (ASP) Name() string { return "asp" }

// Admit applies every push now.
func (ASP) Admit(time.Duration, View, Push) PushDecision { return PushDecision{} }

// AcceptsJoins reports true: a joiner is released at once.
func (ASP) AcceptsJoins() bool { return true }

// Step releases a worker as soon as it finishes a clock, and a joiner as
// soon as it joins.
func (ASP) Step(_ time.Duration, v View, e Event) Output {
	if (e.Kind == EventClock || e.Kind == EventJoin) && v.Waiting(e.Worker) {
		return Output{Release: []WorkerID{e.Worker}}
	}
	return Output{}
}

// SSP is stale synchronous parallel with staleness s: pushes are applied on
// arrival, and a worker that has finished clock c-1 may start clock c only
// while
//
//	c − min_j c_j ≤ s,
//
// where min_j c_j is the effective minimum clock (EffectiveMinClock: clocks
// with transferred samples still in flight count as unfinished). With the
// runtime contract (pushes stored before EventClock, pulls after release)
// a worker at clock c reads every update from clocks ≤ c−s−1, and its own.
// s = 0 gives BSP's gating (but applies pushes one by one instead of
// averaging them); s = math.MaxInt gives ASP.
//
// Reference: Ho et al., "More Effective Distributed ML via a Stale
// Synchronous Parallel Parameter Server", NIPS 2013; falcon.md §5 (SSP).
type SSP struct {
	s int
}

var _ Policy = (*SSP)(nil)

// NewSSP returns an SSP policy with staleness s ≥ 0. It panics if s < 0.
func NewSSP(s int) *SSP {
	if s < 0 {
		panic(fmt.Sprintf("epsp: NewSSP: negative staleness %d", s))
	}
	return &SSP{s: s}
}

// Staleness returns s.
func (p *SSP) Staleness() int { return p.s }

// Name returns "ssp(s=<s>)", or "ssp(s=inf)".
func (p *SSP) Name() string {
	if p.s == math.MaxInt {
		return "ssp(s=inf)"
	}
	return fmt.Sprintf("ssp(s=%d)", p.s)
}

// Admit applies every push now.
func (*SSP) Admit(time.Duration, View, Push) PushDecision { return PushDecision{} }

// AcceptsJoins reports true: a joiner waits at its join clock until the
// gate lets it through.
func (*SSP) AcceptsJoins() bool { return true }

// Step releases every waiting worker the staleness gate lets through.
func (p *SSP) Step(_ time.Duration, v View, _ Event) Output {
	return Output{Release: GateRelease(v, p.s)}
}

// GateRelease returns the waiting workers that the staleness gate with
// bound s lets start their next clock: those with
// Clock(w) − EffectiveMinClock(v) ≤ s.
func GateRelease(v View, s int) []WorkerID {
	min := EffectiveMinClock(v)
	var rel []WorkerID
	for w := range v.NumWorkers() {
		id := WorkerID(w)
		if v.Waiting(id) && withinStaleness(v.Clock(id), min, s) {
			rel = append(rel, id)
		}
	}
	return rel
}

func withinStaleness(clock, min, s int) bool {
	return clock-min <= s || s == math.MaxInt
}
