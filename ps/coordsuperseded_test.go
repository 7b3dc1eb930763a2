package ps_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/ps/pstest"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
)

// fencedState is one coordinator state shared by successive leaders, as
// a store fenced by a leadership (contrib/etcd's) keeps it: each leader
// has a view (lead), and once a later leader took over, an earlier
// view's Save fails with an error wrapping ps.ErrSuperseded.
type fencedState struct {
	mu     sync.Mutex
	b      []byte
	leader int
}

type fencedView struct {
	s     *fencedState
	epoch int
}

// lead makes a new leader and returns its view: the earlier ones are
// deposed.
func (s *fencedState) lead() *fencedView {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leader++
	return &fencedView{s: s, epoch: s.leader}
}

func (v *fencedView) Load(context.Context) ([]byte, error) {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	if v.epoch != v.s.leader {
		return nil, fmt.Errorf("test store: leader %d deposed by %d: %w", v.epoch, v.s.leader, ps.ErrSuperseded)
	}
	return append([]byte(nil), v.s.b...), nil
}

func (v *fencedView) Save(_ context.Context, b []byte) error {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	if v.epoch != v.s.leader {
		return fmt.Errorf("test store: leader %d deposed by %d: %w", v.epoch, v.s.leader, ps.ErrSuperseded)
	}
	v.s.b = append(v.s.b[:0], b...)
	return nil
}

// switchHandler is a service address in front of coordinator processes:
// requests and messages to the coordinator's name go to whichever
// handler it holds now.
type switchHandler struct {
	mu sync.Mutex
	h  transport.Handler
}

func (s *switchHandler) set(h transport.Handler) {
	s.mu.Lock()
	s.h = h
	s.mu.Unlock()
}

func (s *switchHandler) get() transport.Handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.h
}

func (s *switchHandler) HandleRequest(ctx context.Context, from transport.NodeID, req []byte) ([]byte, error) {
	return s.get().HandleRequest(ctx, from, req)
}

func (s *switchHandler) HandleMessage(from transport.NodeID, msg []byte) {
	s.get().HandleMessage(from, msg)
}

// watchedTransport is a coordinator's own transport: it counts the
// aborts it sends, and what else it sends once stopped says it has
// stopped (messages, and requests other than the servers' lease pings).
type watchedTransport struct {
	transport.Transport
	stopped      func() bool
	aborts, late atomic.Int64
}

func (w *watchedTransport) Send(ctx context.Context, to transport.NodeID, msg []byte) error {
	if len(msg) >= 2 && wire.Op(msg[1]) == wire.OpAbort {
		w.aborts.Add(1)
	}
	if w.stopped() {
		w.late.Add(1)
	}
	return w.Transport.Send(ctx, to, msg)
}

func (w *watchedTransport) Request(ctx context.Context, to transport.NodeID, req []byte) ([]byte, error) {
	if w.stopped() && !(len(req) >= 2 && wire.Op(req[1]) == wire.OpPing) {
		w.late.Add(1)
	}
	return w.Transport.Request(ctx, to, req)
}

// countSamples is a model whose gradient counts samples: 1 at index s
// for each sample s of the batch, so that under SGD with LR 1 parameter
// s ends at minus the number of times sample s was pushed (small
// integers, exact in float32).
type countSamples struct{}

func (countSamples) Gradient(_ []float32, samples []int, grad []float32) float64 {
	for _, s := range samples {
		grad[s]++
	}
	return 0
}

// supersededRun is a BSP run whose coordinator, after admitting
// afterPushes pushes, is superseded: its store deposes it (its next save
// fails with ErrSuperseded), or, with abandon, the test also calls
// Abandon on it. A second coordinator started from the same state at the
// same node name (the name's handler switches to it, as a service
// address would) finishes the run. afterPushes 0: no takeover.
type supersededRun struct {
	workers, clocks, samples int
	afterPushes              int
	abandon                  bool
}

type supersededResult struct {
	params  []float32
	flushes int
	first   error // the first coordinator's Err
	late    int64 // what it sent after it stopped
	aborts  int64 // the aborts it sent
}

func (r supersededRun) run(t *testing.T) supersededResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := pstest.NewCluster(t, pstest.Servers(2), pstest.Workers(0), pstest.Deterministic(),
		pstest.Optimizer(store.SGD{LR: 1}), pstest.Retry(5*time.Second))
	names := make([]transport.NodeID, r.workers)
	for i := range names {
		names[i] = ps.WorkerNode(i)
	}
	var admitted atomic.Int64
	takeover := make(chan struct{})
	var once sync.Once
	obs := event.Func(func(e event.Event) {
		if e.Kind == event.PushAdmitted && r.afterPushes > 0 && admitted.Add(1) == int64(r.afterPushes) {
			once.Do(func() { close(takeover) })
		}
	})
	state := &fencedState{}
	front := &switchHandler{}
	tr, err := c.Net.Join(ps.CoordinatorNode, front)
	must(t, err)
	newCoord := func(tr transport.Transport, view *fencedView) *ps.Coordinator {
		cfg := ps.CoordinatorConfig{EPSP: epsp.Config{NumWorkers: r.workers, Batch: 8}, Servers: c.ServerIDs, Workers: names,
			StartTimeout: 10 * time.Second, Store: view, Wait: 30 * time.Second}
		co, err := ps.NewCoordinator(cfg, epsp.NewBSP(), ps.WithObserver(obs))
		must(t, err)
		front.set(co)
		must(t, co.Start(ctx, tr))
		return co
	}
	// stopped: after the deposed coordinator's own Err (its loop sets it
	// and then sends nothing), or once Abandon returned (a send under way
	// at the call may still go, as at a crash)
	var firstP atomic.Pointer[ps.Coordinator]
	var abandoned atomic.Bool
	wtr := &watchedTransport{Transport: tr, stopped: func() bool {
		if r.abandon {
			return abandoned.Load()
		}
		f := firstP.Load()
		return f != nil && f.Err() != nil
	}}
	first := newCoord(wtr, state.lead())
	firstP.Store(first)
	defer first.Close()
	co := first
	ws := make([]*ps.Worker, r.workers)
	for i := range ws {
		w, err := ps.NewWorker(string(names[i]), ps.WorkerConfig{ID: epsp.WorkerID(i), Coordinator: ps.CoordinatorNode, Client: c.ClientCfg, Chunk: 2})
		must(t, err)
		ws[i] = w
		wtr, err := c.Net.Join(names[i], w)
		must(t, err)
		must(t, w.Start(ctx, wtr))
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
			_, err := w.Train(ctx, countSamples{}, ps.ShardSampler{N: r.samples, Workers: r.workers},
				ps.TrainConfig{Keys: keys, Lens: lens, Init: store.Zeros{}, Clocks: r.clocks})
			if err != nil {
				err = fmt.Errorf("worker %d: %w", i, err)
			}
			errs <- err
		}()
	}
	var res supersededResult
	for done := 0; done < r.workers; {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
			done++
		case <-takeover:
			takeover = nil
			// a successor leads: it loads the state the deposed one
			// saved last, and the coordinator's name moves to it
			next := state.lead()
			if r.abandon {
				first.Abandon()
				abandoned.Store(true)
			}
			// the deposed one finds out at its next save (a worker's
			// request): wait for it, bounded by the workers' requests
			for end := time.Now().Add(10 * time.Second); first.Err() == nil; {
				if time.Now().After(end) {
					t.Fatal("the deposed coordinator did not stop within 10 s")
				}
				time.Sleep(time.Millisecond)
			}
			co = newCoord(tr, next)
			defer co.Close()
		}
	}
	res.flushes = co.Stats().Flushes
	res.first = first.Err()
	res.late = wtr.late.Load()
	res.aborts = wtr.aborts.Load()
	res.params = make([]float32, r.samples)
	must(t, c.NewClient(t).Pull(ctx, keys, res.params, lens))
	return res
}

// TestCoordinatorSuperseded_SuccessorFinishesRun: a BSP run whose
// coordinator is deposed mid-run (its store's saves fail with
// ErrSuperseded from then on: mid-clock, and at a clock's last push)
// while it lives on the network, and whose successor starts from the
// same state at the same node name, finishes with every sample counted
// by the servers exactly as often as in a run without the takeover; the
// deposed coordinator reports ErrSuperseded and sends nothing once it
// stopped (no abort). With Abandon the same holds.
func TestCoordinatorSuperseded_SuccessorFinishesRun(t *testing.T) {
	base := supersededRun{workers: 3, clocks: 8, samples: 96}
	want := base.run(t)
	unit := want.params[0]
	if unit == 0 {
		t.Fatal("uninterrupted run: no sample counted")
	}
	for s, v := range want.params {
		if v != unit {
			t.Fatalf("uninterrupted run: sample %d counted %v, sample 0 %v", s, v, unit)
		}
	}
	for _, k := range []int{5, 9} { // 5: the 2nd push of clock 1; 9: the last of clock 2
		for _, abandon := range []bool{false, true} {
			how := "store"
			if abandon {
				how = "abandon"
			}
			t.Run(fmt.Sprintf("%s-after-%d-pushes", how, k), func(t *testing.T) {
				r := base
				r.afterPushes, r.abandon = k, abandon
				got := r.run(t)
				if !errors.Is(got.first, ps.ErrSuperseded) {
					t.Errorf("deposed coordinator's Err = %v, want ErrSuperseded", got.first)
				}
				if got.aborts != 0 {
					t.Errorf("deposed coordinator sent %d aborts, want none", got.aborts)
				}
				if got.late != 0 {
					t.Errorf("deposed coordinator sent %d messages or requests after it stopped, want none", got.late)
				}
				for s, v := range got.params {
					if v != unit {
						t.Fatalf("sample %d counted %v, want %v as without the takeover", s, v, unit)
					}
				}
				if got.flushes != base.clocks {
					t.Errorf("successor counts %d flushes, want %d (the whole run)", got.flushes, base.clocks)
				}
			})
		}
	}
}
