package fvdf

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// fixed is a scheduler that gives flow 0 of the single coflow a fixed
// compressed allocation.
type fixed struct{ a coflow.Allocation }

func (f *fixed) Name() string { return "fixed" }
func (f *fixed) Schedule(_ time.Duration, s *coflow.State) []coflow.Allocation {
	if len(s.Coflows) == 0 {
		return nil
	}
	a := f.a
	a.Flow = s.Coflows[0].Flows[0].Ref
	return []coflow.Allocation{a}
}

// TestPipelining_ClosedFormMatchesSimulation checks the stage formulas
// against package coflow's simulator on a lone compressed flow: the chunked
// flow-shop time (pipelined, chunk b), the ideal pipeline (b = 0) and the
// sequential sum.
//
// Reference: research note swallow.md §3 (stage pipelining:
// T ≈ max stage + fill/drain).
func TestPipelining_ClosedFormMatchesSimulation(t *testing.T) {
	const tol = 1e-6 // relative; the simulator reports whole nanoseconds
	codec := coflow.CodecProfile{Name: "lz4", CompressSpeed: 600e6, DecompressSpeed: 4.9e9, Ratio: 0.36}
	const v = 64 * (64 << 10) // 64 chunks of 64 KiB
	tests := []struct {
		rate, ks, kr float64
	}{
		{125e6, 1, 1},   // wire-bound: r/ρ = 347 MB/s < s = 600 MB/s
		{125e6, 0.2, 1}, // compression-bound
		{1e9, 4, 0.05},  // decompression-bound
	}
	for _, tc := range tests {
		for _, mode := range []string{"chunked", "ideal", "sequential"} {
			t.Run(fmt.Sprintf("r=%g/ks=%g/kr=%g/%s", tc.rate, tc.ks, tc.kr, mode), func(t *testing.T) {
				fab := coflow.NewFabric(2, 1.25e9).SetCores(4)
				fab.Codecs = []coflow.CodecProfile{codec}
				cfg := coflow.Config{Pipelining: mode != "sequential"}
				var want float64
				s, u, rho := codec.CompressSpeed, codec.DecompressSpeed, codec.Ratio
				switch mode {
				case "chunked":
					cfg.ChunkBytes = 64 << 10
					want = ChunkedTime(v, cfg.ChunkBytes, s, u, rho, tc.rate, tc.ks, tc.kr)
				case "ideal":
					want = PipelinedTime(v, s, u, rho, tc.rate, tc.ks, tc.kr)
				case "sequential":
					want = SequentialTime(v, s, u, rho, tc.rate, tc.ks, tc.kr)
				}
				sim, err := coflow.NewSim(cfg, fab, &fixed{coflow.Allocation{Rate: tc.rate, Codec: 1, SendCores: tc.ks, RecvCores: tc.kr}})
				if err != nil {
					t.Fatal(err)
				}
				res, err := sim.Run([]coflow.Coflow{{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: v}}}})
				if err != nil {
					t.Fatal(err)
				}
				got := res.Coflows[0].CCT.Seconds()
				if math.Abs(got-want) > tol*want {
					t.Fatalf("simulated %.9f s, closed form %.9f s", got, want)
				}
			})
		}
	}
}

// TestScheduler_PlansForStageMode checks that FVDF's allocation for a lone
// compressible flow finishes when it plans to in both stage modes: pipelined
// (Γ = max(ρV/B, V/(K·s), V/(K·u))) and sequential (every stage reserved at
// 3× the disposal rate, so Γ = 3ρV/B here), against the simulator.
func TestScheduler_PlansForStageMode(t *testing.T) {
	const tol = 1e-6
	const v, bw = 1e9, 125e6
	codec := coflow.CodecProfile{Name: "sparse", CompressSpeed: 600e6, DecompressSpeed: 4.9e9, Ratio: 0.2}
	for _, seq := range []bool{false, true} {
		t.Run(fmt.Sprintf("sequential=%v", seq), func(t *testing.T) {
			fab := coflow.NewFabric(2, bw).SetCores(4)
			fab.Codecs = []coflow.CodecProfile{codec}
			fv, err := New(Config{StarvationPeriod: -1, SequentialStages: seq, NoCoreHeadroom: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			sim, err := coflow.NewSim(coflow.Config{Pipelining: !seq}, fab, fv)
			if err != nil {
				t.Fatal(err)
			}
			res, err := sim.Run([]coflow.Coflow{{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: v}}}})
			if err != nil {
				t.Fatal(err)
			}
			want := PipelinedTime(v, codec.CompressSpeed, codec.DecompressSpeed, codec.Ratio, bw, 4, 4)
			if seq {
				want = 3 * codec.Ratio * v / bw
			}
			if got := res.Coflows[0].CCT.Seconds(); math.Abs(got-want) > tol*want {
				t.Fatalf("CCT %.9f s, planned %.9f s", got, want)
			}
		})
	}
}
