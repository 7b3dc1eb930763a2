package ps_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/pstest"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
)

// hangModel is a model whose gradient is the sample count; at clock
// hangAt, worker victim (or every worker, victim < 0) calls onHang once
// and then blocks until release is closed.
type hangModel struct {
	victim  int
	hangAt  int
	onHang  func()
	release chan struct{}
	once    sync.Once
	worker  int
}

func (m *hangModel) Gradient(params []float32, samples []int, grad []float32) float64 {
	if len(samples) > 0 && (m.victim < 0 || m.worker == m.victim) && samples[0]/1000 == m.hangAt {
		m.once.Do(m.onHang)
		<-m.release
	}
	for i := range grad {
		grad[i] += float32(len(samples))
	}
	return 0
}

// clockSampler gives sample ids 1000·clock + i, so a model can see the clock.
type clockSampler struct{}

func (clockSampler) Batch(_ epsp.WorkerID, clock, size int) []int {
	ids := make([]int, size)
	for i := range ids {
		ids[i] = 1000*clock + i
	}
	return ids
}

const (
	testLease     = 800 * time.Millisecond
	testInterval  = 50 * time.Millisecond
	testHeartbeat = 50 * time.Millisecond
	// detection bound: Timeout + Interval (see ps/lease.go), plus slack
	// for a loaded 2-core machine
	testSlack = 400 * time.Millisecond
)

// releaser returns the channel hung models wait on and its closer, also
// registered to run before the cluster shuts down (a failed test must not
// leave Close waiting on a hung model).
func releaser(t *testing.T) (chan struct{}, func()) {
	ch := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(ch) }) }
	t.Cleanup(free)
	return ch, free
}

type trainResult struct {
	err error
	at  time.Time
}

// trainAll runs Train on every worker, each with its own hangModel.
func trainAll(c *pstest.Cluster, mk func(w int) ps.Model, clocks int) []chan trainResult {
	out := make([]chan trainResult, len(c.Workers))
	for i, w := range c.Workers {
		out[i] = make(chan trainResult, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := w.Train(ctx, mk(i), clockSampler{}, ps.TrainConfig{Keys: []uint64{0}, Lens: []int{4}, Init: store.Zeros{}, Clocks: clocks})
			out[i] <- trainResult{err, time.Now()}
		}()
	}
	return out
}

// TestBSP_LostWorkerAbortsNamingIt is the finding "under BSP the
// survivors of a killed worker wait forever, Coordinator.Err() nil": a
// worker killed (or cut off, as SIGSTOP would) in the middle of a clock
// is declared lost within Timeout + Interval + slack, and every survivor
// returns ErrAborted naming it.
func TestBSP_LostWorkerAbortsNamingIt(t *testing.T) {
	for _, how := range []string{"kill", "hang"} {
		t.Run(how, func(t *testing.T) {
			c := pstest.NewCluster(t, pstest.Workers(3), pstest.Batch(4), pstest.Policy(epsp.NewBSP()), pstest.NoLeakCheck(),
				pstest.Lease(ps.LeaseConfig{Timeout: testLease, Interval: testInterval}), pstest.Heartbeat(testHeartbeat, 5*time.Second))
			release, free := releaser(t)
			var hungAt atomic.Pointer[time.Time]
			onHang := func() {
				now := time.Now()
				hungAt.Store(&now)
				if how == "kill" {
					c.Net.Kill("worker-1")
				} else {
					for _, p := range append([]transport.NodeID{pstest.CoordinatorID}, c.ServerIDs...) {
						c.Net.Disconnect("worker-1", p)
					}
				}
			}
			res := trainAll(c, func(w int) ps.Model {
				return &hangModel{victim: 1, hangAt: 2, onHang: onHang, release: release, worker: w}
			}, 5)
			for _, w := range []int{0, 2} {
				r := <-res[w]
				t.Logf("worker-%d: %v after %v", w, r.err, r.at.Sub(*hungAt.Load()))
				if !errors.Is(r.err, ps.ErrAborted) || !strings.Contains(r.err.Error(), "worker-1") {
					t.Fatalf("worker-%d: err %v, want ErrAborted naming worker-1", w, r.err)
				}
				if d := r.at.Sub(*hungAt.Load()); d > testLease+testInterval+testSlack {
					t.Errorf("worker-%d returned %v after worker-1 was lost, bound %v", w, d, testLease+testInterval+testSlack)
				}
			}
			if err := c.Coordinator.Err(); !errors.Is(err, ps.ErrPeerLost) || !strings.Contains(err.Error(), "worker-1") {
				t.Errorf("coordinator err %v, want ErrPeerLost naming worker-1", err)
			}
			free()
			<-res[1]
		})
	}
}

// TestLease_ContinueWithout: with ContinueWithout a worker killed in the
// middle of its clock 2 is treated as having left; its unprocessed
// samples of clock 2 are handed to a survivor through the core's transfer
// ledger (one hand-over of its whole batch), and the servers received
// every sample exactly once: the survivors' 5 clocks and the victim's
// clocks 0 to 2.
func TestLease_ContinueWithout(t *testing.T) {
	var applied atomic.Int64
	obs := event.Func(func(e event.Event) {
		if e.Kind == event.Applied {
			applied.Add(int64(e.Samples))
		}
	})
	const batch, clocks = 4, 5
	misses := &leaseMisses{}
	c := pstest.NewCluster(t, pstest.Workers(3), pstest.Batch(batch), pstest.Policy(epsp.NewBSP()), pstest.NoLeakCheck(), pstest.Observer(obs), pstest.Metrics(misses),
		pstest.Lease(ps.LeaseConfig{Timeout: testLease, Interval: testInterval, OnWorkerLost: ps.ContinueWithout}), pstest.Heartbeat(testHeartbeat, 5*time.Second))
	release, free := releaser(t)
	res := trainAll(c, func(w int) ps.Model {
		return &hangModel{victim: 1, hangAt: 2, onHang: func() { c.Net.Kill("worker-1") }, release: release, worker: w}
	}, clocks)
	for _, w := range []int{0, 2} {
		if r := <-res[w]; r.err != nil {
			t.Fatalf("worker-%d: %v", w, r.err)
		}
	}
	free()
	<-res[1]
	if err := c.Coordinator.Err(); err != nil {
		t.Fatalf("coordinator: %v", err)
	}
	// one key on one server: each push is applied once there
	if got, want := applied.Load(), int64(2*clocks*batch+3*batch); got != want {
		t.Errorf("servers received %d samples, want %d", got, want)
	}
	if st := c.Coordinator.Stats(); st.Flushes != clocks || st.Left != 3 || st.HandOvers != 1 || st.SamplesHandedOver != batch {
		t.Errorf("stats: %d flushes, %d left, %d hand-overs of %d samples; want %d, 3, 1 of %d", st.Flushes, st.Left, st.HandOvers, st.SamplesHandedOver, clocks, batch)
	}
	if got := misses.get(); !slices.Equal(got, []string{"worker worker-1"}) {
		t.Errorf("lease misses reported %q, want [worker worker-1]", got)
	}
}

// TestLease_LostServerAbortsNamingIt: a server that stops answering while
// the workers compute is declared lost within the bound, and the run
// aborts naming it.
func TestLease_LostServerAbortsNamingIt(t *testing.T) {
	misses := &leaseMisses{}
	c := pstest.NewCluster(t, pstest.Servers(2), pstest.Workers(2), pstest.Batch(4), pstest.NoLeakCheck(), pstest.Metrics(misses),
		pstest.Lease(ps.LeaseConfig{Timeout: testLease, Interval: testInterval}), pstest.Heartbeat(testHeartbeat, 5*time.Second))
	release, free := releaser(t)
	var killed atomic.Pointer[time.Time]
	res := trainAll(c, func(w int) ps.Model {
		return &hangModel{victim: -1, hangAt: 1, release: release, worker: w, onHang: func() {
			if w == 0 {
				now := time.Now()
				killed.Store(&now)
				c.Net.Kill("server-1")
			}
		}}
	}, 3)
	deadline := time.Now().Add(5 * time.Second)
	for c.Coordinator.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	at := time.Now()
	err := c.Coordinator.Err()
	t.Logf("%v after %v", err, at.Sub(*killed.Load()))
	if !errors.Is(err, ps.ErrPeerLost) || !strings.Contains(err.Error(), "server-1") {
		t.Fatalf("coordinator err %v, want ErrPeerLost naming server-1", err)
	}
	if d := at.Sub(*killed.Load()); d > testLease+testInterval+testSlack {
		t.Errorf("server-1 declared lost %v after it died, bound %v", d, testLease+testInterval+testSlack)
	}
	if got := misses.get(); !slices.Equal(got, []string{"server server-1"}) {
		t.Errorf("lease misses reported %q, want [server server-1]", got)
	}
	free()
	for i := range res {
		if r := <-res[i]; r.err == nil {
			t.Errorf("worker-%d finished despite the lost server", i)
		}
	}
}

// TestLease_LostCoordinator: workers waiting at a barrier whose
// coordinator dies fail within CoordinatorTimeout + a heartbeat + slack
// with ErrPeerLost naming it.
func TestLease_LostCoordinator(t *testing.T) {
	const coordTimeout = 300 * time.Millisecond
	misses := &leaseMisses{}
	c := pstest.NewCluster(t, pstest.Workers(2), pstest.Batch(4), pstest.NoLeakCheck(), pstest.Metrics(misses),
		pstest.Lease(ps.LeaseConfig{Timeout: testLease, Interval: testInterval}), pstest.Heartbeat(testHeartbeat, coordTimeout))
	release, free := releaser(t)
	var killed atomic.Pointer[time.Time]
	res := trainAll(c, func(w int) ps.Model {
		return &hangModel{victim: 1, hangAt: 1, release: release, worker: w, onHang: func() {
			now := time.Now()
			killed.Store(&now)
			c.Net.Kill(pstest.CoordinatorID)
		}}
	}, 3)
	r := <-res[0]
	t.Logf("worker-0: %v after %v", r.err, r.at.Sub(*killed.Load()))
	// ErrCoordinatorUnavailable when a request was in flight as it died,
	// ErrPeerLost from the heartbeats when the worker was waiting
	if !(errors.Is(r.err, ps.ErrPeerLost) || errors.Is(r.err, ps.ErrCoordinatorUnavailable)) || !strings.Contains(r.err.Error(), string(pstest.CoordinatorID)) {
		t.Fatalf("worker-0: err %v, want ErrPeerLost or ErrCoordinatorUnavailable naming the coordinator", r.err)
	}
	if d := r.at.Sub(*killed.Load()); d > coordTimeout+testHeartbeat+testSlack {
		t.Errorf("worker-0 failed %v after the coordinator died, bound %v", d, coordTimeout+testHeartbeat+testSlack)
	}
	// the heartbeats' verdict is a lease miss; a request in flight is not
	if want := "coordinator " + string(pstest.CoordinatorID); errors.Is(r.err, ps.ErrPeerLost) && !slices.Contains(misses.get(), want) {
		t.Errorf("worker-0 found the coordinator lost (%v) but the lease misses are %q, want one %q", r.err, misses.get(), want)
	}
	free()
	<-res[1]
}

// TestIncarnation_RestartedWorkerRefused is the finding "a restarted
// worker is re-admitted as if nothing happened": a new process under a
// running worker's name is refused at Start with ErrRestarted, so it
// cannot run its clocks a second time.
func TestIncarnation_RestartedWorkerRefused(t *testing.T) {
	c := pstest.NewCluster(t, pstest.Workers(2), pstest.NoLeakCheck(),
		pstest.Lease(ps.LeaseConfig{Timeout: -1}))
	c.Net.Kill("worker-1")
	w, err := ps.NewWorker("worker-1", ps.WorkerConfig{ID: 1, Coordinator: pstest.CoordinatorID, Client: c.ClientCfg})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tr, err := c.Net.Join("worker-1", w)
	if err != nil {
		t.Fatal(err)
	}
	err = w.Start(context.Background(), tr)
	if !errors.Is(err, ps.ErrRestarted) || !strings.Contains(err.Error(), "worker-1") {
		t.Fatalf("restarted worker: Start err %v, want ErrRestarted naming worker-1", err)
	}
}

// takerModel computes LedgerSampler ids (gradient: the sample count). The
// victim, on its first samples of another owner's batch (a transfer it
// took, or samples assigned to it), calls onHang and blocks until release
// is closed; the giver blocks on its own samples of clock gateAt until
// gate is closed (at most 5 s), so that its tail is still unclaimed when
// a transfer of it is ordered.
type takerModel struct {
	worker, victim, giver, clocks, gateAt int
	onHang                                func()
	release, gate                         chan struct{}
	once                                  *sync.Once
}

func (m *takerModel) Gradient(params []float32, samples []int, grad []float32) float64 {
	if len(samples) > 0 {
		idx := samples[0] / pstest.LedgerStride
		owner, clock := idx/m.clocks, idx%m.clocks
		if m.worker == m.victim && owner != m.worker {
			m.once.Do(m.onHang)
			<-m.release
		}
		if m.worker == m.giver && owner == m.giver && clock == m.gateAt {
			select {
			case <-m.gate:
			case <-time.After(5 * time.Second):
			}
		}
	}
	for i := range grad {
		grad[i] += float32(len(samples))
	}
	return 0
}

// toVictim is BSP that, when worker 0 finishes clock 1 while worker 1
// computes it, orders [4,8) of worker 1's batch to worker 0 (transfer);
// or (assign) assigns it to worker 0 on the releases into clock 1.
type toVictim struct {
	*epsp.BSP
	assign bool
	done   bool
}

func (p *toVictim) Step(now time.Duration, v epsp.View, e epsp.Event) epsp.Output {
	out := p.BSP.Step(now, v, e)
	if p.done {
		return out
	}
	if p.assign && len(out.Release) == v.NumWorkers() && v.Clock(0) == 1 {
		out.Assign = append(out.Assign, epsp.Assignment{From: 1, To: 0, Clock: 1, Lo: 4, Hi: 8})
		p.done = true
	}
	if !p.assign && e.Kind == epsp.EventClock && e.Worker == 0 && e.Clock == 1 && v.Clock(1) == 1 && !v.Waiting(1) {
		out.Transfers = append(out.Transfers, epsp.TransferOrder{From: 1, To: 0, Clock: 1, Lo: 4, Hi: 8})
		p.done = true
	}
	return out
}

// TestLease_LostTaker: with ContinueWithout, worker 0 takes [4,8) of
// worker 1's batch of clock 1 — a transfer it accepted a task of, or
// samples assigned to it at the release — and is killed before pushing
// them. The range goes to the survivor that is not its giver (worker 2),
// so the barrier of clock 1 passes, the survivors finish every clock
// within a short deadline, and the servers received every sample exactly
// once: the survivors' clocks, and the victim's clocks 0 and 1 (its own
// samples of clock 1 handed over if unpushed). With two workers the giver
// is the only survivor and cannot take its range back: the range is
// given up (lost, counted as abandoned) and the run still goes on.
func TestLease_LostTaker(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers int
		assign  bool
	}{{"transfer", 3, false}, {"assign", 3, true}, {"transfer, giver alone", 2, false}} {
		assign, workers := tc.assign, tc.workers
		t.Run(tc.name, func(t *testing.T) {
			var applied atomic.Int64
			obs := event.Func(func(e event.Event) {
				if e.Kind == event.Applied {
					applied.Add(int64(e.Samples))
				}
			})
			const batch, clocks = 8, 3
			c := pstest.NewCluster(t, pstest.Workers(workers), pstest.Batch(batch), pstest.Chunk(4), pstest.Policy(&toVictim{BSP: epsp.NewBSP(), assign: assign}),
				pstest.TickPeriod(20*time.Millisecond), pstest.NoLeakCheck(), pstest.Observer(obs),
				pstest.Lease(ps.LeaseConfig{Timeout: testLease, Interval: testInterval, OnWorkerLost: ps.ContinueWithout}), pstest.Heartbeat(testHeartbeat, 5*time.Second))
			release, free := releaser(t)
			gate := make(chan struct{})
			var once sync.Once
			onHang := func() { c.Net.Kill("worker-0"); close(gate) }
			res := make([]chan trainResult, len(c.Workers))
			for i, w := range c.Workers {
				res[i] = make(chan trainResult, 1)
				m := &takerModel{worker: i, victim: 0, giver: 1, clocks: clocks, gateAt: 1, onHang: onHang, release: release, gate: gate, once: &once}
				if assign {
					m.gateAt = -1
				}
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
					defer cancel()
					_, err := w.Train(ctx, m, pstest.LedgerSampler{Clocks: clocks}, ps.TrainConfig{Keys: []uint64{0}, Lens: []int{4}, Init: store.Zeros{}, Clocks: clocks})
					res[i] <- trainResult{err, time.Now()}
				}()
			}
			for w := 1; w < workers; w++ {
				if r := <-res[w]; r.err != nil {
					t.Fatalf("worker-%d: %v (coordinator %v, stats %+v)", w, r.err, c.Coordinator.Err(), c.Coordinator.Stats())
				}
			}
			free()
			<-res[0]
			if err := c.Coordinator.Err(); err != nil {
				t.Fatalf("coordinator: %v", err)
			}
			// one key on one server: each push is applied once there
			moved, lost := 1, 0
			if workers == 2 {
				moved, lost = 0, 4
			}
			if got, want := applied.Load(), int64((workers-1)*clocks*batch+2*batch-lost); got != want {
				t.Errorf("servers received %d samples, want %d", got, want)
			}
			st := c.Coordinator.Stats()
			if st.Flushes != clocks || st.Left != workers || st.Retargeted != moved || st.SamplesRetargeted != 4*moved || st.SamplesAbandoned != lost {
				t.Errorf("stats %+v: want %d flushes, %d left, %d range(s) of 4 retargeted, %d samples abandoned", st, clocks, workers, moved, lost)
			}
		})
	}
}

// TestLease_ContinueWithoutEveryWorkerLost: under ContinueWithout, when
// every worker is lost and none finished, nobody goes on: the run aborts
// naming them instead of ending as if it were done (before: the
// coordinator's Err stayed nil and Cluster.WaitTrained reported success).
func TestLease_ContinueWithoutEveryWorkerLost(t *testing.T) {
	c := pstest.NewCluster(t, pstest.Workers(2), pstest.Batch(4), pstest.Policy(epsp.NewBSP()), pstest.NoLeakCheck(),
		pstest.Lease(ps.LeaseConfig{Timeout: testLease, Interval: testInterval, OnWorkerLost: ps.ContinueWithout}), pstest.Heartbeat(testHeartbeat, 5*time.Second))
	release, free := releaser(t)
	res := trainAll(c, func(w int) ps.Model {
		name := fmt.Sprintf("worker-%d", w)
		return &hangModel{victim: -1, hangAt: 1, onHang: func() { c.Net.Kill(transport.NodeID(name)) }, release: release, worker: w}
	}, 5)
	bound := 2*(testLease+testInterval) + 5*time.Second // both leases, and a loaded machine
	end := time.Now().Add(bound)
	for c.Coordinator.Err() == nil && time.Now().Before(end) {
		time.Sleep(10 * time.Millisecond)
	}
	free()
	for _, r := range res {
		<-r
	}
	err := c.Coordinator.Err()
	if !errors.Is(err, ps.ErrPeerLost) || !strings.Contains(err.Error(), "every worker was lost") ||
		!strings.Contains(err.Error(), "worker-0") || !strings.Contains(err.Error(), "worker-1") {
		t.Fatalf("coordinator error %v; want ErrPeerLost naming worker-0 and worker-1 within %v", err, bound)
	}
}
