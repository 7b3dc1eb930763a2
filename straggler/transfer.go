package straggler

import (
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
	end   int      // the owner holds [0, end)
	given [][2]int // ranges handed out (pending or accepted), stacked below batch
}

// Planner is the task-transfer planner [RECONSTRUCTION of Falcon's task
// transfer from stragglers to pioneers, whose protocol is not public;
// falcon.md §3, modelled on FlexRR's RapidReassignment]. It keeps, per
// (worker, clock), the range [0, End) the owner still holds and the tail
// ranges handed out, so that a range is never assigned twice and every
// sample of a clock has exactly one owner:
//
//	[0, Batch) = [0, End) ⊎ given ranges
//
// A giver has at most one pending transfer; a refusal (the giver had
// already started on Lo) returns the range to it, a partial acceptance
// [Lo', Hi) returns [Lo, Lo'). It is not safe for concurrent use.
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
		l = &ledger{batch: batch, end: batch}
		p.books[k] = l
	}
	return l
}

// Held returns the end of the range [0, End) that worker w still holds of
// its batch for clock, and whether the planner has a ledger for it
// (without one, w holds its whole batch).
func (p *Planner) Held(w, clock int) (int, bool) {
	if l := p.books[ledgerKey{w, clock}]; l != nil {
		return l.end, true
	}
	return 0, false
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
	slices.SortFunc(out, func(a, b Assignment) int { return int(a.ID) - int(b.ID) })
	return out
}

// Remaining returns the samples g still holds and has not started,
// End - Cursor (never negative), without recording anything.
func (p *Planner) Remaining(g Giver) int {
	end := g.Batch
	if e, ok := p.Held(g.Worker, g.Clock); ok {
		end = e
	}
	return max(end-max(g.Cursor, 0), 0)
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
	return p.chunk(g, Taker{}, r) >= p.cfg.MinChunk
}

func (p *Planner) chunk(g Giver, t Taker, r int) int {
	f := p.cfg.Fraction
	if p.cfg.Proportional && g.Speed > 0 && t.Speed > 0 {
		f = t.Speed / (t.Speed + g.Speed)
	}
	return int(math.Floor(f * float64(r)))
}

// Plan pairs takers (in the order given) with eligible givers: each taker
// gets the tail chunk of the eligible giver with the largest remaining
// time (remaining/speed; remaining samples if speeds are unknown; ties by
// worker id). Each giver and each taker appears at most once; a taker
// with a pending transfer is skipped. The assignments are recorded as
// pending until [Planner.Resolve].
func (p *Planner) Plan(givers []Giver, takers []Taker) []Assignment {
	var out []Assignment
	busyGiver, busyTaker := map[int]bool{}, map[int]bool{}
	for _, a := range p.pending {
		busyGiver[a.From], busyTaker[a.To] = true, true
	}
	// Eligibility and ranking of each giver do not depend on the taker
	// (except Proportional's chunk size), so compute them once.
	type cand struct {
		g   Giver
		key float64
	}
	var cands []cand
	for _, g := range givers {
		if busyGiver[g.Worker] || !p.eligible(g) {
			continue
		}
		r := float64(p.Remaining(g))
		key := r
		if g.Speed > 0 {
			key = r / g.Speed
		}
		cands = append(cands, cand{g, key})
	}
	used := map[int]bool{}
	for _, t := range takers {
		if busyTaker[t.Worker] {
			continue
		}
		best := -1
		for ci, c := range cands {
			if used[c.g.Worker] || c.g.Worker == t.Worker {
				continue
			}
			if best < 0 || c.key > cands[best].key || (c.key == cands[best].key && c.g.Worker < cands[best].g.Worker) {
				best = ci
			}
		}
		if best < 0 {
			continue
		}
		g := cands[best].g
		n := p.chunk(g, t, p.Remaining(g))
		if n < p.cfg.MinChunk {
			continue
		}
		l := p.book(g.Worker, g.Clock, g.Batch)
		p.nextID++
		a := Assignment{ID: p.nextID, From: g.Worker, To: t.Worker, Clock: g.Clock, Lo: l.end - n, Hi: l.end}
		l.end = a.Lo
		l.given = append(l.given, [2]int{a.Lo, a.Hi})
		p.pending[a.ID] = a
		used[g.Worker] = true
		busyTaker[t.Worker] = true
		out = append(out, a)
	}
	return out
}

// Resolve records the giver's answer to assignment id. accepted=false
// returns the range to the giver. accepted=true with [lo, hi) inside the
// ordered range (lo may be later than ordered, hi must equal it) keeps
// [lo, hi) with the taker and returns [Lo, lo) to the giver. It returns
// the resolved assignment.
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
	last := len(l.given) - 1 // the pending one is the last: one pending per giver
	if !accepted || lo == hi {
		l.end = a.Hi
		l.given = l.given[:last]
		a.Lo = a.Hi
		return a, nil
	}
	l.end = lo
	l.given[last] = [2]int{lo, hi}
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

// PendingFrom returns the pending assignment whose giver is w, if any (a
// giver has at most one). A runtime that renumbers orders (epsp's
// Coordinator assigns its own ids) finds the planner's assignment this way.
func (p *Planner) PendingFrom(w int) (Assignment, bool) {
	for _, a := range p.pending {
		if a.From == w {
			return a, true
		}
	}
	return Assignment{}, false
}
