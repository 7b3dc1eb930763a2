package sim

import (
	"testing"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/straggler"
)

func epspV2(elastic bool) func(straggler.Model) (epsp.Policy, error) {
	return epspV2With(elastic, false)
}

func epspV2With(elastic, noResidual bool) func(straggler.Model) (epsp.Policy, error) {
	return func(topo straggler.Model) (epsp.Policy, error) {
		c := epsp.DefaultEPSPv2Config()
		if elastic {
			c.Elastic, c.Topology = true, topo
		}
		c.NoResidual = noResidual
		return epsp.NewEPSPv2(c)
	}
}

// TestRun_EPSPv2 runs EPSP v2 with a persistent straggler: every sample of
// every clock is counted exactly once (the simulator and the coordinator
// check it on every push and clock), the straggler gives at release and
// takes nothing, planning sends no message of its own (without residual
// transfers there is no transfer order at all; with them, few), and
// blocking falls well below BSP's.
func TestRun_EPSPv2(t *testing.T) {
	for _, elastic := range []bool{false, true} {
		cfg, job := suiteJob(t, true, epspV2With(elastic, true))
		cfg.ComputeNoise = 0.05
		r, err := Run(cfg, job)
		if err != nil {
			t.Fatal(err)
		}
		cfgB, jobB := suiteJob(t, true, plain(epsp.NewBSP()))
		cfgB.ComputeNoise = 0.05
		b, err := Run(cfgB, jobB)
		if err != nil {
			t.Fatal(err)
		}
		if r.Stats.Assignments == 0 || r.Workers[0].Given == 0 || r.Workers[0].Taken != 0 {
			t.Errorf("elastic=%v: %d assignments, straggler gave %d took %d", elastic, r.Stats.Assignments, r.Workers[0].Given, r.Workers[0].Taken)
		}
		if r.Stats.TransfersOrdered != 0 {
			t.Errorf("elastic=%v: %d transfer orders without residual transfers", elastic, r.Stats.TransfersOrdered)
		}
		cfgR, jobR := suiteJob(t, true, epspV2(elastic))
		cfgR.ComputeNoise = 0.05
		rr, err := Run(cfgR, jobR)
		if err != nil {
			t.Fatal(err)
		}
		if rr.Stats.Assignments == 0 || 10*rr.Stats.TransfersOrdered > rr.Stats.Assignments {
			t.Errorf("elastic=%v, residual: %d transfer orders for %d assignments", elastic, rr.Stats.TransfersOrdered, rr.Stats.Assignments)
		}
		if r.BlockedFraction() >= b.BlockedFraction()/2 {
			t.Errorf("elastic=%v: blocked %.3f, BSP %.3f", elastic, r.BlockedFraction(), b.BlockedFraction())
		}
		if r.FinalAccuracy < 0.5 {
			t.Errorf("elastic=%v: final accuracy %.3f", elastic, r.FinalAccuracy)
		}
		t.Logf("elastic=%v: clocks %d vs BSP %d, blocked %.3f vs %.3f, assigned %d samples, parallelism changes %d",
			elastic, r.Workers[1].Clocks, b.Workers[1].Clocks, r.BlockedFraction(), b.BlockedFraction(), r.Stats.SamplesAssigned, r.Stats.ParallelismChanges)
	}
}
