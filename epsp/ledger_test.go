package epsp_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
)

// ledgerCoord is a coordinator of 3 workers (batch 10) in clock 0, driven
// by a scripted policy: worker 0 has finished the clock, and worker 1 has
// given it [7,10) of its batch (transfer id, accepted, not yet pushed).
func ledgerCoord(t *testing.T) (c *epsp.Coordinator, p *scripted, id uint64) {
	t.Helper()
	p = &scripted{}
	c, err := epsp.NewCoordinator(epsp.Config{NumWorkers: 3, Batch: 10, TickPeriod: 100 * time.Millisecond}, p)
	if err != nil {
		t.Fatal(err)
	}
	p.next = epsp.Output{Transfers: []epsp.TransferOrder{{From: 1, To: 0, Clock: 0, Lo: 6, Hi: 10}}}
	out := step(t, c, clockEvent(0, 0))
	id = out.Transfers[0].ID
	step(t, c, epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: id, Accepted: true, Lo: 7, Hi: 10}})
	return c, p, id
}

// foreign is worker w's plain push of samples of owner's clock.
func foreign(w, owner epsp.WorkerID, clock, samples, batch int) epsp.Push {
	return epsp.Push{Worker: w, Owner: owner, Clock: clock, Samples: samples, BatchSamples: batch}
}

// admitRefused checks that Admit refuses p with ErrBadPush (and
// ErrNotOrdered if notOrdered) and changes nothing.
func admitRefused(t *testing.T, c *epsp.Coordinator, p epsp.Push, notOrdered bool) {
	t.Helper()
	before, version := c.Stats(), c.View().Version()
	_, err := c.Admit(0, p)
	if !errors.Is(err, epsp.ErrBadPush) || (notOrdered && !errors.Is(err, epsp.ErrNotOrdered)) {
		t.Fatalf("Admit(%+v) = %v, want ErrBadPush (not ordered: %v)", p, err, notOrdered)
	}
	if after := c.Stats(); !reflect.DeepEqual(after, before) || c.View().Version() != version {
		t.Fatalf("refused push changed the state: stats %+v → %+v, version %d → %d", before, after, version, c.View().Version())
	}
}

// TestCoordinator_RefusesUnorderedForeignPush: a push of another worker's
// samples is admitted only with an accepted transfer behind it, from
// that owner to the pusher in that clock, with room for the samples; a
// refused push changes nothing, and the transfer's own push still goes
// through afterwards, once.
func TestCoordinator_RefusesUnorderedForeignPush(t *testing.T) {
	c, _, id := ledgerCoord(t)
	tests := []struct {
		name       string
		p          epsp.Push
		notOrdered bool
	}{
		{"never ordered", foreign(1, 2, 0, 3, 10), true},
		{"other taker", foreign(2, 1, 0, 3, 10), true},
		{"other owner", foreign(0, 2, 0, 3, 10), true},
		{"other clock", foreign(0, 1, 1, 3, 10), true},
		{"more than the range", foreign(0, 1, 0, 4, 10), true},
		{"batch ending before the range", foreign(0, 1, 0, 3, 9), true},
		{"the owner's whole batch", foreign(0, 1, 0, 10, 10), true},
		{"parts under another owner", epsp.Push{Worker: 0, Owner: 1, Clock: 0, Samples: 3, BatchSamples: 10,
			Parts: []epsp.PushPart{{Owner: 1, Clock: 0, Samples: 3}}}, false},
		{"parts of an owner not assigned", epsp.Push{Worker: 0, Owner: 0, Clock: 0, Samples: 3, BatchSamples: 10,
			Parts: []epsp.PushPart{{Owner: 1, Clock: 0, Samples: 3}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { admitRefused(t, c, tt.p, tt.notOrdered) })
	}
	if _, err := c.Admit(0, foreign(0, 1, 0, 3, 10)); err != nil {
		t.Fatalf("the transfer's push: %v", err)
	}
	admitRefused(t, c, foreign(0, 1, 0, 3, 10), true) // the range is pushed
	step(t, c, epsp.Event{Kind: epsp.EventTransferDone, Transfer: epsp.TransferResult{ID: id}})
	admitRefused(t, c, foreign(0, 1, 0, 3, 10), true) // and done
	if s := c.Stats(); s.Applied != 1 {
		t.Fatalf("stats %+v, want one push admitted", s)
	}
}

// TestCoordinator_ForeignPushNeedsAcceptance: an order not yet answered,
// or refused, covers nothing; a push of fewer samples than the range uses
// the transfer up.
func TestCoordinator_ForeignPushNeedsAcceptance(t *testing.T) {
	p := &scripted{}
	c, err := epsp.NewCoordinator(epsp.Config{NumWorkers: 3, Batch: 10, TickPeriod: 100 * time.Millisecond}, p)
	if err != nil {
		t.Fatal(err)
	}
	p.next = epsp.Output{Transfers: []epsp.TransferOrder{{From: 1, To: 0, Clock: 0, Lo: 6, Hi: 10}, {From: 2, To: 0, Clock: 0, Lo: 5, Hi: 10}}}
	out := step(t, c, clockEvent(0, 0))
	a, b := out.Transfers[0].ID, out.Transfers[1].ID
	admitRefused(t, c, foreign(0, 1, 0, 4, 10), true) // ordered, not answered
	step(t, c, epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: b}})
	admitRefused(t, c, foreign(0, 2, 0, 5, 10), true) // refused by the giver
	step(t, c, epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: a, Accepted: true, Lo: 6, Hi: 10}})
	if _, err := c.Admit(0, foreign(0, 1, 0, 3, 10)); err != nil {
		t.Fatalf("a push of part of the range: %v", err)
	}
	admitRefused(t, c, foreign(0, 1, 0, 1, 10), true) // one push per transfer
}

// TestCoordinator_ForeignPushMatchesItsTransfer: two accepted transfers
// between the same workers each admit one push; a push uses the one of its
// size.
func TestCoordinator_ForeignPushMatchesItsTransfer(t *testing.T) {
	c, p, _ := ledgerCoord(t)
	p.next = epsp.Output{Transfers: []epsp.TransferOrder{{From: 1, To: 0, Clock: 0, Lo: 2, Hi: 7}}}
	out := step(t, c, epsp.Event{Kind: epsp.EventTick})
	step(t, c, epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: out.Transfers[0].ID, Accepted: true, Lo: 2, Hi: 7}})
	for _, n := range []int{5, 3} { // [2,7) first, although [7,10) has the lower ID
		if _, err := c.Admit(0, foreign(0, 1, 0, n, 10)); err != nil {
			t.Fatalf("push of %d samples: %v", n, err)
		}
	}
	admitRefused(t, c, foreign(0, 1, 0, 1, 10), true)
}

// TestCoordinator_HandOver: the unprocessed prefix of a lost worker's
// batch goes to a taker through the transfer ledger: the taker's push of
// it is admitted once, the giver may not push or clock the clock, the
// hand-over holds its clock like a pending transfer, and the giver's
// leave ends it.
func TestCoordinator_HandOver(t *testing.T) {
	c, _, tid := ledgerCoord(t)
	o, ok, err := c.HandOver(1, 2)
	if err != nil || !ok {
		t.Fatalf("HandOver(1, 2) = %v, %v", ok, err)
	}
	if want := (epsp.TransferOrder{ID: o.ID, From: 1, To: 2, Clock: 0, Lo: 0, Hi: 7}); o != want || o.ID == tid || o.ID == 0 {
		t.Fatalf("hand-over %+v, want %+v with a new ID", o, want)
	}
	v := c.View()
	if s := c.Stats(); s.HandOvers != 1 || s.SamplesHandedOver != 7 || v.PendingTransfers(0) != 2 || v.Progress(1).Assigned != 0 {
		t.Fatalf("stats %+v, pending %d, progress %+v", s, v.PendingTransfers(0), v.Progress(1))
	}
	if hs := c.HandOvers(); len(hs) != 1 || hs[0] != o {
		t.Fatalf("HandOvers() = %+v", hs)
	}
	if _, ok, err := c.HandOver(1, 0); ok || err != nil {
		t.Fatalf("second HandOver(1, 0) = %v, %v; want nothing left", ok, err)
	}
	admitRefused(t, c, foreign(1, 1, 0, 7, 10), true) // the giver's own samples are the taker's
	admitRefused(t, c, foreign(0, 1, 0, 7, 10), true) // the other taker's transfer holds 3
	for _, e := range []epsp.Event{
		clockEvent(1, 0),
		{Kind: epsp.EventTransferDone, Transfer: epsp.TransferResult{ID: o.ID}},
		{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: o.ID, Accepted: true, Lo: 0, Hi: 7}},
	} {
		if _, err := c.Step(0, e); !errors.Is(err, epsp.ErrBadEvent) {
			t.Fatalf("Step(%v) during the hand-over = %v, want ErrBadEvent", e.Kind, err)
		}
	}
	if _, err := c.Admit(0, foreign(2, 1, 0, 7, 10)); err != nil {
		t.Fatalf("the taker's push: %v", err)
	}
	admitRefused(t, c, foreign(2, 1, 0, 7, 10), true)
	if _, err := c.Admit(0, foreign(0, 1, 0, 3, 10)); err != nil {
		t.Fatalf("the transfer's push: %v", err)
	}
	step(t, c, epsp.Event{Kind: epsp.EventTransferDone, Transfer: epsp.TransferResult{ID: tid}})
	step(t, c, epsp.Event{Kind: epsp.EventLeave, Worker: 1, Quit: true})
	if v.PendingTransfers(0) != 0 || len(c.HandOvers()) != 0 {
		t.Fatalf("after the giver's leave: pending %d, hand-overs %+v", v.PendingTransfers(0), c.HandOvers())
	}
	admitRefused(t, c, foreign(2, 1, 0, 7, 10), true)
}

// TestCoordinator_HandOverAbandoned: the giver's leave ends a hand-over
// whose taker never pushed; a late push of it is refused.
func TestCoordinator_HandOverAbandoned(t *testing.T) {
	c, _, _ := ledgerCoord(t)
	o, ok, err := c.HandOver(1, 2)
	if err != nil || !ok {
		t.Fatalf("HandOver = %v, %v", ok, err)
	}
	step(t, c, epsp.Event{Kind: epsp.EventLeave, Worker: 2, Quit: true}) // the taker is lost
	step(t, c, epsp.Event{Kind: epsp.EventLeave, Worker: 1, Quit: true}) // so the giver leaves
	if c.View().PendingTransfers(0) != 1 {                               // the transfer of [7,10) is still pending
		t.Fatalf("pending %d, want 1", c.View().PendingTransfers(0))
	}
	admitRefused(t, c, foreign(2, 1, o.Clock, o.Samples(), 10), true)
}

// TestCoordinator_HandOverThenAnswer: an order from a worker not yet
// answered when its samples are handed over can only be refused: an
// acceptance would give a range of the hand-over to a second taker.
func TestCoordinator_HandOverThenAnswer(t *testing.T) {
	c, p, _ := ledgerCoord(t)
	p.next = epsp.Output{Transfers: []epsp.TransferOrder{{From: 1, To: 0, Clock: 0, Lo: 4, Hi: 7}}}
	id := step(t, c, epsp.Event{Kind: epsp.EventTick}).Transfers[0].ID
	if _, ok, err := c.HandOver(1, 2); !ok || err != nil {
		t.Fatalf("HandOver = %v, %v", ok, err)
	}
	before := c.Stats()
	accept := epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: id, Accepted: true, Lo: 4, Hi: 7}}
	if _, err := c.Step(0, accept); !errors.Is(err, epsp.ErrBadEvent) {
		t.Fatalf("acceptance after the hand-over: %v, want ErrBadEvent", err)
	}
	if !reflect.DeepEqual(c.Stats(), before) || c.View().PendingTransfers(0) != 3 {
		t.Fatalf("a refused acceptance changed the state: %+v, pending %d", c.Stats(), c.View().PendingTransfers(0))
	}
	step(t, c, epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: id}})
	if s := c.Stats(); s.TransfersRefused != 1 || c.View().PendingTransfers(0) != 2 {
		t.Fatalf("after the refusal: %+v, pending %d", s, c.View().PendingTransfers(0))
	}
}

// TestCoordinator_HandOverRange: what a hand-over moves — the prefix of
// the batch below what the worker gave away — or why it moves nothing.
func TestCoordinator_HandOverRange(t *testing.T) {
	all := []epsp.WorkerID{0, 1, 2}
	tests := []struct {
		name     string
		assign   []epsp.Assignment // at the release into clock 1
		before   func(*testing.T, *epsp.Coordinator)
		from, to epsp.WorkerID
		hi       int // 0: nothing to hand over
		err      error
	}{
		{name: "whole batch", from: 0, to: 1, hi: 10},
		{name: "below assigned pieces", assign: []epsp.Assignment{{From: 0, To: 1, Clock: 1, Lo: 7, Hi: 10}, {From: 0, To: 2, Clock: 1, Lo: 4, Hi: 7}}, from: 0, to: 1, hi: 4},
		{name: "assigned whole batch", assign: []epsp.Assignment{{From: 0, To: 1, Clock: 1, Lo: 0, Hi: 10}}, from: 0, to: 2},
		{name: "to the worker it assigned to", assign: []epsp.Assignment{{From: 0, To: 1, Clock: 1, Lo: 6, Hi: 10}}, from: 0, to: 1, hi: 6},
		{name: "finished its clock", before: func(t *testing.T, c *epsp.Coordinator) { step(t, c, clockEvent(0, 1)) }, from: 0, to: 1},
		{name: "own push admitted", before: func(t *testing.T, c *epsp.Coordinator) {
			if _, err := c.Admit(0, foreign(0, 0, 1, 10, 10)); err != nil {
				t.Fatal(err)
			}
		}, from: 0, to: 1},
		{name: "unknown giver", from: 5, to: 1, err: epsp.ErrBadEvent},
		{name: "unknown taker", from: 0, to: -1, err: epsp.ErrBadEvent},
		{name: "to itself", from: 0, to: 0, err: epsp.ErrBadEvent},
		{name: "taker left", before: func(t *testing.T, c *epsp.Coordinator) {
			step(t, c, epsp.Event{Kind: epsp.EventLeave, Worker: 2, Quit: true})
		}, from: 0, to: 2, err: epsp.ErrBadEvent},
		{name: "giver left", before: func(t *testing.T, c *epsp.Coordinator) {
			step(t, c, epsp.Event{Kind: epsp.EventLeave, Worker: 0, Quit: true})
		}, from: 0, to: 2, err: epsp.ErrBadEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, p := assignCoord(t)
			p.next = epsp.Output{Flush: []epsp.FlushOrder{{Clock: 0}}, Release: all, Assign: tt.assign}
			step(t, c, epsp.Event{Kind: epsp.EventTick})
			if tt.before != nil {
				tt.before(t, c)
			}
			before := c.Stats()
			o, ok, err := c.HandOver(tt.from, tt.to)
			if !errors.Is(err, tt.err) || (tt.err != nil) != (err != nil) {
				t.Fatalf("HandOver = %v, want %v", err, tt.err)
			}
			if ok != (tt.hi > 0) || (ok && o != epsp.TransferOrder{ID: o.ID, From: tt.from, To: tt.to, Clock: 1, Lo: 0, Hi: tt.hi}) {
				t.Fatalf("HandOver = %+v, %v; want [0,%d)", o, ok, tt.hi)
			}
			if !ok && !reflect.DeepEqual(c.Stats(), before) {
				t.Fatalf("a hand-over of nothing changed the stats: %+v → %+v", before, c.Stats())
			}
		})
	}
}

// injecting is BSP with transfers a test injects at the next step.
type injecting struct {
	*epsp.BSP
	next []epsp.TransferOrder
}

func (p *injecting) Step(now time.Duration, v epsp.View, e epsp.Event) epsp.Output {
	out := p.BSP.Step(now, v, e)
	out.Transfers, p.next = append(out.Transfers, p.next...), nil
	return out
}

// FuzzCoordinator_Ledger drives a BSP coordinator of 3 workers with
// transfers, hand-overs, pushes of any worker's samples, clocks and leaves,
// from the fuzzer's bytes, and checks the ledger: of another worker's
// samples, a worker gets no more pushes admitted, and no more samples,
// than the accepted transfers and hand-overs to it hold; a refused push
// changes nothing; a worker's own samples of a clock it handed over are
// never admitted.
func FuzzCoordinator_Ledger(f *testing.F) {
	f.Add([]byte{0, 0, 3, 1, 0, 6, 4, 1, 1, 7, 2, 0, 1, 0, 3, 5, 1, 6, 1, 2, 2, 2, 1, 0, 7, 7, 1})
	f.Add([]byte{6, 1, 2, 2, 2, 1, 0, 10, 2, 2, 1, 0, 10, 7, 1, 0, 1, 1, 0})
	f.Add([]byte{3, 2, 0, 4, 4, 1, 1, 5, 2, 0, 2, 0, 6, 5, 1, 2, 0, 2, 0, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const n, batch = 3, 10
		p := &injecting{BSP: epsp.NewBSP()}
		c, err := epsp.NewCoordinator(epsp.Config{NumWorkers: n, Batch: batch, TickPeriod: time.Millisecond, StallAfter: time.Hour}, p)
		if err != nil {
			t.Fatal(err)
		}
		type key struct {
			owner, taker epsp.WorkerID
			clock        int
		}
		orders := map[key][2]int{}  // accepted orders: count, samples
		pushed := map[key][2]int{}  // admitted foreign pushes: count, samples
		handed := map[[2]int]bool{} // (worker, clock) handed over
		ordered := map[uint64]epsp.TransferOrder{}
		next := func() int {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return int(b)
		}
		w := func() epsp.WorkerID { return epsp.WorkerID(next() % n) }
		for len(ops) > 0 {
			switch next() % 9 {
			case 0: // a clock
				x := w()
				c.Step(0, clockEvent(int(x), c.View().Clock(x)))
			case 1, 2: // a push of anyone's samples
				x, o := w(), w()
				push := epsp.Push{Worker: x, Owner: o, Clock: next() % 4, Samples: next()%12 + 1, BatchSamples: batch}
				before := c.Stats()
				if _, err := c.Admit(0, push); err != nil {
					if !errors.Is(err, epsp.ErrBadPush) {
						t.Fatalf("Admit(%+v) = %v, want ErrBadPush", push, err)
					}
					if !reflect.DeepEqual(before, c.Stats()) {
						t.Fatalf("refused push %+v changed the stats", push)
					}
					continue
				}
				if x == o {
					if handed[[2]int{int(x), push.Clock}] {
						t.Fatalf("worker %d's own push of clock %d admitted after its hand-over", x, push.Clock)
					}
					continue
				}
				k := key{o, x, push.Clock}
				pu, or := pushed[k], orders[k]
				pu[0]++
				pu[1] += push.Samples
				pushed[k] = pu
				if pu[0] > or[0] || pu[1] > or[1] {
					t.Fatalf("worker %d has %v (pushes, samples) of worker %d's clock %d admitted, %v ordered", x, pu, o, push.Clock, or)
				}
			case 3: // the policy orders a transfer
				from, to := w(), w()
				lo := next() % batch
				p.next = []epsp.TransferOrder{{From: from, To: to, Clock: c.View().Clock(from), Lo: lo, Hi: batch}}
				out, _ := c.Step(0, epsp.Event{Kind: epsp.EventTick})
				p.next = nil
				for _, o := range out.Transfers {
					ordered[o.ID] = o
				}
			case 4: // a giver answers
				id, acc, lo := uint64(next()%8+1), next()%2 == 0, next()%batch
				r := epsp.TransferResult{ID: id, Accepted: acc, Lo: lo, Hi: batch}
				if _, err := c.Step(0, epsp.Event{Kind: epsp.EventTransferResult, Transfer: r}); err == nil && acc {
					o, ok := ordered[id]
					if !ok {
						t.Fatalf("transfer %d, not ordered by the policy, was answered", id)
					}
					st, _ := c.Transfer(id)
					k := key{o.From, st.Order.To, o.Clock} // Retarget may have moved it
					or := orders[k]
					or[0]++
					or[1] += batch - lo
					orders[k] = or
				}
			case 5: // a taker is done
				c.Step(0, epsp.Event{Kind: epsp.EventTransferDone, Transfer: epsp.TransferResult{ID: uint64(next()%8 + 1)}})
			case 6: // a worker is lost and handed over
				from, to := w(), w()
				o, ok, err := c.HandOver(from, to)
				if err != nil && !errors.Is(err, epsp.ErrBadEvent) {
					t.Fatalf("HandOver = %v", err)
				}
				if ok {
					k := key{o.From, o.To, o.Clock}
					or := orders[k]
					or[0]++
					or[1] += o.Samples()
					orders[k] = or
					handed[[2]int{int(from), o.Clock}] = true
				}
			case 7: // a worker leaves
				c.Step(0, epsp.Event{Kind: epsp.EventLeave, Worker: w(), Quit: true})
			case 8: // a lost taker's ranges go to survivors, or are given up
				from, to := w(), []epsp.WorkerID{w(), w()}
				if to[0] == to[1] {
					if _, err := c.Abandon(from); err != nil {
						t.Fatalf("Abandon(%d) = %v", from, err)
					}
					break
				}
				moved, err := c.Retarget(from, to)
				if err != nil {
					if !errors.Is(err, epsp.ErrBadEvent) {
						t.Fatalf("Retarget = %v", err)
					}
					continue
				}
				for _, o := range moved {
					if o.To == from || o.To == o.From || (o.To != to[0] && o.To != to[1]) {
						t.Fatalf("Retarget(%d, %v) moved %+v", from, to, o)
					}
					old, nu := key{o.From, from, o.Clock}, key{o.From, o.To, o.Clock}
					or := orders[old]
					or[0]--
					or[1] -= o.Samples()
					orders[old] = or
					or = orders[nu]
					or[0]++
					or[1] += o.Samples()
					orders[nu] = or
				}
			}
			// every outstanding order holds its clock pending, and nothing
			// else does
			count := map[int]int{}
			for _, st := range c.Transfers() {
				count[st.Order.Clock]++
			}
			for k := range 8 {
				if got := c.View().PendingTransfers(k); got != count[k] {
					t.Fatalf("PendingTransfers(%d) = %d, %d orders outstanding", k, got, count[k])
				}
			}
		}
	})
}
