package epsp_test

import (
	"errors"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
)

// TestCoordinator_LostTakerHoldsItsClock is the finding "a lost taker
// holds its clock pending forever": a taker that leaves (EventLeave with
// Quit) holding an accepted transfer it has not pushed keeps it — a
// worker that left may still compute what it took — so the clock stays
// pending; Retarget is how a runtime that lost it moves the range (see
// TestCoordinator_RetargetLostTaker), and a late push from the worker
// after that is refused.
func TestCoordinator_LostTakerHoldsItsClock(t *testing.T) {
	c, _, id := ledgerCoord(t) // 1 gave [7,10) of clock 0 to 0
	step(t, c, epsp.Event{Kind: epsp.EventLeave, Worker: 0, Quit: true})
	if n := c.View().PendingTransfers(0); n != 1 {
		t.Fatalf("PendingTransfers(0) = %d after the taker's leave, want 1", n)
	}
	if _, err := c.Retarget(0, []epsp.WorkerID{2}); !errors.Is(err, epsp.ErrBadEvent) {
		t.Fatalf("Retarget from a worker that left = %v, want ErrBadEvent (retarget before the leave)", err)
	}
	if st, ok := c.Transfer(id); !ok || st.Order.To != 0 {
		t.Fatalf("Transfer(%d) = %+v, %v", id, st, ok)
	}
}

// TestCoordinator_RetargetLostTaker: under BSP, a lost taker's accepted
// transfer is moved to a survivor (Retarget), which pushes it once; the
// lost taker's push of it is refused, and the clock is flushed after the
// survivor's done, with every sample of the giver's batch admitted once.
func TestCoordinator_RetargetLostTaker(t *testing.T) {
	p := &injecting{BSP: epsp.NewBSP()}
	c, err := epsp.NewCoordinator(epsp.Config{NumWorkers: 3, Batch: 10, TickPeriod: time.Millisecond}, p)
	if err != nil {
		t.Fatal(err)
	}
	step(t, c, clockEvent(0, 0))
	p.next = []epsp.TransferOrder{{From: 1, To: 0, Clock: 0, Lo: 6, Hi: 10}}
	id := step(t, c, epsp.Event{Kind: epsp.EventTick}).Transfers[0].ID
	step(t, c, epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: id, Accepted: true, Lo: 6, Hi: 10}})
	// worker 0 is lost before its push
	moved, err := c.Retarget(0, []epsp.WorkerID{2})
	if err != nil || len(moved) != 1 || moved[0] != (epsp.TransferOrder{ID: id, From: 1, To: 2, Clock: 0, Lo: 6, Hi: 10}) {
		t.Fatalf("Retarget(0, {2}) = %+v, %v", moved, err)
	}
	if st, _ := c.Transfer(id); st.Batch != 10 || st.Order.To != 2 {
		t.Fatalf("Transfer(%d) = %+v", id, st)
	}
	step(t, c, epsp.Event{Kind: epsp.EventLeave, Worker: 0, Quit: true})
	admitRefused(t, c, foreign(0, 1, 0, 4, 10), true)
	if _, err := c.Admit(0, epsp.Push{Worker: 1, Owner: 1, Clock: 0, Samples: 6, BatchSamples: 10}); err != nil {
		t.Fatal(err)
	}
	step(t, c, clockEvent(1, 0))
	step(t, c, clockEvent(2, 0))
	if c.View().PendingTransfers(0) != 1 {
		t.Fatalf("pending %d before the survivor's push, want 1", c.View().PendingTransfers(0))
	}
	if _, err := c.Admit(0, foreign(2, 1, 0, 4, 10)); err != nil {
		t.Fatalf("the survivor's push: %v", err)
	}
	admitRefused(t, c, foreign(2, 1, 0, 4, 10), true)
	out := step(t, c, epsp.Event{Kind: epsp.EventTransferDone, Transfer: epsp.TransferResult{ID: id}})
	if len(out.Flush) != 1 || out.Flush[0].Clock != 0 {
		t.Fatalf("after the survivor's done: %+v, want clock 0 flushed", out)
	}
	if s := c.Stats(); s.Retargeted != 1 || s.SamplesRetargeted != 4 || s.SamplesAbandoned != 0 || s.TransfersDone != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestCoordinator_RetargetUnanswered: an order to a lost taker not yet
// answered goes to the survivor if its giver accepts; the policy's
// result still names the taker it ordered.
func TestCoordinator_RetargetUnanswered(t *testing.T) {
	c, p, _ := ledgerCoord(t)
	p.next = epsp.Output{Transfers: []epsp.TransferOrder{{From: 1, To: 0, Clock: 0, Lo: 4, Hi: 7}}}
	id := step(t, c, epsp.Event{Kind: epsp.EventTick}).Transfers[0].ID
	moved, err := c.Retarget(0, []epsp.WorkerID{2})
	if err != nil || len(moved) != 1 || moved[0].To != 2 || moved[0].ID == id {
		t.Fatalf("Retarget = %+v, %v; want the accepted transfer only", moved, err)
	}
	step(t, c, epsp.Event{Kind: epsp.EventLeave, Worker: 0, Quit: true})
	step(t, c, epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: id, Accepted: true, Lo: 4, Hi: 7}})
	if st, ok := c.Transfer(id); !ok || st.Order.To != 2 || !st.Accepted {
		t.Fatalf("Transfer(%d) = %+v, %v; want accepted for worker 2", id, st, ok)
	}
	if _, err := c.Admit(0, foreign(2, 1, 0, 3, 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admit(0, foreign(2, 1, 0, 3, 10)); err != nil {
		t.Fatal(err)
	}
	admitRefused(t, c, foreign(2, 1, 0, 3, 10), true)
}

// TestCoordinator_RetargetAssigned: samples assigned to a taker at its
// release that it has not pushed become orders of the same pieces to the
// survivor; the clock stays pending until the survivor's done, which the
// policy sees as a tick.
func TestCoordinator_RetargetAssigned(t *testing.T) {
	c, p := assignCoord(t)
	p.next = epsp.Output{Flush: []epsp.FlushOrder{{Clock: 0}}, Release: []epsp.WorkerID{0, 1, 2},
		Assign: []epsp.Assignment{{From: 0, To: 1, Clock: 1, Lo: 7, Hi: 10}, {From: 0, To: 2, Clock: 1, Lo: 4, Hi: 7}}}
	step(t, c, epsp.Event{Kind: epsp.EventTick})
	moved, err := c.Retarget(1, []epsp.WorkerID{2})
	if err != nil || len(moved) != 1 || moved[0].From != 0 || moved[0].To != 2 || moved[0].Clock != 1 || moved[0].Lo != 7 || moved[0].Hi != 10 {
		t.Fatalf("Retarget(1, {2}) = %+v, %v", moved, err)
	}
	id := moved[0].ID
	if st, ok := c.Transfer(id); !ok || !st.Assigned || !st.Accepted || st.Batch < 10 {
		t.Fatalf("Transfer(%d) = %+v, %v", id, st, ok)
	}
	step(t, c, epsp.Event{Kind: epsp.EventLeave, Worker: 1, Quit: true})
	if c.View().PendingTransfers(1) != 1 {
		t.Fatalf("pending %d, want 1", c.View().PendingTransfers(1))
	}
	// worker 1's push of them is refused (it left); worker 2's own push
	// with its assigned parts, then the moved piece
	v := c.View()
	if _, err := c.Admit(0, epsp.Push{Worker: 2, Owner: 2, Clock: 1, BaseVersion: v.Version(), Samples: v.Batch(2) + 3, BatchSamples: v.Batch(2) + 3,
		Parts: []epsp.PushPart{{Owner: 2, Clock: 1, Samples: v.Batch(2)}, {Owner: 0, Clock: 1, Samples: 3}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admit(0, foreign(2, 0, 1, 3, 10)); err != nil {
		t.Fatalf("the moved piece: %v", err)
	}
	admitRefused(t, c, foreign(2, 0, 1, 3, 10), true)
	step(t, c, epsp.Event{Kind: epsp.EventTransferDone, Transfer: epsp.TransferResult{ID: id}})
	if c.View().PendingTransfers(1) != 0 {
		t.Fatalf("pending %d after the done", c.View().PendingTransfers(1))
	}
	if s := c.Stats(); s.Retargeted != 1 || s.SamplesRetargeted != 3 || s.TransfersDone != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestCoordinator_RetargetSkipsTheGiver: a range goes to the first
// survivor that is not its giver; with the giver the only survivor it
// stays the lost taker's, and the taker's leave abandons it. A bad
// Retarget changes nothing.
func TestCoordinator_RetargetSkipsTheGiver(t *testing.T) {
	c, _, id := ledgerCoord(t) // 1 gave [7,10) of clock 0 to 0
	for _, to := range [][]epsp.WorkerID{{0}, {2, 0}, {3}} {
		if _, err := c.Retarget(0, to); !errors.Is(err, epsp.ErrBadEvent) {
			t.Fatalf("Retarget(0, %v) = %v, want ErrBadEvent", to, err)
		}
	}
	if moved, err := c.Retarget(0, []epsp.WorkerID{1}); err != nil || len(moved) != 0 {
		t.Fatalf("Retarget(0, {1}) = %+v, %v; want nothing moved (1 is the giver)", moved, err)
	}
	moved, err := c.Retarget(0, []epsp.WorkerID{1, 2})
	if err != nil || len(moved) != 1 || moved[0].ID != id || moved[0].To != 2 {
		t.Fatalf("Retarget(0, {1, 2}) = %+v, %v; want transfer %d to 2", moved, err, id)
	}
}

// TestCoordinator_Abandon: what a lost taker owed that no survivor can
// take is given up: its accepted range ends, an order to it not yet
// answered ends when accepted, the samples count as abandoned, and its
// late push is refused.
func TestCoordinator_Abandon(t *testing.T) {
	c, p, id := ledgerCoord(t) // 1 gave [7,10) of clock 0 to 0
	p.next = epsp.Output{Transfers: []epsp.TransferOrder{{From: 1, To: 0, Clock: 0, Lo: 4, Hi: 7}}}
	late := step(t, c, epsp.Event{Kind: epsp.EventTick}).Transfers[0].ID
	if n, err := c.Abandon(0); err != nil || n != 3 {
		t.Fatalf("Abandon(0) = %d, %v; want 3", n, err)
	}
	if _, ok := c.Transfer(id); ok || c.View().PendingTransfers(0) != 1 {
		t.Fatalf("transfer %d outstanding %v, pending %d; want it ended, the unanswered order pending", id, ok, c.View().PendingTransfers(0))
	}
	admitRefused(t, c, foreign(0, 1, 0, 3, 10), true)
	step(t, c, epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: late, Accepted: true, Lo: 4, Hi: 7}})
	if _, ok := c.Transfer(late); ok || c.View().PendingTransfers(0) != 0 || c.Stats().SamplesAbandoned != 6 {
		t.Fatalf("after the late acceptance: outstanding %v, pending %d, stats %+v", ok, c.View().PendingTransfers(0), c.Stats())
	}
}
