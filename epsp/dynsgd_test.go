package epsp_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/epsp/epsptest"
)

// Reference: baselines-params.md §3 (cerndb/dist-keras
// DynSGDParameterServer: r /= (num_updates − last_update) + 1).
func TestDynSGD_ScaleIsOneOverDPlusOne(t *testing.T) {
	const tol = 1e-12
	p, err := epsp.NewDynSGD(epsp.DefaultDynSGDConfig())
	if err != nil {
		t.Fatal(err)
	}
	v := epsptest.NewFakeView(3, 10)
	for _, tc := range []struct {
		version, base uint64
		want          float64
	}{
		{0, 0, 1}, {5, 5, 1}, {6, 5, 0.5}, {9, 5, 0.2}, {100, 0, 1.0 / 101},
	} {
		t.Run(fmt.Sprintf("d=%d", tc.version-tc.base), func(t *testing.T) {
			v.SetVersion(tc.version)
			d := p.Admit(0, v, epsp.Push{Worker: 0, Owner: 0, BaseVersion: tc.base, Samples: 10, BatchSamples: 10})
			if d.Action != epsp.ApplyNow || math.Abs(d.Scale-tc.want) > tol {
				t.Fatalf("got %+v, want apply with scale %v", d, tc.want)
			}
		})
	}
}

// The same through a real coordinator: each ApplyNow bumps the version, so
// three pushes on base 0 get 1, 1/2, 1/3.
func TestDynSGD_ThroughCoordinator(t *testing.T) {
	p, _ := epsp.NewDynSGD(epsp.DefaultDynSGDConfig())
	d, err := epsptest.NewDriver(epsp.Config{NumWorkers: 3, Batch: 4}, p)
	if err != nil {
		t.Fatal(err)
	}
	var got []float64
	for w := range 3 {
		dec, err := d.PushOwn(epsp.WorkerID(w))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, dec.EffectiveScale())
	}
	if !slices.Equal(got, []float64{1, 0.5, 1.0 / 3}) {
		t.Fatalf("scales %v, want [1 0.5 0.333]", got)
	}
}

func TestDynSGD_WindowAndGate(t *testing.T) {
	p, _ := epsp.NewDynSGD(epsp.DynSGDConfig{Window: 5, Staleness: 1})
	var ls epsp.LocalSteps = p
	if ls.LocalSteps(0) != 5 || p.Name() != "dynsgd(s=1,window=5)" {
		t.Fatalf("LocalSteps %d name %q", ls.LocalSteps(0), p.Name())
	}
	v := epsptest.NewFakeView(2, 4)
	v.SetClock(0, 1)
	if out := p.Step(0, v, v.Finish(0)); len(out.Release) != 0 { // lead 2 > 1
		t.Fatalf("released beyond the gate: %+v", out)
	}
	if _, err := epsp.NewDynSGD(epsp.DynSGDConfig{Window: -1}); !errors.Is(err, epsp.ErrBadConfig) {
		t.Fatal(err)
	}
}
