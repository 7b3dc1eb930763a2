package etcd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/pstest"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// counting is a model whose gradient counts samples: 1 at index s for
// each sample s of the batch, so that parameter s ends at −η·scale times
// the number of times sample s was pushed, exactly (small integers in
// float32).
type counting struct{}

func (counting) Gradient(_ []float32, samples []int, grad []float32) float64 {
	for _, s := range samples {
		grad[s]++
	}
	return 0
}

// takeoverRun is one BSP run on an in-process network (pstest's servers,
// workers wired by hand) whose coordinator runs under RunStandby in one
// of two "processes", each with its own etcd client. With killAfter > 0
// the leading process dies (its coordinator leaves the network as at
// kill -9, its etcd client closes without resigning) once its
// coordinator has admitted that many pushes; the standby takes over from
// the state in etcd.
type takeoverRun struct {
	workers, clocks, samples int
	killAfter                int
	// depose, with killAfter, deposes the leading process instead of
	// killing it: its lease is revoked on the server (as when it cannot
	// reach etcd for a TTL) while it lives on the network; its RunFunc,
	// canceled on Lost, abandons its coordinator and leaves the network.
	depose bool
	// transient, with killAfter, makes the next transient fenced
	// transactions of the leading process fail (etcd without a leader)
	// instead of killing it: the run must go on under the same leader.
	transient int
}

type takeoverResult struct {
	params   []float32
	flushes  int
	takeover time.Duration // from the kill to the standby's coordinator started
}

func (r takeoverRun) run(t *testing.T) takeoverResult {
	t.Helper()
	needEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*slack)
	defer cancel()
	c := pstest.NewCluster(t, pstest.Servers(2), pstest.Workers(0), pstest.Deterministic(),
		pstest.Optimizer(store.SGD{LR: 1}), pstest.Retry(5*time.Second))
	names := make([]transport.NodeID, r.workers)
	for i := range names {
		names[i] = ps.WorkerNode(i)
	}
	prefix := freshPrefix(t)

	var mu sync.Mutex
	admitted := 0
	killNow := make(chan struct{})
	obs := event.Func(func(e event.Event) {
		if e.Kind != event.PushAdmitted || r.killAfter == 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if admitted++; admitted == r.killAfter {
			close(killNow)
		}
	})
	type started struct {
		proc  int
		co    *ps.Coordinator
		lease clientv3.LeaseID
		at    time.Time
	}
	coords := make(chan started, 2)
	finished := make(chan struct{}) // the workers are done
	procs := make([]*Backend, 2)
	results := make([]chan error, 2)
	flushes := make(chan int, 2)
	startProc := func(i int) {
		procs[i] = newBackend(t, prefix, fmt.Sprintf("coordinator-process-%d", i))
		res := make(chan error, 1)
		results[i] = res
		go func() {
			res <- RunStandby(ctx, procs[i].Election("coordinator"), DefaultStateName, func(ctx context.Context, st *Store, _ []byte) error {
				cfg := ps.CoordinatorConfig{EPSP: epsp.Config{NumWorkers: r.workers, Batch: 8}, Servers: c.ServerIDs, Workers: names,
					StartTimeout: slack, Store: st, Wait: 4 * slack}
				co, err := ps.NewCoordinator(cfg, epsp.NewBSP(), ps.WithObserver(obs))
				if err != nil {
					return err
				}
				// the coordinator's name moves to this process once the
				// last leader's node is gone (as a service address would)
				var tr *transport.Inmem
				for {
					if tr, err = c.Net.Join(ps.CoordinatorNode, co); err == nil {
						break
					}
					select {
					case <-ctx.Done():
						return fmt.Errorf("join: %w (%w)", err, ctx.Err())
					case <-time.After(10 * time.Millisecond):
					}
				}
				defer tr.Close() // leave the network (a killed node has already)
				defer co.Close() // idempotent: the test closes a killed one first
				if err := co.Start(ctx, tr); err != nil {
					return err
				}
				coords <- started{i, co, st.Leadership().Session().ID(), time.Now()}
				select {
				case <-ctx.Done(): // leadership lost (or the test ended)
					// it stops as a crash would (no abort, no "closed"
					// answers), and its node leaves the network (the
					// name moves to the successor)
					co.Abandon()
					tr.Close()
					return ctx.Err()
				case <-finished:
					flushes <- co.Stats().Flushes
					return nil
				}
			})
		}()
	}
	defer func() { // on any exit: stop both processes' coordinators
		cancel()
		for _, res := range results {
			if res != nil {
				select {
				case <-res:
				case <-time.After(2 * slack):
					t.Error("a RunStandby did not return after the test ended")
				}
			}
		}
	}()
	startProc(0)
	var cur started
	select {
	case cur = <-coords:
	case <-time.After(slack):
		t.Fatal("no coordinator started")
	}
	startProc(1) // the standby: campaigns, waits

	ws := make([]*ps.Worker, r.workers)
	for i := range ws {
		w, err := ps.NewWorker(string(names[i]), ps.WorkerConfig{ID: epsp.WorkerID(i), Coordinator: ps.CoordinatorNode, Client: c.ClientCfg, Chunk: 2})
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = w
		tr, err := c.Net.Join(names[i], w)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	errs := make(chan error, r.workers)
	keys, lens := []uint64{0}, []int{r.samples}
	for i, w := range ws {
		go func() {
			_, err := w.Train(ctx, counting{}, ps.ShardSampler{N: r.samples, Workers: r.workers},
				ps.TrainConfig{Keys: keys, Lens: lens, Init: store.Zeros{}, Clocks: r.clocks})
			if err != nil {
				err = fmt.Errorf("worker %d: %w", i, err)
			}
			errs <- err
		}()
	}
	var res takeoverResult
	for done := 0; done < r.workers; {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
			done++
		case <-killNow:
			killNow = nil
			// the leading process dies: its coordinator leaves the
			// network with what it had in memory, its etcd client stops
			// renewing without resigning
			killed := time.Now()
			if r.transient > 0 {
				failNext(procs[cur.proc], r.transient)
				continue
			}
			if r.depose {
				if _, err := procs[cur.proc].Client().Revoke(ctx, cur.lease); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := c.Net.Kill(ps.CoordinatorNode); err != nil {
					t.Fatal(err)
				}
				cur.co.Close()
				procs[cur.proc].Close()
			}
			select {
			case next := <-coords:
				if next.proc == cur.proc {
					t.Fatalf("process %d led again after it died", cur.proc)
				}
				res.takeover = next.at.Sub(killed)
				cur = next
			case <-time.After(testTTL + slack):
				t.Fatalf("the standby did not start a coordinator within %v of the leader's death (TTL %v)", testTTL+slack, testTTL)
			}
			dead := results[1-cur.proc]
			results[1-cur.proc] = nil
			if err := <-dead; !errors.Is(err, ErrNotLeader) {
				t.Fatalf("the dead process's RunStandby = %v, want ErrNotLeader", err)
			}
		}
	}
	close(finished)
	res.flushes = <-flushes
	select {
	case next := <-coords:
		if r.killAfter > 0 && r.transient > 0 {
			t.Fatalf("process %d started a coordinator after transient etcd errors: the leader was replaced", next.proc)
		}
	default:
	}
	last := results[cur.proc]
	results[cur.proc] = nil
	if err := <-last; err != nil {
		t.Fatalf("the leading process's RunStandby = %v", err)
	}
	res.params = make([]float32, r.samples)
	if err := c.NewClient(t).Pull(ctx, keys, res.params, lens); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestTakeover_MidRunLosesNoSample: a 3-worker BSP run whose leading
// coordinator process dies mid-run (after k admitted pushes: mid-clock
// and at a clock's end) is finished by the standby, which resumes from
// the state in etcd: every sample is counted by the servers exactly as
// often as in a run without the kill (each twice: 8 clocks of 8 samples
// over shards of 32), and the standby's coordinator counts every clock's
// flush.
func TestTakeover_MidRunLosesNoSample(t *testing.T) {
	base := takeoverRun{workers: 3, clocks: 8, samples: 96}
	want := base.run(t)
	unit := want.params[0]
	if unit == 0 || math.IsNaN(float64(unit)) {
		t.Fatalf("uninterrupted run: parameter 0 is %v, no sample counted", unit)
	}
	for s, v := range want.params {
		if v != unit {
			t.Fatalf("uninterrupted run: sample %d counted %v, sample 0 %v; each is pushed twice", s, v, unit)
		}
	}
	if want.flushes != base.clocks {
		t.Fatalf("uninterrupted run: %d flushes, want %d", want.flushes, base.clocks)
	}
	for _, k := range []int{5, 9} { // 5: the 2nd push of clock 1; 9: the last of clock 2
		for _, depose := range []bool{false, true} {
			how := "kill"
			if depose {
				how = "depose"
			}
			t.Run(fmt.Sprintf("%s-after-%d-pushes", how, k), func(t *testing.T) {
				r := base
				r.killAfter, r.depose = k, depose
				got := r.run(t)
				t.Logf("standby's coordinator started %v after the leader's death (TTL %v)", got.takeover.Round(time.Millisecond), testTTL)
				for s, v := range got.params {
					if v != unit {
						t.Fatalf("sample %d counted %v (%.0f pushes), want %v (%.0f) as without the kill", s, v, v/unit*2, unit, 2.0)
					}
				}
				if got.flushes != base.clocks {
					t.Errorf("the standby's coordinator counts %d flushes, want %d (the whole run)", got.flushes, base.clocks)
				}
			})
		}
	}
}

// TestTakeover_TransientEtcdErrorsMidRun: a 3-worker BSP run whose
// leading coordinator's fenced writes fail a few times mid-run (etcd
// answers "no leader", as during its own election) finishes under the
// same leader, every sample counted exactly as in a run without the
// errors and every clock flushed: the store retries while its
// leadership holds instead of failing the save (which aborted the run).
func TestTakeover_TransientEtcdErrorsMidRun(t *testing.T) {
	base := takeoverRun{workers: 3, clocks: 8, samples: 96}
	for _, n := range []int{1, 4} {
		t.Run(fmt.Sprintf("%d-failures", n), func(t *testing.T) {
			r := base
			r.killAfter, r.transient = 5, n
			got := r.run(t)
			unit := got.params[0]
			if unit == 0 {
				t.Fatal("parameter 0 is 0: no sample counted")
			}
			for s, v := range got.params {
				if v != unit {
					t.Fatalf("sample %d counted %v, sample 0 %v: each is pushed twice", s, v, unit)
				}
			}
			if got.flushes != base.clocks {
				t.Errorf("%d flushes, want %d", got.flushes, base.clocks)
			}
		})
	}
}
