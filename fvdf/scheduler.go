package fvdf

import (
	"container/heap"
	"math"
	"slices"
	"sort"
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

// Name returns "fvdf", or "fvdf-raw" with compression disabled.
func (s *Scheduler) Name() string {
	if s.cfg.DisableCompression {
		return "fvdf-raw"
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
	T, d := s.cfg.StarvationPeriod, s.cfg.StarvationSlice
	if T <= 0 {
		return 0, false
	}
	phase := now % T
	if phase < d {
		return now - phase + d, true
	}
	return now - phase + T, true
}

// inFairSlice reports whether now is inside a starvation-guard slice.
func (s *Scheduler) inFairSlice(now time.Duration) bool {
	T := s.cfg.StarvationPeriod
	return T > 0 && now%T < s.cfg.StarvationSlice
}

// Schedule implements coflow.Scheduler.
func (s *Scheduler) Schedule(now time.Duration, st *coflow.State) []coflow.Allocation {
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
		pl.coreHeadroom(st, al, base, cores)
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
	if s.cfg.DisableCompression || len(f.Codecs) == 0 {
		return nil
	}
	out := make([]coflow.CodecProfile, len(f.Codecs)+1)
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
	stamp           []int
	gen             int
	win, wout, cpu  []float64
	touched         []int
	byPort          [][]int // candidate flow slots per touched port
	cursor          []int
	sorted          []bool
	ncomp           []int // compressed flows of the planned coflow per machine
	reserved        []float64
	tried, compress []bool
	h               tHeap
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
		pl.stamp = make([]int, n)
		pl.win = make([]float64, n)
		pl.wout = make([]float64, n)
		pl.cpu = make([]float64, n)
		pl.byPort = make([][]int, n)
		pl.cursor = make([]int, n)
		pl.sorted = make([]bool, n)
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

// plan chooses raw/codec per flow of c on resources (in, out, cores) and
// returns Γ'_C and the choice per flow slot (appended to choice[:0]; nil
// choice is allowed when only Γ' is needed). See Scheduler for the rule.
func (pl *planner) plan(c *coflow.CoflowState, in, out, cores []float64, choice []int) (float64, []int) {
	pl.gen++
	pl.touched = pl.touched[:0]
	touch := func(p int) {
		if pl.stamp[p] != pl.gen {
			pl.stamp[p] = pl.gen
			pl.win[p], pl.wout[p], pl.cpu[p] = 0, 0, 0
			pl.ncomp[p] = 0
			pl.byPort[p] = pl.byPort[p][:0]
			pl.cursor[p] = 0
			pl.touched = append(pl.touched, p)
		}
	}
	if c.Send != nil || c.Recv != nil {
		// Per-port loads aggregated by the driver: use them as they are, so
		// that Γ is bit-for-bit the one package coflow's SEBF computes.
		for _, l := range c.Send {
			if l.Flows > 0 && l.Bytes > 0 {
				touch(l.Port)
				pl.win[l.Port] = l.Bytes
			}
		}
		for _, l := range c.Recv {
			if l.Flows > 0 && l.Bytes > 0 {
				touch(l.Port)
				pl.wout[l.Port] = l.Bytes
			}
		}
	} else {
		for _, f := range c.Flows {
			if f.Remaining <= 0 {
				continue
			}
			touch(f.Src)
			touch(f.Dst)
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
		pl.greedy(c, in, out, cores, choice)
	}
	g := 0.0
	for _, p := range pl.touched {
		g = math.Max(g, pl.t(p, in, out, cores))
	}
	return g, choice
}

// greedy compresses flows at the bottleneck machine while that lowers its
// time (see Scheduler, step 1).
func (pl *planner) greedy(c *coflow.CoflowState, in, out, cores []float64, choice []int) {
	nf := len(c.Flows)
	if cap(pl.tried) < nf {
		pl.tried = make([]bool, nf)
	}
	pl.tried = pl.tried[:nf]
	clear(pl.tried)
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
		pl.sorted[p] = false
	}
	pl.h = pl.h[:0]
	for _, p := range pl.touched {
		pl.h = append(pl.h, tEntry{pl.t(p, in, out, cores), p})
	}
	heap.Init(&pl.h)
	gain := 1 - pl.cfg.MinGain
	for pl.h.Len() > 0 {
		top := heap.Pop(&pl.h).(tEntry)
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
		if !pl.sorted[p] {
			// Sorted lazily: most machines never become the bottleneck.
			pl.sorted[p] = true
			slices.SortFunc(lst, func(a, b int) int {
				if ra, rb := c.Flows[a].Remaining, c.Flows[b].Remaining; ra != rb {
					if ra > rb {
						return -1
					}
					return 1
				}
				return a - b
			})
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
				m := pl.tryCodec(f, k, in, out, cores)
				if m < bestM {
					bestK, bestM = k, m
				}
			}
			if bestK != 0 && bestM < tstar*gain {
				pl.apply(f, bestK)
				choice[j] = bestK
				pl.cursor[p]++
				heap.Push(&pl.h, tEntry{pl.t(f.Src, in, out, cores), f.Src})
				if f.Dst != f.Src {
					heap.Push(&pl.h, tEntry{pl.t(f.Dst, in, out, cores), f.Dst})
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

// tryCodec returns max(t_src, t_dst) if flow f were compressed with k.
func (pl *planner) tryCodec(f coflow.FlowState, k int, in, out, cores []float64) float64 {
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

func (pl *planner) apply(f coflow.FlowState, k int) {
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
func (pl *planner) coreHeadroom(st *coflow.State, al []coflow.Allocation, base []int, cores []float64) {
	reserved := pl.reserved[:0]
	for range cores {
		reserved = append(reserved, 0)
	}
	pl.reserved = reserved
	found := false
	for i := range st.Coflows {
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

type tEntry struct {
	t float64
	p int
}

// tHeap is a max-heap on t, ties to the lower port.
type tHeap []tEntry

func (h tHeap) Len() int { return len(h) }
func (h tHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t > h[j].t
	}
	return h[i].p < h[j].p
}
func (h tHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *tHeap) Push(x any)   { *h = append(*h, x.(tEntry)) }
func (h *tHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
