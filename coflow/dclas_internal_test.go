package coflow

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"
)

// refDCLAS is the non-incremental D-CLAS: every call collects every flow
// of every coflow that is not blocked.
type refDCLAS struct {
	*DCLAS        // cfg, Queue, upper, NextWakeup
	book          rateBook
	idx           []int
	q             []int
	sel, src, dst []int32
	w             []float64
	rate          []float64
	wake          time.Duration
	hasWake       bool
}

func (d *refDCLAS) NextWakeup(time.Duration) (time.Duration, bool) { return d.wake, d.hasWake }

// Schedule is D-CLAS's Schedule before the incremental version (commit
// 315c584), kept as the reference of the differential test.
func (d *refDCLAS) Schedule(now time.Duration, s *State) []Allocation {
	b := &d.book
	b.reset(s)
	d.idx, d.q = d.idx[:0], d.q[:0]
	for i := range s.Coflows {
		d.idx = append(d.idx, i)
		d.q = append(d.q, d.Queue(s.Coflows[i].Sent))
	}
	// State order is arrival order, so a stable sort by queue is FIFO
	// within each queue.
	sort.SliceStable(d.idx, func(a, c int) bool { return d.q[d.idx[a]] < d.q[d.idx[c]] })
	if d.cfg.Weighted {
		d.sel, d.src, d.dst, d.w = d.sel[:0], d.src[:0], d.dst[:0], d.w[:0]
		for _, i := range d.idx {
			d.collect(s, i, float64(d.cfg.Queues-d.q[i]))
		}
		b.waterFill(d.sel, d.src, d.dst, d.w)
	} else {
		for _, i := range d.idx {
			if b.blocked(&s.Coflows[i]) {
				continue // every flow already has a full port: nothing to give
			}
			d.sel, d.src, d.dst, d.w = d.sel[:0], d.src[:0], d.dst[:0], d.w[:0]
			d.collect(s, i, 1)
			b.waterFill(d.sel, d.src, d.dst, d.w)
		}
	}
	// Timer: earliest threshold crossing among coflows with a positive rate.
	d.hasWake = false
	best := math.Inf(1)
	d.rate = append(d.rate[:0], make([]float64, len(s.Coflows))...)
	for x, k := range b.given {
		d.rate[b.givenCo[x]] += b.rates[k]
	}
	for i := range s.Coflows {
		c := &s.Coflows[i]
		rate := d.rate[i]
		up := d.upper(d.q[i])
		if rate > 0 && !math.IsInf(up, 1) {
			best = math.Min(best, (up-c.Sent)/rate)
		}
	}
	if !math.IsInf(best, 1) {
		// Round up to the next nanosecond so the coflow has crossed.
		d.wake, d.hasWake = now+time.Duration(math.Ceil(best*1e9))+1, true
	}
	return b.emit(s)
}

func (d *refDCLAS) collect(s *State, i int, w float64) {
	c := &s.Coflows[i]
	for j := range c.Flows {
		d.sel = append(d.sel, int32(d.book.off[i]+j))
		d.src = append(d.src, int32(c.Flows[j].Src))
		d.dst = append(d.dst, int32(c.Flows[j].Dst))
		d.w = append(d.w, w)
	}
}

// dclasLockstep drives the incremental DCLAS and the reference with the
// same State and fails at the first call whose allocations (fields and
// order) or timer differ.
type dclasLockstep struct {
	tb    testing.TB
	inc   *DCLAS
	ref   *refDCLAS
	calls int
	slow  float64 // if > 0, the rates returned are scaled by it
	out   []Allocation
}

func (l *dclasLockstep) Name() string { return "dclas" }
func (l *dclasLockstep) OnlyOnArrivalsAndCompletions() bool {
	return l.inc.OnlyOnArrivalsAndCompletions()
}
func (l *dclasLockstep) NextWakeup(now time.Duration) (time.Duration, bool) {
	a, ok := l.inc.NextWakeup(now)
	b, ok2 := l.ref.NextWakeup(now)
	if a != b || ok != ok2 {
		l.tb.Fatalf("call %d: wakeup %v %v, reference %v %v", l.calls, a, ok, b, ok2)
	}
	return a, ok
}

func (l *dclasLockstep) Schedule(now time.Duration, st *State) []Allocation {
	l.calls++
	want := l.ref.Schedule(now, st)
	got := l.inc.Schedule(now, st)
	if len(got) != len(want) {
		l.tb.Fatalf("call %d at %v: %d allocations, reference %d", l.calls, now, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			l.tb.Fatalf("call %d at %v: allocation %d is %+v, reference %+v", l.calls, now, i, got[i], want[i])
		}
	}
	return slowed(got, l.slow, &l.out)
}

// slowed returns al with every rate scaled by slow (al itself if slow is
// 0): the flows then progress slower than D-CLAS assumes, as under a codec
// that cannot keep up, so its threshold timer fires before the coflow has
// crossed and the next call sees the same queues.
func slowed(al []Allocation, slow float64, out *[]Allocation) []Allocation {
	if slow == 0 {
		return al
	}
	*out = append((*out)[:0], al...)
	for i := range *out {
		(*out)[i].Rate *= slow
	}
	return *out
}

// TestDCLAS_IncrementalSameAsReference replays seeded synthetic traces
// under D-CLAS (strict and weighted, Varys' rule and every flow completion,
// small thresholds so that coflows move between queues often, and slowed
// flows whose timers fire early, which the memo answers) with the
// incremental scheduler and the reference in lockstep: identical
// allocations at every call and identical CCTs.
func TestDCLAS_IncrementalSameAsReference(t *testing.T) {
	cfgs := map[string]DCLASConfig{
		"default":       DefaultDCLASConfig(),
		"small":         {Queues: 6, FirstThreshold: MiB, Multiplier: 4},
		"weighted":      {Queues: 6, FirstThreshold: MiB, Multiplier: 4, Weighted: true},
		"onflow":        {Queues: 6, FirstThreshold: MiB, Multiplier: 4, OnFlowCompletion: true},
		"slow":          {Queues: 6, FirstThreshold: MiB, Multiplier: 4},
		"slow-weighted": {Queues: 6, FirstThreshold: MiB, Multiplier: 4, Weighted: true},
	}
	for name, dc := range cfgs {
		slow := 0.0
		if strings.HasPrefix(name, "slow") {
			slow = 0.3
		}
		for seed := uint64(1); seed <= 3; seed++ {
			if slow > 0 && seed > 1 {
				break // one seed is enough
			}
			t.Run(fmt.Sprintf("%s/seed=%d", name, seed), func(t *testing.T) {
				sc := SynthConfig{Ports: 30, Coflows: 80, MeanInterArrival: 300 * time.Millisecond, MaxWidth: 15}
				if slow > 0 {
					sc.Coflows = 25 // thousands of calls a run otherwise
				}
				tr, err := Synthetic(sc, rand.New(rand.NewPCG(seed, 20)))
				if err != nil {
					t.Fatal(err)
				}
				cfs, err := tr.ToCoflows()
				if err != nil {
					t.Fatal(err)
				}
				mk := func() *DCLAS {
					d, err := NewDCLAS(dc)
					if err != nil {
						t.Fatal(err)
					}
					return d
				}
				fab := tr.Fabric(GigabitBytesPerSec)
				ls := &dclasLockstep{tb: t, inc: mk(), ref: &refDCLAS{DCLAS: mk()}, slow: slow}
				sim, err := NewSim(DefaultConfig(), fab, ls)
				if err != nil {
					t.Fatal(err)
				}
				got, err := sim.Run(cfs)
				if err != nil {
					t.Fatal(err)
				}
				sim, err = NewSim(DefaultConfig(), fab, refOnlyDCLAS{r: &refDCLAS{DCLAS: mk()}, slow: slow})
				if err != nil {
					t.Fatal(err)
				}
				want, err := sim.Run(cfs)
				if err != nil {
					t.Fatal(err)
				}
				for i := range want.Coflows {
					if g, w := got.Coflows[i].CCT, want.Coflows[i].CCT; g != w {
						t.Fatalf("coflow %d: CCT %v, reference %v", i, g, w)
					}
				}
				if slow > 0 && ls.inc.memoHits == 0 {
					t.Fatalf("%d calls, none answered from the memo", ls.calls)
				}
				t.Logf("%d calls identical (%d from the memo)", ls.calls, ls.inc.memoHits)
			})
		}
	}
}

// refOnlyDCLAS lets the simulator drive the reference alone.
type refOnlyDCLAS struct {
	r    *refDCLAS
	slow float64
	out  []Allocation
}

func (r refOnlyDCLAS) Name() string { return "dclas" }
func (r refOnlyDCLAS) Schedule(now time.Duration, st *State) []Allocation {
	return slowed(r.r.Schedule(now, st), r.slow, &r.out)
}
func (r refOnlyDCLAS) OnlyOnArrivalsAndCompletions() bool {
	return r.r.OnlyOnArrivalsAndCompletions()
}
func (r refOnlyDCLAS) NextWakeup(now time.Duration) (time.Duration, bool) {
	return r.r.NextWakeup(now)
}
