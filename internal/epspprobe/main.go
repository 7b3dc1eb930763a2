// Command epspprobe measures the throughput side of the synchronization
// policies in the simulator: clocks completed in a fixed virtual time and
// the blocked fraction, per suite scenario and seed, on a synthetic model
// (throughput does not depend on what is trained). It is a development
// tool; the convergence study is cmd/falcon-study.
//
//	go run ./internal/epspprobe -seeds 3
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/ps/sim"
	"github.com/falconml/falcon/straggler"
)

type spec struct {
	name string
	mk   func(topo straggler.Model) (epsp.Policy, error)
}

func main() {
	seeds := flag.Int("seeds", 3, "seeds 1..n")
	scen := flag.String("scenario", "", "comma-separated scenario names (default all)")
	dur := flag.Duration("duration", 5*time.Second, "virtual time per run")
	flag.Parse()
	specs := []spec{
		{"bsp", func(straggler.Model) (epsp.Policy, error) { return epsp.NewBSP(), nil }},
		{"lb-bsp", func(straggler.Model) (epsp.Policy, error) { return epsp.NewLBBSP(epsp.DefaultLBBSPConfig()) }},
		{"epsp-v1", func(topo straggler.Model) (epsp.Policy, error) {
			c := epsp.DefaultEPSPConfig()
			c.Topology = topo
			return epsp.NewEPSP(c)
		}},
		{"epsp-v2-noelastic", func(straggler.Model) (epsp.Policy, error) { return epsp.NewEPSPv2(epsp.DefaultEPSPv2Config()) }},
		{"epsp-v2", func(topo straggler.Model) (epsp.Policy, error) {
			c := epsp.DefaultEPSPv2Config()
			c.Elastic, c.Topology = true, topo
			return epsp.NewEPSPv2(c)
		}},
	}
	train, test, err := model.Synthetic(model.SyntheticConfig{Train: 4000, Test: 200, Seed: 2})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%-12s %-18s %8s %8s %8s %6s\n", "scenario", "policy", "clocks", "blocked", "assigned", "pchg")
	for _, sc0 := range sim.StudyScenarios(1) {
		if *scen != "" && !strings.Contains(","+*scen+",", ","+sc0.Name+",") {
			continue
		}
		for _, sp := range specs {
			var clocks, blocked, assigned, pchg float64
			for seed := 1; seed <= *seeds; seed++ {
				var sc sim.Scenario
				for _, x := range sim.StudyScenarios(uint64(seed)) {
					if x.Name == sc0.Name {
						sc = x
					}
				}
				speed, err := sc.Model()
				if err != nil {
					log.Fatal(err)
				}
				pol, err := sp.mk(speed)
				if err != nil {
					log.Fatal(err)
				}
				c := sim.DefaultConfig()
				c.Workers = sc.NumWorkers()
				c.Batch = 64
				c.Chunk = 2
				c.ComputeNoise = 0.05
				c.Network.Latency = 600 * time.Microsecond
				c.Parallelism = sc.Parallelism
				c.Duration = *dur
				c.EvalEvery = *dur
				c.Seed = uint64(seed)
				r, err := sim.Run(c, sim.Job{Model: model.NewSoftmax(train.D, train.Classes), Train: train, Test: test, Speed: speed, Policy: pol})
				if err != nil {
					fmt.Fprintln(os.Stderr, sc.Name, sp.name, err)
					continue
				}
				n := 0
				for _, w := range r.Workers {
					n += w.Clocks
				}
				clocks += float64(n)
				blocked += r.BlockedFraction()
				assigned += float64(r.Stats.SamplesAssigned + r.Stats.SamplesTransferred)
				pchg += float64(r.Stats.ParallelismChanges)
			}
			k := float64(*seeds)
			fmt.Printf("%-12s %-18s %8.0f %8.3f %8.0f %6.0f\n", sc0.Name, sp.name, clocks/k, blocked/k, assigned/k, pchg/k)
		}
	}
}
