package fvdf

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// adversarial returns one 20 MB coflow on ports 0→1 at t=0 followed by a
// stream of 5 MB coflows on the same ports, one every 40 ms for 60 s: each
// takes exactly 40 ms at 1 Gbit/s, so the stream alone fills the link and
// each of its coflows always has a smaller bottleneck than the big one.
// Under SEBF the big coflow waits until the stream ends.
func adversarial() []coflow.Coflow {
	cfs := []coflow.Coflow{{ID: 0, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 20e6}}}}
	for i := 1; i <= 1500; i++ {
		cfs = append(cfs, coflow.Coflow{ID: i, Arrival: time.Duration(i) * 40 * time.Millisecond,
			Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 5e6}}})
	}
	return cfs
}

// TestScheduler_StarvationBound checks that with the T/δ guard no coflow
// waits more than T for service under an adversarial stream, that the
// big coflow does finish long before the stream ends, and that SEBF
// (no guard) indeed starves it (so the test can fail).
//
// Reference: Varys §5.3 (starvation freedom, T ≫ δ); Swallow abstract
// ("starvation freedom").
func TestScheduler_StarvationBound(t *testing.T) {
	const T, delta = 2 * time.Second, 100 * time.Millisecond
	cfs := adversarial()
	fab := coflow.NewFabric(2, coflow.GigabitBytesPerSec).SetCores(2)
	fab.Codecs = []coflow.CodecProfile{{Name: "lz4", CompressSpeed: 600e6, DecompressSpeed: 4.9e9, Ratio: 0.4}}
	for _, comp := range []bool{false, true} {
		t.Run(fmt.Sprintf("compression=%v", comp), func(t *testing.T) {
			fv, err := New(Config{DisableCompression: !comp, StarvationPeriod: T, StarvationSlice: delta}, nil)
			if err != nil {
				t.Fatal(err)
			}
			wt := &WaitTracker{Inner: fv}
			res := runSim(t, fab, wt, cfs, nil)
			t.Logf("max wait %v, big coflow finished at %v", wt.MaxWait(), res.Coflows[0].Finish)
			if wt.MaxWait() > T {
				t.Errorf("max wait %v exceeds T = %v", wt.MaxWait(), T)
			}
			if f := res.Coflows[0].Finish; f > 30*time.Second {
				t.Errorf("big coflow finished at %v, starved by the stream", f)
			}
		})
	}
	sebf, err := coflow.NewSEBF(coflow.DefaultOrderedConfig())
	if err != nil {
		t.Fatal(err)
	}
	wt := &WaitTracker{Inner: sebf}
	res := runSim(t, fab, wt, cfs, nil)
	t.Logf("sebf: max wait %v, big coflow finished at %v", wt.MaxWait(), res.Coflows[0].Finish)
	if f := res.Coflows[0].Finish; f < 60*time.Second || wt.MaxWait() < 10*T {
		t.Errorf("sebf: big coflow finished at %v, max wait %v: the stream does not starve it, test is void", f, wt.MaxWait())
	}
}

// TestScheduler_CPUBudget checks, at every decision, that FVDF reserves at
// most CPUFraction of each machine's free cores, and that compressed flows
// reserve cores at both ends.
func TestScheduler_CPUBudget(t *testing.T) {
	cfs, fab := synth(t, 16, 80, 5)
	fab.SetCores(4)
	for p := range fab.Ports {
		fab.Ports[p].Background = float64(p % 3) // 0, 1 or 2 cores busy
	}
	fab.Codecs = []coflow.CodecProfile{
		{Name: "lz4", CompressSpeed: 600e6, DecompressSpeed: 4.9e9, Ratio: 0.36},
		{Name: "snappy", CompressSpeed: 680e6, DecompressSpeed: 1.5e9, Ratio: 0.36},
	}
	for _, tc := range []struct {
		frac  float64
		whole bool
	}{{1, false}, {0.5, false}, {0.1, false}, {1, true}, {0.5, true}} {
		frac := tc.frac
		t.Run(fmt.Sprintf("fraction=%v/whole=%v", frac, tc.whole), func(t *testing.T) {
			fv, err := New(Config{CPUFraction: frac, WholeCores: tc.whole}, nil)
			if err != nil {
				t.Fatal(err)
			}
			compressed := 0
			check := func(now time.Duration, st *coflow.State, al []coflow.Allocation) error {
				used := make([]float64, len(fab.Ports))
				src := map[coflow.FlowRef][2]int{}
				for i := range st.Coflows {
					for _, f := range st.Coflows[i].Flows {
						src[f.Ref] = [2]int{f.Src, f.Dst}
					}
				}
				for _, a := range al {
					if a.Codec != coflow.Raw {
						compressed++
						if a.SendCores <= 0 || a.RecvCores <= 0 {
							return fmt.Errorf("flow %v compressed without cores at both ends", a.Flow)
						}
						if tc.whole && (a.SendCores != math.Trunc(a.SendCores) || a.RecvCores != math.Trunc(a.RecvCores)) {
							return fmt.Errorf("flow %v: fractional cores %v/%v", a.Flow, a.SendCores, a.RecvCores)
						}
					}
					sd := src[a.Flow]
					used[sd[0]] += a.SendCores
					used[sd[1]] += a.RecvCores
				}
				for p, u := range used {
					budget := frac * fab.Ports[p].FreeCores()
					if u > budget*(1+1e-9)+1e-12 {
						return fmt.Errorf("t=%v port %d uses %.6g cores, budget %.6g", now, p, u, budget)
					}
				}
				return nil
			}
			runSim(t, fab, fv, cfs, check)
			if compressed == 0 {
				t.Fatal("nothing was compressed: the budget check is void")
			}
		})
	}
}

// TestScheduler_ResourceConservation checks that FVDF compresses a flow
// only when that makes it dispose strictly faster than sending the same wire
// rate raw (D = min(k_s·s, r/ρ, k_r·u) > r), and never with a codec that
// does not shrink data.
func TestScheduler_ResourceConservation(t *testing.T) {
	cfs, fab := synth(t, 12, 40, 3)
	fab.SetCores(1)
	tests := []struct {
		name  string
		codec coflow.CodecProfile
		// some: the codec must be used at least once (else the check is void).
		some bool
	}{
		{"slow codec", coflow.CodecProfile{Name: "slow", CompressSpeed: 50e6, DecompressSpeed: 50e6, Ratio: 0.3}, true},
		{"fast codec", coflow.CodecProfile{Name: "fast", CompressSpeed: 600e6, DecompressSpeed: 4.9e9, Ratio: 0.3}, true},
		{"no shrink", coflow.CodecProfile{Name: "noshrink", CompressSpeed: 5e9, DecompressSpeed: 5e9, Ratio: 1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := *fab
			f.Codecs = []coflow.CodecProfile{tc.codec}
			fv, err := New(Config{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			used := 0
			check := func(now time.Duration, _ *coflow.State, al []coflow.Allocation) error {
				for _, a := range al {
					if a.Codec == coflow.Raw {
						continue
					}
					used++
					c := tc.codec
					d := math.Min(a.SendCores*c.CompressSpeed, math.Min(a.Rate/c.Ratio, a.RecvCores*c.DecompressSpeed))
					if !(d > a.Rate) {
						return fmt.Errorf("t=%v: flow %v compressed but disposes %.6g ≤ wire rate %.6g", now, a.Flow, d, a.Rate)
					}
				}
				return nil
			}
			runSim(t, &f, fv, cfs, check)
			if tc.some && used == 0 {
				t.Fatalf("%s never used: check is void", tc.codec.Name)
			}
			if !tc.some && used > 0 {
				t.Fatalf("%s used %d times", tc.codec.Name, used)
			}
		})
	}
}

// overestimate is an Estimator that believes codecs are factor× faster
// than they are.
type overestimate struct{ factor float64 }

func (o overestimate) Estimate(_ time.Duration, f *coflow.Fabric, k int) coflow.CodecProfile {
	c := f.Codec(k)
	c.CompressSpeed *= o.factor
	c.DecompressSpeed *= o.factor
	return c
}

// TestScheduler_CoreHeadroom checks that handing idle cores to compressed
// flows protects them against an over-predicted codec speed (the planned
// cores alone would let the codec fall behind the wire) without breaking the
// CPU budget (checked by the simulator) or the disposal rule.
func TestScheduler_CoreHeadroom(t *testing.T) {
	cfs, fab := synth(t, 16, 60, 8)
	fab.SetCores(8)
	// Slow codec: 150 MB/s per core, so the reserved cores matter.
	fab.Codecs = []coflow.CodecProfile{{Name: "slowish", CompressSpeed: 150e6, DecompressSpeed: 600e6, Ratio: 0.3}}
	avg := func(noHeadroom bool) time.Duration {
		fv, err := New(Config{StarvationPeriod: -1, NoCoreHeadroom: noHeadroom}, overestimate{3})
		if err != nil {
			t.Fatal(err)
		}
		res := runSim(t, fab, fv, cfs, nil)
		var sum time.Duration
		for _, c := range res.Coflows {
			sum += c.CCT
		}
		return sum / time.Duration(len(cfs))
	}
	with, without := avg(false), avg(true)
	t.Logf("avg CCT with headroom %v, without %v", with, without)
	if with >= without {
		t.Fatalf("headroom did not help against a 3x over-prediction: %v vs %v", with, without)
	}
}

// uncertain is a Nominal estimator reporting a fixed relative error.
type uncertain struct{ err float64 }

func (u uncertain) Estimate(_ time.Duration, f *coflow.Fabric, k int) coflow.CodecProfile {
	return f.Codec(k)
}
func (u uncertain) Uncertainty(int) float64 { return u.err }

// TestScheduler_DeratesUncertainSpeeds checks that with an estimator that
// reports a relative error e the scheduler plans with speed s/(1+e): a
// lone compressed flow reserves (1+e)× the sender cores.
func TestScheduler_DeratesUncertainSpeeds(t *testing.T) {
	fab := coflow.NewFabric(2, 125e6).SetCores(64)
	fab.Codecs = []coflow.CodecProfile{{Name: "lz4", CompressSpeed: 600e6, DecompressSpeed: 4.9e9, Ratio: 0.36}}
	st := &coflow.State{Fabric: fab, Coflows: []coflow.CoflowState{{Index: 0, Weight: 1, Width: 1, Bytes: 1e9,
		Flows: []coflow.FlowState{{Ref: coflow.FlowRef{}, Src: 0, Dst: 1, Bytes: 1e9, Remaining: 1e9}}}}}
	cores := func(noDerate bool) float64 {
		s, err := New(Config{StarvationPeriod: -1, NoDerate: noDerate, NoCoreHeadroom: true}, uncertain{1})
		if err != nil {
			t.Fatal(err)
		}
		al := s.Schedule(0, st)
		if len(al) != 1 || al[0].Codec == coflow.Raw {
			t.Fatalf("want one compressed allocation, got %+v", al)
		}
		return al[0].SendCores
	}
	plain, derated := cores(true), cores(false)
	if math.Abs(derated/plain-2) > 1e-9 {
		t.Fatalf("sender cores %v derated vs %v plain, want ratio 2", derated, plain)
	}
}
