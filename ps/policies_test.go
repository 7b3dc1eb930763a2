package ps_test

import (
	"testing"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/pstest"
	"github.com/falconml/falcon/straggler"
)

func mustPolicy[P epsp.Policy](p P, err error) epsp.Policy {
	if err != nil {
		panic(err)
	}
	return p
}

// TestPolicies_Live runs every policy of package epsp live through
// pstest.RunPolicy (in-process transport with a network delay, an injected
// straggler): training ends and every sample of every clock is computed
// exactly once, whatever transfers, parallelism or batch changes the policy
// orders.
func TestPolicies_Live(t *testing.T) {
	par := straggler.ParallelismConfig{PMin: 1, PMax: 3}
	policies := []struct {
		name string
		p    func() epsp.Policy
	}{
		{"bsp", func() epsp.Policy { return epsp.NewBSP() }},
		{"asp", func() epsp.Policy { return epsp.NewASP() }},
		{"ssp2", func() epsp.Policy { return epsp.NewSSP(2) }},
		{"epsp-enforced", func() epsp.Policy {
			return mustPolicy(epsp.NewEPSP(epsp.EPSPConfig{Elastic: true, Transfer: true, Parallelism: par}))
		}},
		{"epsp-slack", func() epsp.Policy {
			return mustPolicy(epsp.NewEPSP(epsp.EPSPConfig{Staleness: 1, Elastic: true, Transfer: true, Parallelism: par}))
		}},
		{"flexrr", func() epsp.Policy { return mustPolicy(epsp.NewFlexRR(epsp.DefaultFlexRRConfig())) }},
		{"syncopt", func() epsp.Policy { return mustPolicy(epsp.NewSyncOpt(epsp.DefaultSyncOptConfig())) }},
		{"consgd", func() epsp.Policy { return mustPolicy(epsp.NewConSGD(epsp.DefaultConSGDConfig())) }},
		{"dynsgd", func() epsp.Policy { return mustPolicy(epsp.NewDynSGD(epsp.DefaultDynSGDConfig())) }},
		{"lbbsp", func() epsp.Policy { return mustPolicy(epsp.NewLBBSP(epsp.DefaultLBBSPConfig())) }},
		{"dssp", func() epsp.Policy { return mustPolicy(epsp.NewDSSP(epsp.DefaultDSSPConfig())) }},
		{"test-transfer", func() epsp.Policy { return &transferPolicy{ordered: map[[2]int]bool{}} }},
	}
	for _, pc := range policies {
		t.Run(pc.name, func(t *testing.T) {
			st := pstest.RunPolicy(t, pc.p, pstest.PolicyRun{})
			t.Logf("transfers %d/%d (samples %d), parallelism changes %d, batch changes %d, dropped %d, max lead %d",
				st.TransfersAccepted, st.TransfersOrdered, st.SamplesTransferred, st.ParallelismChanges, st.BatchChanges, st.Dropped, st.MaxLead)
		})
	}
}
