package fvdf

import (
	"fmt"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// runSim runs sched on cfs over fab and returns the result.
func runSim(t testing.TB, fab *coflow.Fabric, sched coflow.Scheduler, cfs []coflow.Coflow, check func(time.Duration, *coflow.State, []coflow.Allocation) error) *coflow.Result {
	t.Helper()
	cfg := coflow.DefaultConfig()
	cfg.Check = check
	sim, err := coflow.NewSim(cfg, fab, sched)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(cfs)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestScheduler_EqualsSEBFWithoutCompression checks that FVDF collapses to
// Varys' SEBF (package coflow's implementation) coflow by coflow when
// compression is off, when no codec shrinks data (ρ = 1), and when machines
// have no cores, with and without the starvation guard.
//
// Reference: research note swallow.md §2 ("without compression Γ'_C equals
// the Varys Γ_C, so FVDF collapses to SEBF") and §9.
func TestScheduler_EqualsSEBFWithoutCompression(t *testing.T) {
	const T, delta = 4 * time.Second, 100 * time.Millisecond
	type variant struct {
		name  string
		fvdf  Config
		sebf  coflow.OrderedConfig
		codec *coflow.CodecProfile
		cores float64
	}
	noShrink := &coflow.CodecProfile{Name: "noshrink", CompressSpeed: 500e6, DecompressSpeed: 2e9, Ratio: 1}
	shrink := &coflow.CodecProfile{Name: "lz4", CompressSpeed: 600e6, DecompressSpeed: 4.9e9, Ratio: 0.4}
	variants := []variant{
		{"disabled", Config{DisableCompression: true, StarvationPeriod: -1}, coflow.OrderedConfig{}, shrink, 4},
		{"ratio=1", Config{StarvationPeriod: -1}, coflow.OrderedConfig{}, noShrink, 4},
		{"no cores", Config{StarvationPeriod: -1}, coflow.OrderedConfig{}, shrink, 0},
		{"disabled+guard", Config{DisableCompression: true, StarvationPeriod: T, StarvationSlice: delta},
			coflow.OrderedConfig{StarvationPeriod: T, StarvationWindow: delta}, shrink, 4},
		{"every flow event", Config{DisableCompression: true, StarvationPeriod: -1, EveryFlowEvent: true},
			coflow.OrderedConfig{OnFlowCompletion: true}, nil, 0},
	}
	for seed := uint64(1); seed <= 4; seed++ {
		cfs, fab := synth(t, 16, 80, seed)
		for _, v := range variants {
			t.Run(fmt.Sprintf("seed=%d/%s", seed, v.name), func(t *testing.T) {
				f := *fab
				f.Ports = append([]coflow.Port(nil), fab.Ports...)
				f.SetCores(v.cores)
				if v.codec != nil {
					f.Codecs = []coflow.CodecProfile{*v.codec}
				}
				fv, err := New(v.fvdf, nil)
				if err != nil {
					t.Fatal(err)
				}
				sebf, err := coflow.NewSEBF(v.sebf)
				if err != nil {
					t.Fatal(err)
				}
				raw := func(_ time.Duration, _ *coflow.State, al []coflow.Allocation) error {
					for _, a := range al {
						if a.Codec != coflow.Raw {
							return fmt.Errorf("flow %v compressed", a.Flow)
						}
					}
					return nil
				}
				got := runSim(t, &f, fv, cfs, raw)
				want := runSim(t, &f, sebf, cfs, nil)
				if got.Calls != want.Calls {
					t.Errorf("calls: fvdf %d, sebf %d", got.Calls, want.Calls)
				}
				if got.WireBytes != want.WireBytes {
					t.Errorf("wire bytes: fvdf %v, sebf %v", got.WireBytes, want.WireBytes)
				}
				for i := range want.Coflows {
					if g, w := got.Coflows[i].CCT, want.Coflows[i].CCT; g != w {
						t.Fatalf("coflow %d (id %d): CCT fvdf %v, sebf %v", i, cfs[i].ID, g, w)
					}
				}
			})
		}
	}
}

func TestScheduler_CompressionHelpsOnSlowLinks(t *testing.T) {
	cfs, fab := synth(t, 16, 60, 9)
	fab.SetCores(4)
	fab.Codecs = []coflow.CodecProfile{{Name: "lz4", CompressSpeed: 600e6, DecompressSpeed: 4.9e9, Ratio: 0.4}}
	fv, err := New(Config{StarvationPeriod: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sebf, err := coflow.NewSEBF(coflow.DefaultOrderedConfig())
	if err != nil {
		t.Fatal(err)
	}
	got := runSim(t, fab, fv, cfs, nil)
	want := runSim(t, fab, sebf, cfs, nil)
	var sg, sw time.Duration
	for i := range cfs {
		sg += got.Coflows[i].CCT
		sw += want.Coflows[i].CCT
	}
	// With ρ = 0.4 and compression at 600 MB/s per core against 125 MB/s
	// ports, every compressed flow disposes ≥ 2x faster than raw; we only
	// require a clear win and real traffic savings.
	if float64(sw)/float64(sg) < 1.3 {
		t.Errorf("avg CCT: fvdf %v, sebf %v: speed-up %.2f, want ≥ 1.3", sg/60, sw/60, float64(sw)/float64(sg))
	}
	if red := 1 - got.WireBytes/got.RawBytes; red < 0.3 {
		t.Errorf("traffic reduction %.2f, want ≥ 0.3", red)
	}
}

// TestScheduler_SameAllocationsAsSEBF compares, at every call of a run, the
// allocation FVDF (compression disabled) returns with the one package
// coflow's SEBF returns for the same state: flows, order, rates, bit for bit.
func TestScheduler_SameAllocationsAsSEBF(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		cfs, fab := synth(t, 16, 80, seed)
		fv, err := New(Config{DisableCompression: true, StarvationPeriod: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sebf, err := coflow.NewSEBF(coflow.DefaultOrderedConfig())
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		check := func(now time.Duration, st *coflow.State, al []coflow.Allocation) error {
			calls++
			want := sebf.Schedule(now, st)
			if len(want) != len(al) {
				return fmt.Errorf("t=%v: %d allocations, sebf %d", now, len(al), len(want))
			}
			for i := range want {
				if want[i] != al[i] {
					return fmt.Errorf("t=%v allocation %d: fvdf %+v, sebf %+v", now, i, al[i], want[i])
				}
			}
			return nil
		}
		runSim(t, fab, fv, cfs, check)
		if calls == 0 {
			t.Fatal("no scheduling calls")
		}
	}
}

// TestScheduler_OrderWithoutCompressionIsSEBF: FVDF's Order with
// compression disabled ranks coflows as SEBF's Γ does (ascending, ties by
// arrival then index): checked on every call of a replay.
func TestScheduler_OrderWithoutCompressionIsSEBF(t *testing.T) {
	cfs, fab := synth(t, 20, 40, 9)
	s, err := New(Config{DisableCompression: true, StarvationPeriod: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	cfg := coflow.DefaultConfig()
	cfg.Check = func(now time.Duration, st *coflow.State, _ []coflow.Allocation) error {
		o := s.Order()
		if len(o) != len(st.Coflows) {
			t.Fatalf("order has %d entries for %d coflows", len(o), len(st.Coflows))
		}
		gamma := func(c *coflow.CoflowState) float64 {
			g := 0.0
			for _, l := range c.Send {
				if l.Flows > 0 {
					g = max(g, l.Bytes/st.Fabric.Ports[l.Port].Ingress)
				}
			}
			for _, l := range c.Recv {
				if l.Flows > 0 {
					g = max(g, l.Bytes/st.Fabric.Ports[l.Port].Egress)
				}
			}
			return g
		}
		for i := 1; i < len(o); i++ {
			a, b := &st.Coflows[o[i-1]], &st.Coflows[o[i]]
			if ga, gb := gamma(a), gamma(b); ga > gb*(1+1e-12) {
				t.Fatalf("call %d: order puts Γ=%v before Γ=%v", calls, ga, gb)
			}
		}
		calls++
		return nil
	}
	sim, err := coflow.NewSim(cfg, fab, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Run(cfs); err != nil {
		t.Fatal(err)
	}
	if calls == 0 {
		t.Fatal("no calls")
	}
}
