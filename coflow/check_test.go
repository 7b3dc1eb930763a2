package coflow_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
)

// Every check has the one shape of Config.Check.
var (
	_ coflow.CheckFunc = (&coflow.Config{}).CheckAllocation
	_ coflow.CheckFunc = coflowtest.CheckAllocation
	_ coflow.CheckFunc = coflowtest.Checker(coflowtest.WorkConserving)
)

// TestCheckAllocation_AgreesWithSim checks that Config.CheckAllocation, on
// the State a scheduler sees, rejects exactly the decisions Sim rejects,
// with the same sentinel and message, and accepts the ones Sim accepts.
func TestCheckAllocation_AgreesWithSim(t *testing.T) {
	fab := coflow.NewFabric(3, 100).SetCores(2)
	fab.Ports[2].Background = 1.5
	fab.Codecs = []coflow.CodecProfile{{Name: "c", CompressSpeed: 10, DecompressSpeed: 10, Ratio: 0.5}}
	cfs := []coflow.Coflow{{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 100}, {Src: 0, Dst: 2, Bytes: 100}}}}
	st := coflowtest.NewState(fab).Coflow(1, 0, coflowtest.F(0, 1, 100), coflowtest.F(0, 2, 100)).State()
	ref0, ref1 := coflow.FlowRef{Coflow: 0, Flow: 0}, coflow.FlowRef{Coflow: 0, Flow: 1}
	tests := []struct {
		name   string
		allocs []coflow.Allocation
		msg    string // "" = valid
	}{
		{"valid raw", []coflow.Allocation{{Flow: ref0, Rate: 50}, {Flow: ref1, Rate: 50}}, ""},
		{"valid compressed", []coflow.Allocation{{Flow: ref0, Rate: 10, Codec: 1, SendCores: 1, RecvCores: 1}}, ""},
		{"within tolerance", []coflow.Allocation{{Flow: ref0, Rate: 100 * (1 + 1e-10)}}, ""},
		{"ingress over", []coflow.Allocation{{Flow: ref0, Rate: 60}, {Flow: ref1, Rate: 60}}, "port 0 ingress"},
		{"single flow over", []coflow.Allocation{{Flow: ref0, Rate: 101}}, "over capacity"},
		{"cores over", []coflow.Allocation{{Flow: ref1, Rate: 10, Codec: 1, SendCores: 1, RecvCores: 1}}, "port 2 uses"},
		{"raw with cores", []coflow.Allocation{{Flow: ref0, Rate: 10, SendCores: 1}}, "raw flow reserves"},
		{"compressed without cores", []coflow.Allocation{{Flow: ref0, Rate: 10, Codec: 1}}, "needs cores"},
		{"codec range", []coflow.Allocation{{Flow: ref0, Rate: 10, Codec: 2, SendCores: 1, RecvCores: 1}}, "codec 2"},
		{"duplicate", []coflow.Allocation{{Flow: ref0, Rate: 10}, {Flow: ref0, Rate: 10}}, "twice"},
		{"negative rate", []coflow.Allocation{{Flow: ref0, Rate: -1}}, "rate"},
		{"NaN rate", []coflow.Allocation{{Flow: ref0, Rate: math.NaN()}}, "rate"},
		{"infinite cores", []coflow.Allocation{{Flow: ref0, Rate: 1, Codec: 1, SendCores: math.Inf(1), RecvCores: 1}}, "cores"},
		{"unknown flow", []coflow.Allocation{{Flow: coflow.FlowRef{Coflow: 0, Flow: 9}, Rate: 10}}, "flow"},
	}
	cfg := coflow.DefaultConfig()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errCheck := cfg.CheckAllocation(0, st, tc.allocs)
			called := false
			sim, err := coflow.NewSim(cfg, fab, funcSched(func(time.Duration, *coflow.State) []coflow.Allocation {
				if called {
					return nil // stop after the decision under test
				}
				called = true
				return tc.allocs
			}))
			if err != nil {
				t.Fatal(err)
			}
			_, errSim := sim.Run(cfs)
			if tc.msg == "" {
				if errCheck != nil {
					t.Fatalf("CheckAllocation rejects a valid decision: %v", errCheck)
				}
				if errors.Is(errSim, coflow.ErrBadAllocation) {
					t.Fatalf("Sim rejects a valid decision: %v", errSim)
				}
				return
			}
			for who, err := range map[string]error{"CheckAllocation": errCheck, "Sim": errSim} {
				if !errors.Is(err, coflow.ErrBadAllocation) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("%s: err = %v, want ErrBadAllocation mentioning %q", who, err, tc.msg)
				}
			}
		})
	}
}

// TestCheckAllocation_AsSimCheck sets coflowtest's checks as Config.Check
// directly: a work-conserving scheduler passes, a half-rate one is named.
func TestCheckAllocation_AsSimCheck(t *testing.T) {
	cfs := []coflow.Coflow{{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 100}}}}
	half := funcSched(func(_ time.Duration, s *coflow.State) []coflow.Allocation {
		var out []coflow.Allocation
		for _, f := range s.Coflows[0].Flows {
			out = append(out, coflow.Allocation{Flow: f.Ref, Rate: 50})
		}
		return out
	})
	for _, tc := range []struct {
		name  string
		check coflow.CheckFunc
		sched coflow.Scheduler
		ok    bool
	}{
		{"capacity, sebf", coflowtest.CheckAllocation, mustSched(t, "sebf"), true},
		{"conserving, sebf", coflowtest.Checker(coflowtest.WorkConserving), mustSched(t, "sebf"), true},
		{"capacity, half rate", coflowtest.CheckAllocation, half, true},
		{"conserving, half rate", coflowtest.Checker(coflowtest.WorkConserving), half, false},
	} {
		cfg := coflow.DefaultConfig()
		cfg.Check = tc.check
		sim, err := coflow.NewSim(cfg, coflow.NewFabric(2, 100), tc.sched)
		if err != nil {
			t.Fatal(err)
		}
		_, err = sim.Run(cfs)
		if tc.ok != (err == nil) || !tc.ok && !errors.Is(err, coflowtest.ErrCheck) {
			t.Fatalf("%s: err = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
