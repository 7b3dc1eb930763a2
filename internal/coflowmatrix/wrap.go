package main

import (
	"math"
	"sort"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/fvdf"
	"github.com/falconml/falcon/predictor"
	"github.com/falconml/falcon/transport"
)

// guarded adds Varys' starvation guard to any scheduler: during
// [k·T, k·T+δ) every flow of every active coflow shares the fabric
// max-min fairly (coflow.Fair); otherwise the inner scheduler decides. Its
// timer asks for a call at every slice boundary (the "T/δ timers"
// rescheduling rule); the inner scheduler's own timer is kept.
type guarded struct {
	inner coflow.Scheduler
	T, d  time.Duration
	fair  *coflow.Fair
}

func (g *guarded) Name() string { return g.inner.Name() }
func (g *guarded) OnlyOnArrivalsAndCompletions() bool {
	e, ok := g.inner.(coflow.EventDriven)
	return ok && e.OnlyOnArrivalsAndCompletions()
}
func (g *guarded) NextWakeup(now time.Duration) (time.Duration, bool) {
	phase := now % g.T
	at := now - phase + g.T
	if phase < g.d {
		at = now - phase + g.d
	}
	if t, ok := g.inner.(coflow.Timer); ok {
		if it, ok := t.NextWakeup(now); ok && it > now && it < at {
			at = it
		}
	}
	return at, true
}
func (g *guarded) Schedule(now time.Duration, s *coflow.State) []coflow.Allocation {
	if now%g.T < g.d {
		return g.fair.Schedule(now, s)
	}
	return g.inner.Schedule(now, s)
}

// compressor turns a raw-rate scheduler into one that compresses: every
// flow the inner scheduler gives wire rate r is sent with a codec at that
// wire rate (always-codec mode), or with the codec the per-flow Policy rule
// (fvdf.Decide: compress when max(V/s, ρV/r, V/u) + overhead < V/r with one
// core each end) picks for its remaining bytes and class (policy mode). To
// keep up with the wire a compressed flow needs D/s sender and D/u
// receiver cores for D = r/ρ; when a port's free cores fall short, every
// compressed flow there is slowed by the same factor f = free/needed (its
// wire rate and cores scaled by f), as a codec that cannot keep up slows
// the transfer.
type compressor struct {
	inner  coflow.Scheduler
	codec  int // fixed codec (1-based); 0 = policy
	codecs []transport.Codec
	cfs    []coflow.Coflow // the run's input: flows' ends and classes
	pos    []int           // coflow index → position in State.Coflows, scratch
	out    []coflow.Allocation
	need   []float64 // per port: cores the compressed flows need
	fac    []float64 // per port: min(1, free cores / need)
	src    []int32   // per allocation: the flow's ports
	dst    []int32
	// per class·codec: ratio and per-core speeds (ports have no
	// SpeedFactor here, so a class's speeds are the same at every port)
	nk          int
	rho, sp, up []float64
	est         [][]predictor.Estimate // per class: the Policy rule's estimates
	// The previous call's inner allocation and fabric: with a fixed codec
	// the output depends on nothing else, so an equal inner allocation
	// gets the previous output (c.out) again.
	prevIn  []coflow.Allocation
	prevFab *coflow.Fabric
}

// prepare caches the per-(class, codec) profiles of fab.
func (c *compressor) prepare(fab *coflow.Fabric) {
	for _, p := range fab.Ports {
		if p.SpeedFactor != 0 && p.SpeedFactor != 1 {
			panic("compressor: ports with a SpeedFactor are not supported")
		}
	}
	c.nk = len(fab.Codecs) + 1
	n := fab.NumClasses() * c.nk
	c.rho, c.sp, c.up = make([]float64, n), make([]float64, n), make([]float64, n)
	for cl := range fab.NumClasses() {
		for k := 1; k < c.nk; k++ {
			i := cl*c.nk + k
			c.rho[i] = fab.Profile(cl, k).Ratio
			c.sp[i], c.up[i] = fab.ClassSpeeds(0, 0, cl, k)
		}
	}
	c.est = make([][]predictor.Estimate, fab.NumClasses())
	for cl := range c.est {
		for j := range c.codecs {
			x := cl*c.nk + j + 1
			c.est[cl] = append(c.est[cl], predictor.Estimate{CompressSpeed: c.sp[x], DecompressSpeed: c.up[x], Ratio: c.rho[x]})
		}
	}
}

func (c *compressor) Name() string { return c.inner.Name() }
func (c *compressor) OnlyOnArrivalsAndCompletions() bool {
	e, ok := c.inner.(coflow.EventDriven)
	return ok && e.OnlyOnArrivalsAndCompletions()
}
func (c *compressor) NextWakeup(now time.Duration) (time.Duration, bool) {
	if t, ok := c.inner.(coflow.Timer); ok {
		return t.NextWakeup(now)
	}
	return 0, false
}

func (c *compressor) flow(s *coflow.State, ref coflow.FlowRef) coflow.FlowState {
	cs := &s.Coflows[c.pos[ref.Coflow]]
	i := sort.Search(len(cs.Flows), func(i int) bool { return cs.Flows[i].Ref.Flow >= ref.Flow })
	return cs.Flows[i]
}

// Schedule rewrites the inner scheduler's allocation. Cost O(P + len(al)),
// plus a binary search in the flow's coflow per allocation in policy mode;
// O(len(al)) when a fixed codec's inner allocation is the previous call's.
func (c *compressor) Schedule(now time.Duration, s *coflow.State) []coflow.Allocation {
	al := c.inner.Schedule(now, s)
	fab := s.Fabric
	if c.rho == nil {
		c.prepare(fab)
	}
	if c.codec != 0 && fab == c.prevFab && coflow.SameAllocations(al, c.prevIn) {
		return c.out
	}
	if c.codec != 0 {
		c.prevIn, c.prevFab = append(c.prevIn[:0], al...), fab
	}
	if c.codec == 0 {
		for i := range s.Coflows {
			idx := s.Coflows[i].Index
			for len(c.pos) <= idx {
				c.pos = append(c.pos, -1)
			}
			c.pos[idx] = i
		}
	}
	if len(c.need) != fab.NumPorts() {
		c.need = make([]float64, fab.NumPorts())
		c.fac = make([]float64, fab.NumPorts())
	}
	clear(c.need)
	c.out = append(c.out[:0], al...)
	c.src, c.dst = c.src[:0], c.dst[:0]
	compressed := false
	for i := range c.out {
		a := &c.out[i]
		f := &c.cfs[a.Flow.Coflow].Flows[a.Flow.Flow]
		c.src = append(c.src, int32(f.Src))
		c.dst = append(c.dst, int32(f.Dst))
		if !(a.Rate > 0) {
			continue
		}
		k := c.codec
		if k == 0 {
			n := int(math.Min(c.flow(s, a.Flow).Remaining, math.MaxInt32))
			best, _ := fvdf.Decide(n, a.Rate, PolicyOverhead, c.codecs, c.est[f.Class])
			k = 0
			for j, cd := range c.codecs {
				if cd == best {
					k = j + 1
				}
			}
			if k == 0 {
				continue // raw
			}
		}
		x := f.Class*c.nk + k
		d := a.Rate / c.rho[x]
		a.Codec, a.SendCores, a.RecvCores = k, d/c.sp[x], d/c.up[x]
		c.need[f.Src] += a.SendCores
		c.need[f.Dst] += a.RecvCores
		compressed = true
	}
	if !compressed {
		return c.out
	}
	// The slow-down of each port, once per port (the same expression per
	// flow gives the same value).
	for p := range c.fac {
		c.fac[p] = math.Min(1, fab.Ports[p].FreeCores()/c.need[p])
	}
	for i := range c.out {
		a := &c.out[i]
		if a.Codec == coflow.Raw {
			continue
		}
		g := math.Min(c.fac[c.src[i]], c.fac[c.dst[i]]) * (1 - 1e-12) // rounding margin for the validator
		a.Rate *= g
		a.SendCores *= g
		a.RecvCores *= g
	}
	return c.out
}

// orderProbe runs FVDF and, on the same state, FVDF with compression off
// (SEBF's order), and counts how often their orders differ.
type orderProbe struct {
	*fvdf.Scheduler
	raw                       *fvdf.Scheduler
	calls, differ, headDiffer int
	pairs, discordant         float64
	rank                      []int
}

func (o *orderProbe) Schedule(now time.Duration, s *coflow.State) []coflow.Allocation {
	al := o.Scheduler.Schedule(now, s)
	a := append([]int(nil), o.Scheduler.Order()...)
	if len(a) < 2 {
		return al
	}
	o.raw.Schedule(now, s)
	b := o.raw.Order()
	if len(b) != len(a) {
		return al
	}
	o.calls++
	if len(o.rank) < len(s.Coflows) {
		o.rank = make([]int, len(s.Coflows))
	}
	same := true
	for i := range a {
		if a[i] != b[i] {
			same = false
		}
		o.rank[b[i]] = i
	}
	if !same {
		o.differ++
	}
	if a[0] != b[0] {
		o.headDiffer++
	}
	// Kendall distance between the two orders (O(n²), n is small per call;
	// capped at the first 200 coflows of FVDF's order).
	n := min(len(a), 200)
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			o.pairs++
			if o.rank[a[i]] > o.rank[a[j]] {
				o.discordant++
			}
		}
	}
	return al
}
