package epsp_test

import (
	"errors"
	"testing"

	"github.com/falconml/falcon/epsp"
)

// TestCoordinator_Revoke: under BSP, worker 1's own push of clock 0,
// admitted and not clocked, is taken back: the buffer's count drops, a
// hand-over then gives its whole batch to a survivor (it refuses while the
// push stands), and the clock flushes once the taker's push is done and
// worker 1 has left. Nothing is taken back twice, nor after a clock, nor
// from a worker that left.
func TestCoordinator_Revoke(t *testing.T) {
	c, err := epsp.NewCoordinator(epsp.Config{NumWorkers: 3, Batch: 10}, epsp.NewBSP())
	if err != nil {
		t.Fatal(err)
	}
	own := func(w epsp.WorkerID) epsp.Push {
		return epsp.Push{Worker: w, Owner: w, Clock: 0, Samples: 10, BatchSamples: 10}
	}
	if _, _, ok, err := c.Revoke(1); ok || err != nil {
		t.Fatalf("Revoke before any push = %v, %v; want nothing", ok, err)
	}
	for _, w := range []epsp.WorkerID{0, 1, 2} {
		if _, err := c.Admit(0, own(w)); err != nil {
			t.Fatal(err)
		}
	}
	step(t, c, clockEvent(0, 0))
	if _, _, ok, err := c.Revoke(0); ok || err != nil {
		t.Fatalf("Revoke after the worker's clock = %v, %v; want nothing", ok, err)
	}
	if _, ok, _ := c.HandOver(1, 2); ok {
		t.Fatal("HandOver of a worker whose push stands: want nothing to hand over")
	}
	buf, n, ok, err := c.Revoke(1)
	if err != nil || !ok || buf != 0 || n != 10 {
		t.Fatalf("Revoke(1) = %d, %d, %v, %v; want buffer 0, 10 samples", buf, n, ok, err)
	}
	if _, _, ok, _ := c.Revoke(1); ok {
		t.Fatal("a second Revoke(1) took something back")
	}
	if s := c.Stats(); s.Revoked != 1 || s.Accumulated != 3 {
		t.Fatalf("stats %+v, want Revoked 1, Accumulated 3", s)
	}
	o, ok, err := c.HandOver(1, 2)
	if err != nil || !ok || o.Lo != 0 || o.Hi != 10 {
		t.Fatalf("HandOver(1, 2) after the revoke = %+v, %v, %v; want [0,10)", o, ok, err)
	}
	if _, err := c.Admit(0, foreign(2, 1, 0, 10, 10)); err != nil {
		t.Fatalf("the taker's push: %v", err)
	}
	step(t, c, clockEvent(2, 0))
	out := step(t, c, epsp.Event{Kind: epsp.EventLeave, Worker: 1, Quit: true})
	if len(out.Flush) != 1 || out.Flush[0].Clock != 0 {
		t.Fatalf("after the hand-over and the leave: %+v, want clock 0 flushed", out)
	}
	if _, _, _, err := c.Revoke(1); !errors.Is(err, epsp.ErrBadEvent) {
		t.Fatalf("Revoke of a worker that left = %v, want ErrBadEvent", err)
	}
}

// TestCoordinator_RevokeRefuses: an applied push (ASP) is not taken back.
func TestCoordinator_RevokeRefuses(t *testing.T) {
	c, err := epsp.NewCoordinator(epsp.Config{NumWorkers: 2, Batch: 10}, epsp.ASP{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admit(0, epsp.Push{Worker: 0, Owner: 0, Clock: 0, Samples: 10, BatchSamples: 10}); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := c.Revoke(0); ok || err != nil {
		t.Fatalf("Revoke of an applied push = %v, %v; want nothing", ok, err)
	}
}
