package sim

import (
	"slices"
	"testing"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/straggler"
)

// EPSP's default multi-taker split in the simulator: a giver gets several
// orders per clock, the pieces it accepts always form one tail [x, batch)
// (so it keeps one prefix), and the run passes the simulator's
// exactly-once invariant (Run fails with ErrInvariant otherwise).
func TestRun_EPSPSplitAllTailFirst(t *testing.T) {
	cfg, job := suiteJob(t, true, func(topo straggler.Model) (epsp.Policy, error) {
		c := epsp.DefaultEPSPConfig()
		c.Topology = topo
		return epsp.NewEPSP(c)
	})
	r, err := Run(cfg, job)
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ from, clock int }
	acc := map[key][][2]int{}
	for _, tr := range r.Transfers {
		if tr.Accepted {
			acc[key{tr.From, tr.Clock}] = append(acc[key{tr.From, tr.Clock}], [2]int{tr.Lo, tr.Hi})
		}
	}
	most := 0
	for k, rs := range acc {
		most = max(most, len(rs))
		slices.SortFunc(rs, func(a, b [2]int) int { return b[0] - a[0] })
		hi := cfg.Batch
		for _, x := range rs {
			if x[1] != hi {
				t.Fatalf("giver %d clock %d: accepted pieces %v are not one tail of [0,%d)", k.from, k.clock, rs, cfg.Batch)
			}
			hi = x[0]
		}
	}
	t.Logf("accepted %d, refused %d", r.AcceptedTransfers(), len(r.Transfers)-r.AcceptedTransfers())
	if most < 3 {
		t.Fatalf("at most %d accepted pieces per giver and clock; the split among several pioneers did not happen", most)
	}
}
