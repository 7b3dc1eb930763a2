package epsp_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
)

// fixedAdmit answers every push with one decision.
type fixedAdmit struct {
	scripted
	dec epsp.PushDecision
}

func (f *fixedAdmit) Admit(time.Duration, epsp.View, epsp.Push) epsp.PushDecision { return f.dec }

// Every push decision a policy returns is checked: a scale must be finite
// and not negative (0 reads as 1), an accumulation must name a buffer
// (>= 0); the error names the policy and the field.
func TestCoordinator_AdmitValidatesDecision(t *testing.T) {
	push := epsp.Push{Worker: 0, Owner: 0, Clock: 0, Samples: 4, BatchSamples: 4}
	for _, tc := range []struct {
		name  string
		dec   epsp.PushDecision
		field string
	}{
		{"negative scale", epsp.PushDecision{Scale: -1}, "Scale"},
		{"NaN scale", epsp.PushDecision{Scale: math.NaN()}, "Scale"},
		{"infinite scale", epsp.PushDecision{Scale: math.Inf(1)}, "Scale"},
		{"accumulate into clock -1", epsp.PushDecision{Action: epsp.Accumulate, Clock: -1}, "Clock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &fixedAdmit{dec: tc.dec}
			c := newCoord(t, 2, p)
			_, err := c.Admit(0, push)
			if !errors.Is(err, epsp.ErrPolicyOutput) {
				t.Fatalf("Admit = %v, want ErrPolicyOutput", err)
			}
			if !strings.Contains(err.Error(), "scripted") || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name the policy and %s", err, tc.field)
			}
			if s := c.Stats(); s.Applied+s.Accumulated+s.Dropped != 0 || c.View().Version() != 0 {
				t.Errorf("a refused decision was counted: %+v", s)
			}
		})
	}
	for _, ok := range []epsp.PushDecision{{}, {Scale: 0.5}, {Action: epsp.Accumulate, Clock: 0}, {Action: epsp.Drop, Scale: -1}} {
		c := newCoord(t, 2, &fixedAdmit{dec: ok})
		if _, err := c.Admit(0, push); err != nil {
			t.Errorf("Admit with %+v: %v", ok, err)
		}
	}
}

// Flushes of clocks that do not exist (beyond every worker's clock with no
// push accumulated into them, clock −1, or a clock flushed twice), bad flush scales and releases of
// workers that do not exist are invalid output, and change nothing.
func TestCoordinator_StepValidatesFlushAndRelease(t *testing.T) {
	for _, tc := range []struct {
		name  string
		out   epsp.Output
		field string
	}{
		{"flush of a future clock", epsp.Output{Flush: []epsp.FlushOrder{{Clock: 5}}}, "Flush"},
		{"flush of clock -1", epsp.Output{Flush: []epsp.FlushOrder{{Clock: -1}}}, "Flush"},
		{"flush twice", epsp.Output{Flush: []epsp.FlushOrder{{Clock: 0}, {Clock: 0}}}, "Flush"},
		{"flush with NaN scale", epsp.Output{Flush: []epsp.FlushOrder{{Clock: 0, Scale: math.NaN()}}}, "Scale"},
		{"flush with negative scale", epsp.Output{Flush: []epsp.FlushOrder{{Clock: 0, Scale: -2}}}, "Scale"},
		{"release of worker 99", epsp.Output{Release: []epsp.WorkerID{0, 99}}, "Release"},
		{"release of worker -1", epsp.Output{Release: []epsp.WorkerID{-1}}, "Release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &fixedAdmit{dec: epsp.PushDecision{Action: epsp.Accumulate, Clock: 0}}
			c := newCoord(t, 2, p)
			if _, err := c.Admit(0, epsp.Push{Worker: 0, Owner: 0, Clock: 0, Samples: 4, BatchSamples: 4}); err != nil {
				t.Fatal(err)
			}
			step(t, c, clockEvent(0, 0))
			p.next = tc.out
			_, err := c.Step(0, epsp.Event{Kind: epsp.EventTick})
			if !errors.Is(err, epsp.ErrPolicyOutput) {
				t.Fatalf("Step = %v, want ErrPolicyOutput", err)
			}
			if !strings.Contains(err.Error(), "scripted") || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name the policy and %s", err, tc.field)
			}
			if v := c.View(); v.Version() != 0 || !v.Waiting(0) || c.Stats().Flushes != 0 {
				t.Error("invalid output was partly applied")
			}
		})
	}
}

// silent never releases anyone.
type silent struct{ scripted }

func (*silent) Name() string { return "silent" }

// A policy that leaves every worker waiting is reported as a stall naming
// it: at once when there is no control tick (no event can come), after
// StallAfter of ticks otherwise.
func TestCoordinator_ReportsStall(t *testing.T) {
	c := newCoord(t, 2, &silent{})
	step(t, c, clockEvent(0, 0))
	_, err := c.Step(0, clockEvent(1, 0))
	if !errors.Is(err, epsp.ErrStalled) || !errors.Is(err, epsp.ErrPolicyOutput) || !strings.Contains(err.Error(), "silent") {
		t.Fatalf("Step = %v, want ErrStalled naming the policy", err)
	}

	c, err = epsp.NewCoordinator(epsp.Config{NumWorkers: 2, Batch: 10, TickPeriod: 10 * time.Millisecond, StallAfter: time.Second}, &silent{})
	if err != nil {
		t.Fatal(err)
	}
	step(t, c, clockEvent(0, 0))
	step(t, c, clockEvent(1, 0))
	for now := time.Duration(0); now < time.Second; now += 10 * time.Millisecond {
		if _, err := c.Step(now, epsp.Event{Kind: epsp.EventTick}); err != nil {
			t.Fatalf("tick at %v: %v", now, err)
		}
	}
	if _, err := c.Step(time.Second+10*time.Millisecond, epsp.Event{Kind: epsp.EventTick}); !errors.Is(err, epsp.ErrStalled) {
		t.Fatalf("tick after StallAfter: %v, want ErrStalled", err)
	}
	// One worker still computing: not a stall.
	c = newCoord(t, 2, &silent{})
	step(t, c, clockEvent(0, 0))
	if _, err := c.Step(0, epsp.Event{Kind: epsp.EventTick}); err != nil {
		t.Fatal(err)
	}
}
