package sim

import (
	"fmt"
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
