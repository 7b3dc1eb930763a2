package straggler

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// TransferConfig configures a [Planner].
type TransferConfig struct {
	// Fraction φ of a giver's remaining samples handed to a taker, from
	// the tail. 0 means 0.5, the value of the FlexRR reproduction
	// (kensiuhk/flexps StealJob(…, 0.5, …); baselines-params.md §1).
	Fraction float64
	// Proportional, if set, replaces Fraction by the speed-proportional
	// split v_t/(v_t+v_g), which makes giver and taker finish together
	// when both speeds are right. Ours.
	Proportional bool
	// MinChunk is the smallest range worth moving, in samples. 0 means 1.
	MinChunk int
	// MinRemaining is the threshold: a giver is eligible only while its
	// remaining samples are at least MinRemaining·Batch. 0 means 0.1,
	// i.e. the helpee is at most 0.9·batch done (the FlexRR reproduction's
	// steal_threshold, baselines-params.md §1). Use a tiny positive value
	// to disable.
	MinRemaining float64
	// SplitAll, if set, replaces the pairwise rule (Fraction,
	// Proportional) by the multi-taker split: in one planning round a
	// giver's remaining tail is split among it and all idle takers
	// assigned to it in proportion to their speeds, so that all finish
	// together; see [Planner.PlanFor]. Ours. false keeps FlexRR's rule.
	SplitAll bool
}

// DefaultTransferConfig returns φ 0.5, MinChunk 1, MinRemaining 0.1.
func DefaultTransferConfig() TransferConfig {
	return TransferConfig{Fraction: 0.5, MinChunk: 1, MinRemaining: 0.1}
}

// Validate checks the ranges of the fields.
func (c *TransferConfig) Validate() error {
	if !(c.Fraction >= 0 && c.Fraction <= 1) {
		return fmt.Errorf("%w: Fraction %v not in (0,1]", ErrConfig, c.Fraction)
	}
	if c.MinChunk < 0 {
		return fmt.Errorf("%w: MinChunk %d < 0", ErrConfig, c.MinChunk)
	}
	if !(c.MinRemaining >= 0 && c.MinRemaining <= 1) {
		return fmt.Errorf("%w: MinRemaining %v not in [0,1]", ErrConfig, c.MinRemaining)
	}
	return nil
}

// Giver is a worker that may give part of its current clock's batch.
type Giver struct {
	Worker int
	Clock  int
	Batch  int // the worker's whole batch for Clock (its own samples 0..Batch-1)
	// Cursor is the index of the next own sample it will process
	// (samples are processed in index order): its Done count, possibly
	// extrapolated to now.
	Cursor int
	Speed  float64 // samples/s; <= 0 unknown
}

// Taker is an idle worker that may take samples.
type Taker struct {
	Worker int
	Speed  float64 // samples/s; <= 0 unknown
	// Ready is the time in seconds until the worker becomes idle; 0 means
	// idle now. A taker with Ready > 0 is still computing: it gets no
	// order, but SplitAll counts it among those that will share a giver's
	// tail (so the first taker to block does not take the share of the
	// pioneers that block a moment later). The pairwise rule ignores it.
	Ready float64
}

// Assignment orders Taker To to compute samples [Lo, Hi) of worker From's
// batch for Clock.
type Assignment struct {
	ID       uint64
	From, To int
	Clock    int
	Lo, Hi   int
}

// Samples is Hi-Lo.
func (a Assignment) Samples() int { return a.Hi - a.Lo }

type ledgerKey struct{ worker, clock int }

type ledger struct {
	batch int
	given [][2]int // ranges handed out (pending or accepted), in planning order
}

// held returns the owner's part of its batch, [0, batch) minus the given
// ranges, as ascending disjoint spans. It is one prefix [0, end) as long
// as the runtime accepts the pieces of a split tail-first (see
// [Planner.Plan]); any answer the transfer contract allows is still
// accounted exactly, as several spans.
func (l *ledger) held() [][2]int {
	gs := slices.Clone(l.given)
	slices.SortFunc(gs, func(a, b [2]int) int { return a[0] - b[0] })
	var out [][2]int
	at := 0
	for _, g := range gs {
		if g[0] > at {
			out = append(out, [2]int{at, g[0]})
		}
		at = max(at, g[1])
	}
	if at < l.batch {
		out = append(out, [2]int{at, l.batch})
	}
	return out
}

// end is the end of the owner's highest held span (0 if it holds nothing).
func (l *ledger) end() int {
	h := l.held()
	if len(h) == 0 {
		return 0
	}
	return h[len(h)-1][1]
}

// Planner is the task-transfer planner [RECONSTRUCTION of Falcon's task
// transfer from stragglers to pioneers, whose protocol is not public;
// falcon.md §3, modelled on FlexRR's RapidReassignment]. It keeps, per
// (worker, clock), the ranges handed out of the owner's batch, so that a
// range is never assigned twice and every sample of a clock has exactly
// one owner:
//
//	[0, Batch) = held ⊎ given ranges
//
// where held is [0, End) when the pieces of a split are accepted
// tail-first (the runtimes in ps and ps/sim accept an order only if it is
// the tail of what the giver still owns, which keeps it so).
//
// Two splitting rules:
//
//   - pairwise (default; FlexRR's rule): each idle taker gets φ of one
//     giver's remaining tail (or, with Proportional, v_t/(v_t+v_g)), and a
//     giver has at most one pending transfer;
//   - SplitAll (ours): in one planning round every eligible giver's
//     remaining tail R is split among the giver and all idle takers
//     assigned to it, taker i getting ⌊R·v_i/(v_g + Σ_j v_j)⌋ so that all
//     finish together; the pieces are issued tail-first (highest Lo
//     first), and the giver has several orders pending until all are
//     answered.
//
// A refusal (the giver had already started on Lo, or the order was not
// its tail) returns the range to it, a partial acceptance [Lo', Hi)
// returns [Lo, Lo'). It is not safe for concurrent use.
type Planner struct {
	cfg     TransferConfig
	nextID  uint64
	books   map[ledgerKey]*ledger
	pending map[uint64]Assignment
}

// NewPlanner validates cfg.
func NewPlanner(cfg TransferConfig) (*Planner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Fraction == 0 {
		cfg.Fraction = 0.5
	}
	if cfg.MinChunk == 0 {
		cfg.MinChunk = 1
	}
	if cfg.MinRemaining == 0 {
		cfg.MinRemaining = 0.1
	}
	return &Planner{cfg: cfg, books: map[ledgerKey]*ledger{}, pending: map[uint64]Assignment{}}, nil
}

// Config returns the planner's configuration with defaults filled in.
func (p *Planner) Config() TransferConfig { return p.cfg }

func (p *Planner) book(w, clock, batch int) *ledger {
	k := ledgerKey{w, clock}
	l := p.books[k]
	if l == nil {
		l = &ledger{batch: batch}
		p.books[k] = l
	}
	return l
}

// Held returns the end of the range [0, End) that worker w still holds of
// its batch for clock, and whether the planner has a ledger for it
// (without one, w holds its whole batch). If the owner's part is not one
// prefix (see [Planner.HeldSpans]), End is the end of its highest span.
func (p *Planner) Held(w, clock int) (int, bool) {
	if l := p.books[ledgerKey{w, clock}]; l != nil {
		return l.end(), true
	}
	return 0, false
}

// HeldSpans returns the ascending disjoint spans of w's batch for clock
// that w still holds, and whether the planner has a ledger for it.
func (p *Planner) HeldSpans(w, clock int) ([][2]int, bool) {
	if l := p.books[ledgerKey{w, clock}]; l != nil {
		return l.held(), true
	}
	return nil, false
}

// HeldSamples returns how many samples of its batch for clock w still
// holds, and whether the planner has a ledger for it.
func (p *Planner) HeldSamples(w, clock int) (int, bool) {
	l := p.books[ledgerKey{w, clock}]
	if l == nil {
		return 0, false
	}
	n := 0
	for _, h := range l.held() {
		n += h[1] - h[0]
	}
	return n, true
}

// Given returns the ranges handed out of w's batch for clock (pending or
// accepted), in the order they were planned.
func (p *Planner) Given(w, clock int) [][2]int {
	if l := p.books[ledgerKey{w, clock}]; l != nil {
		return slices.Clone(l.given)
	}
	return nil
}

// GiverBusy reports whether w has a pending transfer as giver.
func (p *Planner) GiverBusy(w int) bool {
	for _, a := range p.pending {
		if a.From == w {
			return true
		}
	}
	return false
}

// TakerBusy reports whether w has a pending transfer as taker.
func (p *Planner) TakerBusy(w int) bool {
	for _, a := range p.pending {
		if a.To == w {
			return true
		}
	}
	return false
}

// Pending returns the pending assignments ordered by id.
func (p *Planner) Pending() []Assignment {
	out := make([]Assignment, 0, len(p.pending))
	for _, a := range p.pending {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Assignment) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// heldOf returns g's held spans (its whole batch without a ledger).
func (p *Planner) heldOf(g Giver) [][2]int {
	if h, ok := p.HeldSpans(g.Worker, g.Clock); ok {
		return h
	}
	if g.Batch <= 0 {
		return nil
	}
	return [][2]int{{0, g.Batch}}
}

// Remaining returns the samples g still holds and has not started (held
// samples at or after Cursor, never negative), without recording anything.
func (p *Planner) Remaining(g Giver) int {
	c := max(g.Cursor, 0)
	n := 0
	for _, h := range p.heldOf(g) {
		n += max(h[1]-max(h[0], c), 0)
	}
	return n
}

// tail returns the not-started part [lo, hi) of g's highest held span:
// the only range a transfer may cut from.
func (p *Planner) tail(g Giver) (int, int) {
	h := p.heldOf(g)
	if len(h) == 0 {
		return 0, 0
	}
	top := h[len(h)-1]
	return min(max(top[0], g.Cursor), top[1]), top[1]
}

// Eligible reports whether g may give now: no pending transfer, and
// remaining >= max(MinChunk, MinRemaining·Batch) with a chunk of at least
// MinChunk.
func (p *Planner) Eligible(g Giver) bool {
	return !p.GiverBusy(g.Worker) && p.eligible(g)
}

func (p *Planner) eligible(g Giver) bool {
	if g.Batch <= 0 {
		return false
	}
	r := p.Remaining(g)
	if float64(r) < p.cfg.MinRemaining*float64(g.Batch) || r < p.cfg.MinChunk {
		return false
	}
	lo, hi := p.tail(g)
	return min(p.chunk(g, Taker{}, r), hi-lo) >= p.cfg.MinChunk
}

func (p *Planner) chunk(g Giver, t Taker, r int) int {
	f := p.cfg.Fraction
	if p.cfg.Proportional && g.Speed > 0 && t.Speed > 0 {
		f = t.Speed / (t.Speed + g.Speed)
	}
	return int(math.Floor(f * float64(r)))
}

// Plan assigns takers (in the order given) to eligible givers; any taker
// may help any other worker. See [Planner.PlanFor].
func (p *Planner) Plan(givers []Giver, takers []Taker) []Assignment {
	return p.PlanFor(givers, takers, nil)
}

// PlanFor assigns idle takers to eligible givers; can(giver, taker), if
// not nil, says which pairs are allowed (a worker never takes from
// itself). Givers with a pending transfer and takers with a pending
// transfer are skipped. The assignments are recorded as pending until
// [Planner.Resolve].
//
// Pairwise (SplitAll unset): each taker, in the order given, gets the
// tail chunk of the allowed eligible giver with the largest remaining
// time (remaining/speed; remaining samples if speeds are unknown; ties by
// worker id); each giver and each taker appears at most once; takers with
// Ready > 0 are ignored.
//
// SplitAll (givers with pending orders may give again, below them): see
// [Planner.planSplit].
func (p *Planner) PlanFor(givers []Giver, takers []Taker, can func(giver, taker int) bool) []Assignment {
	allowed := func(g, t int) bool { return g != t && (can == nil || can(g, t)) }
	busyGiver, busyTaker := map[int]bool{}, map[int]bool{}
	for _, a := range p.pending {
		busyGiver[a.From], busyTaker[a.To] = true, true
	}
	var gs []Giver
	for _, g := range givers {
		// SplitAll cuts new pieces below the pending ones, which the
		// giver answers first (they were ordered first).
		if (p.cfg.SplitAll || !busyGiver[g.Worker]) && p.eligible(g) {
			gs = append(gs, g)
		}
	}
	var ts, soon []Taker
	for _, t := range takers {
		switch {
		case busyTaker[t.Worker]:
		case t.Ready > 0:
			soon = append(soon, t)
		default:
			ts = append(ts, t)
		}
	}
	if p.cfg.SplitAll {
		return p.planSplit(gs, ts, soon, allowed)
	}
	var out []Assignment
	key := func(g Giver) float64 {
		r := float64(p.Remaining(g))
		if g.Speed > 0 {
			return r / g.Speed
		}
		return r
	}
	used := map[int]bool{}
	for _, t := range ts {
		best := -1
		for ci, g := range gs {
			if used[g.Worker] || !allowed(g.Worker, t.Worker) {
				continue
			}
			if best < 0 || key(g) > key(gs[best]) || (key(g) == key(gs[best]) && g.Worker < gs[best].Worker) {
				best = ci
			}
		}
		if best < 0 {
			continue
		}
		g := gs[best]
		lo, hi := p.tail(g)
		n := min(p.chunk(g, t, p.Remaining(g)), hi-lo)
		if n < p.cfg.MinChunk {
			continue
		}
		used[g.Worker] = true
		out = append(out, p.record(g, t.Worker, hi-n, hi))
	}
	return out
}

func (p *Planner) record(g Giver, to, lo, hi int) Assignment {
	l := p.book(g.Worker, g.Clock, g.Batch)
	p.nextID++
	a := Assignment{ID: p.nextID, From: g.Worker, To: to, Clock: g.Clock, Lo: lo, Hi: hi}
	l.given = append(l.given, [2]int{lo, hi})
	p.pending[a.ID] = a
	return a
}

// planSplit is the multi-taker split (SplitAll; ours, our reading of
// Falcon's "transferring blocked tasks to pioneer workers for fully
// exploiting cluster computation capacity").
//
// A giver's team is the giver, the idle takers assigned to it and every
// allowed taker that will be idle soon (Ready = a_j > 0). The team
// finishes the giver's tail of R samples together at the time T with
//
//	Σ_j v_j·max(T − a_j, 0) = R
//
// (water-filling: members that become idle after T do not take part; for
// idle members alone T = R/(v_g + Σ_j v_j)). An idle taker i gets
// ⌊v_i·T⌋ samples, ≈ R·v_i/(v_g + Σ_j v_j); the giver keeps the rest: its
// own share, the rounding and the shares of the members not idle yet,
// which a later round hands to them when they block.
//
//  1. Idle takers, fastest first (ties in the order given), are assigned
//     one at a time to the allowed giver whose T is largest (ties by
//     worker id), provided every idle taker's share of that giver stays
//     at least MinChunk; otherwise to the next giver by T; a taker no
//     giver can use stays idle. A giver's first taker always fits (it
//     gets at least MinChunk), so no giver with transferable work is left
//     without help while an allowed taker is idle. The greedy rule shares
//     takers among several givers in proportion to their remaining time.
//  2. Each giver's tail [lo, hi) (R = hi − lo not-started samples of its
//     highest held span, below any pending piece) is cut from hi
//     downwards, so the first piece ordered is the tail and each next one
//     ends where the previous one begins.
//
// Unknown speeds (<= 0) count as the mean of the known speeds, or 1 if
// none is known.
func (p *Planner) planSplit(gs []Giver, ts, soon []Taker, allowed func(g, t int) bool) []Assignment {
	if len(gs) == 0 || len(ts) == 0 {
		return nil
	}
	mean, nk := 0.0, 0
	for _, g := range gs {
		if g.Speed > 0 {
			mean += g.Speed
			nk++
		}
	}
	for _, t := range slices.Concat(ts, soon) {
		if t.Speed > 0 {
			mean += t.Speed
			nk++
		}
	}
	if nk > 0 {
		mean /= float64(nk)
	} else {
		mean = 1
	}
	sp := func(v float64) float64 {
		if v > 0 {
			return v
		}
		return mean
	}
	type split struct {
		g      Giver
		lo, hi int
		idleV  float64  // v_g + Σ v of its idle takers
		soon   []member // allowed takers not idle yet, by Ready
		vmin   float64  // slowest idle taker
		takers []Taker
	}
	var ss []*split
	for _, g := range gs {
		lo, hi := p.tail(g)
		if hi-lo < p.cfg.MinChunk {
			continue
		}
		s := &split{g: g, lo: lo, hi: hi, idleV: sp(g.Speed)}
		for _, t := range soon {
			if allowed(g.Worker, t.Worker) {
				s.soon = append(s.soon, member{a: t.Ready, v: sp(t.Speed)})
			}
		}
		slices.SortFunc(s.soon, func(a, b member) int { return cmp.Compare(a.a, b.a) })
		ss = append(ss, s)
	}
	finish := func(s *split, extra float64) float64 {
		return finishTogether(float64(s.hi-s.lo), s.idleV+extra, s.soon)
	}
	ts = slices.Clone(ts)
	slices.SortStableFunc(ts, func(a, b Taker) int { return cmp.Compare(sp(b.Speed), sp(a.Speed)) })
	for _, t := range ts {
		vt := sp(t.Speed)
		var cands []*split
		for _, s := range ss {
			if allowed(s.g.Worker, t.Worker) {
				cands = append(cands, s)
			}
		}
		slices.SortStableFunc(cands, func(a, b *split) int {
			if c := cmp.Compare(finish(b, 0), finish(a, 0)); c != 0 {
				return c
			}
			return cmp.Compare(a.g.Worker, b.g.Worker)
		})
		for _, s := range cands {
			if len(s.takers) > 0 {
				if int(math.Floor(min(s.vmin, vt)*finish(s, vt))) < p.cfg.MinChunk {
					continue
				}
				s.vmin = min(s.vmin, vt)
			} else {
				s.vmin = vt
			}
			s.idleV += vt
			s.takers = append(s.takers, t)
			break
		}
	}
	var out []Assignment
	for _, s := range ss {
		if len(s.takers) == 0 {
			continue
		}
		T := finish(s, 0)
		hi := s.hi
		for _, t := range s.takers {
			n := int(math.Floor(sp(t.Speed) * T))
			if len(s.takers) == 1 {
				n = max(n, p.cfg.MinChunk)
			}
			n = min(n, hi-s.lo)
			if n < p.cfg.MinChunk {
				continue
			}
			out = append(out, p.record(s.g, t.Worker, hi-n, hi))
			hi -= n
		}
	}
	return out
}

// member is a team member for [finishTogether]: idle after a seconds,
// speed v.
type member struct{ a, v float64 }

// finishTogether returns the T with Σ v_j·max(T − a_j, 0) = r for a team
// of members idle now with total speed v0 and the members soon (sorted by
// a) that become idle later.
func finishTogether(r, v0 float64, soon []member) float64 {
	sumV, sumVA := v0, 0.0
	t := r / sumV
	for _, m := range soon {
		if m.a >= t {
			break
		}
		sumV += m.v
		sumVA += m.v * m.a
		t = (r + sumVA) / sumV
	}
	return t
}

// Resolve records the giver's answer to assignment id. accepted=false
// returns the range to the giver. accepted=true with [lo, hi) inside the
// ordered range (lo may be later than ordered, hi must equal it) keeps
// [lo, hi) with the taker and returns [Lo, lo) to the giver; lo == hi is
// a refusal. It returns the resolved assignment.
func (p *Planner) Resolve(id uint64, accepted bool, lo, hi int) (Assignment, error) {
	a, ok := p.pending[id]
	if !ok {
		return Assignment{}, fmt.Errorf("%w: %d", ErrUnknownTransfer, id)
	}
	if accepted && (lo < a.Lo || hi != a.Hi || lo > hi) {
		return a, fmt.Errorf("%w: accepted [%d,%d) of ordered [%d,%d)", ErrRange, lo, hi, a.Lo, a.Hi)
	}
	delete(p.pending, id)
	l := p.books[ledgerKey{a.From, a.Clock}]
	i := slices.Index(l.given, [2]int{a.Lo, a.Hi})
	if !accepted || lo == hi {
		l.given = slices.Delete(l.given, i, i+1)
		a.Lo = a.Hi
		return a, nil
	}
	l.given[i] = [2]int{lo, hi}
	a.Lo = lo
	return a, nil
}

// Forget drops the ledgers of clocks below clock (pending assignments of
// those clocks stay until resolved).
func (p *Planner) Forget(clock int) {
	for k := range p.books {
		if k.clock < clock && !p.pendingFor(k) {
			delete(p.books, k)
		}
	}
}

func (p *Planner) pendingFor(k ledgerKey) bool {
	for _, a := range p.pending {
		if a.From == k.worker && a.Clock == k.clock {
			return true
		}
	}
	return false
}

// PendingFrom returns the pending assignment whose giver is w with the
// lowest id, if any (without SplitAll a giver has at most one). A runtime
// that renumbers orders (epsp's Coordinator assigns its own ids) finds
// the planner's assignment this way, or with [Planner.PendingFor].
func (p *Planner) PendingFrom(w int) (Assignment, bool) {
	var best Assignment
	found := false
	for _, a := range p.pending {
		if a.From == w && (!found || a.ID < best.ID) {
			best, found = a, true
		}
	}
	return best, found
}

// PendingFor returns the pending assignment of clock from giver from to
// taker to with the lowest id, if any. A taker has at most one pending
// assignment, so the answer is unique.
func (p *Planner) PendingFor(from, to, clock int) (Assignment, bool) {
	var best Assignment
	found := false
	for _, a := range p.pending {
		if a.From == from && a.To == to && a.Clock == clock && (!found || a.ID < best.ID) {
			best, found = a, true
		}
	}
	return best, found
}
