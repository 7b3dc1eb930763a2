package ps_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/layout"
	"github.com/falconml/falcon/ps/pstest"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
	"golang.org/x/sync/errgroup"
)

func finalParams(t *testing.T, c *pstest.Cluster, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	if err := c.NewClient(t).Pull(context.Background(), []uint64{0}, out, []int{n}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBSP_Barrier records server flush events and worker clock starts: no
// worker starts clock c+1 before every server has applied clock c, and the
// final parameters are the sample-weighted averages.
// Reference: falcon.md §5 (BSP).
func TestBSP_Barrier(t *testing.T) {
	const workers, clocks, batch = 3, 5, 6
	rec := &pstest.Recorder{}
	c := pstest.NewCluster(t, pstest.Servers(2), pstest.Workers(workers), pstest.Batch(batch), pstest.Chunk(2),
		pstest.Optimizer(store.SGD{LR: 1}), pstest.Observer(rec), pstest.Policy(epsp.NewBSP()),
		pstest.Partitioner(layout.KeyRange{Servers: 2, MaxSegment: 4}))
	m := &pstest.LedgerModel{Workers: workers, Clocks: clocks, Staleness: 0, Full: 1.0 / workers, Delay: pstest.SeededDelay(1, 2*time.Millisecond)}
	n := workers * clocks
	_, err := c.Train(context.Background(), m, pstest.LedgerSampler{Clocks: clocks}, ps.TrainConfig{Keys: []uint64{0}, Lens: []int{n}, Init: store.Zeros{}, Clocks: clocks})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Violations()) > 0 {
		t.Errorf("reads missed updates: %v", m.Violations()[:min(5, len(m.Violations()))])
	}
	// Order check over the recorded trace.
	flushed := map[int]int{} // clock → servers that flushed it
	for _, e := range rec.Events() {
		switch e.Kind {
		case event.Flushed:
			flushed[e.Clock]++
		case event.ClockStart:
			if e.Clock > 0 && flushed[e.Clock-1] != len(c.Servers) {
				t.Errorf("worker %d started clock %d after %d/%d servers flushed clock %d", e.Worker, e.Clock, flushed[e.Clock-1], len(c.Servers), e.Clock-1)
			}
		case event.Applied:
			if flushed[e.Clock] > 0 {
				t.Errorf("push of clock %d buffered after the clock was flushed", e.Clock)
			}
		}
	}
	// The split key (15 values, MaxSegment 4) holds 1/W for every (w, c).
	for i, v := range finalParams(t, c, n) {
		if math.Abs(float64(v)-1.0/workers) > 1e-6 {
			t.Errorf("param %d = %v, want %v", i, v, 1.0/workers)
		}
	}
	if st := c.Coordinator.Stats(); st.Flushes != clocks || st.MaxLead > 1 {
		t.Errorf("stats: %d flushes (want %d), max lead %d", st.Flushes, clocks, st.MaxLead)
	}
}

// TestSSP_StalenessBound is a property test over seeds: with random worker
// speeds, no worker runs more than s clocks ahead of the slowest, and every
// read includes all updates of clocks ≤ c−s−1 plus the reader's own.
// Reference: Ho et al. NIPS 2013; falcon.md §5 (SSP).
func TestSSP_StalenessBound(t *testing.T) {
	const workers, clocks = 3, 7
	for _, s := range []int{0, 1, 3} {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("s=%d/seed=%d", s, seed), func(t *testing.T) {
				c := pstest.NewCluster(t, pstest.Servers(2), pstest.Workers(workers), pstest.Batch(4), pstest.Chunk(4),
					pstest.Optimizer(store.SGD{LR: 1}), pstest.Policy(epsp.NewSSP(s)))
				m := &pstest.LedgerModel{Workers: workers, Clocks: clocks, Staleness: s, Full: 1, Delay: pstest.SeededDelay(seed, 3*time.Millisecond)}
				n := workers * clocks
				keys := make([]uint64, n) // one key per (owner, clock), spread over both servers
				for i := range keys {
					keys[i] = uint64(i) << 59
				}
				_, err := c.Train(context.Background(), m, pstest.LedgerSampler{Clocks: clocks}, ps.TrainConfig{Keys: keys, Init: store.Zeros{}, Clocks: clocks})
				if err != nil {
					t.Fatal(err)
				}
				if len(m.Violations()) > 0 {
					t.Errorf("%d stale reads, e.g. %v", len(m.Violations()), m.Violations()[0])
				}
				if st := c.Coordinator.Stats(); st.MaxLead > s {
					t.Errorf("max lead %d exceeds staleness %d", st.MaxLead, s)
				}
			})
		}
	}
}

// transferPolicy is BSP plus task transfer: when a worker waits at the
// barrier of clock c while another still computes c with work left, half
// of the other's remaining tail goes to the waiting worker (one transfer
// per giver per clock). The slow worker also gets parallelism 2 at clock 1.
type transferPolicy struct {
	flushed int
	ordered map[[2]int]bool
}

func (p *transferPolicy) Name() string { return "test-transfer" }

func (p *transferPolicy) Admit(_ time.Duration, _ epsp.View, push epsp.Push) epsp.PushDecision {
	return epsp.PushDecision{Action: epsp.Accumulate, Clock: push.Clock}
}

func (p *transferPolicy) Step(_ time.Duration, v epsp.View, e epsp.Event) epsp.Output {
	out := epsp.Barrier(v, &p.flushed, 1)
	if e.Kind == epsp.EventClock && e.Clock == 0 && e.Worker != 0 {
		out.SetParallelism = append(out.SetParallelism, epsp.ParallelismOrder{Worker: 0, P: 2})
	}
	for taker := range epsp.WorkerID(v.NumWorkers()) {
		if !v.Waiting(taker) {
			continue
		}
		c := v.Clock(taker) - 1 // the clock the taker finished
		for giver := range epsp.WorkerID(v.NumWorkers()) {
			if v.Waiting(giver) || v.Clock(giver) != c || p.ordered[[2]int{int(giver), c}] {
				continue
			}
			pr := v.Progress(giver)
			rem := pr.Remaining()
			if pr.Clock != c || rem < 4 {
				continue
			}
			b := v.Batch(giver)
			p.ordered[[2]int{int(giver), c}] = true
			out.Transfers = append(out.Transfers, epsp.TransferOrder{From: giver, To: taker, Clock: c, Lo: b - rem/2, Hi: b})
			break
		}
	}
	return out
}

var _ epsp.Policy = (*transferPolicy)(nil)

// TestTransfer_ExactlyOnce runs a slow worker among fast ones under a
// policy that moves work to waiting workers: every sample of every clock
// is computed exactly once (from the chunk trace), transfers happen, and
// the parameters equal the no-transfer result.
// Reference: falcon.md §3 (task transfer, exactly-once sample accounting).
func TestTransfer_ExactlyOnce(t *testing.T) {
	const workers, clocks, batch = 3, 6, 24
	rec := &pstest.Recorder{}
	pol := &transferPolicy{ordered: map[[2]int]bool{}}
	c := pstest.NewCluster(t, pstest.Servers(2), pstest.Workers(workers), pstest.Batch(batch), pstest.Chunk(2), pstest.ProgressEvery(1),
		pstest.Optimizer(store.SGD{LR: 1}), pstest.Observer(rec), pstest.Policy(pol))
	// Injected network delay with jitter: requests of one worker may
	// overtake each other (a transfer answer and the giver's clock).
	c.Net.SetDelay(50*time.Microsecond, 200*time.Microsecond)
	n := workers * clocks
	models := make([]*pstest.LedgerModel, workers)
	for i := range models {
		delay := 100 * time.Microsecond
		if i == 0 {
			delay = 3 * time.Millisecond // the straggler: injected slowdown per chunk
		}
		models[i] = &pstest.LedgerModel{Workers: workers, Clocks: clocks, Staleness: -1, Full: 1.0 / workers,
			Delay: func(epsp.WorkerID, int) time.Duration { return delay }}
	}
	// The slowdown belongs to the computing worker, whoever owns the samples.
	stats, err := c.TrainWith(context.Background(), func(i int) ps.Model { return models[i] }, pstest.LedgerSampler{Clocks: clocks},
		ps.TrainConfig{Keys: []uint64{0}, Lens: []int{n}, Init: store.Zeros{}, Clocks: clocks})
	if err != nil {
		t.Fatal(err)
	}
	// Every sample exactly once.
	count := map[[3]int]int{} // (owner, clock, sample) → times computed
	for _, e := range rec.Events() {
		if e.Kind == event.Chunk {
			for s := e.Lo; s < e.Hi; s++ {
				count[[3]int{int(e.Owner), e.Clock, s}]++
			}
		}
	}
	for o := range workers {
		for k := range clocks {
			for s := range batch {
				if got := count[[3]int{o, k, s}]; got != 1 {
					t.Errorf("sample %d of worker %d clock %d computed %d times", s, o, k, got)
				}
			}
		}
	}
	if len(count) != workers*clocks*batch {
		t.Errorf("%d distinct samples computed, want %d", len(count), workers*clocks*batch)
	}
	st := c.Coordinator.Stats()
	given, taken := 0, 0
	for _, s := range stats {
		given += s.Given
		taken += s.Taken
	}
	if st.TransfersAccepted == 0 || given == 0 || given != taken || given != st.SamplesTransferred {
		t.Errorf("transfers: accepted %d, samples %d; workers gave %d, took %d", st.TransfersAccepted, st.SamplesTransferred, given, taken)
	}
	if st.ParallelismChanges == 0 || models[0].MaxConcurrent() < 2 {
		t.Errorf("parallelism: %d changes recorded, straggler ran %d gradients at once, want 2", st.ParallelismChanges, models[0].MaxConcurrent())
	}
	for i, v := range finalParams(t, c, n) {
		if math.Abs(float64(v)-1.0/workers) > 1e-6 {
			t.Errorf("param %d = %v, want %v (transferred parts must merge sample-weighted)", i, v, 1.0/workers)
		}
	}
	t.Logf("transfers ordered %d accepted %d refused %d, samples moved %d", st.TransfersOrdered, st.TransfersAccepted, st.TransfersRefused, st.SamplesTransferred)
}

// batchPolicy is BSP that gives worker 1 a batch of 4 after its first clock.
type batchPolicy struct{ flushed int }

func (p *batchPolicy) Name() string { return "test-batch" }
func (p *batchPolicy) Admit(_ time.Duration, _ epsp.View, push epsp.Push) epsp.PushDecision {
	return epsp.PushDecision{Action: epsp.Accumulate, Clock: push.Clock}
}
func (p *batchPolicy) Step(_ time.Duration, v epsp.View, e epsp.Event) epsp.Output {
	out := epsp.Barrier(v, &p.flushed, 1)
	if e.Kind == epsp.EventClock && e.Worker == 1 && e.Clock == 0 {
		out.SetBatch = append(out.SetBatch, epsp.BatchOrder{Worker: 1, Size: 4})
	}
	return out
}

// TestWorker_HonoursSetBatch: after the order, worker 1 computes batches of
// 4 samples, pushes them as such, and the server weights them by samples.
func TestWorker_HonoursSetBatch(t *testing.T) {
	const workers, clocks = 2, 3
	rec := &pstest.Recorder{}
	c := pstest.NewCluster(t, pstest.Servers(1), pstest.Workers(workers), pstest.Batch(8), pstest.Chunk(2),
		pstest.Optimizer(store.SGD{LR: 1}), pstest.Observer(rec), pstest.Policy(&batchPolicy{}))
	m := &pstest.LedgerModel{Workers: workers, Clocks: clocks, Staleness: -1}
	_, err := c.Train(context.Background(), m, pstest.LedgerSampler{Clocks: clocks}, ps.TrainConfig{Keys: []uint64{0}, Lens: []int{workers * clocks}, Init: store.Zeros{}, Clocks: clocks})
	if err != nil {
		t.Fatal(err)
	}
	samples := map[[2]int]int{}
	for _, e := range rec.Events() {
		switch e.Kind {
		case event.Chunk:
			samples[[2]int{int(e.Owner), e.Clock}] += e.Hi - e.Lo
		case event.PushAdmitted:
			want := 8
			if e.Push.Owner == 1 && e.Push.Clock > 0 {
				want = 4
			}
			if e.Push.BatchSamples != want {
				t.Errorf("push of worker %d clock %d says batch %d, want %d", e.Push.Owner, e.Push.Clock, e.Push.BatchSamples, want)
			}
		}
	}
	for k := range clocks {
		want1 := 8
		if k > 0 {
			want1 = 4
		}
		if samples[[2]int{0, k}] != 8 || samples[[2]int{1, k}] != want1 {
			t.Errorf("clock %d: computed %d and %d samples, want 8 and %d", k, samples[[2]int{0, k}], samples[[2]int{1, k}], want1)
		}
	}
	// Σ n·g / Σ n per clock: each worker's mean gradient is −1 on its own
	// parameter, so each gets n_w/(n_0+n_1): 1/2 in clock 0, then 8/12 and 4/12.
	p := finalParams(t, c, workers*clocks)
	want := []float32{0.5, 8.0 / 12, 8.0 / 12, 0.5, 4.0 / 12, 4.0 / 12}
	if !nearAll(p, want) {
		t.Errorf("params = %v, want %v", p, want)
	}
}

func TestCoordinator_WaitWorkersNamesMissing(t *testing.T) {
	c := pstest.NewCluster(t, pstest.Servers(1), pstest.Workers(0))
	co, err := ps.NewCoordinator(ps.CoordinatorConfig{EPSP: epsp.Config{NumWorkers: 2, Batch: 4}, Servers: c.ServerIDs,
		Workers: []transport.NodeID{"worker-0", "worker-1"}, StartTimeout: 100 * time.Millisecond}, epsp.NewBSP())
	must(t, err)
	defer co.Close()
	tr, err := c.Net.Join("coordinator", co)
	must(t, err)
	must(t, co.Start(context.Background(), tr))
	w, err := ps.NewWorker("worker-0", ps.WorkerConfig{Coordinator: "coordinator", Client: c.ClientCfg})
	must(t, err)
	defer w.Close()
	wtr, err := c.Net.Join("worker-0", w)
	must(t, err)
	must(t, w.Start(context.Background(), wtr))
	err = co.WaitWorkers(context.Background())
	if !errors.Is(err, ps.ErrStartTimeout) || !strings.Contains(err.Error(), "1/2 workers") || !strings.Contains(err.Error(), "worker-1") || strings.Contains(err.Error(), "worker-0") {
		t.Fatalf("err = %v, want a timeout naming only worker-1", err)
	}
	// A coordinator whose server is missing fails Start and says so.
	co2, err := ps.NewCoordinator(ps.CoordinatorConfig{EPSP: epsp.Config{NumWorkers: 1, Batch: 4}, Servers: []transport.NodeID{"server-0", "server-9"},
		Workers: []transport.NodeID{"worker-9"}, StartTimeout: 100 * time.Millisecond}, epsp.NewBSP())
	must(t, err)
	defer co2.Close()
	tr2, err := c.Net.Join("coordinator-2", co2)
	must(t, err)
	if err := co2.Start(context.Background(), tr2); !errors.Is(err, ps.ErrStartTimeout) || !strings.Contains(err.Error(), "server-9 unreachable") {
		t.Fatalf("Start err = %v, want a timeout naming server-9", err)
	}
}

// TestTrain_CancelReturnsPromptly: cancelling the context stops every
// worker's Train with ctx.Err() within a bound, and shutdown leaks no
// goroutine (TestMain runs goleak).
func TestTrain_CancelReturnsPromptly(t *testing.T) {
	c := pstest.NewCluster(t, pstest.Workers(3), pstest.Batch(8), pstest.Chunk(1), pstest.Parallelism(2))
	m := &pstest.LedgerModel{Workers: 3, Clocks: 1000, Staleness: -1, Delay: func(epsp.WorkerID, int) time.Duration { return time.Millisecond }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Train(ctx, m, pstest.LedgerSampler{Clocks: 1000}, ps.TrainConfig{Keys: []uint64{0}, Lens: []int{3000}, Init: store.Zeros{}, Clocks: 1000})
		done <- err
	}()
	time.Sleep(30 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Train err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Train did not return within 5s of cancel")
	}
}

// TestWorker_ManualLoop drives the Bösen-style loop (Pull, compute,
// PushGradient, Clock) under SSP(1) and checks the clocks and the result.
func TestWorker_ManualLoop(t *testing.T) {
	c := pstest.NewCluster(t, pstest.Servers(1), pstest.Workers(2), pstest.Optimizer(store.SGD{LR: 1}), pstest.Policy(epsp.NewSSP(1)))
	ctx := context.Background()
	keys := []uint64{0, 1}
	must(t, c.Workers[0].Client().Init(ctx, keys, []float32{0, 0}, nil))
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, w := range c.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vals := make([]float32, 2)
			for k := range 5 {
				if err := w.Client().Pull(ctx, keys, vals, nil); err != nil {
					errs[i] = err
					return
				}
				grad := []float32{0, 0}
				grad[i] = -1 // each worker raises its own key by 1 per clock
				if err := w.PushGradient(ctx, keys, grad, nil, 4); err != nil {
					errs[i] = err
					return
				}
				next, err := w.Clock(ctx)
				if err != nil || next != k+1 {
					errs[i] = fmt.Errorf("clock %d: next %d, err %v", k, next, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		must(t, err)
	}
	got := make([]float32, 2)
	must(t, c.NewClient(t).Pull(ctx, keys, got, nil))
	if got[0] != 5 || got[1] != 5 {
		t.Errorf("params = %v, want [5 5]", got)
	}
	// A push naming an unknown key is refused before the coordinator counts it.
	before := c.Coordinator.Stats().Applied
	if err := c.Workers[0].PushGradient(ctx, []uint64{7}, []float32{1}, nil, 1); !errors.Is(err, ps.ErrUnknownKey) {
		t.Errorf("err = %v, want ErrUnknownKey", err)
	}
	if after := c.Coordinator.Stats().Applied; after != before {
		t.Errorf("refused push was admitted: %d -> %d", before, after)
	}
}

func TestShardSampler_Batch(t *testing.T) {
	s := ps.ShardSampler{N: 10, Workers: 3}
	tests := []struct {
		owner       epsp.WorkerID
		clock, size int
		want        []int
	}{
		{0, 0, 2, []int{0, 3}},
		{0, 1, 2, []int{6, 9}},
		{0, 2, 2, []int{0, 3}}, // worker 0's shard {0,3,6,9} wraps
		{2, 0, 4, []int{2, 5, 8, 2}},
		{1, 1, 3, []int{1, 4, 7}}, // shard {1,4,7}: clock 1 starts at position 3 ≡ 0
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("w%d/c%d", tt.owner, tt.clock), func(t *testing.T) {
			got := s.Batch(tt.owner, tt.clock, tt.size)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("Batch = %v, want %v", got, tt.want)
			}
			for _, id := range got {
				if id%3 != int(tt.owner) || id >= 10 {
					t.Errorf("sample %d outside worker %d's shard", id, tt.owner)
				}
			}
		})
	}
}

// TestTrain_ServerDeathAbortsRun kills a server mid-training under BSP: no
// worker waits forever at the barrier; every Train returns within a bound,
// with the dead server named (ErrServerUnavailable) or the run aborted
// (ErrAborted).
func TestTrain_ServerDeathAbortsRun(t *testing.T) {
	c := pstest.NewCluster(t, pstest.Servers(2), pstest.Workers(3), pstest.Batch(4), pstest.Chunk(1),
		pstest.Partitioner(layout.Hash{Servers: 2}))
	m := &pstest.LedgerModel{Workers: 3, Clocks: 1000, Staleness: -1, Delay: func(epsp.WorkerID, int) time.Duration { return 200 * time.Microsecond }}
	keys := []uint64{0, 1, 2, 3, 4, 5, 6, 7}
	errs := make(chan error, 3)
	for i, w := range c.Workers {
		go func() {
			_, err := w.Train(context.Background(), m, pstest.LedgerSampler{Clocks: 1000}, ps.TrainConfig{Keys: keys, Lens: []int{375, 375, 375, 375, 375, 375, 375, 375}, Init: store.Zeros{}, Clocks: 1000})
			errs <- fmt.Errorf("worker %d: %w", i, err)
		}()
	}
	time.Sleep(30 * time.Millisecond)
	must(t, c.Net.Kill("server-1"))
	named := false
	for range 3 {
		select {
		case err := <-errs:
			switch {
			case errors.Is(err, ps.ErrServerUnavailable):
				named = named || strings.Contains(err.Error(), "server-1")
			case errors.Is(err, ps.ErrAborted):
			default:
				t.Errorf("unexpected error: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a worker still waits 10s after the server died")
		}
	}
	if !named && !strings.Contains(fmt.Sprint(c.Coordinator.Err()), "server-1") {
		t.Errorf("nobody named server-1; coordinator: %v", c.Coordinator.Err())
	}
}

// TestStart_AnyOrder starts servers, coordinator and workers in a random
// order with random delays (seeded): every Start waits for its peers
// within its deadline, and the cluster then trains.
func TestStart_AnyOrder(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			net := transport.NewInmemNetwork()
			defer net.Close()
			servers := []transport.NodeID{"server-0", "server-1"}
			workers := []transport.NodeID{"worker-0", "worker-1", "worker-2"}
			co, err := ps.NewCoordinator(ps.CoordinatorConfig{EPSP: epsp.Config{NumWorkers: 3, Batch: 2}, Servers: servers, Workers: workers, StartTimeout: 5 * time.Second}, epsp.NewBSP())
			must(t, err)
			defer co.Close()
			var ws []*ps.Worker
			for i, id := range workers {
				w, err := ps.NewWorker(string(id), ps.WorkerConfig{ID: epsp.WorkerID(i), Coordinator: "coordinator", StartTimeout: 5 * time.Second, Client: ps.ClientConfig{Servers: servers}})
				must(t, err)
				defer w.Close()
				ws = append(ws, w)
			}
			type role struct {
				start func() error
			}
			var roles []role
			for _, id := range servers {
				roles = append(roles, role{start: func() error {
					s, err := ps.NewServer(string(id), ps.DefaultServerConfig())
					if err != nil {
						return err
					}
					_, err = net.Join(id, s)
					return err
				}})
			}
			roles = append(roles, role{start: func() error {
				tr, err := net.Join("coordinator", co)
				if err != nil {
					return err
				}
				return co.Start(context.Background(), tr)
			}})
			for i, w := range ws {
				roles = append(roles, role{start: func() error {
					tr, err := net.Join(workers[i], w)
					if err != nil {
						return err
					}
					return w.Start(context.Background(), tr)
				}})
			}
			var g errgroup.Group
			for _, r := range roles {
				d := time.Duration(rng.IntN(40)) * time.Millisecond
				g.Go(func() error {
					time.Sleep(d)
					return r.start()
				})
			}
			must(t, g.Wait())
			must(t, co.WaitWorkers(context.Background()))
			var tg errgroup.Group
			for _, w := range ws {
				tg.Go(func() error {
					_, err := w.Train(context.Background(), nopModel{}, ps.ShardSampler{N: 12, Workers: 3}, ps.TrainConfig{Keys: []uint64{1}, Lens: []int{4}, Init: store.Zeros{}, Clocks: 3})
					return err
				})
			}
			must(t, tg.Wait())
		})
	}
}
