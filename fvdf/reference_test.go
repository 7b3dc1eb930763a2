package fvdf

import (
	"math"
	"sort"
	"time"

	"github.com/falconml/falcon/coflow"
)

// refScheduler is the non-incremental FVDF: every call re-plans every
// coflow from scratch. It shares the planner (plan, greedy, backfilling)
// with Scheduler and exists only to check that Scheduler's incremental
// Schedule returns the same allocations. The planner's own changes since
// 315c584 keep its results by construction: the typed heap pops in the
// order container/heap did (Less is a total order on distinct entries;
// TestTHeap_SameAsContainerHeap), and the per-port sort uses the same total
// order on (remaining, slot).
type refScheduler struct {
	*Scheduler // cfg, est, fair, NextWakeup, OnlyOnArrivalsAndCompletions

	allocs  []coflow.Allocation
	pl      planner
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
		gamma[i], s.scratch = pl.plan(&st.Coflows[i], pl.capIn, pl.capOut, pl.capCores, s.scratch[:0])
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
			g, ch := pl.plan(c, remIn, remOut, cores, choice[:0])
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
