package coflowtest

import (
	"fmt"
	"time"

	"github.com/falconml/falcon/coflow"
)

// Driver runs a scheduler end to end in virtual time on coflow.Sim and
// checks every decision with Checker(Checks...). It is a fake network for
// scheduler tests: configure it through its fields, run it, then inspect
// the counters. Not safe for concurrent use.
type Driver struct {
	// Fabric is the network; nil means 4 ports of 1 Gbit/s.
	Fabric *coflow.Fabric
	// Config is the simulator configuration; the zero value means
	// coflow.DefaultConfig().
	Config *coflow.Config
	// Checks are the optional checks applied at every decision.
	Checks []Check
	// OnSchedule, if set, sees every state and allocation after the checks.
	OnSchedule coflow.CheckFunc

	// Calls counts Schedule calls made by the last Run; Allocations counts
	// the allocations returned.
	Calls, Allocations int
}

// Run simulates coflows under sched and returns the result, or the first
// failed check (wrapping ErrCheck) or simulator error.
func (d *Driver) Run(sched coflow.Scheduler, coflows []coflow.Coflow) (*coflow.Result, error) {
	fab := d.Fabric
	if fab == nil {
		fab = coflow.NewFabric(4, coflow.GigabitBytesPerSec)
	}
	cfg := coflow.DefaultConfig()
	if d.Config != nil {
		cfg = *d.Config
	}
	d.Calls, d.Allocations = 0, 0
	user := cfg.Check
	check := Checker(d.Checks...)
	cfg.Check = func(now time.Duration, s *coflow.State, allocs []coflow.Allocation) error {
		d.Calls++
		d.Allocations += len(allocs)
		if err := check(now, s, allocs); err != nil {
			return fmt.Errorf("call %d: %w", d.Calls, err)
		}
		if user != nil {
			if err := user(now, s, allocs); err != nil {
				return err
			}
		}
		if d.OnSchedule != nil {
			return d.OnSchedule(now, s, allocs)
		}
		return nil
	}
	sim, err := coflow.NewSim(cfg, fab, sched)
	if err != nil {
		return nil, err
	}
	return sim.Run(coflows)
}

// Clock is a manual virtual clock for tests that call a scheduler directly:
// Now returns the current time, Advance moves it forward.
type Clock struct{ now time.Duration }

// Now returns the clock's time.
func (c *Clock) Now() time.Duration { return c.now }

// Advance moves the clock forward by d (negative d panics: time does not
// run backwards).
func (c *Clock) Advance(d time.Duration) time.Duration {
	if d < 0 {
		panic("coflowtest: Clock.Advance with negative duration")
	}
	c.now += d
	return c.now
}
