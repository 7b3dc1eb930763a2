package sim_test

import (
	"fmt"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/ps/sim"
	"github.com/falconml/falcon/straggler"
)

// Example simulates four workers, one of them four times slower, under
// BSP and under ASP: BSP keeps every worker in lockstep (the fast ones
// wait), ASP lets the fast ones run ahead.
func Example() {
	train, test, err := model.Synthetic(model.SyntheticConfig{Train: 2000, Test: 500, Seed: 1})
	if err != nil {
		panic(err)
	}
	hc := straggler.DefaultHeteroConfig(4)
	hc.Speed = []float64{1, 1, 1, 0.25}
	speed, err := straggler.NewHetero(hc)
	if err != nil {
		panic(err)
	}
	cfg := sim.DefaultConfig()
	cfg.Workers = 4
	cfg.Batch = 16
	cfg.Duration = 2 * time.Second
	cfg.Target = 0.6
	for _, pol := range []epsp.Policy{epsp.NewBSP(), epsp.NewASP()} {
		res, err := sim.Run(cfg, sim.Job{
			Model: model.NewSoftmax(train.D, train.Classes), Train: train, Test: test,
			Speed: speed, Policy: pol,
		})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: clocks fast=%d slow=%d, fast worker blocked %.0f%%, reached target: %v\n",
			pol.Name(), res.Workers[0].Clocks, res.Workers[3].Clocks,
			100*res.Workers[0].Blocked.Seconds()/res.End.Seconds(), res.Reached)
	}
	// Output:
	// bsp: clocks fast=31 slow=31, fast worker blocked 74%, reached target: true
	// asp: clocks fast=123 slow=31, fast worker blocked 0%, reached target: true
}
