package coflow_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// BenchmarkReplayFB replays the 526-coflow, 706k-flow FB2010 trace at
// coflowsim's port rate (skipped when the shared data is absent).
func BenchmarkReplayFB(b *testing.B) {
	tr, cfs := readFB(b)
	for _, name := range []string{"sebf", "sincronia", "dclas"} {
		b.Run("sched="+name, func(b *testing.B) {
			benchRun(b, name, tr, cfs)
		})
	}
}

// BenchmarkSynthetic is a size ladder: 150 ports and 100·k coflows arriving
// every 0.5 s on average (so concurrency, not only length, grows with k).
func BenchmarkSynthetic(b *testing.B) {
	for _, k := range []int{1, 4, 16} {
		cfg := coflow.DefaultSynthConfig()
		cfg.Ports, cfg.Coflows, cfg.MeanInterArrival = 150, 100*k, 500*time.Millisecond
		tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(1, 1)))
		if err != nil {
			b.Fatal(err)
		}
		cfs, err := tr.ToCoflows()
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range []string{"sebf", "fifo", "dclas"} {
			b.Run(fmt.Sprintf("sched=%s/size=%dx", name, k), func(b *testing.B) {
				benchRun(b, name, tr, cfs)
			})
		}
	}
}

func benchRun(b *testing.B, name string, tr *coflow.Trace, cfs []coflow.Coflow) {
	flows := 0
	for i := range cfs {
		flows += len(cfs[i].Flows)
	}
	b.ReportAllocs()
	var res *coflow.Result
	for b.Loop() {
		sched, err := coflow.NewScheduler(name)
		if err != nil {
			b.Fatal(err)
		}
		sim, err := coflow.NewSim(coflow.DefaultConfig(), tr.Fabric(coflow.CoflowsimBytesPerSec), sched)
		if err != nil {
			b.Fatal(err)
		}
		if res, err = sim.Run(cfs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(flows), "flows")
	b.ReportMetric(float64(res.Calls), "calls")
}
