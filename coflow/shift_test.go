package coflow_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// shifted returns a copy of cfs with every arrival moved by d.
func shifted(cfs []coflow.Coflow, d time.Duration) []coflow.Coflow {
	out := make([]coflow.Coflow, len(cfs))
	for i, c := range cfs {
		c.Flows = append([]coflow.Flow(nil), c.Flows...)
		c.Arrival += d
		out[i] = c
	}
	return out
}

// TestSim_TimeShiftInvariance: moving every arrival by k·T, T the starvation
// guard's period, must leave every coflow's CCT unchanged within 1e-6
// relative, for every built-in scheduler (with and without the guard, and
// rescheduling on every flow completion). Anything else is simulator noise
// that would blur comparisons.
func TestSim_TimeShiftInvariance(t *testing.T) {
	cfg := coflow.DefaultSynthConfig()
	cfg.Coflows, cfg.Ports = 60, 30
	tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(11, 0)))
	if err != nil {
		t.Fatal(err)
	}
	cfs, err := tr.ToCoflows()
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfs {
		for j := range cfs[i].Flows {
			cfs[i].Flows[j].Bytes = min(cfs[i].Flows[j].Bytes, 256*coflow.MiB)
		}
	}
	const T = 10 * time.Second
	scheds := map[string]func() (coflow.Scheduler, error){}
	for _, n := range coflow.SchedulerNames() {
		scheds[n] = func() (coflow.Scheduler, error) { return coflow.NewScheduler(n) }
	}
	scheds["sebf-guard"] = func() (coflow.Scheduler, error) {
		return coflow.NewSEBF(coflow.OrderedConfig{StarvationPeriod: T, StarvationWindow: T / 50})
	}
	scheds["sebf-every-flow"] = func() (coflow.Scheduler, error) {
		return coflow.NewSEBF(coflow.OrderedConfig{OnFlowCompletion: true})
	}
	for name, mk := range scheds {
		t.Run(name, func(t *testing.T) {
			var base []time.Duration
			for _, k := range []int{0, 1, 100, 1000} {
				s, err := mk()
				if err != nil {
					t.Fatal(err)
				}
				sim, err := coflow.NewSim(coflow.DefaultConfig(), tr.Fabric(coflow.GigabitBytesPerSec), s)
				if err != nil {
					t.Fatal(err)
				}
				res, err := sim.Run(shifted(cfs, time.Duration(k)*T))
				if err != nil {
					t.Fatal(err)
				}
				var got []time.Duration
				for _, c := range res.Coflows {
					got = append(got, c.CCT)
				}
				if k == 0 {
					base = got
					continue
				}
				for i := range got {
					a, b := got[i].Seconds(), base[i].Seconds()
					if math.Abs(a-b) > 1e-6*math.Max(a, b) {
						t.Fatalf("shift %d·T: coflow %d CCT %v, unshifted %v", k, i, got[i], base[i])
					}
				}
			}
		})
	}
}
