package straggler_test

import (
	"fmt"
	"time"

	"github.com/falconml/falcon/straggler"
)

// Project a barrier (s = 0) where worker 1 runs at half speed and worker 3
// has already finished its clock.
func ExampleProject() {
	ws := []straggler.WorkerState{
		{Clock: 7, Remaining: 120, Batch: 128, Speed: 256},
		{Clock: 7, Remaining: 120, Batch: 128, Speed: 128},
		{Clock: 7, Remaining: 100, Batch: 128, Speed: 256},
		{Clock: 8, Waiting: true, Batch: 128, Speed: 300},
	}
	snap := straggler.Project(3*time.Second, ws, straggler.ProjectConfig{Staleness: 0})
	fmt.Print(snap)
	fmt.Println("stragglers:", snap.Stragglers(), "pioneers:", snap.Pioneers())
	// Output:
	// projection at 3s (s=0, θ=0.20, lead clock 7, ref lag 430ms)
	// worker clock speed/s    finish     blocked    lag        class
	// 0      7     256.0      469ms      469ms      469ms      normal
	// 1      7     128.0      938ms      0s         938ms      straggler
	// 2      7     256.0      391ms      547ms      391ms      normal
	// 3      8w    300.0      0s         938ms      0s         pioneer
	// stragglers: [1] pioneers: [3]
}

// A heterogeneity model with a persistent straggler and a shared host.
func ExampleHetero() {
	m, _ := straggler.NewHetero(straggler.HeteroConfig{
		NumWorkers: 3, BaseRate: 100,
		Hosts: []int{0, 0, 1}, Cores: []int{4, 4},
		Serial:     []float64{0, 0, 0},
		Persistent: map[int]float64{2: 0.5},
	})
	fmt.Printf("%.0f %.0f\n", m.Rate(0, 2, 0), m.Rate(2, 4, 0))
	// Workers 0 and 1 ask for 4 goroutines each on a 4-core host.
	fmt.Printf("%.0f\n", m.RateAll([]int{4, 4, 4}, 0, nil))
	// Output:
	// 200 200
	// [200 200 200]
}

// The planner hands half of a straggler's remaining tail to an idle pioneer.
func ExamplePlanner() {
	pl, _ := straggler.NewPlanner(straggler.DefaultTransferConfig())
	orders := pl.Plan(
		[]straggler.Giver{{Worker: 1, Clock: 7, Batch: 128, Cursor: 28}},
		[]straggler.Taker{{Worker: 3}},
	)
	fmt.Printf("%+v\n", orders[0])
	a, _ := pl.Resolve(orders[0].ID, true, orders[0].Lo, orders[0].Hi)
	end, _ := pl.Held(1, 7)
	fmt.Printf("worker 1 keeps [0,%d), worker 3 computes [%d,%d)\n", end, a.Lo, a.Hi)
	// Output:
	// {ID:1 From:1 To:3 Clock:7 Lo:78 Hi:128}
	// worker 1 keeps [0,78), worker 3 computes [78,128)
}

// With SplitAll, a straggler's tail is shared among all idle pioneers in
// proportion to their speeds, cut tail-first, so that all finish together.
func ExamplePlanner_splitAll() {
	pl, _ := straggler.NewPlanner(straggler.TransferConfig{SplitAll: true})
	orders := pl.Plan(
		[]straggler.Giver{{Worker: 0, Clock: 2, Batch: 130, Speed: 1}},
		[]straggler.Taker{{Worker: 1, Speed: 4}, {Worker: 2, Speed: 4}, {Worker: 3, Speed: 4}},
	)
	for _, o := range orders {
		fmt.Printf("worker %d takes [%d,%d)\n", o.To, o.Lo, o.Hi)
	}
	// Output:
	// worker 1 takes [90,130)
	// worker 2 takes [50,90)
	// worker 3 takes [10,50)
}

// The controller moves a core from a fast worker to a slow one on the
// same host; a host without a slow worker is left alone.
func ExampleController() {
	ctl, _ := straggler.NewController(straggler.ParallelismConfig{
		Curve: func(int) straggler.Speedup { return straggler.Amdahl{Serial: 0} },
	})
	loads := []straggler.WorkerLoad{
		{Host: 0, P: 2, Speed: 50, Batch: 100},  // 2 s per clock: slow
		{Host: 0, P: 2, Speed: 200, Batch: 100}, // 0.5 s
		{Host: 1, P: 2, Speed: 200, Batch: 100},
		{Host: 1, P: 2, Speed: 200, Batch: 100},
	}
	fmt.Println(ctl.Plan(loads, []int{4, 4}))
	// Output:
	// [3 1 2 2]
}
