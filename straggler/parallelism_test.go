package straggler

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestController_AllEqualChangesNothing(t *testing.T) {
	c, _ := NewController(DefaultParallelismConfig())
	ws := []WorkerLoad{{0, 2, 200, 100}, {0, 2, 200, 100}, {1, 2, 200, 100}, {1, 2, 200, 100}}
	// Even with spare cores on both hosts: balance, not maximise.
	got := c.Plan(ws, []int{6, 4})
	if !slices.Equal(got, []int{2, 2, 2, 2}) {
		t.Fatalf("Plan = %v, want unchanged", got)
	}
}

// Reference: falcon.md §2 [reconstruction]: stragglers gain threads,
// pioneers may release them, within a host's budget.
func TestController_MovesCoreToStraggler(t *testing.T) {
	lin := func(int) Speedup { return Amdahl{0} }
	c, _ := NewController(ParallelismConfig{PMin: 1, DeadBand: 0.1, Curve: lin})
	// Host 0: worker 0 is a quarter as fast per core as worker 1; both at
	// p=2, 4 cores. T0 = 100/(25·2) = 2 s, T1 = 0.5 s, host 1's T = 0.5 s.
	ws := []WorkerLoad{{0, 2, 50, 100}, {0, 2, 200, 100}, {1, 2, 200, 100}}
	got := c.Plan(ws, []int{4, 2})
	// One core moves: T0(3) = 1.33 s, T1(1) = 1 s < 2 s. Worker 1 is then
	// at PMin, so it stops at [3 1].
	if !slices.Equal(got, []int{3, 1, 2}) {
		t.Fatalf("Plan = %v, want [3 1 2]", got)
	}
	// The free core goes first (T0(3) = 1.33 s), then worker 1 still
	// gives one since T1(1) = 1 s < 1.33 s: [4 1], both at 1 s.
	got = c.Plan(ws, []int{5, 2})
	if !slices.Equal(got, []int{4, 1, 2}) {
		t.Fatalf("with a free core Plan = %v, want [4 1 2]", got)
	}
}

func TestController_BudgetAndBounds(t *testing.T) {
	c, _ := NewController(ParallelismConfig{PMin: 1, PMax: 3})
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		n := 1 + rng.IntN(6)
		nh := 1 + rng.IntN(3)
		cores := make([]int, nh)
		for h := range cores {
			cores[h] = 1 + rng.IntN(8)
		}
		ws := make([]WorkerLoad, n)
		for i := range ws {
			ws[i] = WorkerLoad{Host: rng.IntN(nh), P: 1 + rng.IntN(4), Speed: 10 + 100*rng.Float64(), Batch: 64}
		}
		got := c.Plan(ws, cores)
		used := make([]int, nh)
		for i, p := range got {
			used[ws[i].Host] += p
			if p < 1 || p > 3 {
				t.Fatalf("p=%d outside [1,3]", p)
			}
		}
		for h := range used {
			cnt := 0
			for _, w := range ws {
				if w.Host == h {
					cnt++
				}
			}
			if used[h] > max(cores[h], cnt) { // pMin=1 per worker may exceed a tiny host
				t.Fatalf("host %d uses %d of %d cores: %v on %v", h, used[h], cores[h], got, ws)
			}
		}
	}
}

// A closed loop against the model: apply the plan, measure the speeds the
// model gives, plan again. The controller must settle (no oscillation)
// and the slowest clock time must not get worse.
func TestController_SettlesAgainstModel(t *testing.T) {
	m, _ := NewHetero(HeteroConfig{
		NumWorkers: 4, BaseRate: 100, Speed: []float64{0.4, 1, 1, 1},
		Hosts: []int{0, 0, 1, 1}, Cores: []int{8, 8},
	})
	c, _ := NewController(ParallelismConfig{Curve: func(w int) Speedup { return m.Curve(w) }})
	ps := []int{4, 4, 4, 4}
	worst := func(ps []int) float64 {
		r := m.RateAll(ps, 0, nil)
		w := 0.0
		for i := range r {
			w = max(w, 100/r[i])
		}
		return w
	}
	start := worst(ps)
	var hist [][]int
	for range 10 {
		r := m.RateAll(ps, 0, nil)
		ws := make([]WorkerLoad, 4)
		for i := range ws {
			ws[i] = WorkerLoad{Host: m.Host(i), P: ps[i], Speed: r[i], Batch: 100}
		}
		ps = c.Plan(ws, []int{8, 8})
		hist = append(hist, ps)
	}
	if !slices.Equal(hist[8], hist[9]) || !slices.Equal(hist[7], hist[9]) {
		t.Fatalf("does not settle: %v", hist)
	}
	if end := worst(ps); end >= start {
		t.Fatalf("slowest clock %v s -> %v s, want shorter (plan %v)", start, end, ps)
	}
	if ps[0] <= 4 || ps[2] != 4 || ps[3] != 4 {
		t.Fatalf("plan %v: the slow worker 0 should gain from worker 1 only", ps)
	}
	_ = time.Second
}
