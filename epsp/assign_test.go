package epsp_test

import (
	"errors"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
)

// assignCoord is a coordinator of 3 workers (batch 10) all waiting at
// clock 1, driven by a scripted policy.
func assignCoord(t *testing.T) (*epsp.Coordinator, *scripted) {
	t.Helper()
	p := &scripted{}
	// a tick period, so that three waiting workers are not a stall yet
	c, err := epsp.NewCoordinator(epsp.Config{NumWorkers: 3, Batch: 10, TickPeriod: 100 * time.Millisecond}, p)
	if err != nil {
		t.Fatal(err)
	}
	for w := range 3 {
		step(t, c, clockEvent(w, 0))
	}
	return c, p
}

func TestCoordinator_AssignValidated(t *testing.T) {
	all := []epsp.WorkerID{0, 1, 2}
	tests := []struct {
		name    string
		release []epsp.WorkerID
		assign  []epsp.Assignment
	}{
		{"taker not released", []epsp.WorkerID{0, 1}, []epsp.Assignment{{From: 0, To: 2, Clock: 1, Lo: 6, Hi: 10}}},
		{"self", all, []epsp.Assignment{{From: 0, To: 0, Clock: 1, Lo: 6, Hi: 10}}},
		{"wrong clock", all, []epsp.Assignment{{From: 0, To: 1, Clock: 0, Lo: 6, Hi: 10}}},
		{"not the tail", all, []epsp.Assignment{{From: 0, To: 1, Clock: 1, Lo: 4, Hi: 8}}},
		{"gap between pieces", all, []epsp.Assignment{{From: 0, To: 1, Clock: 1, Lo: 8, Hi: 10}, {From: 0, To: 2, Clock: 1, Lo: 4, Hi: 7}}},
		{"overlap", all, []epsp.Assignment{{From: 0, To: 1, Clock: 1, Lo: 7, Hi: 10}, {From: 0, To: 2, Clock: 1, Lo: 5, Hi: 8}}},
		{"beyond batch", all, []epsp.Assignment{{From: 0, To: 1, Clock: 1, Lo: 6, Hi: 11}}},
		{"gives and takes", all, []epsp.Assignment{{From: 0, To: 1, Clock: 1, Lo: 8, Hi: 10}, {From: 1, To: 2, Clock: 1, Lo: 8, Hi: 10}}},
		{"resized in the same output", all, []epsp.Assignment{{From: 2, To: 1, Clock: 1, Lo: 8, Hi: 10}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, p := assignCoord(t)
			p.next = epsp.Output{Flush: []epsp.FlushOrder{{Clock: 0}}, Release: tt.release, Assign: tt.assign}
			if tt.name == "resized in the same output" {
				p.next.SetBatch = []epsp.BatchOrder{{Worker: 2, Size: 12}}
			}
			if _, err := c.Step(0, epsp.Event{Kind: epsp.EventTick}); !errors.Is(err, epsp.ErrPolicyOutput) {
				t.Fatalf("Step = %v, want ErrPolicyOutput", err)
			}
			if v := c.View(); v.Version() != 0 || !v.Waiting(0) || c.Stats().Assignments != 0 {
				t.Fatal("invalid output was partly applied")
			}
		})
	}
}

// TestCoordinator_AssignLedger: assigned samples must be pushed by the
// taker, in a push whose parts add up, before it clocks; the giver's and
// taker's views show the split.
func TestCoordinator_AssignLedger(t *testing.T) {
	c, p := assignCoord(t)
	p.next = epsp.Output{Flush: []epsp.FlushOrder{{Clock: 0}}, Release: []epsp.WorkerID{0, 1, 2},
		Assign: []epsp.Assignment{{From: 0, To: 1, Clock: 1, Lo: 7, Hi: 10}, {From: 0, To: 2, Clock: 1, Lo: 4, Hi: 7}}}
	out := step(t, c, epsp.Event{Kind: epsp.EventTick})
	if len(out.Assign) != 2 || c.Stats().SamplesAssigned != 6 {
		t.Fatalf("out %+v, stats %+v", out, c.Stats())
	}
	v := c.View()
	if v.Progress(0).Assigned != 4 || v.Progress(1).Extra != 3 || v.Progress(2).Extra != 3 {
		t.Fatalf("progress %+v %+v %+v", v.Progress(0), v.Progress(1), v.Progress(2))
	}
	// the taker may not clock before pushing what it owes
	if _, err := c.Step(0, clockEvent(1, 1)); !errors.Is(err, epsp.ErrBadEvent) {
		t.Fatalf("clock owing samples: %v, want ErrBadEvent", err)
	}
	push := func(parts []epsp.PushPart, samples int) error {
		_, err := c.Admit(time.Millisecond, epsp.Push{Worker: 1, Owner: 1, Clock: 1, BaseVersion: v.Version(), Samples: samples, BatchSamples: 13, Parts: parts, Busy: time.Millisecond})
		return err
	}
	bad := [][]epsp.PushPart{
		{{Owner: 1, Clock: 1, Samples: 10}, {Owner: 0, Clock: 1, Samples: 4}},                       // more than assigned
		{{Owner: 1, Clock: 1, Samples: 10}, {Owner: 2, Clock: 1, Samples: 3}},                       // wrong owner
		{{Owner: 1, Clock: 1, Samples: 10}, {Owner: 0, Clock: 0, Samples: 3}},                       // wrong clock
		{{Owner: 1, Clock: 1, Samples: 9}, {Owner: 0, Clock: 1, Samples: 3}},                        // parts do not add up to 13
		{{Owner: 1, Clock: 1, Samples: 10}, {Owner: 0, Clock: 1, Samples: 3}, {Owner: 0, Clock: 1}}, // empty part
	}
	for i, parts := range bad {
		if err := push(parts, 13); !errors.Is(err, epsp.ErrBadPush) {
			t.Fatalf("bad parts %d: %v, want ErrBadPush", i, err)
		}
	}
	if err := push([]epsp.PushPart{{Owner: 1, Clock: 1, Samples: 10}, {Owner: 0, Clock: 1, Samples: 3}}, 13); err != nil {
		t.Fatal(err)
	}
	step(t, c, clockEvent(1, 1))
	// the same parts again: nothing is owed any more
	if err := push([]epsp.PushPart{{Owner: 1, Clock: 1, Samples: 10}, {Owner: 0, Clock: 1, Samples: 3}}, 13); !errors.Is(err, epsp.ErrBadPush) {
		t.Fatalf("second push of assigned samples: %v, want ErrBadPush", err)
	}
}

// v2Coord is a coordinator of 3 workers (batch 60) driven by EPSP v2
// without residual transfers: the tests' pushes arrive at once, with
// nobody computing.
func v2Coord(t *testing.T) (*epsp.EPSPv2, *epsp.Coordinator) {
	t.Helper()
	cfg := epsp.DefaultEPSPv2Config()
	cfg.NoResidual = true
	p, err := epsp.NewEPSPv2(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := epsp.NewCoordinator(epsp.Config{NumWorkers: 3, Batch: 60}, p)
	if err != nil {
		t.Fatal(err)
	}
	return p, c
}

// TestEPSPv2_PlansFromBusySpeed: the plan at release follows the busy
// speeds carried on the pushes; with equal speeds nothing is planned.
func TestEPSPv2_PlansFromBusySpeed(t *testing.T) {
	_, c := v2Coord(t)
	run := func(busy [3]time.Duration) epsp.Output {
		var out epsp.Output
		for w := range 3 {
			v := c.View()
			clk := v.Clock(epsp.WorkerID(w))
			if _, err := c.Admit(0, epsp.Push{Worker: epsp.WorkerID(w), Owner: epsp.WorkerID(w), Clock: clk, BaseVersion: v.Version(),
				Samples: v.Progress(epsp.WorkerID(w)).Assigned + v.Progress(epsp.WorkerID(w)).Extra, BatchSamples: 60 + v.Progress(epsp.WorkerID(w)).Extra,
				Busy: busy[w]}); err != nil {
				t.Fatal(err)
			}
			out = step(t, c, clockEvent(w, clk))
		}
		return out
	}
	if out := run([3]time.Duration{time.Second, time.Second, time.Second}); len(out.Release) != 3 || len(out.Assign) != 0 {
		t.Fatalf("equal speeds: %+v", out)
	}
	// worker 0 at 20 samples/s (a change: the estimate jumps to it), the
	// others at 60: T* = 180/140 s; worker 0 keeps round(20·T*) = 26, the
	// others have room 17.14 each and take ⌈17.14⌉ = 18 and the rest, 16
	out := run([3]time.Duration{3 * time.Second, time.Second, time.Second})
	if len(out.Assign) != 2 || out.Assign[0].From != 0 || out.Assign[0].Hi != 60 || out.Assign[1].Lo != 26 {
		t.Fatalf("straggler: %+v", out.Assign)
	}
}

// TestEPSPv2_TinyPushDoesNotSetSpeed: a worker's speed is one sample per
// clock, the samples it pushed over the busy time they took, so a
// one-sample piece that took almost nothing (a residual transfer that ran
// while the worker's pacing caught up, a cached gradient) does not make it
// the fastest worker and the next plan does not give it everyone's tail.
// Live, a push of 1 sample in 22 µs after a clock of 9 samples in 11 ms
// set worker 0's estimate to 45,000 samples/s; the next release assigned
// it 477 samples of 11 workers and the clock took 528 ms instead of 25.
func TestEPSPv2_TinyPushDoesNotSetSpeed(t *testing.T) {
	p, c := v2Coord(t)
	var out epsp.Output
	for range 3 { // three clocks, every worker at 60 samples/s
		for w := range 3 {
			v := c.View()
			clk := v.Clock(epsp.WorkerID(w))
			if _, err := c.Admit(0, epsp.Push{Worker: epsp.WorkerID(w), Owner: epsp.WorkerID(w), Clock: clk, BaseVersion: v.Version(),
				Samples: 60, BatchSamples: 60, Busy: time.Second}); err != nil {
				t.Fatal(err)
			}
			if w == 0 {
				// a transferred sample of worker 1's clock, pushed in 22 µs
				// (the policy sees it as the coordinator would pass it on)
				p.Admit(0, c.View(), epsp.Push{Worker: 0, Owner: 1, Clock: clk, BaseVersion: v.Version(),
					Samples: 1, BatchSamples: 60, Busy: 22 * time.Microsecond})
			}
			out = step(t, c, clockEvent(w, clk))
		}
		if len(out.Release) != 3 || len(out.Assign) != 0 {
			t.Fatalf("equal speeds, one tiny push: release %v, assign %+v (speeds %.0f %.0f %.0f)",
				out.Release, out.Assign, p.Speed(0), p.Speed(1), p.Speed(2))
		}
	}
	if s := p.Speed(0); s < 55 || s > 65 {
		t.Fatalf("worker 0's speed %.1f, want 61/1.000022 ≈ 61 samples/s", s)
	}
}
