package ps_test

import (
	"context"
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
)

// detRun is a BSP run of workers workers, 6 clocks of one push each, with
// Momentum over two keys of 32 values on servers servers. order, if not nil,
// fixes the order in which the workers' pushes of each clock reach the
// servers: worker order(c)[p] computes its gradient of clock c only once
// the servers hold p pushes of c (one server, so arrival order is push
// order). restartAt > 0 (with order) takes a checkpoint of server-1 once
// the first push of clock restartAt is stored, and kills server-1 as
// kill -9 would and starts it again from its directory once all but the
// last are: its checkpoint holds one worker's buffer and its log the
// others' pushes. It returns the final parameters.
func detRun(t *testing.T, workers, servers int, det bool, order func(clock int) []int, restartAt int, opts ...pstest.Option) []float32 {
	t.Helper()
	const clocks = 6
	var mu sync.Mutex
	arrived := map[string]map[int]int{} // server → clock → pushes stored
	obs := event.Func(func(e event.Event) {
		if e.Kind == event.Applied {
			mu.Lock()
			if arrived[e.Node] == nil {
				arrived[e.Node] = map[int]int{}
			}
			arrived[e.Node][e.Clock]++
			mu.Unlock()
		}
	})
	stored := func(clock int) int { // pushes of clock every server holds
		mu.Lock()
		defer mu.Unlock()
		n := math.MaxInt
		for i := range servers {
			n = min(n, arrived[fmt.Sprintf("server-%d", i)][clock])
		}
		return n
	}
	opts = append(opts, pstest.Servers(servers), pstest.Workers(workers), pstest.Batch(8), pstest.Chunk(8),
		pstest.Policy(epsp.NewBSP()), pstest.Optimizer(store.Momentum{LR: 0.05, Mu: 0.9}), pstest.Observer(obs), pstest.NoLeakCheck(),
		pstest.Retry(5*time.Second))
	if det {
		opts = append(opts, pstest.Deterministic())
	}
	if restartAt > 0 {
		opts = append(opts, pstest.Durable(ps.DurableConfig{Dir: t.TempDir(), Log: true, CheckpointEvery: 4}))
	}
	c := pstest.NewCluster(t, opts...)
	restarted := make(chan error, 2)
	models := make([]*noisy, workers)
	for w := range models {
		models[w] = &noisy{}
		models[w].onCall = func(n int) {
			clock := n - 1 // one gradient call per clock (Chunk = Batch)
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
			for stored(clock) < pos {
				time.Sleep(time.Millisecond)
			}
			if restartAt > 0 && clock == restartAt {
				switch pos {
				case 1:
					restarted <- c.Servers[1].Checkpoint()
				case workers - 1:
					_, err := c.RestartServer(1, 50*time.Millisecond)
					restarted <- err
				}
			}
		}
	}
	keys, lens := []uint64{0, 1}, []int{32, 32}
	_, err := c.TrainWith(context.Background(), func(w int) ps.Model { return models[w] }, ps.ShardSampler{N: 96, Workers: workers},
		ps.TrainConfig{Keys: keys, Lens: lens, Init: store.Zeros{}, Clocks: clocks})
	if err != nil {
		t.Fatal(err)
	}
	if restartAt > 0 {
		for range 2 {
			if err := <-restarted; err != nil {
				t.Fatal(err)
			}
		}
	}
	out := make([]float32, 64)
	if err := c.NewClient(t).Pull(context.Background(), keys, out, lens); err != nil {
		t.Fatal(err)
	}
	return out
}

// noisy is regression with a fixed pseudo-random term per sample and
// parameter, spanning three binades, added to its gradient: sums of its
// gradients round differently in different orders (regression's own
// gradients of few-bit data often sum exactly).
type noisy struct{ regression }

func (m *noisy) Gradient(params []float32, samples []int, grad []float32) float64 {
	loss := m.regression.Gradient(params, samples, grad)
	for _, s := range samples {
		for j := range grad {
			h := uint64(s)*0x9e3779b97f4a7c15 + uint64(j)*0xbf58476d1ce4e5b9
			h ^= h >> 29
			h *= 0x94d049bb133111eb
			h ^= h >> 32
			grad[j] += float32(int64(h%2001)-1000) / 1000 * float32(uint64(1)<<(h>>60&7))
		}
	}
	return loss
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
// 4-worker BSP run whose server-1 is killed in the middle of clock 3 and
// restarted from its checkpoint (worker-3's buffer of clock 3) and
// request log (the pushes of worker-2 and worker-1, naming their senders)
// ends bit-identical to an uninterrupted run whose pushes came in the
// other order. It fails if the checkpoint or the replay loses the
// senders.
func TestDeterministicBSP_ServerRestart(t *testing.T) {
	forward := func(int) []int { return []int{0, 1, 2, 3} }
	reversed := func(int) []int { return []int{3, 2, 1, 0} }
	want := detRun(t, 4, 2, true, forward, 0, pstest.Durable(ps.DurableConfig{Dir: t.TempDir(), Log: true}))
	got := detRun(t, 4, 2, true, reversed, 3)
	if !bitsEqual(got, want) {
		t.Fatalf("after the restart %v, uninterrupted %v", got, want)
	}
}
