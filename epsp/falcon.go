package epsp

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/falconml/falcon/straggler"
)

// Topology tells a policy which host each worker runs on and how many
// cores each host has. [straggler.Model] (and so [straggler.Hetero])
// satisfies it.
type Topology interface {
	NumHosts() int
	Host(w int) int
	Cores(h int) int
}

// EPSPConfig configures [NewEPSP]. The zero value is enforced
// synchronization with neither elastic parallelism nor task transfer
// (plain BSP); [DefaultEPSPConfig] turns both on.
type EPSPConfig struct {
	// Staleness s selects the mode: 0 is enforced synchronization (a
	// barrier each clock; pushes accumulate and one sample-weighted update
	// is flushed per clock), s > 0 is slack synchronization (pushes apply
	// on arrival; a worker may run at most s clocks ahead of the
	// effective minimum clock).
	Staleness int
	// Elastic turns on elastic parallelism control. false means each
	// worker keeps the parallelism it has.
	Elastic bool
	// Transfer turns on task transfer from stragglers to blocked pioneers.
	Transfer bool
	// Theta is the projection's classification threshold θ. 0 means
	// straggler.DefaultTheta (0.2, ours).
	Theta float64
	// Alpha is the speed EWMA weight. 0 means 0.5.
	Alpha float64
	// ControlEvery is the number of ticks between parallelism control
	// rounds (the period K of falcon.md §2). 0 means 1.
	ControlEvery int
	// Parallelism bounds and damps the controller (PMin, PMax, DeadBand,
	// Curve). Its Curve is also used to rescale speed estimates when a
	// worker's parallelism changes; nil means Amdahl with
	// straggler.DefaultSerial.
	Parallelism straggler.ParallelismConfig
	// Topology gives hosts and their cores. nil means every worker on its
	// own host with Parallelism.PMax cores, or, if PMax is 0, with the
	// parallelism the worker had at the first control round (then nothing
	// can move: set a Topology or PMax to make elastic control useful).
	Topology Topology
	// Transfers configures the transfer planner: the splitting rule, the
	// minimum chunk and the threshold on a giver's remaining work. Zero
	// fields take the planner's defaults: SplitAll false is FlexRR's
	// pairwise rule (φ = 0.5 of the remaining tail, one taker per giver at
	// a time), 1 sample, 10 % of the batch. [DefaultEPSPConfig] sets
	// SplitAll: a giver's remaining tail is split among it and all blocked
	// idle takers in proportion to their speeds.
	Transfers straggler.TransferConfig
	// NoExtrapolate, if set, estimates a giver's position from its last
	// progress report alone. By default the position is extrapolated to
	// now with the giver's speed estimate (the median known speed if its
	// own is unknown), so stale reports do not trigger transfers of work
	// that is already done.
	NoExtrapolate bool
}

// DefaultEPSPConfig returns enforced synchronization (s = 0) with elastic
// parallelism and task transfer on, transfers by the multi-taker split
// (Transfers.SplitAll), and every other field at its default.
func DefaultEPSPConfig() EPSPConfig {
	return EPSPConfig{Staleness: 0, Elastic: true, Transfer: true, Transfers: straggler.TransferConfig{SplitAll: true}}
}

// Validate checks the configuration.
func (c *EPSPConfig) Validate() error {
	if c.Staleness < 0 {
		return fmt.Errorf("%w: EPSP staleness %d < 0", ErrBadConfig, c.Staleness)
	}
	if !(c.Theta >= 0 && c.Theta < 1) {
		return fmt.Errorf("%w: EPSP theta %v not in [0,1)", ErrBadConfig, c.Theta)
	}
	if !(c.Alpha >= 0 && c.Alpha <= 1) {
		return fmt.Errorf("%w: EPSP alpha %v not in [0,1]", ErrBadConfig, c.Alpha)
	}
	if c.ControlEvery < 0 {
		return fmt.Errorf("%w: EPSP ControlEvery %d < 0", ErrBadConfig, c.ControlEvery)
	}
	if err := c.Parallelism.Validate(); err != nil {
		return fmt.Errorf("%w: EPSP parallelism: %w", ErrBadConfig, err)
	}
	if err := c.Transfers.Validate(); err != nil {
		return fmt.Errorf("%w: EPSP transfers: %w", ErrBadConfig, err)
	}
	return nil
}

// EPSP is Falcon's Elastic-Parallelism Synchronous Parallel policy (Zhou et
// al., "Falcon: Addressing Stragglers in Heterogeneous Parameter Server via
// Multiple Parallelism", IEEE TC 2020; ICDCS 2019).
//
// Published facts: EPSP supports enforced (staleness 0) and slack
// (staleness s > 0) synchronization by adjusting the staleness, combined
// with straggler projection, elastic training-parallelism control and the
// transfer of blocked tasks from stragglers to pioneers. Everything below
// that is a RECONSTRUCTION (falcon.md §1-§4): Falcon's formulas and
// protocol are not public.
//
//   - Enforced (s = 0): every push is accumulated into its clock's buffer;
//     when every worker has finished clock c and no transfer of c is
//     pending, Σ n·g/Σ n is flushed as one update and the workers are
//     released (the [Barrier] rule, as BSP).
//   - Slack (s > 0): pushes apply on arrival; a waiting worker at clock c
//     is released while c − EffectiveMinClock ≤ s ([GateRelease], as SSP).
//   - Straggler projection ([straggler.Project]) runs on every event from
//     EWMA speeds (α, default 0.5) fed by progress reports and clock
//     completions; [EPSP.Snapshot] returns the latest.
//   - Elastic parallelism (Elastic): every ControlEvery ticks the
//     [straggler.Controller] moves cores within each host's budget towards
//     the workers whose projected clock is longest, with a dead-band.
//   - Task transfer (Transfer): blocked pioneers — waiting workers the
//     barrier or gate does not release — that are not already computing a
//     transfer take work from workers that block them (whose clock is
//     below the pioneer's minus s) and whose remaining work is at least
//     the threshold (10 % of its batch). By default ([straggler.Planner]
//     with SplitAll) one planning round splits each such giver's remaining
//     tail R among the giver and ALL the blocked idle takers assigned to
//     it, taker i getting ⌊R·v_i/(v_g + Σ_j v_j)⌋ (speeds from the EWMA
//     estimates; a taker whose share would be under the minimum chunk is
//     skipped), so that all finish together; with several givers, takers
//     go greedily to the giver with the longest projected finish time,
//     which shares them in proportion to the givers' remaining time. The
//     pieces are ordered tail-first (highest Lo first) and the giver has
//     them all outstanding until answered. Without SplitAll, a taker gets
//     φ = 0.5 of one giver's tail and a giver has at most one order
//     outstanding (FlexRR's rule). A taker is released only after its
//     transfer is done; a giver answers each order (a refusal returns the
//     range, and that giver is not asked for that taker again in the same
//     clock). An accepted range may start later than ordered but must end
//     at the ordered Hi; the runtimes accept an order only while it is the
//     tail of what the giver still owns, so each owner's part stays one
//     prefix [0, end).
//
// The multi-taker split is our reconstruction of Falcon's guideline
// "transferring blocked tasks to pioneer workers for fully exploiting
// cluster computation capacity". It was chosen after the first comparison
// of the convergence study (cmd/falcon-study), in which EPSP used the
// pairwise FlexRR-style split, on this analysis: with one straggler
// (speed 1) and 11 blocked pioneers (speed 4), halving hands the first
// pioneer R/2, which then needs R/8 time units and cannot be split
// again, while the proportional split among all 12 finishes in R/45. It
// is not the paper's published rule (none is public); Transfers.SplitAll
// = false gives the earlier behaviour.
//
// With all workers equally fast and no timing noise (ps/sim without
// ComputeNoise), no worker has transferable work when another finishes and
// no worker is slow, so EPSP orders exactly what BSP (s = 0) or SSP(s)
// would. Live, equal workers finish a clock milliseconds apart, and a
// worker that still has a tenth of its batch when another blocks gives
// work away: cmd/falcon-study's live homogeneous runs make about 1400
// transfers in 10 s.
type EPSP struct {
	cfg      EPSPConfig
	name     string
	flushed  int
	ticks    int
	tracker  *straggler.Tracker
	ctl      *straggler.Controller
	planner  *straggler.Planner
	curve    func(w int) straggler.Speedup
	snap     straggler.Snapshot
	n        int
	start    []time.Duration // when the worker's current clock began
	reportAt []time.Duration // time of the worker's last progress report this clock
	last     []ProgressReport
	cores    []int // per host budget, fixed at the first control round
	hosts    []int
	taking   map[WorkerID]int
	refused  map[[2]int]int // (giver, taker) -> clock of a refusal: not asked again this clock
	stats    EPSPStats
}

// EPSPStats counts what an EPSP policy decided.
type EPSPStats struct {
	ControlRounds      int
	ParallelismChanges int
	TransfersPlanned   int
	TransfersRefused   int
	SamplesPlanned     int
	// BatchChanges counts the batch orders of EPSP v2's slack scheme.
	BatchChanges int
}

var _ Policy = (*EPSP)(nil)

// NewEPSP validates cfg and returns the policy.
func NewEPSP(cfg EPSPConfig) (*EPSP, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ControlEvery == 0 {
		cfg.ControlEvery = 1
	}
	if cfg.Alpha == 0 {
		cfg.Alpha = 0.5
	}
	curve := cfg.Parallelism.Curve
	if curve == nil {
		curve = func(int) straggler.Speedup { return straggler.Amdahl{Serial: straggler.DefaultSerial} }
	}
	pc := cfg.Parallelism
	pc.Curve = curve
	ctl, err := straggler.NewController(pc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	pl, err := straggler.NewPlanner(cfg.Transfers)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	mode := "enforced"
	if cfg.Staleness > 0 {
		mode = fmt.Sprintf("slack,s=%d", cfg.Staleness)
	}
	name := "epsp(" + mode
	if !cfg.Elastic {
		name += ",no-elastic"
	}
	if !cfg.Transfer {
		name += ",no-transfer"
	} else if !cfg.Transfers.SplitAll {
		name += ",pairwise"
	}
	return &EPSP{cfg: cfg, name: name + ")", ctl: ctl, planner: pl, curve: curve, refused: map[[2]int]int{}}, nil
}

// Name returns e.g. "epsp(enforced)", "epsp(slack,s=2,no-transfer)" or
// "epsp(enforced,no-elastic,pairwise)" (transfers without SplitAll).
func (p *EPSP) Name() string { return p.name }

// Config returns the configuration with defaults filled in.
func (p *EPSP) Config() EPSPConfig { return p.cfg }

// Snapshot returns the latest straggler projection.
func (p *EPSP) Snapshot() straggler.Snapshot { return p.snap }

// Stats returns the policy's counters.
func (p *EPSP) Stats() EPSPStats { return p.stats }

// Admit accumulates pushes in enforced mode and applies them now in slack mode.
func (p *EPSP) Admit(_ time.Duration, _ View, x Push) PushDecision {
	if p.cfg.Staleness == 0 {
		return PushDecision{Action: Accumulate, Clock: x.Clock}
	}
	return PushDecision{Action: ApplyNow}
}

func (p *EPSP) init(v View) {
	if p.tracker != nil {
		return
	}
	p.n = v.NumWorkers()
	p.tracker, _ = straggler.NewTracker(p.n, straggler.TrackerConfig{Alpha: p.cfg.Alpha, Curve: p.curve})
	p.start = make([]time.Duration, p.n)
	p.reportAt = make([]time.Duration, p.n)
	p.last = make([]ProgressReport, p.n)
	p.taking = map[WorkerID]int{}
	for w := range p.n {
		p.last[w] = v.Progress(WorkerID(w))
		p.tracker.SetParallelism(w, v.Parallelism(WorkerID(w)))
	}
}

// Step implements [Policy].
func (p *EPSP) Step(now time.Duration, v View, e Event) Output {
	p.init(v)
	st := polState{tracker: p.tracker, planner: p.planner, start: p.start, reportAt: p.reportAt, last: p.last, taking: p.taking}
	st.observe(now, v, e)
	if e.Kind == EventTransferResult && !e.Transfer.Accepted {
		p.stats.TransfersRefused++
		p.refused[[2]int{int(e.Transfer.From), int(e.Transfer.To)}] = e.Transfer.Clock
	}
	var out Output
	if p.cfg.Staleness == 0 {
		out = Barrier(v, &p.flushed, 1)
		p.planner.Forget(p.flushed - 1)
	} else {
		out.Release = GateRelease(v, p.cfg.Staleness)
		p.planner.Forget(EffectiveMinClock(v) - 1)
	}
	out.Release = st.dropBusyTakers(out.Release)
	st.markStarts(now, out.Release)
	p.snap = straggler.Project(now, st.states(now, v, out.Release, !p.cfg.NoExtrapolate), straggler.ProjectConfig{Staleness: p.cfg.Staleness, Theta: p.cfg.Theta})
	if p.cfg.Elastic && e.Kind == EventTick {
		p.ticks++
		if p.ticks%p.cfg.ControlEvery == 0 {
			out.SetParallelism = p.control(v)
		}
	}
	if p.cfg.Transfer {
		blocks := func(g, t WorkerID) bool { return v.Clock(g) < v.Clock(t)-p.cfg.Staleness }
		// A worker still computing will be blocked by g once it finishes
		// its clock (its clock then advances by one).
		blocksAfter := func(g, t WorkerID) bool { return v.Clock(g) < v.Clock(t)+1-p.cfg.Staleness }
		out.Transfers = st.plan(now, v, out.Release, blocks, blocksAfter, func(g, t WorkerID) bool {
			c, ok := p.refused[[2]int{int(g), int(t)}]
			return ok && c == v.Clock(g)
		}, !p.cfg.NoExtrapolate)
		for _, o := range out.Transfers {
			p.stats.TransfersPlanned++
			p.stats.SamplesPlanned += o.Samples()
		}
	}
	return out
}

// control runs one parallelism round and returns the changes.
func (p *EPSP) control(v View) []ParallelismOrder {
	p.stats.ControlRounds++
	if p.hosts == nil {
		p.hosts = make([]int, p.n)
		if t := p.cfg.Topology; t != nil {
			p.cores = make([]int, t.NumHosts())
			for h := range p.cores {
				p.cores[h] = t.Cores(h)
			}
			for w := range p.n {
				p.hosts[w] = t.Host(w)
			}
		} else {
			p.cores = make([]int, p.n)
			for w := range p.n {
				p.hosts[w] = w
				p.cores[w] = max(p.cfg.Parallelism.PMax, v.Parallelism(WorkerID(w)))
			}
		}
	}
	loads := make([]straggler.WorkerLoad, p.n)
	for w := range p.n {
		loads[w] = straggler.WorkerLoad{Host: p.hosts[w], P: v.Parallelism(WorkerID(w)), Speed: p.tracker.Speed(w), Batch: v.Batch(WorkerID(w))}
	}
	plan := p.ctl.Plan(loads, p.cores)
	var out []ParallelismOrder
	for w, np := range plan {
		if np != loads[w].P {
			out = append(out, ParallelismOrder{Worker: WorkerID(w), P: np})
			p.tracker.SetParallelism(w, np)
			p.stats.ParallelismChanges++
		}
	}
	return out
}

// polState is the speed, timing and transfer bookkeeping shared by the
// policies that project stragglers or transfer work (EPSP, FlexRR).
type polState struct {
	tracker  *straggler.Tracker
	planner  *straggler.Planner
	start    []time.Duration
	reportAt []time.Duration
	last     []ProgressReport
	// taking counts, per taker, the transfers ordered and not yet refused
	// or done: the taker is computing (or about to compute) them.
	taking map[WorkerID]int
	// noTrack: speeds come from elsewhere (EPSPv2's busy speeds); observe
	// does not feed progress into the tracker.
	noTrack bool
	// ownEnd, if not nil, is the end of the prefix of its batch a worker
	// owns this clock (its batch minus what was assigned away at
	// release); nil means the batch.
	ownEnd func(w WorkerID) int
	// canGive, if not nil, says whether a computing worker may give.
	canGive func(w WorkerID) bool
}

// end is the end of w's own prefix this clock.
func (s polState) end(v View, w WorkerID) int {
	if s.ownEnd != nil {
		return s.ownEnd(w)
	}
	return v.Batch(w)
}

// observe folds an event into speeds and the transfer ledger.
func (s polState) observe(now time.Duration, v View, e Event) {
	switch e.Kind {
	case EventProgress:
		r := e.Progress
		w := int(r.Worker)
		if r.Clock != v.Clock(r.Worker) || v.Waiting(r.Worker) {
			return
		}
		s.last[w] = r
		s.reportAt[w] = now
		el := r.Elapsed
		if el <= 0 {
			el = now - s.start[w]
		}
		if !s.noTrack {
			s.tracker.Observe(straggler.Report{Worker: w, Clock: r.Clock, Done: r.Done, Elapsed: el, Parallelism: r.Parallelism})
		}
	case EventClock:
		if s.noTrack {
			return
		}
		w := int(e.Worker)
		held := v.Batch(e.Worker)
		if n, ok := s.planner.HeldSamples(w, e.Clock); ok {
			held = n
		}
		el := now - s.start[w]
		if s.last[w].Clock == e.Clock && s.last[w].Elapsed > 0 {
			// Continue the clock's own elapsed-time axis.
			el = s.last[w].Elapsed + (now - s.reportAt[w])
		}
		if el > 0 {
			s.tracker.Observe(straggler.Report{Worker: w, Clock: e.Clock, Done: held, Elapsed: el, Parallelism: v.Parallelism(e.Worker)})
		}
	case EventTransferResult:
		if a, ok := s.planner.PendingFor(int(e.Transfer.From), int(e.Transfer.To), e.Transfer.Clock); ok {
			s.planner.Resolve(a.ID, e.Transfer.Accepted, e.Transfer.Lo, a.Hi)
		}
		if !e.Transfer.Accepted {
			s.untake(e.Transfer.To)
		}
	case EventTransferDone:
		s.untake(e.Transfer.To)
	}
}

func (s polState) untake(w WorkerID) {
	if s.taking[w] > 1 {
		s.taking[w]--
	} else {
		delete(s.taking, w)
	}
}

// markStarts records the start of the next clock of released workers.
func (s polState) markStarts(now time.Duration, rel []WorkerID) {
	for _, w := range rel {
		s.start[w] = now
		s.reportAt[w] = now
	}
}

// dropBusyTakers removes workers still computing a transferred range.
func (s polState) dropBusyTakers(rel []WorkerID) []WorkerID {
	return slices.DeleteFunc(rel, func(w WorkerID) bool { return s.taking[w] > 0 })
}

// speed returns w's speed estimate, or the median of the known ones.
func (s polState) speed(w int) float64 {
	if s.tracker.Known(w) {
		return s.tracker.Speed(w)
	}
	var ks []float64
	for i := range s.tracker.NumWorkers() {
		if s.tracker.Known(i) {
			ks = append(ks, s.tracker.Speed(i))
		}
	}
	if len(ks) == 0 {
		return 0
	}
	slices.Sort(ks)
	if len(ks)%2 == 1 {
		return ks[len(ks)/2]
	}
	return (ks[len(ks)/2-1] + ks[len(ks)/2]) / 2
}

// cursor estimates the index of the next own sample w will process.
func (s polState) cursor(now time.Duration, v View, w WorkerID, extrapolate bool) int {
	r := s.last[w]
	done, at := 0, s.start[w]
	if r.Clock == v.Clock(w) && !v.Waiting(w) {
		done, at = r.Cursor(), s.reportAt[w]
	}
	if extrapolate && now > at {
		done += int(math.Round(s.speed(int(w)) * (now - at).Seconds()))
	}
	return done
}

// states builds the projection input; released workers count as starting.
func (s polState) states(now time.Duration, v View, released []WorkerID, extrapolate bool) []straggler.WorkerState {
	ws := make([]straggler.WorkerState, v.NumWorkers())
	for i := range ws {
		w := WorkerID(i)
		b := v.Batch(w)
		st := straggler.WorkerState{Clock: v.Clock(w), Waiting: v.Waiting(w) && !slices.Contains(released, w), Batch: b, Speed: s.tracker.Speed(i)}
		if !st.Waiting {
			st.Remaining = s.planner.Remaining(straggler.Giver{Worker: i, Clock: st.Clock, Batch: b, Cursor: s.cursor(now, v, w, extrapolate)})
			if slices.Contains(released, w) {
				st.Remaining = b
			}
		}
		ws[i] = st
	}
	return ws
}

// plan assigns blocked idle workers to givers that block them (pairwise or
// split, as the planner is configured). Within a giver's split the pieces
// come tail-first.
//
// blocksAfter, if not nil, says which computing workers g will block once
// they finish their clock: they are passed as takers with Ready = their
// projected remaining time, which the multi-taker split counts (the
// pairwise rule ignores them).
func (s polState) plan(now time.Duration, v View, released []WorkerID, blocks, blocksAfter, skip func(g, t WorkerID) bool, extrapolate bool) []TransferOrder {
	var takers []straggler.Taker
	idle := 0
	for i := range v.NumWorkers() {
		w := WorkerID(i)
		switch {
		case v.Waiting(w) && !slices.Contains(released, w) && s.taking[w] == 0:
			takers = append(takers, straggler.Taker{Worker: i, Speed: s.speed(i)})
			idle++
		case blocksAfter != nil && (!v.Waiting(w) || slices.Contains(released, w)) && s.taking[w] == 0:
			sp := s.speed(i)
			if sp <= 0 {
				continue
			}
			left := s.end(v, w)
			if !slices.Contains(released, w) {
				left = s.planner.Remaining(straggler.Giver{Worker: i, Clock: v.Clock(w), Batch: s.end(v, w), Cursor: s.cursor(now, v, w, extrapolate)})
			}
			if r := v.Progress(w); r.Clock == v.Clock(w) {
				left += max(r.Extra-r.ExtraDone, 0) // assigned work it does after its own
			}
			takers = append(takers, straggler.Taker{Worker: i, Speed: sp, Ready: math.Max(float64(left)/sp, 1e-9)})
		}
	}
	if idle == 0 {
		return nil
	}
	// Fastest takers choose first; ties by id.
	slices.SortStableFunc(takers, func(a, b straggler.Taker) int { return cmp.Compare(b.Speed, a.Speed) })
	var gs []straggler.Giver
	for i := range v.NumWorkers() {
		g := WorkerID(i)
		if v.Waiting(g) || (s.canGive != nil && !s.canGive(g)) {
			continue
		}
		gs = append(gs, straggler.Giver{Worker: i, Clock: v.Clock(g), Batch: s.end(v, g), Cursor: s.cursor(now, v, g, extrapolate), Speed: s.speed(i)})
	}
	can := func(g, t int) bool {
		gw, tw := WorkerID(g), WorkerID(t)
		if skip(gw, tw) {
			return false
		}
		if v.Waiting(tw) && !slices.Contains(released, tw) {
			return blocks(gw, tw)
		}
		return blocksAfter != nil && blocksAfter(gw, tw)
	}
	var out []TransferOrder
	for _, a := range s.planner.PlanFor(gs, takers, can) {
		out = append(out, TransferOrder{From: WorkerID(a.From), To: WorkerID(a.To), Clock: a.Clock, Lo: a.Lo, Hi: a.Hi})
		s.taking[WorkerID(a.To)]++
	}
	return out
}
