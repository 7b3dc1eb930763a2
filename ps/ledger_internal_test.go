package ps

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/transport"
)

type silentNode struct{}

func (silentNode) HandleRequest(context.Context, transport.NodeID, []byte) ([]byte, error) {
	return nil, errors.New("no requests")
}
func (silentNode) HandleMessage(transport.NodeID, []byte) {}

// TestCoordinator_RefusesUnorderedPush: a worker that sends, over the
// transport, a push of another worker's samples that no transfer or
// hand-over covers is refused (ErrRejected, naming the reason); the
// coordinator counts nothing and admits nothing, and the run goes on:
// the worker's own push is admitted after it.
func TestCoordinator_RefusesUnorderedPush(t *testing.T) {
	cfg := DefaultCoordinatorConfig()
	cfg.EPSP.NumWorkers, cfg.EPSP.Batch = 2, 8
	cfg.Workers = []transport.NodeID{"w0", "w1"}
	cfg.Lease.Timeout = -1
	var mu sync.Mutex
	var admitted []epsp.Push
	obs := ObserverFunc(func(e Event) {
		if e.Kind == EvPushAdmitted {
			mu.Lock()
			admitted = append(admitted, e.Push)
			mu.Unlock()
		}
	})
	net, c, ctx := ledgerCoordinator(t, cfg, epsp.NewBSP(), WithObserver(obs))
	w0, _ := net.Join("w0", silentNode{})
	defer w0.Close()
	admit := func(p epsp.Push) error {
		e := wire.NewMsg(nil, wire.OpAdmit)
		encodePush(&e, p)
		resp, err := request(ctx, w0, "coordinator", e.B, time.Second)
		if err != nil {
			return err
		}
		_, err = wire.ParseResponse(resp, "coordinator")
		return err
	}
	for _, p := range []epsp.Push{
		{Worker: 0, Owner: 1, Clock: 0, Samples: 8, BatchSamples: 8}, // worker 1's whole batch
		{Worker: 0, Owner: 1, Clock: 0, Samples: 3, BatchSamples: 8}, // a tail of it
		{Worker: 0, Owner: 1, Clock: 1, Samples: 8, BatchSamples: 8}, // its next clock
	} {
		err := admit(p)
		if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "not ordered") {
			t.Fatalf("push %+v: %v, want ErrRejected: not ordered", p, err)
		}
	}
	if s := c.Stats(); s.Accumulated+s.Applied+s.Dropped != 0 || c.Err() != nil {
		t.Fatalf("after refused pushes: stats %+v, coordinator error %v", s, c.Err())
	}
	if err := admit(epsp.Push{Worker: 0, Owner: 0, Clock: 0, Samples: 8, BatchSamples: 8}); err != nil {
		t.Fatalf("own push: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if s := c.Stats(); s.Accumulated != 1 || len(admitted) != 1 || admitted[0].Owner != 0 {
		t.Fatalf("after the own push: stats %+v, admitted %+v", s, admitted)
	}
}

// inbox is a node that records the one-way messages it receives and
// answers nothing.
type inbox struct {
	mu   sync.Mutex
	msgs [][]byte
}

func (*inbox) HandleRequest(context.Context, transport.NodeID, []byte) ([]byte, error) {
	return nil, errors.New("no requests")
}

func (b *inbox) HandleMessage(_ transport.NodeID, m []byte) {
	b.mu.Lock()
	b.msgs = append(b.msgs, append([]byte(nil), m...))
	b.mu.Unlock()
}

// wait returns the first message with op o, waiting up to d.
func (b *inbox) wait(o op, d time.Duration) ([]byte, bool) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		b.mu.Lock()
		for _, m := range b.msgs {
			if got, body, err := wire.Header(m); err == nil && got == o {
				b.mu.Unlock()
				return body, true
			}
		}
		b.mu.Unlock()
	}
	return nil, false
}

// pesterPolicy is BSP that, at worker 0's clock and at every tick while
// worker 0 waits and worker 1 computes clock 0, orders [4,8) of worker 1's
// batch to worker 0, one order at a time.
type pesterPolicy struct {
	*epsp.BSP
	open bool
}

func (p *pesterPolicy) Step(now time.Duration, v epsp.View, e epsp.Event) epsp.Output {
	out := p.BSP.Step(now, v, e)
	switch e.Kind {
	case epsp.EventTransferResult:
		p.open = p.open && e.Transfer.Accepted
	case epsp.EventTransferDone:
		p.open = false
	case epsp.EventClock, epsp.EventTick:
		if !p.open && v.Waiting(0) && v.(epsp.Membership).Member(1) && v.Clock(1) == 0 && !v.Waiting(1) {
			out.Transfers = append(out.Transfers, epsp.TransferOrder{From: 1, To: 0, Clock: 0, Lo: 4, Hi: 8})
			p.open = true
		}
	}
	return out
}

// TestLease_LostGiverOrdersRefused: a worker lost under ContinueWithout
// with a transfer order it never answered, and with the policy ordering
// more from it while its samples are handed over: the orders count as
// refused (the unanswered one before the hand-over, the later ones at
// once), so the hand-over moves its whole batch, the barrier is not held
// by orders nobody will answer, and the clock is flushed once the taker's
// push is stored. The hand-over's done is refused from another worker and
// before the taker's push.
func TestLease_LostGiverOrdersRefused(t *testing.T) {
	cfg := DefaultCoordinatorConfig()
	cfg.EPSP.NumWorkers, cfg.EPSP.Batch, cfg.EPSP.TickPeriod = 3, 8, 10*time.Millisecond
	cfg.Workers = []transport.NodeID{"w0", "w1", "w2"}
	cfg.StartTimeout = 300 * time.Millisecond
	cfg.Lease = LeaseConfig{Timeout: 250 * time.Millisecond, Interval: 25 * time.Millisecond, OnWorkerLost: ContinueWithout}
	net, c, ctx := ledgerCoordinator(t, cfg, &pesterPolicy{BSP: epsp.NewBSP()})
	in0, in1 := &inbox{}, &inbox{}
	w0, _ := net.Join("w0", in0)
	defer w0.Close()
	w1, _ := net.Join("w1", in1) // receives orders, never answers, never heartbeats
	defer w1.Close()
	w2, _ := net.Join("w2", &inbox{})
	defer w2.Close()
	callAs := func(tr transport.Transport, msg []byte) error { return coordCallAs(ctx, tr, msg) }
	call := func(msg []byte) error { return callAs(w0, msg) }
	defer heartbeat(callAs, w0, w2)() // workers 0 and 2 stay alive

	for w, tr := range map[int]transport.Transport{0: w0, 2: w2} {
		e := wire.NewMsg(nil, wire.OpAdmit)
		encodePush(&e, epsp.Push{Worker: epsp.WorkerID(w), Owner: epsp.WorkerID(w), Clock: 0, Samples: 8, BatchSamples: 8})
		if err := callAs(tr, e.B); err != nil {
			t.Fatal(err)
		}
		e = wire.NewMsg(nil, wire.OpClock)
		e.I64(0)
		if err := callAs(tr, e.B); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := in1.wait(wire.OpTransferOrder, 2*time.Second); !ok {
		t.Fatal("worker 1 got no transfer order")
	}
	body, ok := in0.wait(wire.OpTransferTask, 3*time.Second) // worker 1 is lost: the hand-over
	if !ok {
		t.Fatalf("no hand-over task; coordinator error %v, stats %+v", c.Err(), c.Stats())
	}
	d := decoder{B: body}
	id, owner, clock, lo, hi, batch := d.U64(), d.I64(), d.I64(), d.I64(), d.I64(), d.I64()
	if owner != 1 || clock != 0 || lo != 0 || hi != 8 || batch != 8 {
		t.Fatalf("hand-over of worker %d's clock %d [%d,%d) of %d, want worker 1's clock 0 [0,8) of 8", owner, clock, lo, hi, batch)
	}
	// ticks: the policy orders from worker 1 again (refused at once)
	for end := time.Now().Add(2 * time.Second); c.Stats().TransfersOrdered < 2 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	done := wire.NewMsg(nil, wire.OpTransferDone)
	done.U64(id)
	for _, tc := range []struct {
		tr   transport.Transport
		want string
	}{{w2, "given to worker 0"}, {w0, "before its push was admitted"}} {
		if err := callAs(tc.tr, done.B); !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("premature done: %v, want ErrRejected: %s", err, tc.want)
		}
	}
	if s := c.Stats(); s.Left != 0 || s.Flushes != 0 {
		t.Fatalf("a refused done let worker 1 leave: %+v", s)
	}
	e := wire.NewMsg(nil, wire.OpAdmit)
	encodePush(&e, epsp.Push{Worker: 0, Owner: 1, Clock: 0, Samples: 8, BatchSamples: 8})
	if err := call(e.B); err != nil {
		t.Fatalf("the taker's push: %v", err)
	}
	if err := call(done.B); err != nil {
		t.Fatalf("hand-over done: %v", err)
	}
	if _, ok := in0.wait(wire.OpRelease, 2*time.Second); !ok {
		t.Fatalf("worker 0 was not released: the barrier of clock 0 is held; stats %+v", c.Stats())
	}
	s := c.Stats()
	if s.Flushes != 1 || s.HandOvers != 1 || s.SamplesHandedOver != 8 || s.TransfersAccepted != 0 || s.TransfersRefused < 2 || s.TransfersRefused != s.TransfersOrdered || c.Err() != nil {
		t.Fatalf("stats %+v, coordinator error %v; want one flush, one hand-over of 8, every order (two at least) refused", s, c.Err())
	}
}

// orderOnce is BSP that orders [4,8) of worker 1's batch of clock 0 to
// worker 0 when worker 0 finishes clock 0.
type orderOnce struct{ *epsp.BSP }

func (p orderOnce) Step(now time.Duration, v epsp.View, e epsp.Event) epsp.Output {
	out := p.BSP.Step(now, v, e)
	if e.Kind == epsp.EventClock && e.Worker == 0 && e.Clock == 0 {
		out.Transfers = append(out.Transfers, epsp.TransferOrder{From: 1, To: 0, Clock: 0, Lo: 4, Hi: 8})
	}
	return out
}

// TestCoordinator_TransferDoneOnlyFromTaker: a transfer's done is refused
// from a worker that is not its taker, and from the taker before its push
// of the range is admitted; then the push and the done go through and the
// barrier passes.
func TestCoordinator_TransferDoneOnlyFromTaker(t *testing.T) {
	cfg := DefaultCoordinatorConfig()
	cfg.EPSP.NumWorkers, cfg.EPSP.Batch = 2, 8
	cfg.Workers = []transport.NodeID{"w0", "w1"}
	cfg.Lease.Timeout = -1
	net, c, ctx := ledgerCoordinator(t, cfg, orderOnce{epsp.NewBSP()})
	in0, in1 := &inbox{}, &inbox{}
	w0, _ := net.Join("w0", in0)
	defer w0.Close()
	w1, _ := net.Join("w1", in1)
	defer w1.Close()
	call := func(tr transport.Transport, msg []byte) error { return coordCallAs(ctx, tr, msg) }
	push := func(tr transport.Transport, p epsp.Push) error {
		e := wire.NewMsg(nil, wire.OpAdmit)
		encodePush(&e, p)
		return call(tr, e.B)
	}
	clock := wire.NewMsg(nil, wire.OpClock)
	clock.I64(0)
	if err := push(w0, epsp.Push{Worker: 0, Owner: 0, Clock: 0, Samples: 8, BatchSamples: 8}); err != nil {
		t.Fatal(err)
	}
	if err := call(w0, clock.B); err != nil {
		t.Fatal(err)
	}
	body, ok := in1.wait(wire.OpTransferOrder, 2*time.Second)
	if !ok {
		t.Fatal("worker 1 got no transfer order")
	}
	d := decoder{B: body}
	id := d.U64()
	answer := wire.NewMsg(nil, wire.OpTransferResult)
	answer.U64(id)
	answer.U8(1)
	answer.I64(4)
	answer.I64(8)
	answer.I64(8)
	if err := call(w1, answer.B); err != nil {
		t.Fatalf("worker 1 accepts: %v", err)
	}
	if _, ok := in0.wait(wire.OpTransferTask, 2*time.Second); !ok {
		t.Fatal("worker 0 got no task")
	}
	done := wire.NewMsg(nil, wire.OpTransferDone)
	done.U64(id)
	if err := call(w1, done.B); !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "given to worker 0") {
		t.Fatalf("done from the giver: %v, want ErrRejected", err)
	}
	if err := call(w0, done.B); !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "not admitted") {
		t.Fatalf("done before the push: %v, want ErrRejected", err)
	}
	if err := push(w0, epsp.Push{Worker: 0, Owner: 1, Clock: 0, Samples: 4, BatchSamples: 8}); err != nil {
		t.Fatalf("the taker's push: %v", err)
	}
	if err := push(w1, epsp.Push{Worker: 1, Owner: 1, Clock: 0, Samples: 4, BatchSamples: 8}); err != nil {
		t.Fatalf("the giver's push: %v", err)
	}
	if err := call(w1, clock.B); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Flushes != 0 {
		t.Fatalf("the barrier passed with the transfer not done: %+v", s)
	}
	if err := call(w0, done.B); err != nil {
		t.Fatalf("done: %v", err)
	}
	if s := c.Stats(); s.Flushes != 1 || s.TransfersDone != 1 || s.Accumulated != 3 || c.Err() != nil {
		t.Fatalf("stats %+v, coordinator error %v; want one flush after the done", s, c.Err())
	}
}

// TestLease_LostTakerOrderAnsweredLate: the taker of a transfer order is
// lost (its transport gone) before the giver answers; when the giver
// accepts, the task goes to the survivor that is not the giver — not to
// the dead taker, which would abort the run — and the barrier passes
// once its push and done are in, with the range admitted once.
func TestLease_LostTakerOrderAnsweredLate(t *testing.T) {
	cfg := DefaultCoordinatorConfig()
	cfg.EPSP.NumWorkers, cfg.EPSP.Batch = 3, 8
	cfg.Workers = []transport.NodeID{"w0", "w1", "w2"}
	cfg.StartTimeout = 300 * time.Millisecond
	cfg.OrderTimeout = time.Second
	cfg.Lease = LeaseConfig{Timeout: 250 * time.Millisecond, Interval: 25 * time.Millisecond, OnWorkerLost: ContinueWithout}
	net, c, ctx := ledgerCoordinator(t, cfg, orderOnce{epsp.NewBSP()})
	in0, in1, in2 := &inbox{}, &inbox{}, &inbox{}
	w0, _ := net.Join("w0", in0)
	w1, _ := net.Join("w1", in1)
	defer w1.Close()
	w2, _ := net.Join("w2", in2)
	defer w2.Close()
	call := func(tr transport.Transport, msg []byte) error { return coordCallAs(ctx, tr, msg) }
	push := func(tr transport.Transport, p epsp.Push) error {
		e := wire.NewMsg(nil, wire.OpAdmit)
		encodePush(&e, p)
		return call(tr, e.B)
	}
	defer heartbeat(call, w1, w2)() // workers 1 and 2 stay alive
	clock := wire.NewMsg(nil, wire.OpClock)
	clock.I64(0)
	if err := push(w0, epsp.Push{Worker: 0, Owner: 0, Clock: 0, Samples: 8, BatchSamples: 8}); err != nil {
		t.Fatal(err)
	}
	if err := call(w0, clock.B); err != nil {
		t.Fatal(err)
	}
	body, ok := in1.wait(wire.OpTransferOrder, 2*time.Second)
	if !ok {
		t.Fatal("worker 1 got no transfer order")
	}
	id := (&decoder{B: body}).U64()
	w0.Close() // worker 0 dies: silent, and unreachable
	for end := time.Now().Add(3 * time.Second); c.Stats().Left < 1 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	if s := c.Stats(); s.Left != 1 || c.Err() != nil {
		t.Fatalf("worker 0 not lost and gone: stats %+v, coordinator error %v", s, c.Err())
	}
	answer := wire.NewMsg(nil, wire.OpTransferResult)
	answer.U64(id)
	answer.U8(1)
	answer.I64(4)
	answer.I64(8)
	answer.I64(8)
	if err := call(w1, answer.B); err != nil {
		t.Fatalf("worker 1 accepts: %v", err)
	}
	if c.Err() != nil {
		t.Fatalf("the run aborted: %v", c.Err())
	}
	task, ok := in2.wait(wire.OpTransferTask, 2*time.Second)
	if !ok {
		t.Fatalf("worker 2 got no task; stats %+v", c.Stats())
	}
	d := decoder{B: task}
	if tid, owner, clk, lo, hi, batch := d.U64(), d.I64(), d.I64(), d.I64(), d.I64(), d.I64(); tid != id || owner != 1 || clk != 0 || lo != 4 || hi != 8 || batch != 8 {
		t.Fatalf("task %d of worker %d's clock %d [%d,%d) of %d, want %d of worker 1's clock 0 [4,8) of 8", tid, owner, clk, lo, hi, batch, id)
	}
	for w, tr := range map[int]transport.Transport{1: w1, 2: w2} {
		if err := push(tr, epsp.Push{Worker: epsp.WorkerID(w), Owner: epsp.WorkerID(w), Clock: 0, Samples: 8 - 4*(1-w/2), BatchSamples: 8}); err != nil {
			t.Fatal(err)
		}
		if err := call(tr, clock.B); err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Stats(); s.Flushes != 0 {
		t.Fatalf("the barrier passed with the moved range not pushed: %+v", s)
	}
	if err := push(w2, epsp.Push{Worker: 2, Owner: 1, Clock: 0, Samples: 4, BatchSamples: 8}); err != nil {
		t.Fatalf("the survivor's push: %v", err)
	}
	if err := push(w2, epsp.Push{Worker: 2, Owner: 1, Clock: 0, Samples: 4, BatchSamples: 8}); !errors.Is(err, ErrRejected) {
		t.Fatalf("a second push of the range: %v, want ErrRejected", err)
	}
	done := wire.NewMsg(nil, wire.OpTransferDone)
	done.U64(id)
	if err := call(w2, done.B); err != nil {
		t.Fatalf("done: %v", err)
	}
	if _, ok := in2.wait(wire.OpRelease, 2*time.Second); !ok {
		t.Fatalf("worker 2 was not released: stats %+v", c.Stats())
	}
	if s := c.Stats(); s.Flushes != 1 || s.TransfersDone != 1 || s.Accumulated != 4 || s.SamplesAbandoned != 0 || c.Err() != nil {
		t.Fatalf("stats %+v, coordinator error %v; want one flush of 4 pushes (8+4+4+8 samples)", s, c.Err())
	}
}

// heartbeat sends a heartbeat from each of trs every 20 ms through call,
// so that the coordinator's leases keep those workers alive, until the
// returned function is called (it waits for the senders to stop).
func heartbeat(call func(transport.Transport, []byte) error, trs ...transport.Transport) (stop func()) {
	done := make(chan struct{})
	var beats sync.WaitGroup
	for _, tr := range trs {
		beats.Go(func() {
			for {
				e := wire.NewMsg(nil, wire.OpHeartbeat)
				e.U64(1)
				call(tr, e.B)
				select {
				case <-done:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
	}
	return func() { close(done); beats.Wait() }
}

// TestLease_LostWorkerFailReportEndsNothing: under ContinueWithout a
// worker declared lost learns it on its next request and reports that as
// its failure; the report does not abort the run that already goes on
// without it (found by TestMultiProcess_PartitionedWorker, which failed
// when the report arrived before the coordinator's final line). The same
// report from a live worker still aborts, naming it.
func TestLease_LostWorkerFailReportEndsNothing(t *testing.T) {
	cfg := DefaultCoordinatorConfig()
	cfg.EPSP.NumWorkers, cfg.EPSP.Batch = 2, 8
	cfg.Workers = []transport.NodeID{"w0", "w1"}
	cfg.StartTimeout = 300 * time.Millisecond
	cfg.Lease = LeaseConfig{Timeout: 250 * time.Millisecond, Interval: 25 * time.Millisecond, OnWorkerLost: ContinueWithout}
	net, c, ctx := ledgerCoordinator(t, cfg, epsp.NewBSP())
	w0, _ := net.Join("w0", &inbox{})
	defer w0.Close()
	w1, _ := net.Join("w1", &inbox{}) // never heartbeats: lost
	defer w1.Close()
	callAs := func(tr transport.Transport, msg []byte) error { return coordCallAs(ctx, tr, msg) }
	defer heartbeat(callAs, w0)()
	fail := func(tr transport.Transport, why string) {
		e := wire.NewMsg(nil, wire.OpFail)
		e.Str(why)
		if err := tr.Send(ctx, "coordinator", e.B); err != nil {
			t.Fatal(err)
		}
	}
	// lost after the lease timeout (bounded by start timeout + lease + margin)
	for end := time.Now().Add(5 * time.Second); !c.lease.isLost(1); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("w1 was not declared lost; coordinator error %v", c.Err())
		}
	}
	fail(w1, "ps: rejected by coordinator: w1 was declared lost")
	// a message is served on the loop after its delivery: give it time
	// (a failure here shows within a few milliseconds on the in-memory net)
	time.Sleep(200 * time.Millisecond)
	if err := c.Err(); err != nil {
		t.Fatalf("a lost worker's failure report aborted the run: %v", err)
	}
	fail(w0, "disk on fire")
	for end := time.Now().Add(5 * time.Second); c.Err() == nil && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "w0 failed: disk on fire") {
		t.Fatalf("a live worker's failure report: coordinator error %v, want it to name w0", err)
	}
}

// ledgerCoordinator starts, on a new in-memory network, server s0 and a
// coordinator of cfg (its Servers set to s0) running policy; all of it
// ends with the test, and ctx (10 s) bounds the test's calls.
func ledgerCoordinator(t *testing.T, cfg CoordinatorConfig, policy epsp.Policy, opts ...Option) (*transport.InmemNetwork, *Coordinator, context.Context) {
	t.Helper()
	net := transport.NewInmemNetwork()
	t.Cleanup(func() { net.Close() })
	srv, _ := NewServer("s0", DefaultServerConfig())
	st, _ := net.Join("s0", srv)
	t.Cleanup(func() { st.Close() })
	cfg.Servers = []transport.NodeID{"s0"}
	c, err := NewCoordinator(cfg, policy, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ct, _ := net.Join("coordinator", c)
	t.Cleanup(func() { ct.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	if err := c.Start(ctx, ct); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return net, c, ctx
}

// coordCallAs sends msg to the coordinator from tr and parses its answer.
func coordCallAs(ctx context.Context, tr transport.Transport, msg []byte) error {
	resp, err := request(ctx, tr, "coordinator", msg, time.Second)
	if err == nil {
		_, err = wire.ParseResponse(resp, "coordinator")
	}
	return err
}
