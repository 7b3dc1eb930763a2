package straggler

import (
	"fmt"
	"time"
)

// Report is one progress report of a worker for its current clock:
// cumulative samples done and time elapsed since the clock began.
type Report struct {
	Worker      int
	Clock       int
	Done        int           // samples of the worker's own batch processed this clock
	Elapsed     time.Duration // since the clock began
	Parallelism int           // goroutines computing; 0 means unknown
}

// TrackerConfig configures a [Tracker].
type TrackerConfig struct {
	// Alpha is the EWMA weight of the newest sample, in (0,1]:
	// v ← Alpha·x + (1-Alpha)·v. 0 means 0.5 (LB-BSP's α, baselines-params.md §4).
	Alpha float64
	// Curve, if set, rescales a worker's speed estimate when its
	// parallelism changes from p to p': v ← v·S(p')/S(p), so a speed
	// measured before a parallelism change is not mistaken for the new
	// one. nil means no rescaling.
	Curve func(w int) Speedup
}

// DefaultTrackerConfig returns Alpha 0.5 and no curve.
func DefaultTrackerConfig() TrackerConfig { return TrackerConfig{Alpha: 0.5} }

// Validate checks Alpha.
func (c *TrackerConfig) Validate() error {
	if !(c.Alpha >= 0 && c.Alpha <= 1) {
		return fmt.Errorf("%w: Alpha %v not in (0,1]", ErrConfig, c.Alpha)
	}
	return nil
}

type trackState struct {
	started bool
	clock   int
	done    int
	elapsed time.Duration
	p       int
	speed   float64
	samples int
}

// Tracker keeps an EWMA of each worker's throughput (samples/s) from its
// progress reports: the throughput sample of a report is
// (Done - Done_prev)/(Elapsed - Elapsed_prev), with the previous report of
// the same clock or (0, 0) at the start of a clock. It is not safe for
// concurrent use.
type Tracker struct {
	cfg TrackerConfig
	ws  []trackState
}

// NewTracker returns a tracker for n workers.
func NewTracker(n int, cfg TrackerConfig) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("%w: %d workers", ErrConfig, n)
	}
	if cfg.Alpha == 0 {
		cfg.Alpha = 0.5
	}
	return &Tracker{cfg: cfg, ws: make([]trackState, n)}, nil
}

// NumWorkers is the number of tracked workers.
func (t *Tracker) NumWorkers() int { return len(t.ws) }

// Observe folds a progress report into the worker's speed. It reports
// whether the report produced a throughput sample; reports that go
// backwards (an older clock, or no elapsed time since the previous one)
// are ignored. An out-of-range worker returns an error wrapping ErrWorker.
func (t *Tracker) Observe(r Report) (bool, error) {
	if r.Worker < 0 || r.Worker >= len(t.ws) {
		return false, fmt.Errorf("%w: %d", ErrWorker, r.Worker)
	}
	s := &t.ws[r.Worker]
	t.rescale(r.Worker, r.Parallelism)
	var d0 int
	var e0 time.Duration
	switch {
	case !s.started || r.Clock > s.clock:
	case r.Clock == s.clock:
		d0, e0 = s.done, s.elapsed
	default:
		return false, nil
	}
	if r.Elapsed <= e0 || r.Done < d0 {
		if !s.started || r.Clock > s.clock {
			s.started, s.clock, s.done, s.elapsed = true, r.Clock, r.Done, r.Elapsed
		}
		return false, nil
	}
	x := float64(r.Done-d0) / (r.Elapsed - e0).Seconds()
	s.started, s.clock, s.done, s.elapsed = true, r.Clock, r.Done, r.Elapsed
	t.fold(s, x)
	return true, nil
}

// ObserveRate folds a throughput sample x (samples/s) measured with p
// goroutines (0 = unchanged) directly, e.g. batch/clock-duration at the
// end of a clock.
func (t *Tracker) ObserveRate(w int, x float64, p int) error {
	if w < 0 || w >= len(t.ws) {
		return fmt.Errorf("%w: %d", ErrWorker, w)
	}
	if !(x >= 0) {
		return fmt.Errorf("%w: rate %v", ErrConfig, x)
	}
	t.rescale(w, p)
	t.fold(&t.ws[w], x)
	return nil
}

func (t *Tracker) fold(s *trackState, x float64) {
	if s.samples == 0 {
		s.speed = x
	} else {
		s.speed = t.cfg.Alpha*x + (1-t.cfg.Alpha)*s.speed
	}
	s.samples++
}

func (t *Tracker) rescale(w, p int) {
	s := &t.ws[w]
	if p <= 0 || p == s.p {
		return
	}
	if s.p > 0 && s.samples > 0 && t.cfg.Curve != nil {
		c := t.cfg.Curve(w)
		s.speed *= c.Speedup(float64(p)) / c.Speedup(float64(s.p))
	}
	s.p = p
}

// SetParallelism tells the tracker that w now computes with p goroutines
// (rescaling its estimate if a Curve is configured).
func (t *Tracker) SetParallelism(w, p int) {
	if w >= 0 && w < len(t.ws) {
		t.rescale(w, p)
	}
}

// Reset forgets w's speed estimate (keeping its parallelism): the next
// sample becomes the estimate.
func (t *Tracker) Reset(w int) {
	if w >= 0 && w < len(t.ws) {
		t.ws[w] = trackState{p: t.ws[w].p}
	}
}

// Speed returns w's estimated samples/s, 0 if unknown.
func (t *Tracker) Speed(w int) float64 { return t.ws[w].speed }

// Known reports whether w has at least one throughput sample.
func (t *Tracker) Known(w int) bool { return t.ws[w].samples > 0 }

// Parallelism returns the parallelism of w's latest report (0 if none).
func (t *Tracker) Parallelism(w int) int { return t.ws[w].p }

// Speeds appends every worker's speed to dst.
func (t *Tracker) Speeds(dst []float64) []float64 {
	for i := range t.ws {
		dst = append(dst, t.ws[i].speed)
	}
	return dst
}
