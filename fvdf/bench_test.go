package fvdf

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/falconml/falcon/coflow"
)

// BenchmarkReplay replays synthetic FB-like traces under FVDF and SEBF.
func BenchmarkReplay(b *testing.B) {
	for _, n := range []int{50, 200} {
		cfg := coflow.DefaultSynthConfig()
		cfg.Coflows, cfg.Ports = n, 50
		tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(1, 0)))
		if err != nil {
			b.Fatal(err)
		}
		cfs, err := tr.ToCoflows()
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range []string{"fvdf", "sebf"} {
			b.Run(fmt.Sprintf("coflows=%d/%s", n, name), func(b *testing.B) {
				for range b.N {
					if _, err := Run(name, cfs, tr.Ports, ReplayConfig{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
