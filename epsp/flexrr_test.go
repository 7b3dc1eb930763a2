package epsp_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/epsp/epsptest"
	"github.com/falconml/falcon/straggler"
)

func polFlexRR(t *testing.T, mod func(*epsp.FlexRRConfig)) *epsp.FlexRR {
	t.Helper()
	c := epsp.DefaultFlexRRConfig()
	c.NoExtrapolate = true
	if mod != nil {
		mod(&c)
	}
	p, err := epsp.NewFlexRR(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func polProgress(v *epsptest.FakeView, w epsp.WorkerID, done int) epsp.Event {
	r := epsp.ProgressReport{Worker: w, Clock: v.Clock(w), Done: done, Assigned: v.Batch(w), Elapsed: time.Second}
	v.SetProgress(r)
	return epsp.Event{Kind: epsp.EventProgress, Worker: w, Progress: r}
}

// Reference: baselines-params.md §1 (kensiuhk/flexps RapidReassignment): a
// finished helper steals 0.5 of the remaining tail of the slowest
// same-iteration member whose done count is ≤ 0.9·batch; offer →
// confirm/cancel, and after a cancel the helper asks again.
func TestFlexRR_RapidReassignment(t *testing.T) {
	p := polFlexRR(t, nil)
	v := epsptest.NewFakeView(4, 100)
	now := time.Second
	for w, done := range []int{0, 20, 50, 95} {
		if w > 0 {
			p.Step(now, v, polProgress(v, epsp.WorkerID(w), done))
		}
	}
	// Worker 0 finishes clock 0: the slowest same-clock helpee is worker 1
	// (80 left); it takes [60,100) and is not released while helping,
	// although s = 1 would let it start clock 1.
	out := p.Step(now, v, v.Finish(0))
	if len(out.Release) != 0 || len(out.Transfers) != 1 {
		t.Fatalf("helper output %+v, want one transfer and no release", out)
	}
	if o := out.Transfers[0]; o.From != 1 || o.To != 0 || o.Clock != 0 || o.Lo != 60 || o.Hi != 100 {
		t.Fatalf("transfer %+v, want 1->0 clock 0 [60,100)", o)
	}
	ts := v.Apply(out)
	// Worker 1 had passed 60 already: it cancels. The helper asks again,
	// never worker 1 again this clock; worker 2 (50 left ≥ 10) gives [75,100).
	v.SetPending(0, 0)
	out = p.Step(now, v, epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: ts[0].ID, From: 1, To: 0, Clock: 0}})
	if len(out.Transfers) != 1 || out.Transfers[0].From != 2 || out.Transfers[0].Lo != 75 || len(out.Release) != 0 {
		t.Fatalf("after cancel: %+v, want a transfer from worker 2 [75,100)", out)
	}
	ts = v.Apply(out)
	out = p.Step(now, v, epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: ts[0].ID, Accepted: true, Lo: 75, Hi: 100, From: 2, To: 0, Clock: 0}})
	if len(out.Release) != 0 {
		t.Fatalf("released while helping: %+v", out)
	}
	v.SetPending(0, 0)
	out = p.Step(now, v, epsp.Event{Kind: epsp.EventTransferDone, Transfer: epsp.TransferResult{ID: ts[0].ID, Accepted: true, Lo: 75, Hi: 100, From: 2, To: 0, Clock: 0}})
	// Done helping; worker 3 is 95 % done (not helpable), worker 1 refused,
	// worker 2 is giving nothing more above the threshold? It holds [0,75)
	// with 50 done: 25 left ≥ 10, so the helper helps again.
	if len(out.Transfers) != 1 || out.Transfers[0].From != 2 || out.Transfers[0].Lo != 63 {
		t.Fatalf("after done: %+v, want another transfer from worker 2 [63,75)", out)
	}
}

func TestFlexRR_NoHelpAboveThresholdOrOtherClock(t *testing.T) {
	p := polFlexRR(t, nil)
	v := epsptest.NewFakeView(3, 100)
	p.Step(0, v, polProgress(v, 1, 91)) // > 0.9·batch done: not helpable
	v.SetClock(2, 1)                    // computes clock 1: another iteration
	p.Step(0, v, polProgress(v, 2, 0))
	out := p.Step(0, v, v.Finish(0))
	if len(out.Transfers) != 0 || !slices.Equal(out.Release, []epsp.WorkerID{0}) {
		t.Fatalf("output %+v, want release of worker 0 and no transfer", out)
	}
}

func TestFlexRR_GroupSize(t *testing.T) {
	p := polFlexRR(t, func(c *epsp.FlexRRConfig) { c.GroupSize = 1 })
	v := epsptest.NewFakeView(4, 100)
	p.Step(0, v, polProgress(v, 1, 80)) // in 0's group (ring 0 -> 1) but 0.8 done: 20 left
	p.Step(0, v, polProgress(v, 2, 0))  // slower, but not in 0's group
	out := p.Step(0, v, v.Finish(0))
	if len(out.Transfers) != 1 || out.Transfers[0].From != 1 {
		t.Fatalf("output %+v, want a transfer from worker 1 only", out)
	}
}

func TestFlexRRConfig_Validate(t *testing.T) {
	for _, c := range []epsp.FlexRRConfig{{Staleness: -1}, {GroupSize: -2}, {Alpha: 3}, {Transfers: straggler.TransferConfig{Fraction: -1}}} {
		if _, err := epsp.NewFlexRR(c); !errors.Is(err, epsp.ErrBadConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// FlexRR in the loop: transfers happen, all are exactly-once (RunLoop
// checks), and with a slow worker it beats SSP(1) alone.
func TestFlexRR_Loop(t *testing.T) {
	hc := straggler.DefaultHeteroConfig(4)
	hc.Persistent = map[int]float64{2: 0.3}
	m, _ := straggler.NewHetero(hc)
	cfg := epsptest.LoopConfig{Model: m, Batch: 64, Clocks: 10, ProgressEvery: 5 * time.Millisecond}
	ssp, err := epsptest.RunLoop(cfg, epsp.NewSSP(1))
	if err != nil {
		t.Fatal(err)
	}
	got, err := epsptest.RunLoop(cfg, polFlexRR(t, func(c *epsp.FlexRRConfig) { c.NoExtrapolate = false }))
	if err != nil {
		t.Fatal(err)
	}
	if got.Stats.TransfersAccepted == 0 || got.End >= ssp.End {
		t.Fatalf("flexrr: %d transfers accepted, end %v; ssp(1) end %v", got.Stats.TransfersAccepted, got.End, ssp.End)
	}
}

// TestFlexRR_HelpBehind: under s = 1 a straggler two clocks behind blocks
// the helpers; the reproduction's rule (same clock only) leaves it alone,
// so the helpers wait, while HelpBehind takes from its tail.
func TestFlexRR_HelpBehind(t *testing.T) {
	for _, behind := range []bool{false, true} {
		p := polFlexRR(t, func(c *epsp.FlexRRConfig) { c.HelpBehind = behind })
		v := epsptest.NewFakeView(3, 100)
		v.SetClock(0, 1)
		v.SetClock(2, 2).SetWaiting(2, true) // done with clocks 0 and 1, waiting to start 2
		p.Step(0, v, polProgress(v, 1, 20))
		p.Step(0, v, polProgress(v, 0, 10))
		out := p.Step(0, v, v.Finish(0)) // worker 0 done with clock 1 too: both wait on worker 1 at clock 0
		if behind {
			// one helper takes 0.5 of the tail; a giver has one
			// pending transfer at a time (offer, then confirm or cancel)
			if len(out.Transfers) != 1 || out.Transfers[0].From != 1 || out.Transfers[0].Clock != 0 || len(out.Release) != 0 {
				t.Fatalf("behind: %+v, want one transfer from worker 1's clock 0 and no release", out)
			}
			continue
		}
		if len(out.Transfers) != 0 || len(out.Release) != 0 {
			t.Fatalf("reproduction: %+v, want no transfer (other clock) and no release (s = 1)", out)
		}
	}
}
