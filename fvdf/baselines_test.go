package fvdf_test

import (
	"errors"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/fvdf"
)

// twoClassFabric: 4 ports of 1e8 B/s with 8 cores each; one codec whose
// class 0 ("random") does not shrink and class 1 ("text") shrinks to ¼.
func twoClassFabric() *coflow.Fabric {
	fab := coflow.NewFabric(4, 1e8).SetCores(8)
	ref := coflow.CodecProfile{Name: "lz4", CompressSpeed: 1e9, DecompressSpeed: 4e9, Ratio: 0.5}
	fab.Codecs = []coflow.CodecProfile{ref}
	fab.Classes = []coflow.DataClass{
		{Name: "random", Codecs: []coflow.CodecProfile{{Name: "lz4", CompressSpeed: 1e9, DecompressSpeed: 4e9, Ratio: 1}}},
		{Name: "text", Codecs: []coflow.CodecProfile{{Name: "lz4", CompressSpeed: 1e9, DecompressSpeed: 4e9, Ratio: 0.25}}},
	}
	return fab
}

// orderCoflows: C1 (incompressible, 2e8 B, Γ 2 s, ρΓ 2 s) and C2 (text,
// 4e8 B, Γ 4 s, ρΓ 1 s) from port 0, to ports 1 and dst2. SEBF serves
// C1 first, a compressed-bottleneck order C2.
func orderCoflows(dst2 int) []coflow.Coflow {
	return []coflow.Coflow{
		{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 2e8, Class: 0}}},
		{ID: 2, Flows: []coflow.Flow{{Src: 0, Dst: dst2, Bytes: 4e8, Class: 1}}},
	}
}

func run(t *testing.T, fab *coflow.Fabric, s coflow.Scheduler, cfs []coflow.Coflow) *coflow.Result {
	t.Helper()
	sim, err := coflow.NewSim(coflow.DefaultConfig(), fab, s)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(cfs)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestBaselines_Order: on two coflows sharing port 0, FVDF and sebf-rho
// serve the compressible C2 first, SEBF + lz4 and sebf-order+fvdf serve C1
// first (SEBF's order); every compressing baseline puts C2 on the wire
// compressed (¼ of its bytes); and the order shows in which coflow
// finishes first.
func TestBaselines_Order(t *testing.T) {
	fab := twoClassFabric()
	cfs := orderCoflows(2)
	mk := map[string]func() coflow.Scheduler{
		"fvdf": func() coflow.Scheduler { s, _ := fvdf.New(fvdf.Config{StarvationPeriod: -1}, nil); return s },
		"sebf-order+fvdf": func() coflow.Scheduler {
			s, _ := fvdf.New(fvdf.Config{StarvationPeriod: -1, OrderBySEBF: true}, nil)
			return s
		},
		"sebf-rho": func() coflow.Scheduler {
			r, _ := fvdf.NewSEBFRho(coflow.DefaultOrderedConfig(), 1)
			s, _ := fvdf.NewCompressor(r, fvdf.CompressorConfig{Codec: 1})
			return s
		},
		"sebf+lz4": func() coflow.Scheduler {
			r, _ := coflow.NewSEBF(coflow.DefaultOrderedConfig())
			s, _ := fvdf.NewCompressor(r, fvdf.CompressorConfig{Codec: 1})
			return s
		},
	}
	for _, tc := range []struct {
		name       string
		c2First    bool
		wantC2Wire float64
	}{
		{"fvdf", true, 1e8},
		{"sebf-order+fvdf", false, 1e8},
		{"sebf-rho", true, 1e8},
		{"sebf+lz4", false, 1e8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mk[tc.name]()
			if s.Name() != tc.name && s.Name() != "sebf" {
				t.Fatalf("name %q", s.Name())
			}
			res := run(t, fab, s, cfs)
			c1, c2 := res.Coflows[0], res.Coflows[1]
			if got := c2.Finish < c1.Finish; got != tc.c2First {
				t.Fatalf("C1 finishes at %v, C2 at %v; want C2 first: %v", c1.Finish, c2.Finish, tc.c2First)
			}
			if w := c2.WireBytes; w < tc.wantC2Wire*(1-1e-9) || w > tc.wantC2Wire*(1+1e-9) {
				t.Fatalf("C2 put %v bytes on the wire, want %v", w, tc.wantC2Wire)
			}
		})
	}
}

// TestOrderBySEBF_Order: on coflows on disjoint ports, FVDF's Order puts
// the compressible C2 first and OrderBySEBF puts C1 first (SEBF's order,
// as package coflow's SEBF computes it), while both compress C2's flow.
func TestOrderBySEBF_Order(t *testing.T) {
	fab := twoClassFabric()
	cfs := orderCoflows(2)
	cfs[0].Flows[0].Src, cfs[0].Flows[0].Dst = 1, 3 // disjoint ports
	st := &coflow.State{Fabric: fab}
	for i, c := range cfs {
		cs := coflow.CoflowState{Index: i, ID: c.ID, Weight: 1, Width: 1, Bytes: c.TotalBytes()}
		for j, f := range c.Flows {
			cs.Flows = append(cs.Flows, coflow.FlowState{Ref: coflow.FlowRef{Coflow: i, Flow: j}, Src: f.Src, Dst: f.Dst, Bytes: f.Bytes, Remaining: f.Bytes, Class: f.Class})
		}
		st.Coflows = append(st.Coflows, cs)
	}
	st.ComputePortLoads()
	for _, tc := range []struct {
		sebfOrder bool
		want      []int
	}{{false, []int{1, 0}}, {true, []int{0, 1}}} {
		s, err := fvdf.New(fvdf.Config{StarvationPeriod: -1, OrderBySEBF: tc.sebfOrder}, nil)
		if err != nil {
			t.Fatal(err)
		}
		al := s.Schedule(0, st)
		if got := s.Order(); len(got) != 2 || got[0] != tc.want[0] || got[1] != tc.want[1] {
			t.Fatalf("OrderBySEBF %v: order %v, want %v", tc.sebfOrder, got, tc.want)
		}
		for _, a := range al {
			if a.Flow.Coflow == 1 && (a.Codec != 1 || !(a.Rate > 0)) {
				t.Fatalf("OrderBySEBF %v: C2's flow %+v, want compressed", tc.sebfOrder, a)
			}
		}
	}
}

// TestNewBaseline_Rules: every name parses and prints back, builds under
// every rule, and is called as the rule says: on every flow completion
// only under "every", with a timer no later than the guard's next slice
// boundary under "timers"; bad names and rules are refused.
func TestNewBaseline_Rules(t *testing.T) {
	for _, name := range fvdf.BaselineNames() {
		b, err := fvdf.ParseBaseline(name)
		if err != nil || b.String() != name {
			t.Fatalf("ParseBaseline(%q) = %v, %v", name, b, err)
		}
		for _, rule := range fvdf.ReschedulingRules() {
			s, err := fvdf.NewBaseline(b, fvdf.BaselineConfig{Rescheduling: rule})
			if err != nil {
				t.Fatalf("%s/%s: %v", name, rule, err)
			}
			ed, ok := s.(coflow.EventDriven)
			if !ok || ed.OnlyOnArrivalsAndCompletions() != (rule != fvdf.ReschedEvery) {
				t.Errorf("%s/%s: event-driven %v", name, rule, ok && ed.OnlyOnArrivalsAndCompletions())
			}
			if rule == fvdf.ReschedTimers {
				tm, ok := s.(coflow.Timer)
				if !ok {
					t.Fatalf("%s/%s: no timer", name, rule)
				}
				if at, ok := tm.NextWakeup(5 * time.Second); !ok || at > 10*time.Second {
					t.Errorf("%s/%s: wake-up %v %v, want ≤ 10 s", name, rule, at, ok)
				}
			}
		}
	}
	for _, bad := range []string{"", "fifo", "sebf+gzip", "sebf+none", "sebf-rho+policy", "fvdf+lz4", "sebf-order", "sebf+write-policy"} {
		if _, err := fvdf.ParseBaseline(bad); !errors.Is(err, fvdf.ErrBadInput) {
			t.Errorf("ParseBaseline(%q): %v, want ErrBadInput", bad, err)
		}
	}
	if _, err := fvdf.NewBaseline(fvdf.Baseline{Sched: "sebf", Comp: "lz4"}, fvdf.BaselineConfig{Rescheduling: "sometimes"}); !errors.Is(err, fvdf.ErrConfig) {
		t.Errorf("rule sometimes: %v", err)
	}
	if _, err := fvdf.NewBaseline(fvdf.Baseline{Sched: "sebf", Comp: "zstd"}, fvdf.BaselineConfig{}); !errors.Is(err, fvdf.ErrConfig) {
		t.Errorf("codec zstd: %v", err)
	}
}
