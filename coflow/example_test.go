package coflow_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/falconml/falcon/coflow"
)

// Example_simulate replays two coflows on a 3-port fabric of 1 MB/s under
// SEBF and FIFO.
func Example_simulate() {
	cfs := []coflow.Coflow{
		{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 2, Bytes: 4e6}, {Src: 1, Dst: 2, Bytes: 4e6}}},
		{ID: 2, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 2e6}}},
	}
	for _, name := range []string{"sebf", "fifo"} {
		sched, _ := coflow.NewScheduler(name)
		sim, err := coflow.NewSim(coflow.DefaultConfig(), coflow.NewFabric(3, 1e6), sched)
		if err != nil {
			panic(err)
		}
		res, err := sim.Run(cfs)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: C1 %v, C2 %v, average %v\n", name, res.Coflows[0].CCT, res.Coflows[1].CCT, coflow.Summarize(res).Mean)
	}
	// Output:
	// sebf: C1 8s, C2 2s, average 5s
	// fifo: C1 8s, C2 4s, average 6s
}

// ExampleReadTrace parses the coflow-benchmark format: coflow 2 arrives at
// 10.833 s with mappers on ports 104 and 132 and one reducer on port 140
// receiving 48 MiB, split equally over the mappers.
func ExampleReadTrace() {
	tr, err := coflow.ReadTrace(strings.NewReader("150 1\n2 10833 2 104 132 1 140:48.0\n"))
	if err != nil {
		panic(err)
	}
	cfs, _ := tr.ToCoflows()
	for _, f := range cfs[0].Flows {
		fmt.Printf("%d -> %d: %.0f MiB at %v\n", f.Src, f.Dst, f.Bytes/coflow.MiB, cfs[0].Arrival)
	}
	// Output:
	// 104 -> 140: 24 MiB at 10.833s
	// 132 -> 140: 24 MiB at 10.833s
}

// ExampleSynthetic generates a small FB2010-like trace from a seed and
// replays it under SEBF with compression-capable ports.
func ExampleSynthetic() {
	cfg := coflow.DefaultSynthConfig()
	cfg.Ports, cfg.Coflows, cfg.MeanInterArrival = 20, 50, 500*time.Millisecond
	tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		panic(err)
	}
	cfs, _ := tr.ToCoflows()
	sebf, _ := coflow.NewSEBF(coflow.DefaultOrderedConfig())
	sim, _ := coflow.NewSim(coflow.DefaultConfig(), tr.Fabric(coflow.GigabitBytesPerSec), sebf)
	res, err := sim.Run(cfs)
	if err != nil {
		panic(err)
	}
	s := coflow.Summarize(res)
	fmt.Printf("%d coflows, traffic reduction %.1f%%, median CCT ≤ mean: %v\n", s.N, 100*res.TrafficReduction(), s.Median <= s.Mean)
	// Output:
	// 50 coflows, traffic reduction 0.0%, median CCT ≤ mean: true
}
