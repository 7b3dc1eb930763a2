package fvdf

import (
	"math"
	"slices"
	"time"

	"github.com/falconml/falcon/coflow"
)

// Estimator supplies the codec profiles the scheduler decides with: the
// predicted compression speed, decompression speed and ratio of fabric codec
// k (k ≥ 1) at time now. Port.SpeedFactor is applied by the scheduler on
// top. The simulator meanwhile advances with the true speeds, so prediction
// error shows up in CCT.
type Estimator interface {
	Estimate(now time.Duration, f *coflow.Fabric, k int) coflow.CodecProfile
}

// Uncertain is an optional capability of an Estimator: the relative error
// (0 = exact) of its recent codec-speed predictions for codec k. The
// scheduler then plans with the pessimistic speed predicted/(1 + error),
// so that an over-predicted codec does not fall behind the wire it
// reserved (unless Config.NoDerate).
type Uncertain interface {
	Uncertainty(k int) float64
}

// Nominal is the Estimator that returns the fabric's own codec profiles
// (an oracle when the true speeds never change).
type Nominal struct{}

// Estimate returns f.Codec(k).
func (Nominal) Estimate(_ time.Duration, f *coflow.Fabric, k int) coflow.CodecProfile {
	return f.Codec(k)
}

// Scheduler is FVDF: Fastest-Volume-Disposal-First coflow scheduling with
// per-flow compression decisions (Swallow; the rules below are our
// reconstruction of the unpublished algorithm, research note swallow.md §2).
//
// At every call, with the predicted codec profiles:
//
//  1. For each active coflow C, choose per flow raw or a codec greedily and
//     compute its effective disposal bottleneck Γ'_C = max_p t_p(C), where
//     for machine p
//     t_p = max(Σ_{f from p} ρ_f V_f / In(p), Σ_{f to p} ρ_f V_f / Out(p),
//     (Σ_{compressed f from p} V_f/s_p + Σ_{compressed f to p} V_f/u_p) / K_p)
//     (V_f remaining raw bytes, ρ_f = 1 for raw flows, K_p free cores).
//     The greedy repeatedly takes the bottleneck machine and compresses the
//     largest raw flow there, with the codec that helps most, if that lowers
//     the bottleneck's time by more than MinGain (ties between bottleneck
//     machines are handled because a flow only touches its two ends).
//  2. Order coflows by ascending Γ'_C (ties: arrival, then index).
//  3. In that order, re-plan each coflow on the capacity and cores left by
//     higher-priority coflows (so a flow is compressed only when cores are
//     free at both ends after them, and only when that strictly shortens its
//     disposal: resource conservation), and give every flow the MADD rate
//     that makes all of C's flows finish together at its Γ: wire rate
//     ρ_f V_f/Γ, sender cores V_f/(Γ s), receiver cores V_f/(Γ u). A coflow
//     whose Γ is infinite (a port or CPU it needs is exhausted) waits.
//  4. Backfill leftover bandwidth to flows in the same order (Varys), then
//     leftover cores: a raw flow with a rate is switched to a codec when the
//     free cores let it dispose strictly faster at the same wire rate, and
//     the cores still free on a machine are handed to its compressed flows
//     in proportion to their reservations (headroom against an
//     over-predicted codec speed; the bytes compressed, hence CPU-seconds,
//     do not change).
//  5. Starvation freedom (Varys' T/δ): during [kT, kT+δ) every flow of every
//     active coflow gets a per-flow max-min fair share, raw (coflow.Fair),
//     so no active coflow goes unserved for longer than T − δ.
//
// Per-flow data classes: ρ_f, s and u above are those of flow f's class
// (coflow.Flow.Class; the fabric's per-class profiles, coflow.Fabric.Profile,
// with the Estimator's prediction for the reference codec scaled by
// coflow.Fabric.ClassFactors), so the same codec may be worth it for one
// flow and not for another, and Γ' — hence the order — differs from SEBF's
// Γ by more than a common factor.
//
// With compression disabled, or no codec with ratio < 1, steps 1–4 are
// SEBF + MADD + backfilling.
//
// Cost of one call, with A active coflows, P_c ports and F_c unfinished
// flows of coflow c: O(A·log A + P + Σ_c P_c) for the order, plus one plan
// (the greedy, O(F_c·log F_c + F_c·log P_c)) for each coflow whose Γ' is
// needed and not remembered. Γ' is remembered from the previous call for
// a coflow none of whose flows got a rate there (same Sent, WireSent,
// Bytes and flow list, same fabric view); otherwise it is first bracketed
// from the per-port loads, and planned only when its bracket overlaps
// another's. Step 3 plans only coflows that can get capacity (a coflow
// that needs a full port is recognised in O(P_c + F_c) without planning)
// and reuses step 1's plan for a coflow whose ports nothing above it
// touched; step 4 visits coflows with an open source and destination port
// (and, in them, only flows whose two ports are open), the core steps only
// coflows given a rate (and stop once no machine has a free core). The
// greedy keeps the touched ports in an indexed heap (each port once, with
// its current time) and sorts a coflow's candidate flows once per plan,
// by insertion from the order of the coflow's previous plan, which is
// nearly sorted when its flows advanced together (O(F_c) then, instead of
// O(F_c·log F_c)). The allocation is exactly the one re-planning
// everything with the original greedy gives
// (TestIncremental_SameAsReference, TestPlan_SameAsReferenceGreedy).
// Config.ReplanPeriod > 1 is an approximation of steps 1–2 (a running
// coflow's Γ' scaled from its last plan by its raw bottleneck's change);
// off by default.
// What still grows with every active flow: each running coflow is
// re-planned when its bracket overlaps another's, because its Γ' depends on
// every one of its flows' remaining bytes, and all of them moved.
//
// It is a pure, single-goroutine value: no clocks, no goroutines.
type Scheduler struct {
	cfg Config
	est Estimator

	// scratch, reused across calls
	allocs  []coflow.Allocation
	pl      planner
	fair    *coflow.Fair
	scratch []int
	al      []coflow.Allocation
	order   []int // positions in State.Coflows, priority order of the last call
	prof    []coflow.CodecProfile
	gamma   []float64
	base    []int
	given   []int
	init    []bool // per position: al entries initialised this call
	planned []bool // per position: step 1 planned it this call
	exact   []bool // per position: gamma is Γ' (not a bracket's end)
	lo, hi  []float64
	byLo    []int
	choice1 []int  // step 1's choice per flow slot (base-indexed)
	has     []bool // per position: some flow got a rate this call
	remIn   []float64
	remOut  []float64
	cores   []float64
	isIn    []bool // per port: ingress left (step 4)
	isOut   []bool // per port: egress left (step 4)

	// incremental state: Γ' per coflow Index, valid while the fabric
	// view (epoch) is unchanged and the coflow did not run.
	memo   []memo
	spare  memo  // for an Index outside memo's range: never valid
	hinted []int // memo indices holding a hint
	calls  uint64
	epoch  uint64
	views  uint64 // fabric views seen (checkEpoch): epoch without fair slices

	scaledN int // Γ' scaled instead of planned (Config.ReplanPeriod), for tests
	view    fabricView
}

// memo is a coflow's Γ' on the full free resources, with what it was
// computed from.
type memo struct {
	ok      bool
	ran     bool   // some flow of it got a rate in the call seen
	seen    uint64 // the last call it was present in
	epoch   uint64
	gamma   float64
	sent    float64
	wire    float64
	bytes   float64
	n       int
	id      int
	arrival time.Duration
	first   *coflow.FlowState
	// With Config.ReplanPeriod > 1: the call of the last plan and the raw
	// bottleneck then (approx is false when there is none to scale).
	approx  bool
	planned uint64
	view    uint64
	raw     float64
	// hint is the coflow's candidate order at its last plan (planner.greedy),
	// kept while it is present; it only speeds up the next plan's sort.
	hint *candHint
}

// valid reports whether m still holds c's Γ': computed under this fabric
// view, present in the previous call and given no rate there (so, with a
// driver that pauses the flows it got no allocation for, as coflow.Sim
// does, none of its flows moved), and with the same counters and flow list.
func (m *memo) valid(c *coflow.CoflowState, epoch, calls uint64) bool {
	if !m.ok || m.epoch != epoch || m.seen+1 != calls || m.ran {
		return false
	}
	if m.sent != c.Sent || m.wire != c.WireSent || m.bytes != c.Bytes || m.n != len(c.Flows) ||
		m.id != c.ID || m.arrival != c.Arrival {
		return false
	}
	return len(c.Flows) == 0 || m.first == &c.Flows[0]
}

func (m *memo) set(c *coflow.CoflowState, epoch uint64, gamma float64) {
	*m = memo{ok: true, epoch: epoch, gamma: gamma, sent: c.Sent, wire: c.WireSent, bytes: c.Bytes,
		n: len(c.Flows), id: c.ID, arrival: c.Arrival, seen: m.seen, ran: m.ran, hint: m.hint,
		approx: m.approx, planned: m.planned, view: m.view, raw: m.raw}
	if len(c.Flows) > 0 {
		m.first = &c.Flows[0]
	}
}

// scaled returns the approximate Γ' of Config.ReplanPeriod for c (see
// there): the last plan's Γ' times raw/m.raw, raw being c's raw bottleneck
// now; ok is false when c must be planned.
func (m *memo) scaled(c *coflow.CoflowState, view, calls uint64, period int, raw float64) (float64, bool) {
	if !m.approx || m.view != view || calls-m.planned >= uint64(period) {
		return 0, false
	}
	if m.id != c.ID || m.arrival != c.Arrival || len(c.Flows) == 0 || len(c.Flows) > m.n {
		return 0, false
	}
	if !(m.raw > 0) || !(raw > 0) || math.IsInf(raw, 0) || math.IsInf(m.raw, 0) {
		return 0, false
	}
	return m.gamma * (raw / m.raw), true
}

// maxMemo bounds the coflow indices whose Γ' is remembered.
const maxMemo = 1 << 16

func (s *Scheduler) memoFor(index int) *memo {
	if index < 0 || index >= maxMemo {
		s.spare = memo{}
		return &s.spare
	}
	if index >= len(s.memo) {
		s.memo = append(s.memo, make([]memo, index+1-len(s.memo))...)
	}
	return &s.memo[index]
}

// hintFor returns the candidate order remembered for coflow Index index,
// for planner.plan, listing it in s.hinted so that dropHints frees it once
// the coflow is gone; nil outside the memo's range.
func (s *Scheduler) hintFor(index int) *candHint {
	if index < 0 || index >= maxMemo {
		return nil
	}
	m := s.memoFor(index)
	if m.hint == nil {
		m.hint = &candHint{}
		s.hinted = append(s.hinted, index)
	}
	return m.hint
}

// dropHints frees the hints of coflows absent from this call, so that
// they hold memory only for present coflows.
func (s *Scheduler) dropHints() {
	kept := s.hinted[:0]
	for _, i := range s.hinted {
		if m := &s.memo[i]; m.seen == s.calls && m.hint != nil {
			kept = append(kept, i)
		} else {
			m.hint = nil
		}
	}
	s.hinted = kept
}

// fabricView is what every Γ' depends on besides the coflow itself.
type fabricView struct {
	fab                  *coflow.Fabric
	capIn, capOut, cores []float64
	speed                []float64
	ratio, s, u          []float64
	codecs               []int
	nk                   int
}

// checkEpoch starts a new epoch (dropping every remembered Γ') when the
// fabric, its capacities, free cores, speed factors or the predicted codec
// profiles differ from the previous call's. Cost O(P + classes·codecs).
func (s *Scheduler) checkEpoch(f *coflow.Fabric) {
	pl, v := &s.pl, &s.view
	same := v.fab == f && v.nk == pl.nk && slices.Equal(v.capIn, pl.capIn) && slices.Equal(v.capOut, pl.capOut) &&
		slices.Equal(v.cores, pl.capCores) && slices.Equal(v.ratio, pl.ratio) && slices.Equal(v.s, pl.s) &&
		slices.Equal(v.u, pl.u) && slices.Equal(v.codecs, pl.codecs) && len(v.speed) == len(f.Ports)
	if same {
		for p := range f.Ports {
			if v.speed[p] != speedFactor(f.Ports[p]) {
				same = false
				break
			}
		}
	}
	if same {
		return
	}
	s.epoch++
	s.views++
	v.fab, v.nk = f, pl.nk
	v.capIn = append(v.capIn[:0], pl.capIn...)
	v.capOut = append(v.capOut[:0], pl.capOut...)
	v.cores = append(v.cores[:0], pl.capCores...)
	v.ratio = append(v.ratio[:0], pl.ratio...)
	v.s = append(v.s[:0], pl.s...)
	v.u = append(v.u[:0], pl.u...)
	v.codecs = append(v.codecs[:0], pl.codecs...)
	v.speed = v.speed[:0]
	for p := range f.Ports {
		v.speed = append(v.speed, speedFactor(f.Ports[p]))
	}
}

func growF(x []float64, n int) []float64 {
	if cap(x) < n {
		return make([]float64, n)
	}
	return x[:n]
}

func growI(x []int, n int) []int {
	if cap(x) < n {
		return make([]int, n)
	}
	x = x[:n]
	x[0] = 0
	return x
}

func growB(x []bool, n int) []bool {
	if cap(x) < n {
		return make([]bool, n)
	}
	x = x[:n]
	clear(x)
	return x
}

// Order returns the priority order of the last Schedule call as positions
// in the State's Coflows (ascending Γ'), or nil if that call was a
// starvation-guard fair slice or had no coflows. The slice is reused by
// the next call.
func (s *Scheduler) Order() []int { return s.order }

var (
	_ coflow.Scheduler   = (*Scheduler)(nil)
	_ coflow.Timer       = (*Scheduler)(nil)
	_ coflow.EventDriven = (*Scheduler)(nil)
)

// New returns an FVDF scheduler deciding with estimator est (nil means
// [Nominal]).
func New(cfg Config, est Estimator) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if est == nil {
		est = Nominal{}
	}
	return &Scheduler{cfg: cfg, est: est, fair: coflow.NewFair()}, nil
}

// Name returns "fvdf", "fvdf-raw" with compression disabled, or
// "sebf-order+fvdf" with Config.OrderBySEBF.
func (s *Scheduler) Name() string {
	switch {
	case s.cfg.DisableCompression:
		return "fvdf-raw"
	case s.cfg.OrderBySEBF:
		return "sebf-order+fvdf"
	}
	return "fvdf"
}

// Config returns the validated configuration.
func (s *Scheduler) Config() Config { return s.cfg }

// OnlyOnArrivalsAndCompletions implements coflow.EventDriven.
func (s *Scheduler) OnlyOnArrivalsAndCompletions() bool { return !s.cfg.EveryFlowEvent }

// NextWakeup implements coflow.Timer: the next start or end of a fair
// slice of the starvation guard.
func (s *Scheduler) NextWakeup(now time.Duration) (time.Duration, bool) {
	return coflow.NextSliceBoundary(now, s.cfg.StarvationPeriod, s.cfg.StarvationSlice)
}

// inFairSlice reports whether now is inside a starvation-guard slice.
func (s *Scheduler) inFairSlice(now time.Duration) bool {
	T := s.cfg.StarvationPeriod
	return T > 0 && now%T < s.cfg.StarvationSlice
}

// Schedule implements coflow.Scheduler.
//
// The work is incremental (see the Scheduler doc, "Cost"): a coflow's Γ'
// on the full free resources (steps 1–2) is kept from the previous call
// when none of its flows got a rate there and its counters are unchanged;
// in step 3 a coflow that needs a port another coflow already filled is
// recognised as waiting from its per-port loads and the flows at that
// port; backfilling (step 4) visits only coflows with an open source and an
// open destination port, and the core steps only coflows given a rate.
// The allocation is the one the full recomputation returns, bit for bit
// (TestIncremental_SameAsReference).
func (s *Scheduler) Schedule(now time.Duration, st *coflow.State) []coflow.Allocation {
	s.allocs = s.allocs[:0]
	s.order = s.order[:0]
	s.calls++
	if len(st.Coflows) == 0 {
		s.epoch++ // nothing to remember
		return s.allocs
	}
	if s.inFairSlice(now) {
		// Step 5: the starvation guard's fair slice: per-flow max-min
		// sharing, raw (package coflow's Fair, as in its SEBF guard). Every
		// flow may run, so no cached plan survives it.
		s.epoch++
		return s.fair.Schedule(now, st)
	}
	pl := &s.pl
	s.prof = s.codecProfilesInto(now, st.Fabric, s.prof)
	pl.reset(st.Fabric, s.cfg, s.prof)
	s.checkEpoch(st.Fabric)

	// Flattened per-flow slots, indexed by (coflow position, flow slot).
	n := len(st.Coflows)
	s.base = growI(s.base, n+1)
	base := s.base
	for i := range st.Coflows {
		base[i+1] = base[i] + len(st.Coflows[i].Flows)
	}

	// Step 1–2: order by Γ' on the full free resources. A coflow's Γ'
	// is remembered from the previous call if it did not run (memo), or
	// else bracketed in O(P_c) (planner.bounds); it is planned only while
	// its bracket overlaps another coflow's, since otherwise the bracket
	// alone places it. The plan's per-flow choice is kept for step 3.
	s.gamma = growF(s.gamma, n)
	s.lo = growF(s.lo, n)
	s.hi = growF(s.hi, n)
	gamma, lo, hi := s.gamma, s.lo, s.hi
	s.planned = growB(s.planned, n)
	s.exact = growB(s.exact, n)
	if cap(s.choice1) < base[n] {
		s.choice1 = make([]int, base[n])
	}
	s.choice1 = s.choice1[:base[n]]
	pl.boundSetup()
	planAt := func(i int) {
		c := &st.Coflows[i]
		gamma[i], s.scratch = pl.plan(c, pl.capIn, pl.capOut, pl.capCores, s.scratch[:0], s.hintFor(c.Index))
		m := s.memoFor(c.Index)
		m.set(c, s.epoch, gamma[i])
		if s.cfg.ReplanPeriod > 1 {
			m.approx, m.planned, m.view, m.raw = true, s.calls, s.views, pl.rawBottleneck(c)
		}
		s.exact[i] = true
		if len(s.scratch) == len(c.Flows) {
			s.planned[i] = true
			copy(s.choice1[base[i]:base[i+1]], s.scratch)
		}
	}
	s.byLo = s.byLo[:0]
	if s.cfg.OrderBySEBF {
		// SEBF's key: Γ of the raw bytes on the full capacities, as
		// plan computes it with no codec (bit for bit package coflow's).
		// Step 3 then plans every coflow with codecs.
		codecs := pl.codecs
		pl.codecs = nil
		for i := range st.Coflows {
			s.order = append(s.order, i)
			gamma[i], _ = pl.plan(&st.Coflows[i], pl.capIn, pl.capOut, pl.capCores, nil, nil)
			s.exact[i] = true
		}
		pl.codecs = codecs
	}
	for i := range st.Coflows {
		if s.cfg.OrderBySEBF {
			break
		}
		c := &st.Coflows[i]
		s.order = append(s.order, i)
		m := s.memoFor(c.Index)
		var approx float64
		switch {
		case m.valid(c, s.epoch, s.calls):
			gamma[i], lo[i], hi[i], s.exact[i] = m.gamma, m.gamma, m.gamma, true
		case s.cfg.ReplanPeriod > 1 && func() bool {
			var ok bool
			approx, ok = m.scaled(c, s.views, s.calls, s.cfg.ReplanPeriod, pl.rawBottleneck(c))
			return ok
		}():
			// Config.ReplanPeriod's approximation: a point, not planned.
			gamma[i], lo[i], hi[i], s.exact[i] = approx, approx, approx, true
			s.scaledN++
		case pl.bounds(c, &lo[i], &hi[i]):
			m.ok = false // until planned
		default:
			planAt(i)
			lo[i], hi[i] = gamma[i], gamma[i]
		}
		m.seen, m.ran = s.calls, false
		s.byLo = append(s.byLo, i)
	}
	// Brackets that overlap (touching counts) form groups. In each group
	// of two or more, the widest bracket (by hi/lo) is planned, which
	// turns it into a point and may split the group; this repeats until
	// every group is a single bracket or only points. A lone bracket is
	// disjoint from every other, so its lower end orders it exactly.
	for {
		slices.SortFunc(s.byLo, func(a, b int) int {
			if c := cmpF(lo[a], lo[b]); c != 0 {
				return c
			}
			return cmpF(hi[a], hi[b])
		})
		planned := false
		for x := 0; x < len(s.byLo); {
			y, top := x+1, hi[s.byLo[x]]
			for y < len(s.byLo) && lo[s.byLo[y]] <= top {
				top = max(top, hi[s.byLo[y]])
				y++
			}
			if y-x > 1 {
				w, wi := 0.0, -1
				for _, i := range s.byLo[x:y] {
					if s.exact[i] {
						continue
					}
					r := math.Inf(1)
					if lo[i] > 0 {
						r = hi[i] / lo[i]
					}
					if wi < 0 || r > w {
						w, wi = r, i
					}
				}
				if wi >= 0 {
					planAt(wi)
					lo[wi], hi[wi] = gamma[wi], gamma[wi]
					planned = true
				}
			}
			x = y
		}
		if !planned {
			break
		}
	}
	for i := range st.Coflows {
		if !s.exact[i] {
			gamma[i] = lo[i]
		}
	}
	order := s.order
	slices.SortFunc(order, func(ca, cb int) int {
		if gamma[ca] != gamma[cb] {
			if gamma[ca] < gamma[cb] {
				return -1
			}
			return 1
		}
		if x, y := st.Coflows[ca].Arrival, st.Coflows[cb].Arrival; x != y {
			if x < y {
				return -1
			}
			return 1
		}
		return st.Coflows[ca].Index - st.Coflows[cb].Index
	})

	// Per-flow allocations; a coflow's entries are initialised only when
	// it may get something.
	if cap(s.al) < base[n] {
		s.al = make([]coflow.Allocation, base[n])
	}
	al := s.al[:base[n]]
	s.init = growB(s.init, n)
	s.has = growB(s.has, n)
	initAl := func(ci int) {
		if s.init[ci] {
			return
		}
		s.init[ci] = true
		row := al[base[ci]:base[ci+1]]
		for j := range st.Coflows[ci].Flows {
			row[j] = coflow.Allocation{Flow: st.Coflows[ci].Flows[j].Ref}
		}
	}
	given := s.given[:0]
	s.remIn = append(s.remIn[:0], pl.capIn...)
	s.remOut = append(s.remOut[:0], pl.capOut...)
	s.cores = append(s.cores[:0], pl.capCores...)
	remIn, remOut, cores := s.remIn, s.remOut, s.cores

	{
		// Step 3: MADD in FVDF order on what is left.
		choice := s.scratch[:0]
		for _, ci := range order {
			c := &st.Coflows[ci]
			var g float64
			var use []int
			if s.planned[ci] && pl.untouched(c, remIn, remOut, cores) {
				// Its resources are the full ones of step 1: same plan.
				g, use = gamma[ci], s.choice1[base[ci]:base[ci+1]]
			} else {
				if pl.waits(c, remIn, remOut, cores) {
					continue // Γ = +Inf: a port it needs is full
				}
				g, choice = pl.plan(c, remIn, remOut, cores, choice[:0], s.hintFor(c.Index))
				use = choice
			}
			if !(g > 0) || math.IsInf(g, 0) {
				continue
			}
			initAl(ci)
			for j, f := range c.Flows {
				a := &al[base[ci]+j]
				v := f.Remaining
				if v <= 0 {
					continue
				}
				k := coflow.Raw
				if use != nil {
					k = use[j]
				}
				if k == coflow.Raw {
					a.Rate = math.Min(v/g, math.Min(remIn[f.Src], remOut[f.Dst]))
				} else {
					// Disposal v/Γ, capped by what is left (rounding).
					rho, sp, up := pl.rho(f.Class, k), pl.sSpeed(f.Src, f.Class, k), pl.uSpeed(f.Dst, f.Class, k)
					m := pl.m
					d := math.Min(v/g, math.Min(remIn[f.Src], remOut[f.Dst])/(m*rho))
					if f.Src == f.Dst {
						d = math.Min(d, cores[f.Src]/(m/sp+m/up))
					} else {
						d = math.Min(d, math.Min(cores[f.Src]*sp, cores[f.Dst]*up)/m)
					}
					a.Codec = k
					a.Rate, a.SendCores, a.RecvCores = m*rho*d, m*d/sp, m*d/up
					if s.cfg.WholeCores && !pl.wholeCores(a, f, cores) {
						// No whole cores left at an end: send raw.
						*a = coflow.Allocation{Flow: f.Ref, Rate: math.Min(v/g, math.Min(remIn[f.Src], remOut[f.Dst]))}
					}
				}
				if !(a.Rate > 0) {
					*a = coflow.Allocation{Flow: f.Ref}
					continue
				}
				take(a, f, remIn, remOut, cores)
				given = append(given, base[ci]+j)
				s.has[ci] = true
			}
		}
	}
	// Step 4: backfill bandwidth, then cores, in the same order. A flow
	// gets extra bandwidth only if its source and destination both have
	// capacity left, and ports only fill up: a coflow whose source ports,
	// or whose destination ports, are all full gets nothing, nor does any
	// coflow once every ingress or every egress is full.
	// isIn[p], isOut[p]: p's ingress, egress still has capacity (pl.eff).
	s.isIn, s.isOut = growB(s.isIn, len(remIn)), growB(s.isOut, len(remOut))
	isIn, isOut := s.isIn, s.isOut
	openIn, openOut := 0, 0
	for p := range remIn {
		if pl.eff(remIn[p], pl.capIn[p]) > 0 {
			isIn[p] = true
			openIn++
		}
		if pl.eff(remOut[p], pl.capOut[p]) > 0 {
			isOut[p] = true
			openOut++
		}
	}
	for _, ci := range order {
		if openIn == 0 || openOut == 0 {
			break
		}
		c := &st.Coflows[ci]
		if pl.closed(c, remIn, remOut) {
			continue
		}
		for j := range c.Flows {
			f := &c.Flows[j]
			if f.Remaining <= 0 || !isIn[f.Src] || !isOut[f.Dst] {
				continue // backfillBandwidth would give it nothing
			}
			initAl(ci)
			a := &al[base[ci]+j]
			was := a.Rate
			pl.backfillBandwidth(a, *f, remIn, remOut, cores)
			if was == 0 && a.Rate > 0 {
				given = append(given, base[ci]+j)
				s.has[ci] = true
			}
			if !(pl.eff(remIn[f.Src], pl.capIn[f.Src]) > 0) {
				isIn[f.Src] = false
				openIn--
			}
			if !(pl.eff(remOut[f.Dst], pl.capOut[f.Dst]) > 0) {
				isOut[f.Dst] = false
				openOut--
			}
		}
	}
	if len(pl.codecs) > 0 && pl.m == 1 {
		// backfillCores switches only a raw flow with a rate and free
		// cores at both ends (cores only fall here), so the others are
		// skipped, and all once no machine has a free core.
		free := 0
		for p := range cores {
			if cores[p] > 0 {
				free++
			}
		}
		for _, ci := range order {
			if free == 0 {
				break
			}
			if !s.has[ci] {
				continue // no flow of it has a rate: nothing to switch
			}
			c := &st.Coflows[ci]
			row := al[base[ci]:base[ci+1]]
			for j := range c.Flows {
				f := &c.Flows[j]
				if a := &row[j]; f.Remaining > 0 && a.Codec == coflow.Raw && a.Rate > 0 && cores[f.Src] > 0 && cores[f.Dst] > 0 {
					pl.backfillCores(a, *f, cores)
					if !(cores[f.Src] > 0) {
						free--
					}
					if f.Dst != f.Src && !(cores[f.Dst] > 0) {
						free--
					}
				}
			}
		}
	}
	if !s.cfg.NoCoreHeadroom && !s.cfg.WholeCores && len(pl.codecs) > 0 {
		pl.coreHeadroom(st, al, base, cores, s.has)
	}
	// Emit in the order flows first got a rate (priority order), as package
	// coflow's ordering schedulers do, so the driver sees identical input.
	for _, k := range given {
		if al[k].Rate > 0 {
			s.allocs = append(s.allocs, al[k])
		}
	}
	for ci := range st.Coflows {
		if s.has[ci] {
			s.memoFor(st.Coflows[ci].Index).ran = true
		}
	}
	clear(s.init)
	clear(s.has)
	s.given = given
	s.dropHints()
	return s.allocs
}

// take subtracts a's wire rate and cores from the remaining resources.
func take(a *coflow.Allocation, f coflow.FlowState, remIn, remOut, cores []float64) {
	remIn[f.Src] = math.Max(0, remIn[f.Src]-a.Rate)
	remOut[f.Dst] = math.Max(0, remOut[f.Dst]-a.Rate)
	cores[f.Src] = math.Max(0, cores[f.Src]-a.SendCores)
	cores[f.Dst] = math.Max(0, cores[f.Dst]-a.RecvCores)
}

// codecProfiles returns the estimated profile of every fabric codec
// (index k, k ≥ 1; entry 0 unused), or nil when compression is off.
func (s *Scheduler) codecProfiles(now time.Duration, f *coflow.Fabric) []coflow.CodecProfile {
	return s.codecProfilesInto(now, f, nil)
}

// codecProfilesInto is codecProfiles reusing buf's backing array.
func (s *Scheduler) codecProfilesInto(now time.Duration, f *coflow.Fabric, buf []coflow.CodecProfile) []coflow.CodecProfile {
	if s.cfg.DisableCompression || len(f.Codecs) == 0 {
		return nil
	}
	out := buf[:0]
	for range len(f.Codecs) + 1 {
		out = append(out, coflow.CodecProfile{})
	}
	unc, derate := s.est.(Uncertain)
	derate = derate && !s.cfg.NoDerate
	for k := 1; k <= len(f.Codecs); k++ {
		out[k] = s.est.Estimate(now, f, k)
		if derate {
			// Plan with a pessimistic speed: predicted / (1 + recent error).
			if e := unc.Uncertainty(k); e > 0 {
				out[k].CompressSpeed /= 1 + e
				out[k].DecompressSpeed /= 1 + e
			}
		}
	}
	return out
}

// planner holds the per-call fabric view and the scratch of plan.
type planner struct {
	fab      *coflow.Fabric
	cfg      Config
	m        float64   // stage factor: 1 pipelined, 3 sequential
	codecs   []int     // codec ids usable for some class (ratio < 1)
	nk       int       // codec ids per class: len(fabric codecs)+1
	ratio    []float64 // by class·nk + codec id
	s, u     []float64 // per-core speeds by class·nk + codec id, before SpeedFactor
	capIn    []float64
	capOut   []float64
	capCores []float64

	// plan scratch, indexed by port
	stamp          []int
	gen            int
	win, wout, cpu []float64
	touched        []int
	byPort         [][]int // candidate flow slots per touched port
	cursor         []int
	ncomp          []int // compressed flows of the planned coflow per machine
	reserved       []float64
	tried          []bool
	hp             []int     // greedy's indexed heap of ports
	hpos           []int     // per port: its position in hp
	tval           []float64 // per port: its time in hp

	kv   []remKey
	slot []int32   // flow id → slot, for a hint
	key  []float64 // per slot: remaining bytes of a candidate, else -1

	// bounds' parameters for the call, and its per-port sums
	rhoMin, sMax, uMax float64
	vin, vout          []float64
}

func (pl *planner) reset(f *coflow.Fabric, cfg Config, prof []coflow.CodecProfile) {
	pl.fab, pl.cfg = f, cfg
	pl.m = 1
	if cfg.SequentialStages {
		pl.m = 3
	}
	n := f.NumPorts()
	pl.capIn = resize(pl.capIn, n)
	pl.capOut = resize(pl.capOut, n)
	pl.capCores = resize(pl.capCores, n)
	for p, port := range f.Ports {
		pl.capIn[p] = port.Ingress
		pl.capOut[p] = port.Egress
		pl.capCores[p] = port.FreeCores() * cfg.CPUFraction
	}
	pl.codecs = pl.codecs[:0]
	nc := f.NumClasses()
	pl.nk = len(prof)
	pl.ratio = resize(pl.ratio, nc*pl.nk)
	pl.s = resize(pl.s, nc*pl.nk)
	pl.u = resize(pl.u, nc*pl.nk)
	for k := 1; k < len(prof); k++ {
		c := prof[k]
		usable := false
		for cl := range nc {
			// The estimate is for the reference codec; a class scales it
			// (factors exactly 1 without classes).
			fs, fd, fr := f.ClassFactors(cl, k)
			i := cl*pl.nk + k
			pl.ratio[i], pl.s[i], pl.u[i] = c.Ratio*fr, c.CompressSpeed*fs, c.DecompressSpeed*fd
			if pl.ratio[i] > 0 && pl.ratio[i] < 1 && pl.s[i] > 0 && pl.u[i] > 0 {
				usable = true
			}
		}
		if usable {
			pl.codecs = append(pl.codecs, k)
		}
	}
	if len(pl.stamp) != n {
		pl.vin, pl.vout = make([]float64, n), make([]float64, n)
		pl.stamp = make([]int, n)
		pl.win = make([]float64, n)
		pl.wout = make([]float64, n)
		pl.cpu = make([]float64, n)
		pl.byPort = make([][]int, n)
		pl.cursor = make([]int, n)
		pl.hpos = make([]int, n)
		pl.tval = make([]float64, n)
		pl.ncomp = make([]int, n)
		pl.gen = 0
	}
}

func resize(x []float64, n int) []float64 {
	if cap(x) < n {
		return make([]float64, n)
	}
	x = x[:n]
	clear(x)
	return x
}

func speedFactor(p coflow.Port) float64 {
	if p.SpeedFactor == 0 {
		return 1
	}
	return p.SpeedFactor
}

func (pl *planner) sSpeed(p, c, k int) float64 { return pl.s[c*pl.nk+k] * speedFactor(pl.fab.Ports[p]) }
func (pl *planner) uSpeed(p, c, k int) float64 { return pl.u[c*pl.nk+k] * speedFactor(pl.fab.Ports[p]) }

// rho returns the predicted ratio of codec k on class c.
func (pl *planner) rho(c, k int) float64 { return pl.ratio[c*pl.nk+k] }

// shrinks reports whether codec k can help a flow of class c at all.
func (pl *planner) shrinks(c, k int) bool {
	i := c*pl.nk + k
	return pl.ratio[i] > 0 && pl.ratio[i] < 1 && pl.s[i] > 0 && pl.u[i] > 0
}

// div returns x/c with 0/anything = 0 and positive/0 = +Inf.
func div(x, c float64) float64 {
	if x <= 0 {
		return 0
	}
	if c <= 0 {
		return math.Inf(1)
	}
	return x / c
}

// portTime returns t_p for the given loads at p.
func portTime(win, wout, cpu, in, out, cores float64) float64 {
	return math.Max(div(win, in), math.Max(div(wout, out), div(cpu, cores)))
}

func (pl *planner) t(p int, in, out, cores []float64) float64 {
	return portTime(pl.win[p], pl.wout[p], pl.cpu[p], pl.eff(in[p], pl.capIn[p]), pl.eff(out[p], pl.capOut[p]), pl.eff(cores[p], pl.capCores[p]))
}

// zeroCap is the relative capacity below which a port (or a machine's core
// pool) counts as full, as in package coflow's built-in schedulers.
const zeroCap = 1e-12

// eff returns free, or 0 when free ≤ capacity·zeroCap (full).
func (pl *planner) eff(free, capacity float64) float64 {
	if free <= capacity*zeroCap {
		return 0
	}
	return free
}

// touch clears port p's scratch the first time this generation (pl.gen)
// uses it, and lists it in pl.touched.
func (pl *planner) touch(p int) {
	if pl.stamp[p] != pl.gen {
		pl.stamp[p] = pl.gen
		pl.win[p], pl.wout[p], pl.cpu[p] = 0, 0, 0
		pl.ncomp[p] = 0
		pl.byPort[p] = pl.byPort[p][:0]
		pl.cursor[p] = 0
		pl.touched = append(pl.touched, p)
	}
}

// startLoads starts a generation (pl.gen) of the port scratch and sets
// each of c's ports with bytes left to the load the driver aggregated
// (CoflowState.Send, Recv).
func (pl *planner) startLoads(c *coflow.CoflowState) {
	pl.gen++
	pl.touched = pl.touched[:0]
	for _, l := range c.Send {
		if l.Flows > 0 && l.Bytes > 0 {
			pl.touch(l.Port)
			pl.win[l.Port] = l.Bytes
		}
	}
	for _, l := range c.Recv {
		if l.Flows > 0 && l.Bytes > 0 {
			pl.touch(l.Port)
			pl.wout[l.Port] = l.Bytes
		}
	}
}

// plan chooses raw/codec per flow of c on resources (in, out, cores) and
// returns Γ'_C and the choice per flow slot (appended to choice[:0]; nil
// choice is allowed when only Γ' is needed). See Scheduler for the rule.
//
// hint, if not nil, carries c's candidate order from its previous plan to
// the next (see greedy); it changes only the cost, never the result.
func (pl *planner) plan(c *coflow.CoflowState, in, out, cores []float64, choice []int, hint *candHint) (float64, []int) {
	if c.Send != nil || c.Recv != nil {
		// Per-port loads aggregated by the driver: use them as they are, so
		// that Γ is bit-for-bit the one package coflow's SEBF computes.
		pl.startLoads(c)
	} else {
		pl.gen++
		pl.touched = pl.touched[:0]
		for _, f := range c.Flows {
			if f.Remaining <= 0 {
				continue
			}
			pl.touch(f.Src)
			pl.touch(f.Dst)
			pl.win[f.Src] += f.Remaining
			pl.wout[f.Dst] += f.Remaining
		}
	}
	nf := len(c.Flows)
	if choice != nil || len(pl.codecs) > 0 {
		choice = choice[:0]
		for range nf {
			choice = append(choice, coflow.Raw)
		}
	}
	if len(pl.codecs) > 0 {
		pl.greedy(c, in, out, cores, choice, hint)
	}
	g := 0.0
	for _, p := range pl.touched {
		g = math.Max(g, pl.t(p, in, out, cores))
	}
	return g, choice
}

// waits reports that plan(c, in, out, cores) would return Γ' = +Inf (c
// must wait) without planning: some port c needs is full and, as in
// plan's first greedy step at the first such port (the heap's top: largest
// t, lowest port), no codec for any candidate flow there makes its time
// finite. It answers false whenever it cannot tell cheaply (no per-port
// loads from the driver, a candidate flow's other end outside them). Cost
// O(P_c) for a coflow that is not blocked, O(P_c + F_c) for one that is.
func (pl *planner) waits(c *coflow.CoflowState, in, out, cores []float64) bool {
	if c.Send == nil && c.Recv == nil {
		return false
	}
	pl.startLoads(c)
	ps := -1
	for _, p := range pl.touched {
		if math.IsInf(pl.t(p, in, out, cores), 1) && (ps < 0 || p < ps) {
			ps = p
		}
	}
	if ps < 0 {
		return false
	}
	if len(pl.codecs) == 0 {
		return true
	}
	for j := range c.Flows {
		f := &c.Flows[j]
		if f.Remaining <= 0 || f.Src != ps && f.Dst != ps || !(cores[f.Src] > 0 && cores[f.Dst] > 0) {
			continue
		}
		if pl.stamp[f.Src] != pl.gen || pl.stamp[f.Dst] != pl.gen {
			return false
		}
		for _, k := range pl.codecs {
			if !math.IsInf(pl.tryCodec(f, k, in, out, cores), 1) {
				return false
			}
		}
	}
	return true
}

// boundSlack widens the brackets of bounds, far beyond the rounding of
// the greedy's sums (relative error ~F·2⁻⁵³).
const boundSlack = 1e-9

// boundSetup prepares bounds for this call: the smallest ratio and the
// largest per-core speeds of any (class, codec) the greedy may use.
func (pl *planner) boundSetup() {
	pl.rhoMin, pl.sMax, pl.uMax = 1, 0, 0
	for _, k := range pl.codecs {
		for cl := 0; cl*pl.nk+k < len(pl.ratio); cl++ {
			if !pl.shrinks(cl, k) {
				continue
			}
			i := cl*pl.nk + k
			pl.rhoMin = min(pl.rhoMin, pl.ratio[i])
			pl.sMax, pl.uMax = max(pl.sMax, pl.s[i]), max(pl.uMax, pl.u[i])
		}
	}
}

// bounds brackets plan(c, capIn, capOut, capCores)'s Γ' from c's per-port
// loads, without planning: *hi is the raw bottleneck
// max_p max(W_p/In_p, W'_p/Out_p) (the greedy only lowers it), and *lo the
// largest, over ports and directions, of the least time compressing some
// x ≤ V of the bytes there can reach, V the remaining bytes of the flows
// at that port side: with a = 1 − m·ρ_min and b = m/s_max (s_max the
// fastest per-core speed at the port),
//
//	min_{0≤x≤V} max((W − a·x)/In, b·x/K) = b·W/(a·K + b·In) if that x ≤ V,
//	                                      (W − a·V)/In otherwise,
//
// or W/In when a ≤ 0 or K = 0 (no compression can help). Both are widened
// by boundSlack. Cost O(P_c + F_c) with two additions per flow. It returns
// false without per-port loads from the driver.
func (pl *planner) bounds(c *coflow.CoflowState, lo, hi *float64) bool {
	if c.Send == nil && c.Recv == nil {
		return false
	}
	a := 1 - pl.m*pl.rhoMin
	compress := a > 0
	if compress {
		for _, x := range c.Send {
			pl.vin[x.Port] = 0
		}
		for _, x := range c.Recv {
			pl.vout[x.Port] = 0
		}
		for j := range c.Flows {
			if f := &c.Flows[j]; f.Remaining > 0 {
				pl.vin[f.Src] += f.Remaining
				pl.vout[f.Dst] += f.Remaining
			}
		}
	}
	l, h := 0.0, 0.0
	one := func(w, v, capa, speed float64, p int) {
		bw := pl.eff(capa, capa)
		raw := div(w, bw)
		h = max(h, raw)
		k := pl.eff(pl.capCores[p], pl.capCores[p])
		sp := speed * speedFactor(pl.fab.Ports[p])
		if !compress || !(k > 0) || !(sp > 0) {
			l = max(l, raw)
			return
		}
		b := pl.m / sp
		den := a*k + b*bw
		if xs := w * k / den; xs <= v {
			l = max(l, b*w/den)
		} else {
			l = max(l, div(w-a*v, bw))
		}
	}
	for _, x := range c.Send {
		if x.Flows > 0 && x.Bytes > 0 {
			one(x.Bytes, pl.vin[x.Port], pl.capIn[x.Port], pl.sMax, x.Port)
		}
	}
	for _, x := range c.Recv {
		if x.Flows > 0 && x.Bytes > 0 {
			one(x.Bytes, pl.vout[x.Port], pl.capOut[x.Port], pl.uMax, x.Port)
		}
	}
	*lo, *hi = l*(1-boundSlack), h*(1+boundSlack)
	return true
}

// rawBottleneck returns c's raw bottleneck on the full capacities from
// the driver's per-port loads, max_p max(W_p/In_p, W'_p/Out_p), or 0
// without them.
func (pl *planner) rawBottleneck(c *coflow.CoflowState) float64 {
	h := 0.0
	for _, x := range c.Send {
		if x.Flows > 0 && x.Bytes > 0 {
			h = max(h, div(x.Bytes, pl.eff(pl.capIn[x.Port], pl.capIn[x.Port])))
		}
	}
	for _, x := range c.Recv {
		if x.Flows > 0 && x.Bytes > 0 {
			h = max(h, div(x.Bytes, pl.eff(pl.capOut[x.Port], pl.capOut[x.Port])))
		}
	}
	return h
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// untouched reports that plan(c, in, out, cores) reads the same
// resources as plan(c, capIn, capOut, capCores): every port c's loads name
// still has its full ingress, egress and free cores, and those ports hold
// all of c's flows at both ends. False without per-port loads.
func (pl *planner) untouched(c *coflow.CoflowState, in, out, cores []float64) bool {
	if c.Send == nil && c.Recv == nil {
		return false
	}
	full := func(p int) bool {
		return in[p] == pl.capIn[p] && out[p] == pl.capOut[p] && cores[p] == pl.capCores[p]
	}
	ns, nr := 0, 0
	for _, l := range c.Send {
		if l.Flows > 0 && l.Bytes > 0 {
			if !full(l.Port) {
				return false
			}
			ns += l.Flows
		}
	}
	for _, l := range c.Recv {
		if l.Flows > 0 && l.Bytes > 0 {
			if !full(l.Port) {
				return false
			}
			nr += l.Flows
		}
	}
	return ns == len(c.Flows) && nr == len(c.Flows)
}

// closed reports that no flow of c can get more bandwidth: all its source
// ports have no ingress left, or all its destination ports no egress.
// False without per-port loads from the driver.
func (pl *planner) closed(c *coflow.CoflowState, in, out []float64) bool {
	if c.Send == nil && c.Recv == nil {
		return false
	}
	open := false
	for _, l := range c.Send {
		if l.Flows > 0 && pl.eff(in[l.Port], pl.capIn[l.Port]) > 0 {
			open = true
			break
		}
	}
	if !open {
		return true
	}
	for _, l := range c.Recv {
		if l.Flows > 0 && pl.eff(out[l.Port], pl.capOut[l.Port]) > 0 {
			return false
		}
	}
	return true
}

// greedy compresses flows at the bottleneck machine while that lowers its
// time (see Scheduler, step 1).
//
// The candidates (flows with bytes left and free cores at both ends) are
// sorted once by remaining bytes, largest first, ties by slot (a total
// order, so the result does not depend on the sort algorithm), and dealt
// to their ports in that order, so every port's list is in that order.
// The sort starts from the order this coflow's flows had at its previous
// plan (hint, when given), which is nearly sorted when its flows advanced
// together. The bottleneck is the top of an indexed max-heap of the
// touched ports on (t_p, lower port first) that holds each port once with
// its current time. This is the rule the lazy heap of (t, port) entries
// with lazily sorted port lists followed (reference_test.go keeps it):
// a lazy heap's valid entries for p all equal (t_p, p), every port has
// one, and the popped bottleneck is pushed back whenever a flow there is
// compressed, so both pick the same port at every step.
func (pl *planner) greedy(c *coflow.CoflowState, in, out, cores []float64, choice []int, hint *candHint) {
	nf := len(c.Flows)
	if cap(pl.tried) < nf {
		pl.tried = make([]bool, nf)
	}
	pl.tried = pl.tried[:nf]
	clear(pl.tried)
	kv := pl.candidates(c, cores, hint)
	if len(kv) == 0 {
		return
	}
	for _, e := range kv {
		f := &c.Flows[e.j]
		if pl.stamp[f.Src] != pl.gen {
			pl.touch(f.Src)
		}
		if pl.stamp[f.Dst] != pl.gen {
			pl.touch(f.Dst)
		}
		pl.byPort[f.Src] = append(pl.byPort[f.Src], e.j)
		if f.Dst != f.Src {
			pl.byPort[f.Dst] = append(pl.byPort[f.Dst], e.j)
		}
	}
	h := pl.hp[:0]
	for _, p := range pl.touched {
		pl.tval[p] = pl.t(p, in, out, cores)
		pl.hpos[p] = len(h)
		h = append(h, p)
	}
	pl.hp = h
	for i := len(h)/2 - 1; i >= 0; i-- {
		pl.down(i)
	}
	gain := 1 - pl.cfg.MinGain
	for len(pl.hp) > 0 {
		p := pl.hp[0]
		tstar := pl.tval[p]
		if tstar == 0 {
			return
		}
		accepted := false
		lst := pl.byPort[p]
		for pl.cursor[p] < len(lst) {
			j := lst[pl.cursor[p]]
			if choice[j] != coflow.Raw || pl.tried[j] {
				pl.cursor[p]++
				continue
			}
			f := &c.Flows[j]
			bestK, bestM := 0, math.Inf(1)
			for _, k := range pl.codecs {
				m := pl.tryCodec(f, k, in, out, cores)
				if m < bestM {
					bestK, bestM = k, m
				}
			}
			if bestK != 0 && bestM < tstar*gain {
				pl.apply(f, bestK)
				choice[j] = bestK
				pl.cursor[p]++
				pl.update(f.Src, pl.t(f.Src, in, out, cores))
				if f.Dst != f.Src {
					pl.update(f.Dst, pl.t(f.Dst, in, out, cores))
				}
				accepted = true
				break
			}
			pl.tried[j] = true
			pl.cursor[p]++
		}
		if !accepted {
			return // the bottleneck cannot be lowered: Γ' is final
		}
	}
}

// candHint is a coflow's candidate order at its previous plan: the flow
// ids, and the slots with the flow list they index (valid while the list
// is the same: same length, same first element).
type candHint struct {
	ids, slots []int32
	n          int
	first      *coflow.FlowState
}

// candidates returns c's flows with bytes left and free cores at both
// ends as (remaining, slot) pairs sorted largest first, ties by slot, and
// records their order in *hint (if not nil) for the next plan of c, whose
// sort then starts from it: by slot while c's flow list is the same, else
// by flow id.
func (pl *planner) candidates(c *coflow.CoflowState, cores []float64, hint *candHint) []remKey {
	kv := pl.kv[:0]
	ok := func(f *coflow.FlowState) bool {
		return f.Remaining > 0 && cores[f.Src] > 0 && cores[f.Dst] > 0
	}
	nf := len(c.Flows)
	switch {
	case hint != nil && len(hint.slots) > 0 && nf > 0 && hint.n == nf && hint.first == &c.Flows[0]:
		// The same flow list: the hinted slots first, in their order,
		// then the others in slot order. The keys are gathered in one
		// sequential pass (-1: not a candidate, or already listed), so
		// the hint's order reads 8 bytes per flow, not a FlowState.
		key := pl.key[:0]
		for j := range c.Flows {
			r := -1.0
			if f := &c.Flows[j]; ok(f) {
				r = f.Remaining
			}
			key = append(key, r)
		}
		for _, j := range hint.slots {
			if int(j) < nf && key[j] >= 0 {
				kv = append(kv, remKey{key[j], int(j)})
				key[j] = -1
			}
		}
		for j, r := range key {
			if r >= 0 {
				kv = append(kv, remKey{r, j})
			}
		}
		pl.key = key
	case hint != nil && len(hint.ids) > 0 && c.Width > 0 && c.Width <= 4*nf+1024:
		// Slot of each flow id (Ref.Flow < Width), -1 if absent; the
		// hinted ids first, in their order, then the others in slot order.
		slot := pl.slot[:0]
		for range c.Width {
			slot = append(slot, -1)
		}
		valid := true
		for j := range c.Flows {
			id := c.Flows[j].Ref.Flow
			if id < 0 || id >= c.Width || slot[id] >= 0 {
				valid = false
				break
			}
			slot[id] = int32(j)
		}
		if valid {
			for _, id := range hint.ids {
				if int(id) < len(slot) {
					if j := slot[id]; j >= 0 {
						slot[id] = -1
						if f := &c.Flows[j]; ok(f) {
							kv = append(kv, remKey{f.Remaining, int(j)})
						}
					}
				}
			}
			for j := range c.Flows {
				if f := &c.Flows[j]; slot[f.Ref.Flow] >= 0 && ok(f) {
					kv = append(kv, remKey{f.Remaining, j})
				}
			}
		} else {
			kv = kv[:0]
			for j := range c.Flows {
				if f := &c.Flows[j]; ok(f) {
					kv = append(kv, remKey{f.Remaining, j})
				}
			}
		}
		pl.slot = slot
	default:
		for j := range c.Flows {
			if f := &c.Flows[j]; ok(f) {
				kv = append(kv, remKey{f.Remaining, j})
			}
		}
	}
	sortRem(kv)
	pl.kv = kv
	if hint != nil {
		ids, slots := hint.ids[:0], hint.slots[:0]
		for _, e := range kv {
			ids = append(ids, int32(c.Flows[e.j].Ref.Flow))
			slots = append(slots, int32(e.j))
		}
		hint.ids, hint.slots, hint.n, hint.first = ids, slots, nf, nil
		if nf > 0 {
			hint.first = &c.Flows[0]
		}
	}
	return kv
}

// remBefore is candidates' order: more remaining bytes first, ties by slot.
func remBefore(a, b remKey) bool {
	if a.r != b.r {
		return a.r > b.r
	}
	return a.j < b.j
}

// sortRem sorts kv in remBefore's order: by insertion, which is linear on
// the nearly sorted input a hint gives, until it has moved more than 8
// elements per element; then by pdqsort. remBefore is a total order on
// distinct slots, so both give the same result.
func sortRem(kv []remKey) {
	limit, moves := 8*len(kv)+64, 0
	for i := 1; i < len(kv); i++ {
		x, j := kv[i], i
		for j > 0 && remBefore(x, kv[j-1]) {
			kv[j] = kv[j-1]
			j--
		}
		kv[j] = x
		if moves += i - j; moves > limit {
			slices.SortFunc(kv, func(a, b remKey) int {
				if remBefore(a, b) {
					return -1
				}
				if remBefore(b, a) {
					return 1
				}
				return 0
			})
			return
		}
	}
}

// down restores the port heap below position i.
func (pl *planner) down(i int) {
	h := pl.hp
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && pl.before(h[r], h[l]) {
			j = r
		}
		if !pl.before(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		pl.hpos[h[i]], pl.hpos[h[j]] = i, j
		i = j
	}
}

// up restores the port heap above position j.
func (pl *planner) up(j int) {
	h := pl.hp
	for j > 0 {
		i := (j - 1) / 2
		if !pl.before(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		pl.hpos[h[i]], pl.hpos[h[j]] = i, j
		j = i
	}
}

// before orders the port heap: larger t first, ties to the lower port.
func (pl *planner) before(p, q int) bool {
	if a, b := pl.tval[p], pl.tval[q]; a != b {
		return a > b
	}
	return p < q
}

// update sets port p's time in the heap to t, adding p if it is not there
// (a flow's end whose load the driver did not list).
func (pl *planner) update(p int, t float64) {
	i := pl.hpos[p]
	if i < 0 || i >= len(pl.hp) || pl.hp[i] != p {
		pl.tval[p] = t
		pl.hpos[p] = len(pl.hp)
		pl.hp = append(pl.hp, p)
		pl.up(len(pl.hp) - 1)
		return
	}
	old := pl.tval[p]
	pl.tval[p] = t
	if t > old || t == old {
		pl.up(i)
	}
	pl.down(pl.hpos[p])
}

// tryCodec returns max(t_src, t_dst) if flow f were compressed with k.
func (pl *planner) tryCodec(f *coflow.FlowState, k int, in, out, cores []float64) float64 {
	if !pl.shrinks(f.Class, k) {
		return math.Inf(1)
	}
	v, rho := f.Remaining, pl.rho(f.Class, k)
	s, d := f.Src, f.Dst
	if pl.cfg.WholeCores {
		// Each compressed flow needs at least one whole core per end.
		if s == d && float64(pl.ncomp[s]+2) > math.Floor(cores[s]+1e-9) ||
			s != d && (float64(pl.ncomp[s]+1) > math.Floor(cores[s]+1e-9) || float64(pl.ncomp[d]+1) > math.Floor(cores[d]+1e-9)) {
			return math.Inf(1)
		}
	}
	m := pl.m
	cs := m * v / pl.sSpeed(s, f.Class, k)
	cd := m * v / pl.uSpeed(d, f.Class, k)
	w := m * rho * v
	if s == d {
		return portTime(pl.win[s]-v+w, pl.wout[d]-v+w, pl.cpu[s]+cs+cd, in[s], out[s], cores[s])
	}
	ts := portTime(pl.win[s]-v+w, pl.wout[s], pl.cpu[s]+cs, in[s], out[s], cores[s])
	td := portTime(pl.win[d], pl.wout[d]-v+w, pl.cpu[d]+cd, in[d], out[d], cores[d])
	return math.Max(ts, td)
}

func (pl *planner) apply(f *coflow.FlowState, k int) {
	v, rho := f.Remaining, pl.rho(f.Class, k)
	m := pl.m
	pl.win[f.Src] += m*rho*v - v
	pl.wout[f.Dst] += m*rho*v - v
	pl.cpu[f.Src] += m * v / pl.sSpeed(f.Src, f.Class, k)
	pl.cpu[f.Dst] += m * v / pl.uSpeed(f.Dst, f.Class, k)
	pl.ncomp[f.Src]++
	pl.ncomp[f.Dst]++
}

// wholeCores rounds a's core reservations up to whole cores (tolerating
// rounding noise of 1e-9 core) and reports whether the free cores allow it.
func (pl *planner) wholeCores(a *coflow.Allocation, f coflow.FlowState, cores []float64) bool {
	ks := math.Max(1, math.Ceil(a.SendCores-1e-9))
	kr := math.Max(1, math.Ceil(a.RecvCores-1e-9))
	if f.Src == f.Dst {
		if ks+kr > cores[f.Src]+1e-9 {
			return false
		}
	} else if ks > cores[f.Src]+1e-9 || kr > cores[f.Dst]+1e-9 {
		return false
	}
	a.SendCores, a.RecvCores = ks, kr
	return true
}

// backfillBandwidth gives flow a (allocated or not) the leftover capacity of
// its ports; a compressed flow can use more wire only as far as free cores
// at both ends let it compress and decompress the extra.
func (pl *planner) backfillBandwidth(a *coflow.Allocation, f coflow.FlowState, remIn, remOut, cores []float64) {
	extra := math.Min(pl.eff(remIn[f.Src], pl.capIn[f.Src]), pl.eff(remOut[f.Dst], pl.capOut[f.Dst]))
	if !(extra > 0) {
		return
	}
	if a.Codec != coflow.Raw && pl.cfg.WholeCores {
		// Use only the slack of the cores already reserved.
		k := a.Codec
		rho := pl.rho(f.Class, k)
		extra = math.Min(extra, rho*math.Min(a.SendCores*pl.sSpeed(f.Src, f.Class, k), a.RecvCores*pl.uSpeed(f.Dst, f.Class, k))-a.Rate)
		if !(extra > 0) {
			return
		}
		add := coflow.Allocation{Rate: extra}
		a.Rate += extra
		take(&add, f, remIn, remOut, cores)
		return
	}
	if a.Codec != coflow.Raw {
		k := a.Codec
		rho := pl.rho(f.Class, k)
		// extra wire w needs w/(ρ s) sender and w/(ρ u) receiver cores.
		needS := 1 / (rho * pl.sSpeed(f.Src, f.Class, k))
		needU := 1 / (rho * pl.uSpeed(f.Dst, f.Class, k))
		if f.Src == f.Dst {
			extra = math.Min(extra, cores[f.Src]/(needS+needU))
		} else {
			extra = math.Min(extra, math.Min(cores[f.Src]/needS, cores[f.Dst]/needU))
		}
		if !(extra > 0) {
			return
		}
		add := coflow.Allocation{Rate: extra, SendCores: extra * needS, RecvCores: extra * needU}
		a.Rate += add.Rate
		a.SendCores += add.SendCores
		a.RecvCores += add.RecvCores
		take(&add, f, remIn, remOut, cores)
		return
	}
	a.Rate += extra
	remIn[f.Src] = math.Max(0, remIn[f.Src]-extra)
	remOut[f.Dst] = math.Max(0, remOut[f.Dst]-extra)
}

// coreHeadroom hands the cores still free on each machine to the compressed
// flows there, in proportion to what they reserved: every compressed flow's
// reservation is scaled by g = min(1 + free_src/reserved_src,
// 1 + free_dst/reserved_dst) ≥ 1. Its wire rate is unchanged, so it spends
// no more CPU-seconds (the bytes to compress are the same); the extra
// cores only keep its codec stages ahead of the wire when the true codec
// speed is below the prediction. Parameter-free; off with NoCoreHeadroom.
//
// has, if not nil, marks the coflow positions with a flow given a rate;
// the others are skipped (their entries of al need not be set).
func (pl *planner) coreHeadroom(st *coflow.State, al []coflow.Allocation, base []int, cores []float64, has []bool) {
	reserved := pl.reserved[:0]
	for range cores {
		reserved = append(reserved, 0)
	}
	pl.reserved = reserved
	found := false
	for i := range st.Coflows {
		if has != nil && !has[i] {
			continue
		}
		for j, f := range st.Coflows[i].Flows {
			a := &al[base[i]+j]
			if a.Codec != coflow.Raw && a.Rate > 0 {
				reserved[f.Src] += a.SendCores
				reserved[f.Dst] += a.RecvCores
				found = true
			}
		}
	}
	if !found {
		return
	}
	factor := func(p int) float64 {
		if reserved[p] <= 0 {
			return 1
		}
		return 1 + cores[p]/reserved[p]
	}
	for i := range st.Coflows {
		if has != nil && !has[i] {
			continue
		}
		for j, f := range st.Coflows[i].Flows {
			a := &al[base[i]+j]
			if a.Codec == coflow.Raw || !(a.Rate > 0) {
				continue
			}
			g := math.Min(factor(f.Src), factor(f.Dst))
			a.SendCores *= g
			a.RecvCores *= g
		}
	}
	// The scaled reservations may exceed the budget by rounding only.
	for p := range cores {
		cores[p] = 0
	}
}

// backfillCores switches a raw flow with a wire rate to the codec that lets
// it dispose fastest with the free cores, when that is strictly faster
// than raw (resource conservation). The wire rate does not grow.
func (pl *planner) backfillCores(a *coflow.Allocation, f coflow.FlowState, cores []float64) {
	if a.Codec != coflow.Raw || !(a.Rate > 0) || len(pl.codecs) == 0 || pl.m != 1 {
		return // (sequential stages: never worth it at the same wire rate)
	}
	r := a.Rate
	bestK, bestD := 0, r*(1+pl.cfg.MinGain)
	var bestKs, bestKr float64
	for _, k := range pl.codecs {
		if !pl.shrinks(f.Class, k) {
			continue
		}
		s, u, rho := pl.sSpeed(f.Src, f.Class, k), pl.uSpeed(f.Dst, f.Class, k), pl.rho(f.Class, k)
		var d float64
		if f.Src == f.Dst {
			d = math.Min(r/rho, cores[f.Src]/(1/s+1/u))
		} else {
			d = math.Min(r/rho, math.Min(cores[f.Src]*s, cores[f.Dst]*u))
		}
		ks, kr := d/s, d/u
		if pl.cfg.WholeCores {
			// Whole cores, as many as useful and available.
			ks, kr = math.Ceil(r/(rho*s)-1e-9), math.Ceil(r/(rho*u)-1e-9)
			if f.Src == f.Dst {
				for ks+kr > cores[f.Src]+1e-9 && (ks > 1 || kr > 1) {
					if ks >= kr {
						ks--
					} else {
						kr--
					}
				}
				if ks+kr > cores[f.Src]+1e-9 {
					continue
				}
			} else {
				ks, kr = math.Min(ks, math.Floor(cores[f.Src]+1e-9)), math.Min(kr, math.Floor(cores[f.Dst]+1e-9))
				if ks < 1 || kr < 1 {
					continue
				}
			}
			d = math.Min(r/rho, math.Min(ks*s, kr*u))
		}
		if d > bestD {
			bestK, bestD, bestKs, bestKr = k, d, ks, kr
		}
	}
	if bestK == 0 {
		return
	}
	a.Codec = bestK
	a.Rate = pl.rho(f.Class, bestK) * bestD
	a.SendCores, a.RecvCores = bestKs, bestKr
	cores[f.Src] = math.Max(0, cores[f.Src]-bestKs)
	cores[f.Dst] = math.Max(0, cores[f.Dst]-bestKr)
}

// remKey is a flow slot with its remaining bytes, for sorting.
type remKey struct {
	r float64
	j int
}
