package straggler

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestPlanClock(t *testing.T) {
	tests := []struct {
		name string
		ws   []ClockLoad
		want []Piece
	}{
		{"equal", []ClockLoad{{64, 1000}, {64, 1000}, {64, 1000}}, nil},
		{"within margin", []ClockLoad{{64, 1000}, {64, 960}}, nil},
		{"unknown speed left out", []ClockLoad{{64, 0}, {64, 1000}}, nil},
		// T* = 192/(250+1000+1000) = 0.08533 s: the straggler keeps
		// round(250·T*) = 21, takers have room 1000·T* − 64 = 21.33
		// each; tail first, ⌈room⌉ to the first taker with the most room
		{"one straggler", []ClockLoad{{64, 250}, {64, 1000}, {64, 1000}}, []Piece{{0, 1, 42, 64}, {0, 2, 21, 42}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanClock(tt.ws, PlanConfig{})
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPlanClock_Properties: over random speeds and batches, each giver's
// pieces are adjacent and end at its batch end, givers never take, takers
// never exceed T*·r by more than one sample, and the longest projected
// clock never gets longer.
func TestPlanClock_Properties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		n := 1 + rng.IntN(16)
		ws := make([]ClockLoad, n)
		for i := range ws {
			ws[i] = ClockLoad{Batch: 1 + rng.IntN(128), Speed: 100 + 4000*rng.Float64()}
			if rng.IntN(10) == 0 {
				ws[i].Speed = 0
			}
		}
		ps := PlanClock(ws, PlanConfig{MinPiece: 1 + rng.IntN(3)})
		load := make([]float64, n)
		for i, w := range ws {
			load[i] = float64(w.Batch)
		}
		giving := map[int][]Piece{}
		taking := map[int]bool{}
		for _, p := range ps {
			if p.From == p.To || p.Lo < 0 || p.Lo >= p.Hi || p.Hi > ws[p.From].Batch {
				t.Fatalf("iter %d: bad piece %+v", iter, p)
			}
			giving[p.From] = append(giving[p.From], p)
			taking[p.To] = true
			load[p.From] -= float64(p.Hi - p.Lo)
			load[p.To] += float64(p.Hi - p.Lo)
		}
		for g, gp := range giving {
			if taking[g] {
				t.Fatalf("iter %d: worker %d gives and takes", iter, g)
			}
			hi := ws[g].Batch
			for _, p := range gp { // tail first
				if p.Hi != hi {
					t.Fatalf("iter %d: giver %d pieces %v not tail-first adjacent", iter, g, gp)
				}
				hi = p.Lo
			}
		}
		before, after := 0.0, 0.0
		for i, w := range ws {
			if w.Speed <= 0 {
				continue
			}
			before = math.Max(before, float64(w.Batch)/w.Speed)
			after = math.Max(after, load[i]/w.Speed)
		}
		if after > before+1e-12 {
			t.Fatalf("iter %d: longest clock %v -> %v", iter, before, after)
		}
	}
}

func TestThroughputController(t *testing.T) {
	amdahl := func(int) Speedup { return Amdahl{Serial: 0.05} }
	sp := func(p float64) float64 { return Amdahl{Serial: 0.05}.Speedup(p) }
	t.Run("equal workers keep their cores", func(t *testing.T) {
		c, _ := NewThroughputController(ThroughputConfig{Curve: amdahl, Agree: 1})
		ws := []WorkerLoad{{Host: 0, P: 2, Speed: 1000 * sp(2)}, {Host: 0, P: 2, Speed: 1000 * sp(2)}}
		if got := c.Plan(ws, []int{4}); !slices.Equal(got, []int{2, 2}) {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("idle cores filled", func(t *testing.T) {
		c, _ := NewThroughputController(ThroughputConfig{Curve: amdahl, Agree: 1})
		ws := []WorkerLoad{{Host: 0, P: 2, Speed: 1000 * sp(2)}, {Host: 0, P: 2, Speed: 1000 * sp(2)}}
		if got := c.Plan(ws, []int{8}); !slices.Equal(got, []int{4, 4}) {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("cores go to the faster per core, not the slowest", func(t *testing.T) {
		c, _ := NewThroughputController(ThroughputConfig{Curve: amdahl, Agree: 1})
		// worker 0 is 4x slower per core: equalising speeds would feed it
		ws := []WorkerLoad{{Host: 0, P: 4, Speed: 250 * sp(4)}, {Host: 0, P: 4, Speed: 1000 * sp(4)}}
		got := c.Plan(ws, []int{8})
		if !(got[0] < 4 && got[1] > 4 && got[0]+got[1] == 8) {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("needs agreement", func(t *testing.T) {
		c, _ := NewThroughputController(ThroughputConfig{Curve: amdahl}) // Agree 3
		ws := []WorkerLoad{{Host: 0, P: 1, Speed: 1000}, {Host: 0, P: 1, Speed: 1000}}
		for round := 1; round <= 3; round++ {
			got := c.Plan(ws, []int{4})
			changed := !slices.Equal(got, []int{1, 1})
			if changed != (round == 3) {
				t.Fatalf("round %d: %v", round, got)
			}
		}
		c.Plan(ws, []int{4})
		c.Hold()
		if got := c.Plan(ws, []int{4}); !slices.Equal(got, []int{1, 1}) {
			t.Fatalf("after Hold: %v", got)
		}
	})
	t.Run("small gain ignored", func(t *testing.T) {
		c, _ := NewThroughputController(ThroughputConfig{Curve: amdahl, Agree: 1, MinGain: 0.2})
		ws := []WorkerLoad{{Host: 0, P: 3, Speed: 900 * sp(3)}, {Host: 0, P: 3, Speed: 1000 * sp(3)}}
		if got := c.Plan(ws, []int{6}); !slices.Equal(got, []int{3, 3}) {
			t.Fatalf("got %v", got)
		}
	})
}
