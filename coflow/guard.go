package coflow

import (
	"fmt"
	"time"
)

// Guard adds Varys' starvation guard (Chowdhury, Zhong, Stoica, SIGCOMM
// 2014, §5.3) to any scheduler: during [k·Period, k·Period+Slice) every
// flow of every active coflow shares the fabric max-min fairly (Fair);
// otherwise Inner decides. Its timer asks for a call at every slice
// boundary (the "T/δ timers" rescheduling rule of the coflow studies);
// Inner's own timer is kept when it fires earlier, and Inner's
// EventDriven capability is forwarded. Ordered has the same guard built
// in (OrderedConfig.StarvationPeriod); Guard gives it to schedulers that
// lack it (D-CLAS, Sincronia, wrappers).
//
// Cost: Inner's, or Fair's during a slice. Not safe for concurrent use.
type Guard struct {
	inner         Scheduler
	period, slice time.Duration
	fair          Fair
}

var (
	_ Scheduler   = (*Guard)(nil)
	_ EventDriven = (*Guard)(nil)
	_ Timer       = (*Guard)(nil)
)

// NewGuard wraps inner with a fair slice of length slice every period
// (0 < slice < period).
func NewGuard(inner Scheduler, period, slice time.Duration) (*Guard, error) {
	if inner == nil {
		return nil, fmt.Errorf("%w: nil scheduler", ErrInvalidConfig)
	}
	if !(slice > 0 && slice < period) {
		return nil, fmt.Errorf("%w: starvation guard needs 0 < slice (%v) < period (%v)", ErrInvalidConfig, slice, period)
	}
	return &Guard{inner: inner, period: period, slice: slice}, nil
}

// Name returns the inner scheduler's name.
func (g *Guard) Name() string { return g.inner.Name() }

// OnlyOnArrivalsAndCompletions forwards the inner scheduler's EventDriven.
func (g *Guard) OnlyOnArrivalsAndCompletions() bool {
	e, ok := g.inner.(EventDriven)
	return ok && e.OnlyOnArrivalsAndCompletions()
}

// NextSliceBoundary returns the next start or end, after now, of the
// slices [k·period, k·period + slice) a starvation guard runs fairly in;
// false when period ≤ 0 (no guard). Schedulers that implement Timer for
// such a guard return it from NextWakeup.
func NextSliceBoundary(now, period, slice time.Duration) (time.Duration, bool) {
	if period <= 0 {
		return 0, false
	}
	phase := now % period
	if phase < slice {
		return now - phase + slice, true
	}
	return now - phase + period, true
}

// NextWakeup returns the next slice boundary, or the inner scheduler's
// timer if it is earlier (and after now).
func (g *Guard) NextWakeup(now time.Duration) (time.Duration, bool) {
	at, _ := NextSliceBoundary(now, g.period, g.slice)
	if t, ok := g.inner.(Timer); ok {
		if it, ok := t.NextWakeup(now); ok && it > now && it < at {
			at = it
		}
	}
	return at, true
}

// Schedule returns Fair's allocation inside a slice, Inner's otherwise.
func (g *Guard) Schedule(now time.Duration, s *State) []Allocation {
	if now%g.period < g.slice {
		return g.fair.Schedule(now, s)
	}
	return g.inner.Schedule(now, s)
}
