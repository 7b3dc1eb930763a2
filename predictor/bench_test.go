package predictor

import (
	"fmt"
	"testing"
	"time"

	"github.com/falconml/falcon/internal/cputime"
)

// reportCPU reports the process CPU time per op since c0 as "cpu-ns/op"
// (0 where unsupported). It is the better figure on a loaded machine.
func reportCPU(b *testing.B, c0 time.Duration) {
	if c := cputime.Process(); c > 0 && b.N > 0 {
		b.ReportMetric(float64(c-c0)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkRNN_Predict measures one prediction: Observe (one network step
// and the feature update, online fine-tuning off) followed by Predict.
// The goal is < 5 µs at hidden 16.
func BenchmarkRNN_Predict(b *testing.B) {
	s := regimeSeries(1024, 1)
	for _, cell := range []Cell{CellLSTM, CellGRU} {
		for _, h := range []int{8, 16, 32} {
			b.Run(fmt.Sprintf("cell=%s/hidden=%d", cell, h), func(b *testing.B) {
				p, err := NewRNN(Config{RNN: RNNConfig{Cell: cell, Hidden: h, OnlineSteps: -1, WarmUp: 1}})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				var sink float64
				i := 0
				c0 := cputime.Process()
				for b.Loop() {
					p.Observe(s[i&1023])
					sink += p.Predict().CompressSpeed
					i++
				}
				reportCPU(b, c0)
				_ = sink
			})
		}
	}
}

// BenchmarkRNN_Update measures one online update (FineTune: one Adam step
// of truncated BPTT over the window, plus recomputing the state). The goal
// is < 100 µs at hidden 16, window 16.
func BenchmarkRNN_Update(b *testing.B) {
	s := regimeSeries(64, 1)
	for _, cell := range []Cell{CellLSTM, CellGRU} {
		for _, h := range []int{8, 16, 32} {
			for _, w := range []int{8, 16, 32} {
				b.Run(fmt.Sprintf("cell=%s/hidden=%d/window=%d", cell, h, w), func(b *testing.B) {
					p, err := NewRNN(Config{RNN: RNNConfig{Cell: cell, Hidden: h, Window: w, OnlineSteps: -1}})
					if err != nil {
						b.Fatal(err)
					}
					for _, m := range s {
						p.Observe(m)
					}
					b.ReportAllocs()
					c0 := cputime.Process()
					for b.Loop() {
						p.FineTune()
					}
					reportCPU(b, c0)
				})
			}
		}
	}
}

// BenchmarkBaselines measures Observe+Predict of the baselines for scale
// (AR's figure includes its refit every ARRefit observations, amortised).
func BenchmarkBaselines(b *testing.B) {
	s := regimeSeries(1024, 1)
	for _, name := range []string{NameLastValue, NameEWMA, NameAR} {
		b.Run("predictor="+name, func(b *testing.B) {
			p, err := New(name, Config{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var sink float64
			i := 0
			c0 := cputime.Process()
			for b.Loop() {
				p.Observe(s[i&1023])
				sink += p.Predict().CompressSpeed
				i++
			}
			reportCPU(b, c0)
			_ = sink
		})
	}
}
