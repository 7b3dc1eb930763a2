package epsp_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/epsp/epsptest"
)

// Reference: falcon.md §5 / baselines-params.md §3 (Jiang et al. SIGMOD'17,
// ConSGD: "a constant learning rate schedule for updates before adding
// them to the global parameter"); λ = 1/M is ours (unverified).
func TestConSGD_ConstantScaleAndGate(t *testing.T) {
	const tol = 1e-12
	p, err := epsp.NewConSGD(epsp.DefaultConSGDConfig())
	if err != nil {
		t.Fatal(err)
	}
	v := epsptest.NewFakeView(5, 10)
	for _, base := range []uint64{0, 3, 7} {
		v.SetVersion(9)
		d := p.Admit(0, v, epsp.Push{Worker: 1, Owner: 1, BaseVersion: base, Samples: 10, BatchSamples: 10})
		if d.Action != epsp.ApplyNow || math.Abs(d.Scale-0.2) > tol {
			t.Fatalf("base %d: %+v, want apply with scale 1/5 whatever the staleness", base, d)
		}
	}
	// SSP gate s = 3: a worker at clock 4 may go, at clock 5 it waits.
	v.SetClock(0, 0)
	v.SetClock(1, 3)
	out := p.Step(0, v, v.Finish(1)) // now at clock 4: 4-0 ≤ 3? no
	if len(out.Release) != 0 {
		t.Fatalf("released at lead 4: %+v", out)
	}
	v.SetClock(0, 1).SetClock(2, 1).SetClock(3, 1).SetClock(4, 1)
	if out := p.Step(0, v, epsp.Event{Kind: epsp.EventTick}); !slices.Equal(out.Release, []epsp.WorkerID{1}) {
		t.Fatalf("lead 3: %+v, want release of 1", out)
	}
	q, _ := epsp.NewConSGD(epsp.ConSGDConfig{Lambda: 0.5, Staleness: -1})
	if d := q.Admit(0, v, epsp.Push{}); d.Scale != 0.5 {
		t.Fatalf("explicit lambda: %+v", d)
	}
	if out := q.Step(0, v, v.Finish(2)); !slices.Equal(out.Release, []epsp.WorkerID{2}) {
		t.Fatalf("no gate: %+v, want immediate release", out)
	}
	if _, err := epsp.NewConSGD(epsp.ConSGDConfig{Lambda: -1}); !errors.Is(err, epsp.ErrBadConfig) {
		t.Fatal(err)
	}
}
