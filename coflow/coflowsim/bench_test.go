package coflowsim

import (
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
)

// BenchmarkReplayFB replays the 526-coflow FB2010 trace (skipped when the
// shared data is absent). CoflowSim itself takes about 15 minutes for SEBF;
// here SEBF and FIFO take about 3 s, DARK 1.6 s. FAIR and PFP recompute at
// every flow completion (706k of them); runPerFlow's lazy flow state keeps
// them to seconds too (they took 350 to 410 s with run's event jump).
//
//	go test -run '^$' -bench ReplayFB -benchtime 1x ./coflow/coflowsim/
func BenchmarkReplayFB(b *testing.B) {
	dir := coflowtest.SharedDir(b, "coflow-benchmark")
	tr := coflowtest.ReadTraceFile(b, filepath.Join(dir, "FB2010-1Hr-150-0.txt"))
	for _, sched := range []string{"SEBF", "FIFO", "DARK", "FAIR", "PFP"} {
		b.Run("sched="+sched, func(b *testing.B) {
			for b.Loop() {
				if _, err := Run(tr, sched, DefaultConfig()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReplaySynthetic is a size ladder on generated traces with an
// FB2010-like mix and load (150 ports, 6.9 s mean inter-arrival).
func BenchmarkReplaySynthetic(b *testing.B) {
	for _, n := range []int{50, 200} {
		cfg := coflow.DefaultSynthConfig()
		cfg.Coflows = n
		cfg.MeanInterArrival = 6900 * time.Millisecond
		tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(1, 1)))
		if err != nil {
			b.Fatal(err)
		}
		b.Run("coflows="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Run(tr, "SEBF", DefaultConfig()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
