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
	p, err := epsp.NewConSGD(epsp.ConSGDConfig{Staleness: 3}) // the gate option
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

// consgdLead runs worker 0 of 3 through clocks while the others never
// finish one, through a real Coordinator, and returns how many clocks it
// finished before it was held (clocks if never).
func consgdLead(t *testing.T, cfg epsp.ConSGDConfig, clocks int) int {
	t.Helper()
	p, err := epsp.NewConSGD(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := epsptest.NewDriver(epsp.Config{NumWorkers: 3, Batch: 4}, p)
	if err != nil {
		t.Fatal(err)
	}
	for k := range clocks {
		if _, err := d.PushOwn(0); err != nil {
			t.Fatal(err)
		}
		out, err := d.Clock(0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(out.Release, 0) {
			return k
		}
	}
	return clocks
}

// Issue 27 item 2: ConSGD runs as DynSGD does, from the same paper, with
// no SSP gate by default (the gate s = 3 of earlier versions was ours; the
// paper's own rule for a gate was not found): a worker 20 clocks ahead of
// the others is still released at once. The gate stays an option, and
// then holds the worker at lead s.
func TestConSGD_DefaultHasNoGate(t *testing.T) {
	if cfg := epsp.DefaultConSGDConfig(); cfg.Staleness >= 0 {
		t.Errorf("DefaultConSGDConfig().Staleness = %d, want negative (no gate)", cfg.Staleness)
	}
	if got := consgdLead(t, epsp.DefaultConSGDConfig(), 20); got != 20 {
		t.Errorf("default ConSGD held worker 0 after %d clocks ahead of the others, want never (20)", got)
	}
	for _, s := range []int{0, 1, 3} {
		if got := consgdLead(t, epsp.ConSGDConfig{Staleness: s}, 20); got != s {
			t.Errorf("ConSGD with gate s=%d held worker 0 after %d clocks, want %d", s, got, s)
		}
	}
	p, _ := epsp.NewConSGD(epsp.DefaultConSGDConfig())
	if p.Name() != "consgd(async)" {
		t.Errorf("default name %q", p.Name())
	}
}
