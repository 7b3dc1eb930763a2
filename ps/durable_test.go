package ps_test

import (
	"context"
	"errors"
	"math"
	"os"
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
)

// regression is least squares on synthetic data: sample s has features
// x_j = ((7s+3j) mod 11)/11 − ½ and target Σ_j x_j·(j−1). Its gradient
// depends on the parameters, so optimizer state and order matter.
type regression struct {
	onCall func(n int) // called before every Gradient with its 1-based count
	calls  atomic.Int64
}

func (m *regression) Gradient(params []float32, samples []int, grad []float32) float64 {
	if m.onCall != nil {
		m.onCall(int(m.calls.Add(1)))
	}
	var loss float64
	x := make([]float32, len(params))
	for _, s := range samples {
		var y, p float32
		for j := range x {
			x[j] = float32((7*s+3*j)%11)/11 - 0.5
			y += x[j] * float32(j-1)
			p += params[j] * x[j]
		}
		r := p - y
		for j := range x {
			grad[j] += r * x[j]
		}
		loss += float64(r * r)
	}
	return loss
}

// durableRun trains 2 workers for clocks clocks of BSP with Adam over two
// keys, one on each of 2 durable servers, and returns the final
// parameters and the samples each server applied (its EvApplied weights).
// restartAt, if > 0, kills server-1 as kill -9 would when worker 0 starts
// its restartAt-th chunk and starts it again from its files 50 ms later.
func durableRun(t *testing.T, clocks, restartAt int) ([]float32, map[string]int) {
	var mu sync.Mutex
	applied := map[string]int{}
	obs := event.Func(func(e event.Event) {
		if e.Kind == event.Applied {
			mu.Lock()
			applied[e.Node] += e.Samples
			mu.Unlock()
		}
	})
	c := pstest.NewCluster(t, pstest.Servers(2), pstest.Workers(2), pstest.Batch(8), pstest.Chunk(4), pstest.Policy(epsp.NewBSP()),
		pstest.Optimizer(store.Adam{LR: 0.05}), pstest.Observer(obs), pstest.NoLeakCheck(),
		pstest.Durable(ps.DurableConfig{Dir: t.TempDir(), Log: true, CheckpointEvery: 3}), pstest.Retry(5*time.Second))
	restarted := make(chan error, 1)
	models := []*regression{{}, {}}
	if restartAt > 0 {
		models[0].onCall = func(n int) {
			if n == restartAt {
				go func() {
					s, err := c.RestartServer(1, 50*time.Millisecond)
					if err == nil {
						var steps int64
						s.View(func(st *store.Store) { steps = st.Steps(1) })
						if steps == 0 {
							err = errors.New("restarted server-1 holds no steps: nothing restored")
						}
					}
					restarted <- err
				}()
			}
		}
	}
	keys, lens := []uint64{0, 1}, []int{3, 3} // one key on each server (Modulo)
	_, err := c.TrainWith(context.Background(), func(w int) ps.Model { return models[w] }, ps.ShardSampler{N: 64, Workers: 2},
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
	mu.Lock()
	defer mu.Unlock()
	return out, applied
}

// TestDurable_ServerRestartBitIdentical: a BSP run whose server is killed
// in the middle of a clock and restarted from its checkpoint and request
// log ends with parameters bit-identical to the run without the fault,
// and every server applied every sample exactly once (the workers' resent
// pushes were recognised by their request ids).
func TestDurable_ServerRestartBitIdentical(t *testing.T) {
	const clocks = 8
	want, wantApplied := durableRun(t, clocks, 0)
	got, gotApplied := durableRun(t, clocks, 9) // chunk 9 of worker 0: its clock 4
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("param %d: %v after the restart, %v without (all: %v vs %v)", i, got[i], want[i], got, want)
		}
	}
	for _, srv := range []string{"server-0", "server-1"} {
		if gotApplied[srv] != 2*clocks*8 || wantApplied[srv] != 2*clocks*8 {
			t.Errorf("%s applied %d samples with the restart, %d without; want %d", srv, gotApplied[srv], wantApplied[srv], 2*clocks*8)
		}
	}
}

// TestDurable_CorruptCheckpointRefused: a server whose checkpoint file is
// damaged does not start (it would serve wrong values); the error names
// the file.
func TestDurable_CorruptCheckpointRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := ps.DefaultServerConfig()
	cfg.Durable = ps.DurableConfig{Dir: dir}
	s, err := ps.NewServer("server-0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "server-0.ckpt")
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 4
	os.WriteFile(path, b, 0o644)
	_, err = ps.NewServer("server-0", cfg)
	if !errors.Is(err, store.ErrCorruptCheckpoint) || !strings.Contains(err.Error(), "server-0.ckpt") {
		t.Fatalf("err %v, want ErrCorruptCheckpoint naming the file", err)
	}
}
