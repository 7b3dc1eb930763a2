package epsp_test

import (
	"container/heap"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
)

func newCoord(t *testing.T, n int, p epsp.Policy) *epsp.Coordinator {
	t.Helper()
	c, err := epsp.NewCoordinator(epsp.Config{NumWorkers: n, Batch: 10}, p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func step(t *testing.T, c *epsp.Coordinator, e epsp.Event) epsp.Output {
	t.Helper()
	out, err := c.Step(0, e)
	if err != nil {
		t.Fatalf("Step(%v): %v", e.Kind, err)
	}
	return out
}

func clockEvent(w, c int) epsp.Event {
	return epsp.Event{Kind: epsp.EventClock, Worker: epsp.WorkerID(w), Clock: c}
}

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		name string
		cfg  epsp.Config
		ok   bool
	}{
		{"default", epsp.DefaultConfig(), true},
		{"no workers", epsp.Config{Batch: 1}, false},
		{"no batch", epsp.Config{NumWorkers: 1}, false},
		{"negative parallelism", epsp.Config{NumWorkers: 1, Batch: 1, Parallelism: -1}, false},
		{"negative tick", epsp.Config{NumWorkers: 1, Batch: 1, TickPeriod: -time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, epsp.ErrBadConfig) {
				t.Fatalf("error %v is not ErrBadConfig", err)
			}
		})
	}
	if _, err := epsp.NewCoordinator(epsp.DefaultConfig(), nil); !errors.Is(err, epsp.ErrBadConfig) {
		t.Fatalf("nil policy: got %v", err)
	}
}

func TestCoordinator_AdmitRefusesBadPushes(t *testing.T) {
	c := newCoord(t, 2, epsp.NewASP())
	good := epsp.Push{Worker: 1, Owner: 1, Samples: 10, BatchSamples: 10}
	tests := []struct {
		name string
		p    epsp.Push
	}{
		{"unknown worker", epsp.Push{Worker: 2, Owner: 2, Samples: 1, BatchSamples: 1}},
		{"negative worker", epsp.Push{Worker: -1, Samples: 1, BatchSamples: 1}},
		{"unknown owner", epsp.Push{Worker: 0, Owner: 5, Samples: 1, BatchSamples: 1}},
		{"future version", epsp.Push{BaseVersion: 1, Samples: 1, BatchSamples: 1}},
		{"no samples", epsp.Push{BatchSamples: 1}},
		{"part larger than batch", epsp.Push{Samples: 3, BatchSamples: 2}},
		{"negative clock", epsp.Push{Clock: -1, Samples: 1, BatchSamples: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.Admit(0, tt.p); !errors.Is(err, epsp.ErrBadPush) {
				t.Fatalf("Admit = %v, want ErrBadPush", err)
			}
			if v := c.View().Version(); v != 0 {
				t.Fatalf("refused push changed version to %d", v)
			}
		})
	}
	if _, err := c.Admit(0, good); err != nil {
		t.Fatal(err)
	}
	if got := c.View().Version(); got != 1 {
		t.Fatalf("version after one ASP push = %d, want 1", got)
	}
}

func TestCoordinator_StepRefusesBadEvents(t *testing.T) {
	c := newCoord(t, 2, epsp.NewBSP())
	step(t, c, clockEvent(0, 0))
	tests := []struct {
		name string
		e    epsp.Event
	}{
		{"clock while waiting", clockEvent(0, 1)},
		{"wrong clock", clockEvent(1, 3)},
		{"unknown worker", clockEvent(7, 0)},
		{"unknown kind", epsp.Event{Kind: 99}},
		{"result for unknown transfer", epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: 42}}},
		{"done for unknown transfer", epsp.Event{Kind: epsp.EventTransferDone, Transfer: epsp.TransferResult{ID: 42}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.Step(0, tt.e); !errors.Is(err, epsp.ErrBadEvent) {
				t.Fatalf("Step = %v, want ErrBadEvent", err)
			}
			if c.View().Clock(0) != 1 || c.View().Clock(1) != 0 || !c.View().Waiting(0) {
				t.Fatal("refused event changed the state")
			}
		})
	}
}

// scripted is a policy whose next output is set by the test.
type scripted struct{ next epsp.Output }

func (*scripted) Name() string { return "scripted" }
func (*scripted) Admit(time.Duration, epsp.View, epsp.Push) epsp.PushDecision {
	return epsp.PushDecision{}
}
func (s *scripted) Step(time.Duration, epsp.View, epsp.Event) epsp.Output {
	out := s.next
	s.next = epsp.Output{}
	return out
}

func TestCoordinator_InvalidPolicyOutputChangesNothing(t *testing.T) {
	tests := []struct {
		name string
		out  epsp.Output
	}{
		{"zero parallelism", epsp.Output{SetParallelism: []epsp.ParallelismOrder{{Worker: 0, P: 0}}}},
		{"zero batch", epsp.Output{SetBatch: []epsp.BatchOrder{{Worker: 1, Size: 0}}}},
		{"self transfer", epsp.Output{Transfers: []epsp.TransferOrder{{From: 1, To: 1, Lo: 0, Hi: 5}}}},
		{"range beyond batch", epsp.Output{Transfers: []epsp.TransferOrder{{From: 1, To: 0, Lo: 5, Hi: 11}}}},
		{"transfer from waiting worker", epsp.Output{Transfers: []epsp.TransferOrder{{From: 0, To: 1, Clock: 1, Lo: 5, Hi: 10}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &scripted{}
			c := newCoord(t, 2, p)
			step(t, c, clockEvent(0, 0))
			p.next = tt.out
			p.next.Flush = []epsp.FlushOrder{{Clock: 0}}
			p.next.Release = []epsp.WorkerID{0}
			if _, err := c.Step(0, epsp.Event{Kind: epsp.EventTick}); !errors.Is(err, epsp.ErrPolicyOutput) {
				t.Fatalf("Step = %v, want ErrPolicyOutput", err)
			}
			v := c.View()
			if v.Version() != 0 || !v.Waiting(0) || v.Parallelism(0) != 1 || v.Batch(1) != 10 || c.Stats().TransfersOrdered != 0 {
				t.Fatal("invalid output was partly applied")
			}
		})
	}
}

func TestCoordinator_ReleaseFiltersDuplicatesAndNonWaiting(t *testing.T) {
	p := &scripted{}
	c := newCoord(t, 3, p)
	step(t, c, clockEvent(1, 0))
	p.next = epsp.Output{Release: []epsp.WorkerID{0, 1, 1, 2}}
	out := step(t, c, epsp.Event{Kind: epsp.EventTick})
	if !slices.Equal(out.Release, []epsp.WorkerID{1}) {
		t.Fatalf("Release = %v, want [1]", out.Release)
	}
}

// Reference: falcon.md §5 (BSP): no worker starts clock c+1 before every
// push of clock c is applied.
func TestBSP_Barrier(t *testing.T) {
	c := newCoord(t, 3, epsp.NewBSP())
	for w := range 3 {
		d, err := c.Admit(0, epsp.Push{Worker: epsp.WorkerID(w), Owner: epsp.WorkerID(w), Samples: 10, BatchSamples: 10})
		if err != nil {
			t.Fatal(err)
		}
		if d.Action != epsp.Accumulate || d.Clock != 0 {
			t.Fatalf("BSP decision = %+v, want accumulate into clock 0", d)
		}
		out := step(t, c, clockEvent(w, 0))
		if w < 2 && !out.Empty() {
			t.Fatalf("worker %d of 3 finished: got orders %+v before the barrier", w, out)
		}
		if w == 2 {
			if !slices.Equal(out.Flush, []epsp.FlushOrder{{Clock: 0, Scale: 1}}) {
				t.Fatalf("Flush = %v, want clock 0", out.Flush)
			}
			if !slices.Equal(out.Release, []epsp.WorkerID{0, 1, 2}) {
				t.Fatalf("Release = %v, want all", out.Release)
			}
		}
	}
	if got := c.View().Version(); got != 1 {
		t.Fatalf("version = %d, want 1 (one flush)", got)
	}
}

// A transfer of clock c that is still in flight holds the barrier of c.
func TestBSP_BarrierWaitsForTransfers(t *testing.T) {
	p := &withTransfer{BSP: epsp.NewBSP()}
	c := newCoord(t, 2, p)
	// Worker 0 finishes; the policy moves [6,10) of worker 1's batch to it.
	p.order = &epsp.TransferOrder{From: 1, To: 0, Clock: 0, Lo: 6, Hi: 10}
	out := step(t, c, clockEvent(0, 0))
	if len(out.Transfers) != 1 || out.Transfers[0].ID == 0 {
		t.Fatalf("Transfers = %+v, want one with an ID", out.Transfers)
	}
	id := out.Transfers[0].ID
	for _, bad := range []epsp.TransferResult{{ID: id, Accepted: true, Lo: 5, Hi: 10}, {ID: id, Accepted: true, Lo: 7, Hi: 9}, {ID: id, Accepted: true, Lo: 10, Hi: 10}} {
		if _, err := c.Step(0, epsp.Event{Kind: epsp.EventTransferResult, Transfer: bad}); !errors.Is(err, epsp.ErrBadEvent) {
			t.Fatalf("accepted range [%d,%d) of ordered [6,10): got %v, want ErrBadEvent", bad.Lo, bad.Hi, err)
		}
	}
	out = step(t, c, epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: id, Accepted: true, Lo: 7, Hi: 10}})
	if got := c.View().Progress(1).Assigned; got != 7 {
		t.Fatalf("giver's assigned samples = %d, want 7", got)
	}
	out = step(t, c, clockEvent(1, 0))
	if len(out.Flush) != 0 || len(out.Release) != 0 {
		t.Fatalf("barrier passed with a transfer pending: %+v", out)
	}
	done := epsp.Event{Kind: epsp.EventTransferDone, Transfer: epsp.TransferResult{ID: id}}
	if _, err := c.Step(0, done); !errors.Is(err, epsp.ErrBadEvent) {
		t.Fatalf("done before the taker's push: %v, want ErrBadEvent", err)
	}
	if _, err := c.Admit(0, epsp.Push{Worker: 0, Owner: 1, Clock: 0, Samples: 3, BatchSamples: 10}); err != nil {
		t.Fatal(err)
	}
	out = step(t, c, done)
	if len(out.Flush) != 1 || len(out.Release) != 2 {
		t.Fatalf("after the transfer is done: %+v, want flush and two releases", out)
	}
	if s := c.Stats(); s.TransfersAccepted != 1 || s.TransfersDone != 1 || s.SamplesTransferred != 3 {
		t.Fatalf("stats = %+v", s)
	}
}

type withTransfer struct {
	*epsp.BSP
	order *epsp.TransferOrder
}

func (p *withTransfer) Step(now time.Duration, v epsp.View, e epsp.Event) epsp.Output {
	out := p.BSP.Step(now, v, e)
	if p.order != nil {
		out.Transfers = append(out.Transfers, *p.order)
		p.order = nil
	}
	return out
}

func TestASP_NeverWaits(t *testing.T) {
	c := newCoord(t, 2, epsp.NewASP())
	for k := range 5 {
		out := step(t, c, clockEvent(0, k))
		if !slices.Equal(out.Release, []epsp.WorkerID{0}) {
			t.Fatalf("clock %d: Release = %v", k, out.Release)
		}
	}
	if lead := c.Stats().MaxLead; lead != 5 {
		t.Fatalf("MaxLead = %d, want 5", lead)
	}
}

func TestSSP_Name(t *testing.T) {
	if got := epsp.NewSSP(3).Name(); got != "ssp(s=3)" {
		t.Fatalf("Name = %q", got)
	}
	if got := epsp.NewSSP(math.MaxInt).Name(); got != "ssp(s=inf)" {
		t.Fatalf("Name = %q", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("NewSSP(-1) did not panic")
		}
	}()
	epsp.NewSSP(-1)
}

// run drives a coordinator in virtual time: each worker computes each clock
// for a random duration (its speed factor times an exponential draw), pushes
// and clocks. It returns the order in which (worker, clock) started and
// checks after every release that the releasing worker is within bound of
// the effective minimum clock.
func run(t *testing.T, p epsp.Policy, n, clocks int, seed uint64, bound int) (starts [][2]int, c *epsp.Coordinator) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	c = newCoord(t, n, p)
	speed := make([]float64, n)
	for i := range speed {
		speed[i] = 0.5 + 3*rng.Float64()
	}
	var q eventQueue
	var seq int
	begin := func(now time.Duration, w int) {
		starts = append(starts, [2]int{w, c.View().Clock(epsp.WorkerID(w))})
		d := time.Duration(float64(time.Millisecond) * speed[w] * rng.ExpFloat64())
		seq++
		heap.Push(&q, simEvent{at: now + d, seq: seq, worker: w, base: c.View().Version()})
	}
	for w := range n {
		begin(0, w)
	}
	for q.Len() > 0 {
		ev := heap.Pop(&q).(simEvent)
		w := epsp.WorkerID(ev.worker)
		clock := c.View().Clock(w)
		if _, err := c.Admit(ev.at, epsp.Push{Worker: w, Owner: w, Clock: clock, BaseVersion: ev.base, Samples: 10, BatchSamples: 10}); err != nil {
			t.Fatal(err)
		}
		out, err := c.Step(ev.at, clockEvent(ev.worker, clock))
		if err != nil {
			t.Fatal(err)
		}
		min := c.View().MinClock()
		for _, r := range out.Release {
			if lead := c.View().Clock(r) - min; bound >= 0 && lead > bound {
				t.Fatalf("seed %d: worker %d released at clock %d, min %d: lead %d > %d", seed, r, c.View().Clock(r), min, lead, bound)
			}
			if c.View().Clock(r) < clocks {
				begin(ev.at, int(r))
			}
		}
	}
	for w := range n {
		if got := c.View().Clock(epsp.WorkerID(w)); got != clocks {
			t.Fatalf("seed %d: worker %d stopped at clock %d of %d (deadlock)", seed, w, got, clocks)
		}
	}
	return starts, c
}

type simEvent struct {
	at     time.Duration
	seq    int
	worker int
	base   uint64
}

type eventQueue []simEvent

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *eventQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// Reference: Ho et al. NIPS 2013 (SSP): a worker at clock c never runs more
// than s clocks ahead of the slowest worker. Property test over seeds.
func TestSSP_StalenessBoundProperty(t *testing.T) {
	for _, s := range []int{0, 1, 3} {
		for seed := range uint64(30) {
			_, c := run(t, epsp.NewSSP(s), 6, 25, seed, s)
			if got := c.Stats().MaxLead; got > s {
				t.Fatalf("s=%d seed=%d: MaxLead %d", s, seed, got)
			}
		}
	}
}

// Reference: falcon.md Spec: SSP with s=0 gates exactly as BSP.
func TestSSP_ZeroGatesLikeBSP(t *testing.T) {
	for seed := range uint64(10) {
		a, _ := run(t, epsp.NewSSP(0), 5, 12, seed, 0)
		b, _ := run(t, epsp.NewBSP(), 5, 12, seed, 0)
		if !slices.Equal(a, b) {
			t.Fatalf("seed %d: SSP(0) start order differs from BSP", seed)
		}
	}
}

// Reference: falcon.md Spec: SSP with s=∞ never blocks, like ASP.
func TestSSP_InfiniteIsASP(t *testing.T) {
	for seed := range uint64(10) {
		a, ca := run(t, epsp.NewSSP(math.MaxInt), 4, 15, seed, -1)
		b, cb := run(t, epsp.NewASP(), 4, 15, seed, -1)
		if !slices.Equal(a, b) {
			t.Fatalf("seed %d: SSP(inf) start order differs from ASP", seed)
		}
		if !slices.Equal(ca.Stats().Staleness, cb.Stats().Staleness) {
			t.Fatalf("seed %d: staleness histograms differ", seed)
		}
	}
}

func TestCoordinator_StalenessHistogram(t *testing.T) {
	c := newCoord(t, 2, epsp.NewASP())
	push := func(w int, base uint64) {
		t.Helper()
		if _, err := c.Admit(0, epsp.Push{Worker: epsp.WorkerID(w), Owner: epsp.WorkerID(w), BaseVersion: base, Samples: 1, BatchSamples: 1}); err != nil {
			t.Fatal(err)
		}
	}
	push(0, 0) // d=0, version -> 1
	push(1, 0) // d=1, version -> 2
	push(0, 0) // d=2
	push(1, 3) // d=0
	if got, want := c.Stats().Staleness, []int{2, 1, 1}; !slices.Equal(got, want) {
		t.Fatalf("Staleness = %v, want %v", got, want)
	}
}
