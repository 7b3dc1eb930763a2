package fvdf

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/falconml/falcon/coflow"
)

// refScheduler is the non-incremental FVDF: every call re-plans every
// coflow from scratch. It shares the planner's backfilling with Scheduler
// but plans with its own copy of plan and greedy as of af88ef9 (a lazy
// heap of (t, port) entries, each port's candidates sorted when it first
// becomes the bottleneck; refPlanner below), and exists only to check that
// Scheduler's incremental Schedule, and planner.greedy's indexed heap and
// hinted sort, return the same allocations. The typed heap pops in the
// order container/heap did (TestTHeap_SameAsContainerHeap).
type refScheduler struct {
	*Scheduler // cfg, est, fair, NextWakeup, OnlyOnArrivalsAndCompletions

	allocs  []coflow.Allocation
	pl      planner
	rp      refPlanner
	scratch []int
	al      []coflow.Allocation
	order   []int
}

func newRef(tb interface{ Fatal(...any) }, cfg Config, est Estimator) *refScheduler {
	s, err := New(cfg, est)
	if err != nil {
		tb.Fatal(err)
	}
	return &refScheduler{Scheduler: s}
}

// Schedule is FVDF's Schedule as it was before the incremental version
// (commit 315c584), kept verbatim (coreHeadroom now takes a nil "all
// coflows" mask) as the reference of the differential tests.
func (s *refScheduler) Schedule(now time.Duration, st *coflow.State) []coflow.Allocation {
	s.allocs = s.allocs[:0]
	s.order = s.order[:0]
	if len(st.Coflows) == 0 {
		return s.allocs
	}
	if s.inFairSlice(now) {
		// Step 5: the starvation guard's fair slice: per-flow max-min
		// sharing, raw (package coflow's Fair, as in its SEBF guard).
		return s.fair.Schedule(now, st)
	}
	pl := &s.pl
	pl.reset(st.Fabric, s.cfg, s.codecProfiles(now, st.Fabric))

	// Step 1–2: order by Γ' on the full free resources.
	n := len(st.Coflows)
	order := make([]int, n)
	gamma := make([]float64, n)
	for i := range st.Coflows {
		order[i] = i
		gamma[i], s.scratch = s.rp.plan(pl, &st.Coflows[i], pl.capIn, pl.capOut, pl.capCores, s.scratch[:0])
	}
	sort.Slice(order, func(a, b int) bool {
		ca, cb := order[a], order[b]
		if gamma[ca] != gamma[cb] {
			return gamma[ca] < gamma[cb]
		}
		if x, y := st.Coflows[ca].Arrival, st.Coflows[cb].Arrival; x != y {
			return x < y
		}
		return st.Coflows[ca].Index < st.Coflows[cb].Index
	})
	s.order = append(s.order, order...)

	// Flattened per-flow allocations, indexed by (coflow slot, flow slot).
	base := make([]int, n+1)
	for i := range st.Coflows {
		base[i+1] = base[i] + len(st.Coflows[i].Flows)
	}
	if cap(s.al) < base[n] {
		s.al = make([]coflow.Allocation, base[n])
	}
	al := s.al[:base[n]]
	clear(al)
	for i := range st.Coflows {
		for j, f := range st.Coflows[i].Flows {
			al[base[i]+j].Flow = f.Ref
		}
	}
	given := make([]int, 0, len(al))
	remIn := append([]float64(nil), pl.capIn...)
	remOut := append([]float64(nil), pl.capOut...)
	cores := append([]float64(nil), pl.capCores...)

	{
		// Step 3: MADD in FVDF order on what is left.
		choice := s.scratch[:0]
		for _, ci := range order {
			c := &st.Coflows[ci]
			g, ch := s.rp.plan(pl, c, remIn, remOut, cores, choice[:0])
			choice = ch
			if !(g > 0) || math.IsInf(g, 0) {
				continue
			}
			for j, f := range c.Flows {
				a := &al[base[ci]+j]
				v := f.Remaining
				if v <= 0 {
					continue
				}
				k := coflow.Raw
				if choice != nil {
					k = choice[j]
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
			}
		}
	}
	// Step 4: backfill bandwidth, then cores, in the same order.
	for _, ci := range order {
		c := &st.Coflows[ci]
		for j, f := range c.Flows {
			if f.Remaining > 0 {
				a := &al[base[ci]+j]
				was := a.Rate
				pl.backfillBandwidth(a, f, remIn, remOut, cores)
				if was == 0 && a.Rate > 0 {
					given = append(given, base[ci]+j)
				}
			}
		}
	}
	for _, ci := range order {
		c := &st.Coflows[ci]
		for j, f := range c.Flows {
			if f.Remaining > 0 {
				pl.backfillCores(&al[base[ci]+j], f, cores)
			}
		}
	}
	if !s.cfg.NoCoreHeadroom && !s.cfg.WholeCores && len(pl.codecs) > 0 {
		pl.coreHeadroom(st, al, base, cores, nil)
	}
	// Emit in the order flows first got a rate (priority order), as package
	// coflow's ordering schedulers do, so the driver sees identical input.
	for _, k := range given {
		if al[k].Rate > 0 {
			s.allocs = append(s.allocs, al[k])
		}
	}
	return s.allocs
}

// refPlanner holds the scratch of the reference greedy that planner no
// longer has.
type refPlanner struct {
	sorted []bool
	h      tHeap
	kv     []remKey
}

// plan is planner.plan as of af88ef9, verbatim but for the greedy it
// calls (refPlanner.greedy). It chooses raw/codec per flow of c on resources (in, out, cores) and
// returns Γ'_C and the choice per flow slot (appended to choice[:0]; nil
// choice is allowed when only Γ' is needed). See Scheduler for the rule.
func (r *refPlanner) plan(pl *planner, c *coflow.CoflowState, in, out, cores []float64, choice []int) (float64, []int) {
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
		r.greedy(pl, c, in, out, cores, choice)
	}
	g := 0.0
	for _, p := range pl.touched {
		g = math.Max(g, pl.t(p, in, out, cores))
	}
	return g, choice
}

// greedy is planner.greedy as of af88ef9 (a lazy heap of (t, port)
// entries, each port's candidates sorted when it first becomes the
// bottleneck), verbatim but for its scratch. It compresses flows at the bottleneck machine while that lowers its
// time (see Scheduler, step 1).
func (r *refPlanner) greedy(pl *planner, c *coflow.CoflowState, in, out, cores []float64, choice []int) {
	nf := len(c.Flows)
	if cap(pl.tried) < nf {
		pl.tried = make([]bool, nf)
	}
	pl.tried = pl.tried[:nf]
	clear(pl.tried)
	if len(r.sorted) < len(pl.stamp) {
		r.sorted = make([]bool, len(pl.stamp))
	}
	anyCores := false
	for j, f := range c.Flows {
		if f.Remaining <= 0 {
			continue
		}
		if cores[f.Src] > 0 && cores[f.Dst] > 0 {
			anyCores = true
			pl.byPort[f.Src] = append(pl.byPort[f.Src], j)
			if f.Dst != f.Src {
				pl.byPort[f.Dst] = append(pl.byPort[f.Dst], j)
			}
		}
	}
	if !anyCores {
		return
	}
	for _, p := range pl.touched {
		r.sorted[p] = false
	}
	r.h = r.h[:0]
	for _, p := range pl.touched {
		r.h = append(r.h, tEntry{pl.t(p, in, out, cores), p})
	}
	r.h.init()
	gain := 1 - pl.cfg.MinGain
	for r.h.Len() > 0 {
		top := r.h.pop()
		p := top.p
		if cur := pl.t(p, in, out, cores); cur != top.t {
			continue // stale
		}
		tstar := top.t
		if tstar == 0 {
			return
		}
		accepted := false
		lst := pl.byPort[p]
		if !r.sorted[p] {
			// Sorted lazily: most machines never become the bottleneck.
			r.sorted[p] = true
			// Largest remaining first, ties by slot: a total order, so the
			// result does not depend on the sort algorithm. Sorted on
			// (key, slot) pairs to keep the comparisons in cache.
			kv := r.kv[:0]
			for _, j := range lst {
				kv = append(kv, remKey{c.Flows[j].Remaining, j})
			}
			slices.SortFunc(kv, func(a, b remKey) int {
				if a.r != b.r {
					if a.r > b.r {
						return -1
					}
					return 1
				}
				return a.j - b.j
			})
			for x := range kv {
				lst[x] = kv[x].j
			}
			r.kv = kv
		}
		for pl.cursor[p] < len(lst) {
			j := lst[pl.cursor[p]]
			if choice[j] != coflow.Raw || pl.tried[j] {
				pl.cursor[p]++
				continue
			}
			f := c.Flows[j]
			bestK, bestM := 0, math.Inf(1)
			for _, k := range pl.codecs {
				m := pl.tryCodec(&f, k, in, out, cores)
				if m < bestM {
					bestK, bestM = k, m
				}
			}
			if bestK != 0 && bestM < tstar*gain {
				pl.apply(&f, bestK)
				choice[j] = bestK
				pl.cursor[p]++
				r.h.push(tEntry{pl.t(f.Src, in, out, cores), f.Src})
				if f.Dst != f.Src {
					r.h.push(tEntry{pl.t(f.Dst, in, out, cores), f.Dst})
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

type tEntry struct {
	t float64
	p int
}

// tHeap is a max-heap on t, ties to the lower port. Less is a strict
// total order on distinct entries, so the sequence of pops does not depend
// on the heap's internal layout (TestTHeap_SameAsContainerHeap).
type tHeap []tEntry

func (h tHeap) Len() int { return len(h) }
func (h tHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t > h[j].t
	}
	return h[i].p < h[j].p
}

func (h tHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *tHeap) push(e tEntry) {
	*h = append(*h, e)
	x := *h
	for j := len(x) - 1; j > 0; {
		i := (j - 1) / 2
		if !x.Less(j, i) {
			break
		}
		x[i], x[j] = x[j], x[i]
		j = i
	}
}

func (h *tHeap) pop() tEntry {
	x := *h
	n := len(x) - 1
	top := x[0]
	x[0] = x[n]
	*h = x[:n]
	h.down(0)
	return top
}

func (h tHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && h.Less(r, l) {
			j = r
		}
		if !h.Less(j, i) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}
