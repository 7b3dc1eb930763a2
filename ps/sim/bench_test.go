package sim

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/straggler"
)

// BenchmarkRun measures the simulator's own cost per simulated second of a
// cluster training softmax regression on synthetic data, for growing
// cluster sizes; events/op reports the discrete events run.
func BenchmarkRun(b *testing.B) {
	train, test, err := model.Synthetic(model.SyntheticConfig{Train: 4000, Test: 200, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{4, 16, 64} {
		for _, pol := range []string{"bsp", "asp"} {
			b.Run(fmt.Sprintf("workers=%d/%s", n, pol), func(b *testing.B) {
				hc := straggler.DefaultHeteroConfig(n)
				hc.Transient = straggler.TransientConfig{Prob: 0.2, Period: time.Second, Duration: 300 * time.Millisecond, Factor: 0.25}
				sp, err := straggler.NewHetero(hc)
				if err != nil {
					b.Fatal(err)
				}
				c := DefaultConfig()
				c.Workers, c.Batch, c.Duration = n, 32, time.Second
				var events uint64
				for b.Loop() {
					var p epsp.Policy = epsp.NewBSP()
					if pol == "asp" {
						p = epsp.NewASP()
					}
					s, err := New(c, Job{Model: model.NewSoftmax(train.D, train.Classes), Train: train, Test: test, Speed: sp, Policy: p})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := s.Run(); err != nil {
						b.Fatal(err)
					}
					events += s.q.Executed()
				}
				b.ReportMetric(float64(events)/float64(b.N), "events/op")
			})
		}
	}
}

// BenchmarkCNNGoroutines measures the speed-up of the CNN's real gradient
// math with p goroutines on this machine: p clones of LeNet-5 each compute
// the gradient of 16 samples at once (the live runtime's chunked claims);
// samples/s is the throughput. It is the measurement behind
// DefaultContention (curve.go).
func BenchmarkCNNGoroutines(b *testing.B) {
	train, _, err := model.Synthetic(model.SyntheticConfig{Train: 512, Test: 10, Dim: 784, Classes: 10, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []int{1, 2, 3, 4} {
		b.Run(fmt.Sprintf("p=%d", p), func(b *testing.B) {
			ms := make([]model.Model, p)
			grads := make([][]float32, p)
			var params []float32
			for i := range ms {
				m, err := model.NewCNN(model.DefaultCNNConfig())
				if err != nil {
					b.Fatal(err)
				}
				ms[i] = m
				grads[i] = make([]float32, m.NumParams())
				params = make([]float32, m.NumParams())
			}
			idx := make([]int, 16)
			for i := range idx {
				idx[i] = i
			}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				var wg sync.WaitGroup
				for i := range p {
					wg.Go(func() { ms[i].LossGrad(params, train, idx, grads[i]) })
				}
				wg.Wait()
			}
			b.ReportMetric(float64(b.N*p*len(idx))/time.Since(start).Seconds(), "samples/s")
		})
	}
}
