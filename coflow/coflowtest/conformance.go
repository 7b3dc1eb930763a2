package coflowtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// SuiteOptions configures RunSuite.
type SuiteOptions struct {
	// WorkConserving additionally requires every decision to pass the
	// WorkConserving check.
	WorkConserving bool
	// Seeds is the number of synthetic traces. Zero means 3.
	Seeds int
	// Ports and Coflows size each synthetic trace. Zero means 8 and 30.
	Ports, Coflows int
	// Fabric, if set, replaces the default fabric (Ports ports at
	// coflowsim's rate) — e.g. to give ports cores and codecs.
	Fabric func(ports int) *coflow.Fabric
}

// RunSuite is a conformance suite for coflow schedulers: it replays seeded
// synthetic traces under a fresh scheduler from newSched and checks that
// every decision respects port capacities and cores (and, optionally, work
// conservation), that every coflow finishes with all its bytes delivered,
// and that no coflow sent raw beats its isolated bottleneck time (its
// largest port load divided by the port's capacity; coflows that were
// partly compressed are exempt, since shrinking bytes can beat it).
func RunSuite(t *testing.T, newSched func() coflow.Scheduler, opts SuiteOptions) {
	t.Helper()
	seeds, ports, n := opts.Seeds, opts.Ports, opts.Coflows
	if seeds == 0 {
		seeds = 3
	}
	if ports == 0 {
		ports = 8
	}
	if n == 0 {
		n = 30
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			cfg := coflow.DefaultSynthConfig()
			cfg.Ports, cfg.Coflows, cfg.MaxWidth, cfg.MeanInterArrival = ports, n, ports, 2*time.Second
			tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(uint64(seed), 7)))
			if err != nil {
				t.Fatal(err)
			}
			cfs, err := tr.ToCoflows()
			if err != nil {
				t.Fatal(err)
			}
			fab := tr.Fabric(coflow.CoflowsimBytesPerSec)
			if opts.Fabric != nil {
				fab = opts.Fabric(ports)
			}
			d := Driver{Fabric: fab}
			if opts.WorkConserving {
				d.Checks = []Check{WorkConserving}
			}
			res, err := d.Run(newSched(), cfs)
			if err != nil {
				t.Fatal(err)
			}
			var total float64
			for i := range cfs {
				c := &cfs[i]
				total += c.TotalBytes()
				r := res.Coflows[i]
				if r.Finish < r.Start || r.Start < c.Arrival {
					t.Errorf("coflow %d: arrival %v, start %v, finish %v", c.ID, c.Arrival, r.Start, r.Finish)
				}
				compressed := r.WireBytes < r.Bytes*(1-Tolerance)
				if lb := IsolatedBound(c, fab); !compressed && r.CCT.Seconds() < lb*(1-Tolerance)-1e-9 {
					t.Errorf("coflow %d: CCT %v below its isolated bound %.6fs", c.ID, r.CCT, lb)
				}
			}
			if math.Abs(res.RawBytes-total) > Tolerance*total {
				t.Errorf("delivered %v raw bytes, want %v", res.RawBytes, total)
			}
		})
	}
}

// IsolatedBound is the coflow's bottleneck time alone on an empty fabric,
// in seconds: max over its ports of the bytes it moves through the port
// divided by the port's capacity. No schedule can finish it sooner (without
// compression).
func IsolatedBound(c *coflow.Coflow, fab *coflow.Fabric) float64 {
	in := map[int]float64{}
	out := map[int]float64{}
	for _, f := range c.Flows {
		in[f.Src] += f.Bytes
		out[f.Dst] += f.Bytes
	}
	var g float64
	for p, b := range in {
		g = math.Max(g, b/fab.Ports[p].Ingress)
	}
	for p, b := range out {
		g = math.Max(g, b/fab.Ports[p].Egress)
	}
	return g
}
