package ps_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/pstest"
	"github.com/falconml/falcon/ps/store"
)

// detRun is a BSP run of workers workers, 6 clocks of one push each, with
// Adam over two keys of 3 values on servers servers. order, if not nil,
// fixes the order in which the workers' pushes of each clock reach the
// servers: worker order(c)[p] computes its gradient of clock c only once
// the servers hold p pushes of c (one server, so arrival order is push
// order). restartAt > 0 kills server-1 when worker 0 computes clock
// restartAt and starts it again from its directory. It returns the final
// parameters.
func detRun(t *testing.T, workers, servers int, det bool, order func(clock int) []int, restartAt int, opts ...pstest.Option) []float32 {
	t.Helper()
	const clocks = 6
	var mu sync.Mutex
	arrived := map[int]int{} // clock → pushes stored
	obs := event.Func(func(e event.Event) {
		if e.Kind == event.Applied && e.Node == "server-0" {
			mu.Lock()
			arrived[e.Clock]++
			mu.Unlock()
		}
	})
	opts = append(opts, pstest.Servers(servers), pstest.Workers(workers), pstest.Batch(8), pstest.Chunk(8),
		pstest.Policy(epsp.NewBSP()), pstest.Optimizer(store.Adam{LR: 0.05}), pstest.Observer(obs), pstest.NoLeakCheck(),
		pstest.Retry(5*time.Second))
	if det {
		opts = append(opts, pstest.Deterministic())
	}
	if restartAt > 0 {
		opts = append(opts, pstest.Durable(ps.DurableConfig{Dir: t.TempDir(), Log: true, CheckpointEvery: 4}))
	}
	c := pstest.NewCluster(t, opts...)
	restarted := make(chan error, 1)
	models := make([]*regression, workers)
	for w := range models {
		models[w] = &regression{}
		models[w].onCall = func(n int) {
			clock := n - 1 // one gradient call per clock (Chunk = Batch)
			if w == 0 && restartAt > 0 && clock == restartAt {
				go func() {
					_, err := c.RestartServer(1, 50*time.Millisecond)
					restarted <- err
				}()
			}
			if order == nil {
				return
			}
			pos := 0
			for p, x := range order(clock) {
				if x == w {
					pos = p
				}
			}
			// Bounded by the test's timeout: a worker ahead of this one
			// in the order never waits for it.
			for {
				mu.Lock()
				ok := arrived[clock] >= pos
				mu.Unlock()
				if ok {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	keys, lens := []uint64{0, 1}, []int{3, 3}
	_, err := c.TrainWith(context.Background(), func(w int) ps.Model { return models[w] }, ps.ShardSampler{N: 96, Workers: workers},
		ps.TrainConfig{Keys: keys, Lens: lens, Init: store.Zeros{}, Clocks: clocks})
	if err != nil {
		t.Fatal(err)
	}
	if restartAt > 0 {
		if err := <-restarted; err != nil {
			t.Fatal(err)
		}
	}
	out := make([]float32, 6)
	if err := c.NewClient(t).Pull(context.Background(), keys, out, lens); err != nil {
		t.Fatal(err)
	}
	return out
}

func bitsEqual(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestDeterministicBSP_ArrivalOrder: fault-free BSP runs of 3 and 4
// workers over TCP whose pushes reach the server in different orders
// (forward, reversed, rotated per clock) end with bit-identical
// parameters under StoreConfig.Deterministic, and with different ones
// without it (the server's float32 sum follows arrival order: the finding
// "bit-identical under BSP holds for two workers only").
func TestDeterministicBSP_ArrivalOrder(t *testing.T) {
	for _, workers := range []int{3, 4} {
		t.Run(map[int]string{3: "3workers", 4: "4workers"}[workers], func(t *testing.T) {
			forward := func(int) []int {
				o := make([]int, workers)
				for i := range o {
					o[i] = i
				}
				return o
			}
			reversed := func(int) []int {
				o := make([]int, workers)
				for i := range o {
					o[i] = workers - 1 - i
				}
				return o
			}
			rotated := func(c int) []int {
				o := make([]int, workers)
				for i := range o {
					o[i] = (i + c + 1) % workers
				}
				return o
			}
			orders := []func(int) []int{reversed, rotated}
			want := detRun(t, workers, 1, true, forward, 0, pstest.TCP(""))
			for i, o := range orders {
				if got := detRun(t, workers, 1, true, o, 0, pstest.TCP("")); !bitsEqual(got, want) {
					t.Errorf("deterministic, order %d: %v, forward order: %v", i, got, want)
				}
			}
			ref := detRun(t, workers, 1, false, forward, 0, pstest.TCP(""))
			differ := false
			for _, o := range orders {
				if !bitsEqual(detRun(t, workers, 1, false, o, 0, pstest.TCP("")), ref) {
					differ = true
				}
			}
			if !differ {
				t.Error("without Deterministic every arrival order gave the same bits: the failure the option removes did not show")
			}
		})
	}
}

// TestDeterministicBSP_ServerRestart: with StoreConfig.Deterministic, a
// 3-worker BSP run whose server-1 is killed mid-run and restarted from its
// checkpoint and request log (per-worker buffers in the checkpoint,
// senders in the log) ends bit-identical to an uninterrupted run, though
// arrival orders differ between the runs.
func TestDeterministicBSP_ServerRestart(t *testing.T) {
	want := detRun(t, 3, 2, true, nil, 0)
	got := detRun(t, 3, 2, true, nil, 3)
	if !bitsEqual(got, want) {
		t.Fatalf("after the restart %v, uninterrupted %v", got, want)
	}
}
