package store

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// detPush is one worker's push of a clock.
type detPush struct {
	sender string
	grad   []float32
	weight float64
}

// detRun accumulates the pushes of each clock in the order perm(clock)
// gives and flushes each clock, on a store of one key of n values; it
// returns the final values.
func detRun(t *testing.T, cfg Config, clocks [][]detPush, order func(c int, ps []detPush) []detPush) []float32 {
	t.Helper()
	n := len(clocks[0][0].grad)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Init([]uint64{7}, []int{n}, Uniform{Lo: -1, Hi: 1, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	for c, ps := range clocks {
		for _, p := range order(c, ps) {
			if err := s.AccumulateFrom(c, p.sender, []uint64{7}, nil, p.grad, p.weight); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Flush(c, 1); err != nil {
			t.Fatal(err)
		}
	}
	v, _ := s.Value(nil, 7)
	return v
}

// detClocks makes clocks clocks of pushes from workers workers, n values
// each, gradients spanning several binades so that float32 sums depend on
// their order.
func detClocks(workers, clocks, n int) [][]detPush {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([][]detPush, clocks)
	for c := range out {
		for w := range workers {
			g := make([]float32, n)
			for i := range g {
				g[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(4))))
			}
			out[c] = append(out[c], detPush{sender: fmt.Sprintf("worker-%d", w), grad: g, weight: float64(16 + r.IntN(48))})
		}
	}
	return out
}

func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// TestDeterministicOrderFree: with Config.Deterministic, 3 and 4 workers'
// pushes accumulated in any order give bit-identical parameters; without
// it the same runs differ (the failure the option removes is real).
func TestDeterministicOrderFree(t *testing.T) {
	for _, workers := range []int{3, 4} {
		for _, opt := range []Optimizer{SGD{LR: 0.1}, Adam{LR: 1e-3}} {
			t.Run(fmt.Sprintf("%dworkers/%s", workers, opt.Name()), func(t *testing.T) {
				clocks := detClocks(workers, 5, 512)
				inOrder := func(_ int, ps []detPush) []detPush { return ps }
				reversed := func(_ int, ps []detPush) []detPush { q := slices.Clone(ps); slices.Reverse(q); return q }
				shuffled := func(seed uint64) func(int, []detPush) []detPush {
					r := rand.New(rand.NewPCG(seed, 9))
					return func(_ int, ps []detPush) []detPush {
						q := slices.Clone(ps)
						r.Shuffle(len(q), func(i, j int) { q[i], q[j] = q[j], q[i] })
						return q
					}
				}
				orders := []func(int, []detPush) []detPush{reversed, shuffled(1), shuffled(2), shuffled(3)}
				det := Config{Optimizer: opt, Deterministic: true}
				want := detRun(t, det, clocks, inOrder)
				for i, o := range orders {
					if got := detRun(t, det, clocks, o); !sameBits(got, want) {
						t.Errorf("deterministic: order %d ends with other bits than in-order", i)
					}
				}
				plain := Config{Optimizer: opt}
				ref := detRun(t, plain, clocks, inOrder)
				differ := false
				for _, o := range orders {
					if !sameBits(detRun(t, plain, clocks, o), ref) {
						differ = true
					}
				}
				if !differ {
					t.Errorf("without Deterministic every order gave the same bits: the test shows nothing")
				}
				// Deterministic sums senders in name order: the same as
				// the plain store fed in that order.
				if !sameBits(want, ref) {
					t.Errorf("deterministic in-order run differs from the plain in-order run")
				}
			})
		}
	}
}
