package epsp

import (
	"fmt"
	"time"

	"github.com/falconml/falcon/straggler"
)

// FlexRRConfig configures [NewFlexRR].
type FlexRRConfig struct {
	// Staleness is the SSP slack bound s. The FlexRR reproduction uses 1
	// (kStaleness = 1); 0 gates like a barrier (pushes still apply on arrival).
	Staleness int
	// GroupSize is the helper-group size: worker w may help the next
	// GroupSize workers on the ring w+1, w+2, … 0 means every other worker
	// (the reproduction's grouping with one worker per node: the same slot
	// on every other node). The ring for GroupSize > 0 is ours.
	GroupSize int
	// Transfers configures RapidReassignment: φ (0.5 of the remaining
	// tail) and the threshold (a helpee at most 0.9·batch done, i.e.
	// MinRemaining 0.1). Zero fields take those defaults.
	Transfers straggler.TransferConfig
	// Alpha is the speed EWMA weight used to extrapolate a helpee's
	// progress between reports. 0 means 0.5.
	Alpha float64
	// NoExtrapolate, if set, judges a helpee by its last progress report
	// alone.
	NoExtrapolate bool
	// HelpBehind lets a waiting helper help a helpee computing any clock
	// before the one the helper finished, not only that clock (the
	// reproduction's rule). Under s = 1 a straggler that fell two clocks
	// behind is otherwise never helped again: the fast workers wait at
	// clock c+2 while it computes c (straggler scenario, seeds 2-5: 4 to
	// 26 transfers in 10 s, 29 % of ideal steps/s). Ours: a variant, not
	// the reproduction.
	HelpBehind bool
}

// DefaultFlexRRConfig returns s = 1, one group, φ = 0.5, threshold 0.9·batch.
func DefaultFlexRRConfig() FlexRRConfig {
	return FlexRRConfig{Staleness: 1, Transfers: straggler.DefaultTransferConfig()}
}

// Validate checks the configuration.
func (c *FlexRRConfig) Validate() error {
	if c.Staleness < 0 || c.GroupSize < 0 {
		return fmt.Errorf("%w: FlexRR staleness %d / group size %d", ErrBadConfig, c.Staleness, c.GroupSize)
	}
	if !(c.Alpha >= 0 && c.Alpha <= 1) {
		return fmt.Errorf("%w: FlexRR alpha %v", ErrBadConfig, c.Alpha)
	}
	if err := c.Transfers.Validate(); err != nil {
		return fmt.Errorf("%w: FlexRR transfers: %w", ErrBadConfig, err)
	}
	return nil
}

// FlexRR is SSP with RapidReassignment (Harlap et al., "Addressing the
// straggler problem for iterative convergent parallel ML", SoCC 2016).
// FlexRR's own parameters were not found; the rule here follows the
// public reproduction kensiuhk/flexps (examples/rapid_reassignment;
// baselines-params.md §1), made centralized:
//
//   - pushes apply on arrival; a waiting worker at clock c is released
//     while c − EffectiveMinClock ≤ s (s = 1);
//   - a helper is a worker that has finished clock c (it is waiting); its
//     helpees are the workers of its group still computing the same clock
//     c (with HelpBehind, any clock before c: our variant). If the slowest helpee (longest remaining time) is at most
//     0.9·batch done, the helper takes φ = 0.5 of its remaining samples
//     from the tail (offer); the helpee confirms, or cancels if it has
//     already passed the split point, and the helper then asks another
//     helpee (never the one that cancelled, for that clock);
//   - a helper starts its next clock only after its help is done;
//   - progress comes from the workers' reports, extrapolated to now with
//     the EWMA speed (the reproduction asks the helpee for fresh status;
//     extrapolation is our stand-in).
type FlexRR struct {
	cfg     FlexRRConfig
	planner *straggler.Planner
	tracker *straggler.Tracker
	st      polState
	refused map[[2]int]int
}

var _ Policy = (*FlexRR)(nil)

// NewFlexRR validates cfg and returns the policy.
func NewFlexRR(cfg FlexRRConfig) (*FlexRR, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Alpha == 0 {
		cfg.Alpha = 0.5
	}
	pl, err := straggler.NewPlanner(cfg.Transfers)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	return &FlexRR{cfg: cfg, planner: pl, refused: map[[2]int]int{}}, nil
}

// Name returns e.g. "flexrr(s=1)", or "flexrr(s=1,behind)" with HelpBehind.
func (p *FlexRR) Name() string {
	if p.cfg.HelpBehind {
		return fmt.Sprintf("flexrr(s=%d,behind)", p.cfg.Staleness)
	}
	return fmt.Sprintf("flexrr(s=%d)", p.cfg.Staleness)
}

// Config returns the configuration with defaults filled in.
func (p *FlexRR) Config() FlexRRConfig { return p.cfg }

// Admit applies every push now.
func (*FlexRR) Admit(time.Duration, View, Push) PushDecision { return PushDecision{} }

// inGroup reports whether helper t may help g.
func (p *FlexRR) inGroup(n int, g, t WorkerID) bool {
	if p.cfg.GroupSize == 0 || p.cfg.GroupSize >= n-1 {
		return true
	}
	d := (int(g) - int(t) + n) % n
	return d >= 1 && d <= p.cfg.GroupSize
}

// Step implements [Policy].
func (p *FlexRR) Step(now time.Duration, v View, e Event) Output {
	if p.tracker == nil {
		n := v.NumWorkers()
		p.tracker, _ = straggler.NewTracker(n, straggler.TrackerConfig{Alpha: p.cfg.Alpha})
		p.st = polState{tracker: p.tracker, planner: p.planner, start: make([]time.Duration, n), reportAt: make([]time.Duration, n), last: make([]ProgressReport, n), taking: map[WorkerID]int{}}
		for w := range n {
			p.st.last[w] = v.Progress(WorkerID(w))
		}
	}
	p.st.observe(now, v, e)
	if e.Kind == EventTransferResult && !e.Transfer.Accepted {
		p.refused[[2]int{int(e.Transfer.From), int(e.Transfer.To)}] = e.Transfer.Clock
	}
	n := v.NumWorkers()
	sameClock := func(g, t WorkerID) bool {
		if p.cfg.HelpBehind {
			return v.Clock(g) < v.Clock(t) && p.inGroup(n, g, t)
		}
		return v.Clock(g) == v.Clock(t)-1 && p.inGroup(n, g, t)
	}
	skip := func(g, t WorkerID) bool {
		c, ok := p.refused[[2]int{int(g), int(t)}]
		return ok && c == v.Clock(g)
	}
	// Helpers help before they start their next clock: plan first, over
	// every waiting worker, then release the ones that are not helping.
	var out Output
	out.Transfers = p.st.plan(now, v, nil, sameClock, nil, skip, !p.cfg.NoExtrapolate)
	p.planner.Forget(EffectiveMinClock(v) - 1)
	out.Release = p.st.dropBusyTakers(GateRelease(v, p.cfg.Staleness))
	p.st.markStarts(now, out.Release)
	return out
}
