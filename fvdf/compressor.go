package fvdf

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/predictor"
	"github.com/falconml/falcon/transport"
)

// CompressorConfig configures a [Compressor].
type CompressorConfig struct {
	// Codec is the fabric codec (k ≥ 1: Fabric.Codecs[k-1]) every flow is
	// sent with ("always compress"). Zero selects, per flow, the codec the
	// Policy rule ([Decide]) picks among Codecs.
	Codec int
	// Codecs are the transport codecs of the fabric's codecs, in fabric
	// order (Codecs[k-1] is fabric codec k). Required when Codec is zero;
	// ignored otherwise.
	Codecs []transport.Codec
	// Overhead is the Policy rule's per-decision overhead (policy mode).
	// Zero means none.
	Overhead time.Duration
	// Estimator, if not nil, gives the codec profiles the wrapper plans
	// with at each call (the reference codec's, scaled per class by
	// coflow.Fabric.ClassFactors, as FVDF's planner does; not derated);
	// the same knowledge of drifting codec speeds FVDF gets in a replay.
	// Nil means the fabric's nominal profiles, fixed.
	Estimator Estimator
	// WholeCores makes compressed flows run on whole codec workers, as
	// FVDF's Config.WholeCores does (PROTOCOL-v3 §7): a port has
	// ⌊free cores⌋ workers; in the inner scheduler's order, a flow the
	// inner scheduler gives wire rate r takes ⌈r/(ρs)⌉ sender and
	// ⌈r/(ρu)⌉ receiver workers, fewer if fewer are left (at least one at
	// each end, else it is sent raw at r), and runs at
	// min(r, ρ·min(k_s·s, k_r·u)). The wire a capped flow cannot use is
	// offered again in the same call in the order of Compressor's work
	// conservation: a flow holding workers takes up to their slack, a raw
	// flow any free wire, a paused flow workers if any are left (else it
	// runs raw). Zero (false) means fractional cores, as described on
	// Compressor.
	WholeCores bool
}

// Compressor turns a raw-rate scheduler (package coflow's SEBF, D-CLAS,
// Sincronia, or any other) into one that compresses: the baselines
// "sebf+lz4", "dclas+snappy", "sincronia+policy" of the FVDF study.
//
// Every flow the inner scheduler gives wire rate r is sent with a codec at
// that wire rate: the fixed one (CompressorConfig.Codec), or the one the
// per-flow Policy rule picks for its remaining bytes and class (compress
// when max(V/s, ρV/r, V/u) + overhead < V/r with one core each end). To
// keep up with the wire a compressed flow of class c needs D/s sender and
// D/u receiver cores for D = r/ρ (ρ, s, u of its class, the fabric's
// nominal profiles). When a port's free cores fall short, every
// compressed flow there is slowed by the same factor f = free/needed (its
// wire rate and cores scaled by f, the lower factor of its two ends), as
// a codec that cannot keep up slows the transfer: each flow then runs at
// its core-bound rate.
//
// Work conservation (after the slow-down, in the same call): the port
// capacity the slowed flows no longer use is offered again, greedily in
// the inner scheduler's priority order — first the flows it allocated, in
// the order it returned them (package coflow's schedulers return flows in
// the order they first got a rate, i.e. priority order), then its paused
// flows, coflow by coflow in the order of each coflow's first allocated
// flow, then coflows it gave nothing, in State (arrival) order. A flow
// gets min(free ingress at its source, free egress at its destination),
// and a compressed flow (a paused flow takes the fixed codec, or the one
// the Policy rule picks at that rate) no more than the cores still free at
// both ends sustain: extra wire Δ needs Δ/(ρ·s) and Δ/(ρ·u) more cores.
// So bandwidth a core-starved flow cannot use goes to flows that can. It
// runs only in calls where some flow was slowed; a call without core
// shortage returns the inner allocation with codecs and cores added,
// exactly as the study's first (non-work-conserving) wrapper did.
//
// Why here: cmd/falcon-coflow and the baseline matrix (internal/coflowmatrix)
// run the same baselines; one exported wrapper keeps their numbers
// comparable, and the work-conserving rule is tested once (its test,
// TestCompressor_ReoffersFreedBandwidth, fails on the earlier wrapper).
//
// Cost per call: O(P + A + len(allocation)) (a flow's ends and class are
// recorded when its coflow is first seen, O(F_c) once; the Policy rule
// adds a binary search in the flow's coflow per allocation), plus, in
// calls that redistribute, O(Σ_c P_c + A·log A) to rank the coflows with
// an open port and O(F_c) for each one visited. With a fixed codec, an
// inner allocation equal to the previous call's, on the same fabric and
// with the same coflows and numbers of unfinished flows (or after a call
// that did not redistribute), returns the previous output in
// O(A + len(allocation)). Measured on FB2010 (seed 1, 10 Gbit/s, 1 core):
// sebf+lz4 under every flow completion 10.5 s a run (8.6 s with the
// earlier wrapper), dclas+lz4 under Varys' rule 36 s (19 s; it is also
// called 125k times instead of 75k, its threshold timers firing on the
// faster flows).
//
// Ports with a SpeedFactor other than 1 are refused (panic): the nominal
// per-class speeds are taken at factor 1. A Compressor caches by FlowRef
// across calls: use one per run (a new one for a new Sim.Run).
type Compressor struct {
	inner  coflow.Scheduler
	codec  int
	codecs []transport.Codec
	over   time.Duration
	estor  Estimator
	whole  bool

	fab         *coflow.Fabric
	nk          int
	rho, sp, up []float64              // per class·nk + codec
	est         [][]predictor.Estimate // per class: the Policy rule's estimates

	out      []coflow.Allocation
	pos      []int        // coflow Index → position in State.Coflows
	meta     [][]flowMeta // coflow Index → per flow (Ref.Flow): ends, class, mark
	gen      uint32       // mark of the flows in this call's allocation
	need     []float64
	fac      []float64
	src, dst []int32
	cls      []int32
	resIn    []float64
	resOut   []float64
	spare    []float64
	rank     []int // per position: first allocation index, or len(al)+position
	byRank   []int
	// The previous call's inner allocation and fabric, whether it
	// redistributed, and its coflows' (Index, unfinished flows): a fixed
	// codec's output depends on nothing else (redistribution reads which
	// flows are unfinished, and flows only ever finish).
	prevIn     []coflow.Allocation
	prevFab    *coflow.Fabric
	prevSpread bool
	prevSet    []int
}

// flowMeta is what the wrapper needs of a flow besides the allocation.
type flowMeta struct {
	src, dst, cls int32
	mark          uint32
}

// metaOf returns the metadata of flow ref (unfinished, in s), recorded
// from s the first time its coflow is seen. O(1), O(F_c) the first time.
func (c *Compressor) metaOf(s *coflow.State, ref coflow.FlowRef) *flowMeta {
	for len(c.meta) <= ref.Coflow {
		c.meta = append(c.meta, nil)
	}
	m := c.meta[ref.Coflow]
	if ref.Flow >= len(m) || m[ref.Flow].src < 0 {
		cs := &s.Coflows[c.pos[ref.Coflow]]
		n := max(cs.Width, ref.Flow+1)
		if old := len(m); old < n {
			m = append(m, make([]flowMeta, n-old)...)
			for j := old; j < n; j++ {
				m[j].src = -1 // not recorded yet
			}
		}
		for j := range cs.Flows {
			f := &cs.Flows[j]
			if f.Ref.Flow < len(m) && m[f.Ref.Flow].src < 0 {
				m[f.Ref.Flow] = flowMeta{src: int32(f.Src), dst: int32(f.Dst), cls: int32(f.Class)}
			}
		}
		c.meta[ref.Coflow] = m
	}
	return &m[ref.Flow]
}

// sameSet reports whether s has the coflows (Index) and numbers of
// unfinished flows recorded in prevSet, and records them. O(A).
func (c *Compressor) sameSet(s *coflow.State) bool {
	same := len(c.prevSet) == 2*len(s.Coflows)
	for i := range s.Coflows {
		x, n := s.Coflows[i].Index, len(s.Coflows[i].Flows)
		if same && (c.prevSet[2*i] != x || c.prevSet[2*i+1] != n) {
			same = false
		}
		if !same {
			break
		}
	}
	if !same {
		c.prevSet = c.prevSet[:0]
		for i := range s.Coflows {
			c.prevSet = append(c.prevSet, s.Coflows[i].Index, len(s.Coflows[i].Flows))
		}
	}
	return same
}

var (
	_ coflow.Scheduler   = (*Compressor)(nil)
	_ coflow.EventDriven = (*Compressor)(nil)
	_ coflow.Timer       = (*Compressor)(nil)
)

// NewCompressor wraps inner.
func NewCompressor(inner coflow.Scheduler, cfg CompressorConfig) (*Compressor, error) {
	if inner == nil {
		return nil, fmt.Errorf("%w: nil inner scheduler", ErrConfig)
	}
	if cfg.Codec < 0 || cfg.Codec == 0 && len(cfg.Codecs) == 0 {
		return nil, fmt.Errorf("%w: compressor needs a codec (≥ 1) or the policy's codecs", ErrConfig)
	}
	if cfg.Overhead < 0 {
		return nil, fmt.Errorf("%w: negative policy overhead %v", ErrConfig, cfg.Overhead)
	}
	return &Compressor{inner: inner, codec: cfg.Codec, codecs: cfg.Codecs, over: cfg.Overhead, estor: cfg.Estimator, whole: cfg.WholeCores}, nil
}

// Name returns the inner scheduler's name.
func (c *Compressor) Name() string { return c.inner.Name() }

// OnlyOnArrivalsAndCompletions forwards the inner scheduler's EventDriven.
func (c *Compressor) OnlyOnArrivalsAndCompletions() bool {
	e, ok := c.inner.(coflow.EventDriven)
	return ok && e.OnlyOnArrivalsAndCompletions()
}

// NextWakeup forwards the inner scheduler's Timer.
func (c *Compressor) NextWakeup(now time.Duration) (time.Duration, bool) {
	if t, ok := c.inner.(coflow.Timer); ok {
		return t.NextWakeup(now)
	}
	return 0, false
}

// prepare caches the per-(class, codec) profiles of fab.
func (c *Compressor) prepare(fab *coflow.Fabric) {
	for _, p := range fab.Ports {
		if p.SpeedFactor != 0 && p.SpeedFactor != 1 {
			panic("fvdf: Compressor: ports with a SpeedFactor are not supported")
		}
	}
	if c.codec > len(fab.Codecs) {
		panic(fmt.Sprintf("fvdf: Compressor: codec %d, fabric has %d", c.codec, len(fab.Codecs)))
	}
	c.fab = fab
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
	c.policyEstimates()
}

// estimate replaces the profiles by the Estimator's at now.
func (c *Compressor) estimate(now time.Duration, fab *coflow.Fabric) {
	for k := 1; k < c.nk; k++ {
		e := c.estor.Estimate(now, fab, k)
		for cl := range fab.NumClasses() {
			fs, fd, fr := fab.ClassFactors(cl, k)
			i := cl*c.nk + k
			c.rho[i], c.sp[i], c.up[i] = e.Ratio*fr, e.CompressSpeed*fs, e.DecompressSpeed*fd
		}
	}
	c.policyEstimates()
}

// policyEstimates sets the Policy rule's estimates from the profiles.
func (c *Compressor) policyEstimates() {
	c.est = c.est[:0]
	for range c.fab.NumClasses() {
		c.est = append(c.est, nil)
	}
	for cl := range c.est {
		for j := range c.codecs {
			if j+1 >= c.nk {
				break
			}
			x := cl*c.nk + j + 1
			c.est[cl] = append(c.est[cl], predictor.Estimate{CompressSpeed: c.sp[x], DecompressSpeed: c.up[x], Ratio: c.rho[x]})
		}
	}
}

// flow returns the unfinished flow ref of s (it must be in s).
func (c *Compressor) flow(s *coflow.State, ref coflow.FlowRef) (int, int) {
	i := c.pos[ref.Coflow]
	fs := s.Coflows[i].Flows
	j := sort.Search(len(fs), func(j int) bool { return fs[j].Ref.Flow >= ref.Flow })
	return i, j
}

// pick returns the codec (1-based, Raw for none) for flow f at wire rate r.
func (c *Compressor) pick(f *coflow.FlowState, r float64) int {
	if c.codec != 0 {
		return c.codec
	}
	n := int(math.Min(f.Remaining, math.MaxInt32))
	best, _ := Decide(n, r, c.over, c.codecs[:len(c.est[f.Class])], c.est[f.Class])
	for j, cd := range c.codecs {
		if cd == best && best != transport.CodecNone {
			return j + 1
		}
	}
	return coflow.Raw
}

// Schedule rewrites the inner scheduler's allocation (see Compressor).
func (c *Compressor) Schedule(now time.Duration, s *coflow.State) []coflow.Allocation {
	al := c.inner.Schedule(now, s)
	fab := s.Fabric
	if c.fab != fab {
		c.prepare(fab)
	}
	if c.estor != nil {
		c.estimate(now, fab)
		c.prevFab = nil // the profiles may have changed: no reuse
	}
	if c.codec != 0 {
		set := c.sameSet(s) // recorded for the next call in any case
		if (set || !c.prevSpread) && fab == c.prevFab && coflow.SameAllocations(al, c.prevIn) {
			return c.out
		}
		c.prevIn, c.prevFab = append(c.prevIn[:0], al...), fab
	}
	c.prevSpread = false
	for i := range s.Coflows {
		idx := s.Coflows[i].Index
		for len(c.pos) <= idx {
			c.pos = append(c.pos, -1)
		}
		c.pos[idx] = i
	}
	np := fab.NumPorts()
	if len(c.need) != np {
		c.need, c.fac = make([]float64, np), make([]float64, np)
		c.resIn, c.resOut, c.spare = make([]float64, np), make([]float64, np), make([]float64, np)
	}
	clear(c.need)
	c.out = append(c.out[:0], al...)
	c.src, c.dst, c.cls = c.src[:0], c.dst[:0], c.cls[:0]
	c.gen++
	if c.gen == 0 { // wrapped: clear old marks
		for _, m := range c.meta {
			for j := range m {
				m[j].mark = 0
			}
		}
		c.gen = 1
	}
	if c.whole {
		for p, pt := range fab.Ports {
			c.spare[p] = math.Floor(pt.FreeCores() + 1e-9)
		}
	}
	compressed, slowed := false, false
	for i := range c.out {
		a := &c.out[i]
		m := c.metaOf(s, a.Flow)
		m.mark = c.gen
		c.src = append(c.src, m.src)
		c.dst = append(c.dst, m.dst)
		c.cls = append(c.cls, m.cls)
		if !(a.Rate > 0) {
			continue
		}
		k := c.codec
		if k == 0 {
			ci, j := c.flow(s, a.Flow)
			k = c.pick(&s.Coflows[ci].Flows[j], a.Rate)
		}
		if k == coflow.Raw {
			continue
		}
		x := int(m.cls)*c.nk + k
		d := a.Rate / c.rho[x]
		if c.whole {
			ks, kr := c.workers(int(m.src), int(m.dst), d/c.sp[x], d/c.up[x])
			if ks < 1 {
				continue // no worker left at an end: raw at r
			}
			r := math.Min(a.Rate, c.rho[x]*math.Min(ks*c.sp[x], kr*c.up[x]))
			if r < a.Rate {
				slowed = true
			}
			a.Codec, a.Rate, a.SendCores, a.RecvCores = k, r, ks, kr
			continue
		}
		a.Codec, a.SendCores, a.RecvCores = k, d/c.sp[x], d/c.up[x]
		c.need[m.src] += a.SendCores
		c.need[m.dst] += a.RecvCores
		compressed = true
	}
	if c.whole {
		if slowed {
			c.redistribute(s, len(al))
			c.prevSpread = true
		}
		return c.out
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
		m := math.Min(c.fac[c.src[i]], c.fac[c.dst[i]])
		if m < 1 {
			slowed = true
		}
		g := m * (1 - 1e-12) // rounding margin for the validator
		a.Rate *= g
		a.SendCores *= g
		a.RecvCores *= g
	}
	if slowed {
		c.redistribute(s, len(al))
		c.prevSpread = true
	}
	return c.out
}

// workers takes whole codec workers for a flow from src to dst that needs
// needS sender and needR receiver cores: ⌈need⌉ at each end (at least 1),
// capped by the workers left in c.spare (at one port, the larger demand
// gives way first), and returns them, or (0, 0) when an end has none left.
func (c *Compressor) workers(src, dst int, needS, needR float64) (float64, float64) {
	ks := math.Max(1, math.Ceil(needS-1e-9))
	kr := math.Max(1, math.Ceil(needR-1e-9))
	if src == dst {
		avail := c.spare[src]
		if avail < 2 {
			return 0, 0
		}
		for ks+kr > avail {
			if ks >= kr {
				ks--
			} else {
				kr--
			}
		}
	} else {
		ks, kr = math.Min(ks, c.spare[src]), math.Min(kr, c.spare[dst])
		if ks < 1 || kr < 1 {
			return 0, 0
		}
	}
	c.spare[src] -= ks
	c.spare[dst] -= kr
	return ks, kr
}

// offerWhole gives allocation a (flow f of class cls from src to dst) the
// wire left on its path, whole-core mode (CompressorConfig.WholeCores): a
// flow holding workers up to their slack, a raw flow with a rate any of
// it, a paused flow workers if any are left at both ends (else raw).
// Returns whether a got anything.
func (c *Compressor) offerWhole(a *coflow.Allocation, f *coflow.FlowState, src, dst, cls int) bool {
	r := math.Min(c.resIn[src], c.resOut[dst])
	if !(r > 0) {
		return false
	}
	switch {
	case a.Codec != coflow.Raw:
		x := cls*c.nk + a.Codec
		r = math.Min(r, c.rho[x]*math.Min(a.SendCores*c.sp[x], a.RecvCores*c.up[x])-a.Rate)
	case a.Rate == 0:
		k := c.codec
		if k == 0 {
			k = c.pick(f, r)
		}
		if k != coflow.Raw {
			x := cls*c.nk + k
			if ks, kr := c.workers(src, dst, r/(c.rho[x]*c.sp[x]), r/(c.rho[x]*c.up[x])); ks >= 1 {
				a.Codec, a.SendCores, a.RecvCores = k, ks, kr
				r = math.Min(r, c.rho[x]*math.Min(ks*c.sp[x], kr*c.up[x]))
			}
		}
	}
	if !(r > 0) {
		return false
	}
	r *= 1 - 1e-12 // rounding margin for the validator
	a.Rate += r
	c.resIn[src] = trim(c.resIn[src]-r, c.fab.Ports[src].Ingress)
	c.resOut[dst] = trim(c.resOut[dst]-r, c.fab.Ports[dst].Egress)
	return true
}

// spread is the relative margin below which a port's free capacity or
// cores count as none when redistributing (dust from rounding).
const spread = 1e-9

// trim returns free, or 0 when free ≤ capacity·spread.
func trim(free, capacity float64) float64 {
	if free <= capacity*spread {
		return 0
	}
	return free
}

// redistribute offers the capacity left after the slow-down (see
// Compressor); nal is the inner allocation's length.
func (c *Compressor) redistribute(s *coflow.State, nal int) {
	fab := s.Fabric
	for p, pt := range fab.Ports {
		c.resIn[p], c.resOut[p] = pt.Ingress, pt.Egress
		if !c.whole { // (whole cores: c.spare holds the workers left)
			c.spare[p] = pt.FreeCores()
		}
	}
	for i := range c.out {
		a := &c.out[i]
		c.resIn[c.src[i]] -= a.Rate
		c.resOut[c.dst[i]] -= a.Rate
		if !c.whole {
			c.spare[c.src[i]] -= a.SendCores
			c.spare[c.dst[i]] -= a.RecvCores
		}
	}
	for p, pt := range fab.Ports {
		c.resIn[p] = trim(c.resIn[p], pt.Ingress)
		c.resOut[p] = trim(c.resOut[p], pt.Egress)
		if !c.whole {
			c.spare[p] = trim(c.spare[p], pt.FreeCores())
		}
	}
	// extra returns what is left on the path of a flow from src to dst
	// of class cls with codec k (Raw: none).
	extra := func(src, dst, cls, k int) float64 {
		r := math.Min(c.resIn[src], c.resOut[dst])
		if !(r > 0) || k == coflow.Raw {
			return r
		}
		x := cls*c.nk + k
		cs, cu := 1/(c.rho[x]*c.sp[x]), 1/(c.rho[x]*c.up[x]) // cores per wire B/s
		if src == dst {
			return math.Min(r, c.spare[src]/(cs+cu))
		}
		return math.Min(r, math.Min(c.spare[src]/cs, c.spare[dst]/cu))
	}
	take := func(a *coflow.Allocation, src, dst, cls int, r float64) {
		r *= 1 - 1e-12 // rounding margin for the validator
		a.Rate += r
		ps, pd := &fab.Ports[src], &fab.Ports[dst]
		c.resIn[src] = trim(c.resIn[src]-r, ps.Ingress)
		c.resOut[dst] = trim(c.resOut[dst]-r, pd.Egress)
		if a.Codec != coflow.Raw {
			x := cls*c.nk + a.Codec
			ks, kr := r/(c.rho[x]*c.sp[x]), r/(c.rho[x]*c.up[x])
			a.SendCores += ks
			a.RecvCores += kr
			c.spare[src] = trim(c.spare[src]-ks, ps.FreeCores())
			c.spare[dst] = trim(c.spare[dst]-kr, pd.FreeCores())
		}
	}
	n := len(s.Coflows)
	if cap(c.rank) < n {
		c.rank = make([]int, n)
	}
	c.rank = c.rank[:n]
	for i := range c.rank {
		c.rank[i] = nal + i
	}
	// 1. The inner scheduler's flows, in its order.
	for i := range nal {
		a := &c.out[i]
		ci := c.pos[a.Flow.Coflow]
		c.rank[ci] = min(c.rank[ci], i)
		src, dst, cls := int(c.src[i]), int(c.dst[i]), int(c.cls[i])
		if c.whole {
			var f *coflow.FlowState
			if a.Rate == 0 && a.Codec == coflow.Raw && c.codec == 0 {
				_, j := c.flow(s, a.Flow)
				f = &s.Coflows[ci].Flows[j]
			}
			c.offerWhole(a, f, src, dst, cls)
			continue
		}
		k := a.Codec
		if a.Rate == 0 && k == coflow.Raw {
			// Paused by the inner scheduler: a codec as for a paused flow.
			r := math.Min(c.resIn[src], c.resOut[dst])
			if !(r > 0) {
				continue
			}
			if k = c.codec; k == 0 {
				_, j := c.flow(s, a.Flow)
				k = c.pick(&s.Coflows[ci].Flows[j], r)
			}
		}
		if r := extra(src, dst, cls, k); r > 0 {
			a.Codec = k
			take(a, src, dst, cls, r)
		}
	}
	// 2. Paused flows, coflows in rank order.
	c.byRank = c.byRank[:0]
	for i := range n {
		if c.open(&s.Coflows[i]) {
			c.byRank = append(c.byRank, i)
		}
	}
	sort.Slice(c.byRank, func(x, y int) bool { return c.rank[c.byRank[x]] < c.rank[c.byRank[y]] })
	for _, ci := range c.byRank {
		cs := &s.Coflows[ci]
		if !c.open(cs) {
			continue
		}
		var meta []flowMeta
		if cs.Index < len(c.meta) {
			meta = c.meta[cs.Index]
		}
		for j := range cs.Flows {
			f := &cs.Flows[j]
			if f.Remaining <= 0 || f.Ref.Flow < len(meta) && meta[f.Ref.Flow].mark == c.gen {
				continue // done, or in the inner allocation: seen in step 1
			}
			if c.whole {
				a := coflow.Allocation{Flow: f.Ref}
				if c.offerWhole(&a, f, f.Src, f.Dst, f.Class) {
					c.out = append(c.out, a)
				}
				continue
			}
			r := math.Min(c.resIn[f.Src], c.resOut[f.Dst])
			if !(r > 0) {
				continue
			}
			k := c.pick(f, r)
			if r = extra(f.Src, f.Dst, f.Class, k); !(r > 0) {
				continue
			}
			c.out = append(c.out, coflow.Allocation{Flow: f.Ref, Codec: k})
			take(&c.out[len(c.out)-1], f.Src, f.Dst, f.Class, r)
		}
	}
}

// open reports whether coflow cs has a source port with free ingress and
// a destination port with free egress (else none of its flows can get
// anything). Cost O(P_c), or O(F_c) without per-port loads.
func (c *Compressor) open(cs *coflow.CoflowState) bool {
	if cs.Send == nil && cs.Recv == nil {
		return true
	}
	in, out := false, false
	for _, l := range cs.Send {
		if l.Flows > 0 && c.resIn[l.Port] > 0 {
			in = true
			break
		}
	}
	for _, l := range cs.Recv {
		if l.Flows > 0 && c.resOut[l.Port] > 0 {
			out = true
			break
		}
	}
	return in && out
}
