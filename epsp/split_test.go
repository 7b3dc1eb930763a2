package epsp_test

import (
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/epsp/epsptest"
)

// The multi-taker split (DefaultEPSPConfig): one straggler (20 samples/s)
// and four pioneers (80/s). When the first pioneer blocks, the others are
// about to (their extrapolated work is done), so its share is the
// all-finish-together one, ≈ R·80/(20 + 4·80), not R/2; the pioneers that
// block next get the next pieces, cut below the first (tail-first), while
// the first is still unanswered.
func TestEPSP_SplitAllSharesAmongPioneers(t *testing.T) {
	p := polEPSP(t, func(c *epsp.EPSPConfig) { c.Elastic = false })
	v := epsptest.NewFakeView(5, 200)
	for w := range epsp.WorkerID(5) {
		done := 80
		if w == 0 {
			done = 20
		}
		p.Step(time.Second, v, polProgress(v, w, done))
	}
	now := 2500 * time.Millisecond
	// Worker 0 is at 20 + 20·1.5 = 50: R = 150.
	out := p.Step(now, v, v.Finish(1))
	if len(out.Transfers) != 1 {
		t.Fatalf("first round %+v", out.Transfers)
	}
	o := out.Transfers[0]
	want := 150 * 80 / 340 // 35
	if o.From != 0 || o.To != 1 || o.Hi != 200 || abs(o.Samples()-want) > 1 {
		t.Fatalf("first piece %+v, want ≈ %d samples at the tail [.,200) (halving would give 75)", o, want)
	}
	v.Apply(out)
	hi := o.Lo
	for w := epsp.WorkerID(2); w < 5; w++ {
		out := p.Step(now, v, v.Finish(w))
		if len(out.Transfers) != 1 {
			t.Fatalf("worker %d: %+v", w, out.Transfers)
		}
		o := out.Transfers[0]
		if o.From != 0 || o.To != w || o.Hi != hi || abs(o.Samples()-want) > 2 {
			t.Fatalf("worker %d got %+v, want ≈ %d samples ending at %d", w, o, want, hi)
		}
		hi = o.Lo
		v.Apply(out)
	}
	// The straggler keeps ≈ its own share, 150·20/340 ≈ 9 samples after 50.
	if kept := hi - 50; kept < 5 || kept > 15 {
		t.Fatalf("giver keeps [50,%d)", hi)
	}
}

// Without SplitAll EPSP halves, as FlexRR does.
func TestEPSP_PairwiseHalves(t *testing.T) {
	p := polEPSP(t, func(c *epsp.EPSPConfig) { c.Elastic = false; c.Transfers.SplitAll = false })
	if p.Name() != "epsp(enforced,no-elastic,pairwise)" {
		t.Fatalf("name %q", p.Name())
	}
	v := epsptest.NewFakeView(5, 200)
	for w := range epsp.WorkerID(5) {
		done := 80
		if w == 0 {
			done = 20
		}
		p.Step(time.Second, v, polProgress(v, w, done))
	}
	out := p.Step(2500*time.Millisecond, v, v.Finish(1))
	if len(out.Transfers) != 1 || out.Transfers[0].Lo != 125 {
		t.Fatalf("pairwise %+v, want [125,200)", out.Transfers)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
