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
}

type restartResult struct {
	params  []float32
	kills   int
	restart error
	stats   epsp.Stats
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
		if e.Kind == event.PushAdmitted && r.killAfter > 0 && admitted.Add(1) == int64(r.killAfter) {
			killOnce.Do(func() { close(killNow) })
		}
	})
	newCoord := func() *ps.Coordinator {
		cfg := ps.CoordinatorConfig{EPSP: epsp.Config{NumWorkers: r.workers, Batch: 8}, Servers: c.ServerIDs, Workers: names,
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
		w, err := ps.NewWorker(string(names[i]), ps.WorkerConfig{ID: epsp.WorkerID(i), Coordinator: ps.CoordinatorNode, Client: c.ClientCfg, Chunk: 2})
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
			_, err := w.Train(ctx, &noisy{}, ps.ShardSampler{N: 96, Workers: r.workers},
				ps.TrainConfig{Keys: keys, Lens: lens, Init: store.Zeros{}, Clocks: r.clocks})
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
