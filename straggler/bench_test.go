package straggler

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func benchStates(n int) []WorkerState {
	rng := rand.New(rand.NewPCG(1, 1))
	ws := make([]WorkerState, n)
	for i := range ws {
		ws[i] = WorkerState{Clock: 10 + rng.IntN(3), Waiting: rng.IntN(4) == 0, Remaining: rng.IntN(128), Batch: 128, Speed: 100 + 900*rng.Float64()}
	}
	return ws
}

func BenchmarkProject(b *testing.B) {
	for _, n := range []int{16, 64, 256} {
		ws := benchStates(n)
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			for b.Loop() {
				Project(time.Second, ws, ProjectConfig{Staleness: 2})
			}
		})
	}
}

func BenchmarkController_Plan(b *testing.B) {
	c, _ := NewController(DefaultParallelismConfig())
	for _, n := range []int{16, 64, 256} {
		rng := rand.New(rand.NewPCG(2, 2))
		ws := make([]WorkerLoad, n)
		cores := make([]int, n/4)
		for h := range cores {
			cores[h] = 16
		}
		for i := range ws {
			ws[i] = WorkerLoad{Host: i / 4, P: 4, Speed: 100 + 900*rng.Float64(), Batch: 128}
		}
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			for b.Loop() {
				c.Plan(ws, cores)
			}
		})
	}
}

func BenchmarkPlanner_Plan(b *testing.B) {
	for _, n := range []int{16, 64, 256} {
		gs := make([]Giver, n/2)
		ts := make([]Taker, n/2)
		for i := range gs {
			gs[i] = Giver{Worker: i, Batch: 128, Cursor: i % 64, Speed: float64(100 + i)}
			ts[i] = Taker{Worker: n/2 + i, Speed: 500}
		}
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			for b.Loop() {
				p, _ := NewPlanner(DefaultTransferConfig())
				p.Plan(gs, ts)
			}
		})
	}
}
