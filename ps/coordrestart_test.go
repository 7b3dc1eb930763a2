package ps_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
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

// restartRun is one BSP run on an in-process network: servers from
// pstest, and a coordinator and workers wired by hand so that the
// coordinator can be killed and a new one started on the same store.
type restartRun struct {
	workers, clocks int
	// killAfter > 0 kills the coordinator once it has admitted that many
	// pushes, and starts a new one on the same store down later.
	killAfter int
	down      time.Duration
	policy    func() epsp.Policy
	// ledger, if set, trains pstest.LedgerModel (worker 2 slow) under
	// control ticks and records events into it, for CheckExactlyOnce
	ledger *pstest.Recorder
}

type restartResult struct {
	params []float32
	kills  int
	stats  epsp.Stats
}

func (r restartRun) run(t *testing.T) restartResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := pstest.NewCluster(t, pstest.Servers(2), pstest.Workers(0), pstest.Deterministic(),
		pstest.Optimizer(store.Momentum{LR: 0.05, Mu: 0.9}), pstest.Retry(5*time.Second))
	// noisy (detbsp_test.go): sums of its gradients round differently in
	// different orders, so arrival order would show
	keys, lens, n := []uint64{0, 1}, []int{32, 32}, 64
	names := make([]transport.NodeID, r.workers)
	for i := range names {
		names[i] = transport.NodeID(fmt.Sprintf("worker-%d", i))
	}
	st := ps.DirCoordinatorStore(filepath.Join(t.TempDir(), "coord"))
	var admitted atomic.Int64
	killNow := make(chan struct{})
	var killOnce sync.Once
	obs := event.Func(func(e event.Event) {
		if r.ledger != nil {
			r.ledger.Observe(e)
		}
		if e.Kind == event.PushAdmitted && r.killAfter > 0 && admitted.Add(1) == int64(r.killAfter) {
			killOnce.Do(func() { close(killNow) })
		}
	})
	ec := epsp.Config{NumWorkers: r.workers, Batch: 8}
	var ledger *pstest.LedgerModel
	if r.ledger != nil {
		ec.TickPeriod = 2 * time.Millisecond
		ledger = &pstest.LedgerModel{Workers: r.workers, Clocks: r.clocks, Staleness: -1, Full: 1,
			Delay: func(w epsp.WorkerID, _ int) time.Duration {
				if w == 2 {
					return 3 * time.Millisecond
				}
				return 500 * time.Microsecond
			}}
		keys, lens, n = []uint64{0}, []int{r.workers * r.clocks}, r.workers*r.clocks
	}
	newCoord := func() *ps.Coordinator {
		cfg := ps.CoordinatorConfig{EPSP: ec, Servers: c.ServerIDs, Workers: names,
			StartTimeout: 10 * time.Second, Store: st, Wait: 20 * time.Second}
		co, err := ps.NewCoordinator(cfg, r.policy(), ps.WithObserver(obs))
		must(t, err)
		tr, err := c.Net.Join(ps.CoordinatorNode, co)
		must(t, err)
		must(t, co.Start(ctx, tr))
		return co
	}
	co := newCoord()
	ws := make([]*ps.Worker, r.workers)
	for i := range ws {
		w, err := ps.NewWorker(string(names[i]), ps.WorkerConfig{ID: epsp.WorkerID(i), Coordinator: ps.CoordinatorNode, Client: c.ClientCfg, Chunk: 2, ProgressEvery: 1},
			ps.WithObserver(obs))
		must(t, err)
		ws[i] = w
		tr, err := c.Net.Join(names[i], w)
		must(t, err)
		must(t, w.Start(ctx, tr))
	}
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	var res restartResult
	errs := make(chan error, r.workers)
	for i, w := range ws {
		go func() {
			var m ps.Model = &noisy{}
			var sampler ps.Sampler = ps.ShardSampler{N: 96, Workers: r.workers}
			if ledger != nil {
				m, sampler = ledger, pstest.LedgerSampler{Clocks: r.clocks}
			}
			_, err := w.Train(ctx, m, sampler, ps.TrainConfig{Keys: keys, Lens: lens, Init: store.Zeros{}, Clocks: r.clocks})
			if err != nil {
				err = fmt.Errorf("worker %d: %w", i, err)
			}
			errs <- err
		}()
	}
	done := 0
	for done < r.workers {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatalf("%v", err)
			}
			done++
		case <-killNow:
			killNow = nil
			// as kill -9: the node leaves the network with what it had in
			// memory; the store keeps what was saved
			must(t, c.Net.Kill(ps.CoordinatorNode))
			co.Close()
			res.kills++
			time.Sleep(r.down)
			co = newCoord()
		}
	}
	res.stats = co.Stats()
	co.Close()
	res.params = make([]float32, n)
	must(t, c.NewClient(t).Pull(ctx, keys, res.params, lens))
	return res
}

func firstDiff(a, b []float32) (int, bool) {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i, false
		}
	}
	return -1, len(a) == len(b)
}

// TestCoordinatorRestart_BSPBitIdentical: a deterministic BSP run whose
// coordinator is killed mid-run (after k admitted pushes, k over a range
// that falls in the middle of clocks and at their ends) and started again
// from its store ends with parameters bit-identical to a run that was not
// interrupted; the restarted coordinator's counters show the whole run.
func TestCoordinatorRestart_BSPBitIdentical(t *testing.T) {
	const workers, clocks = 3, 8
	base := restartRun{workers: workers, clocks: clocks, policy: func() epsp.Policy { return epsp.NewBSP() }}
	want := base.run(t)
	for _, k := range []int{1, 5, 9, 13} { // mid-clock (5: 2nd push of clock 1) and a clock's last push (9)
		t.Run(fmt.Sprintf("kill-after-%d-pushes", k), func(t *testing.T) {
			r := base
			r.killAfter, r.down = k, 100*time.Millisecond
			got := r.run(t)
			if got.kills != 1 {
				t.Fatalf("coordinator killed %d times, want 1", got.kills)
			}
			if i, ok := firstDiff(got.params, want.params); !ok {
				t.Fatalf("parameters differ from the uninterrupted run's at %d: %v vs %v", i, got.params[i], want.params[i])
			}
			if got.stats.Flushes != clocks {
				t.Errorf("restarted coordinator counts %d flushes, want %d (the whole run)", got.stats.Flushes, clocks)
			}
		})
	}
}

// TestCoordinatorRestart_WorkersWaitThenNameIt: a durable coordinator
// that never comes back: its workers wait CoordinatorWait (told in the
// hello) and then fail with ErrPeerLost naming the coordinator, within
// the wait plus a margin.
func TestCoordinatorRestart_WorkersWaitThenNameIt(t *testing.T) {
	const wait = 1500 * time.Millisecond
	c := pstest.NewCluster(t, pstest.Servers(1), pstest.Workers(0))
	ctx := context.Background()
	names := []transport.NodeID{"worker-0"}
	co, err := ps.NewCoordinator(ps.CoordinatorConfig{EPSP: epsp.Config{NumWorkers: 1, Batch: 4}, Servers: c.ServerIDs, Workers: names,
		Store: ps.DirCoordinatorStore(t.TempDir()), Wait: wait}, epsp.NewBSP())
	must(t, err)
	tr, err := c.Net.Join(ps.CoordinatorNode, co)
	must(t, err)
	must(t, co.Start(ctx, tr))
	w, err := ps.NewWorker("worker-0", ps.WorkerConfig{Coordinator: ps.CoordinatorNode, Client: c.ClientCfg, Heartbeat: 50 * time.Millisecond,
		CoordinatorTimeout: 200 * time.Millisecond})
	must(t, err)
	defer w.Close()
	wtr, err := c.Net.Join("worker-0", w)
	must(t, err)
	must(t, w.Start(ctx, wtr))
	t0 := time.Now()
	must(t, c.Net.Kill(ps.CoordinatorNode))
	co.Close()
	_, err = w.Clock(ctx) // the clock's request waits for the coordinator, then fails
	el := time.Since(t0)
	if !errors.Is(err, ps.ErrPeerLost) || !strings.Contains(err.Error(), string(ps.CoordinatorNode)) {
		t.Fatalf("err = %v, want ErrPeerLost naming the coordinator", err)
	}
	// the wait, plus a heartbeat period and the resend backoff (≤ 500 ms),
	// plus a margin for a loaded machine
	if el < wait || el > wait+500*time.Millisecond+5*time.Second {
		t.Fatalf("failed after %v; want within [%v, %v]", el, wait, wait+5500*time.Millisecond)
	}
}

// TestCoordinatorRestart_OtherClusterRefused: a state saved by another
// cluster (another policy) is refused with ErrCoordinatorState naming
// both.
func TestCoordinatorRestart_OtherClusterRefused(t *testing.T) {
	c := pstest.NewCluster(t, pstest.Servers(1), pstest.Workers(0))
	st := ps.DirCoordinatorStore(t.TempDir())
	names := []transport.NodeID{"worker-0"}
	cfg := ps.CoordinatorConfig{EPSP: epsp.Config{NumWorkers: 1, Batch: 4}, Servers: c.ServerIDs, Workers: names, Store: st}
	co, err := ps.NewCoordinator(cfg, epsp.NewBSP())
	must(t, err)
	tr, err := c.Net.Join(ps.CoordinatorNode, co)
	must(t, err)
	must(t, co.Start(context.Background(), tr))
	w, err := ps.NewWorker("worker-0", ps.WorkerConfig{Coordinator: ps.CoordinatorNode, Client: c.ClientCfg})
	must(t, err)
	defer w.Close()
	wtr, err := c.Net.Join("worker-0", w)
	must(t, err)
	must(t, w.Start(context.Background(), wtr)) // its hello is saved
	co.Close()
	if _, err := ps.NewCoordinator(cfg, epsp.NewSSP(1)); !errors.Is(err, ps.ErrCoordinatorState) || !strings.Contains(err.Error(), "bsp") || !strings.Contains(err.Error(), "ssp") {
		t.Fatalf("err = %v, want ErrCoordinatorState naming both policies", err)
	}
}

// TestCoordinatorRestart_TransfersExactlyOnce: under FlexRR, whose
// transfers move samples of a slow worker to the others, a coordinator
// killed mid-run and restarted from its store lets the run finish with
// every sample of every clock computed and counted once (the events of
// both coordinators and the workers, pstest.CheckExactlyOnce), and
// transfers happened.
func TestCoordinatorRestart_TransfersExactlyOnce(t *testing.T) {
	const workers, clocks = 3, 12
	for _, k := range []int{6, 14} {
		t.Run(fmt.Sprintf("kill-after-%d-pushes", k), func(t *testing.T) {
			rec := &pstest.Recorder{}
			r := restartRun{workers: workers, clocks: clocks, killAfter: k, down: 50 * time.Millisecond, ledger: rec,
				policy: func() epsp.Policy { return mustPolicy(epsp.NewFlexRR(epsp.DefaultFlexRRConfig())) }}
			got := r.run(t)
			if got.kills != 1 {
				t.Fatalf("coordinator killed %d times, want 1", got.kills)
			}
			complete := make([]int, workers)
			for i := range complete {
				complete[i] = clocks
			}
			pstest.CheckExactlyOnce(t, rec.Events(), complete)
			t.Logf("stats after the restart: %d transfers accepted (%d samples), %d flushes", got.stats.TransfersAccepted, got.stats.SamplesTransferred, got.stats.Flushes)
		})
	}
}

// BenchmarkCoordinatorStore_BSPRun times a whole in-process BSP run (3
// workers, 30 clocks, 2 servers) without a coordinator store and with a
// DirCoordinatorStore: what the write-ahead saves (about 2 per worker and
// clock, each an append and an fsync) cost a run.
func BenchmarkCoordinatorStore_BSPRun(b *testing.B) {
	const workers, clocks = 3, 30
	for _, durable := range []bool{false, true} {
		b.Run(fmt.Sprintf("durable=%v", durable), func(b *testing.B) {
			for b.Loop() {
				opts := []pstest.Option{pstest.Servers(2), pstest.Workers(workers), pstest.Batch(8), pstest.Chunk(8),
					pstest.Policy(epsp.NewBSP()), pstest.NoLeakCheck()}
				if durable {
					opts = append(opts, pstest.CoordinatorStore(ps.DirCoordinatorStore(b.TempDir())))
				}
				c := pstest.NewCluster(b, opts...)
				_, err := c.Train(context.Background(), &noisy{}, ps.ShardSampler{N: 96, Workers: workers},
					ps.TrainConfig{Keys: []uint64{0, 1}, Lens: []int{32, 32}, Init: store.Zeros{}, Clocks: clocks})
				if err != nil {
					b.Fatal(err)
				}
				c.PS.Close()
			}
		})
	}
}
