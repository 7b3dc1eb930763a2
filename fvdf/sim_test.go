package fvdf

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// synth returns a small synthetic workload and a fabric with lz4-like codec.
func synth(t testing.TB, ports, n int, seed uint64) ([]coflow.Coflow, *coflow.Fabric) {
	t.Helper()
	cfg := coflow.SynthConfig{Ports: ports, Coflows: n, MeanInterArrival: 200 * time.Millisecond, MaxWidth: 8}
	tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(seed, 7)))
	if err != nil {
		t.Fatal(err)
	}
	cfs, err := tr.ToCoflows()
	if err != nil {
		t.Fatal(err)
	}
	fab := tr.Fabric(coflow.GigabitBytesPerSec)
	return cfs, fab
}

func TestScheduler_RunsInSim(t *testing.T) {
	cfs, fab := synth(t, 20, 60, 1)
	fab.SetCores(4)
	fab.Codecs = []coflow.CodecProfile{{Name: "lz4", CompressSpeed: 600e6, DecompressSpeed: 4.9e9, Ratio: 0.4}}
	for _, comp := range []bool{false, true} {
		s, err := New(Config{DisableCompression: !comp}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sim, err := coflow.NewSim(coflow.DefaultConfig(), fab, s)
		if err != nil {
			t.Fatal(err)
		}
		res, err := sim.Run(cfs)
		if err != nil {
			t.Fatal(err)
		}
		var sum time.Duration
		for _, c := range res.Coflows {
			sum += c.CCT
		}
		t.Logf("compress=%v avg CCT %v wire %.3g raw %.3g calls %d", comp, sum/time.Duration(len(cfs)), res.WireBytes, res.RawBytes, res.Calls)
	}
}

// TestFVDF_TimeShiftInvariance: moving every arrival by k·T (T = the guard
// period) leaves FVDF's and guarded SEBF's CCTs unchanged within 1e-6
// relative, with compression and a 64 KiB pipeline (the review measured a
// 0.5 % move of FVDF's average CCT for a 1000 s shift before the simulator
// kept its times relative to the first arrival).
func TestFVDF_TimeShiftInvariance(t *testing.T) {
	cfs, _ := synth(t, 20, 150, 3)
	cfg := ReplayConfig{Static: true, Cores: 2}
	T := DefaultConfig().StarvationPeriod
	for _, name := range []string{"fvdf", "sebf-guard"} {
		var base []time.Duration
		for _, k := range []int{0, 1, 100} {
			sh := make([]coflow.Coflow, len(cfs))
			for i, c := range cfs {
				c.Arrival += time.Duration(k) * T
				sh[i] = c
			}
			m, err := Run(name, sh, 20, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				base = m.CCT
				continue
			}
			for i := range m.CCT {
				a, b := m.CCT[i].Seconds(), base[i].Seconds()
				if math.Abs(a-b) > 1e-6*math.Max(a, b) {
					t.Fatalf("%s shift %d·T: coflow %d CCT %v, unshifted %v", name, k, i, m.CCT[i], base[i])
				}
			}
		}
	}
}

// TestFVDF_OneClassBitIdentical: FVDF on a fabric with one explicit data
// class whose profiles are the fabric's codecs gives bit-identical results
// to a fabric without classes (the per-flow class machinery changes
// nothing when there is one class).
func TestFVDF_OneClassBitIdentical(t *testing.T) {
	cfs, fab := synth(t, 20, 80, 2)
	fab.SetCores(2)
	fab.Codecs = []coflow.CodecProfile{
		{Name: "lz4", CompressSpeed: 600e6, DecompressSpeed: 4.9e9, Ratio: 0.4},
		{Name: "snappy", CompressSpeed: 680e6, DecompressSpeed: 1.5e9, Ratio: 0.38},
	}
	run := func(f *coflow.Fabric) *coflow.Result {
		s, err := New(Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sim, err := coflow.NewSim(coflow.DefaultConfig(), f, s)
		if err != nil {
			t.Fatal(err)
		}
		res, err := sim.Run(cfs)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	one := *fab
	one.Classes = []coflow.DataClass{{Name: "all", Codecs: fab.Codecs}}
	a, b := run(fab), run(&one)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("one explicit class differs: avg wire %v vs %v", a.WireBytes, b.WireBytes)
	}
	if a.WireBytes >= a.RawBytes {
		t.Fatal("nothing was compressed: the test does not exercise the codecs")
	}
}

// TestFVDF_PerClassDecision: with two classes, one that compresses well and
// one that does not shrink at all, FVDF compresses only the first class's
// flows.
func TestFVDF_PerClassDecision(t *testing.T) {
	cfs, fab := synth(t, 20, 60, 4)
	fab.SetCores(4)
	good := coflow.CodecProfile{Name: "lz4", CompressSpeed: 600e6, DecompressSpeed: 4.9e9, Ratio: 0.35}
	none := coflow.CodecProfile{Name: "lz4", CompressSpeed: 10e9, DecompressSpeed: 50e9, Ratio: 1}
	fab.Codecs = []coflow.CodecProfile{{Name: "lz4", CompressSpeed: 1e9, DecompressSpeed: 8e9, Ratio: 0.6}}
	fab.Classes = []coflow.DataClass{{Name: "text", Codecs: []coflow.CodecProfile{good}}, {Name: "random", Codecs: []coflow.CodecProfile{none}}}
	if err := coflow.AssignClasses(cfs, []float64{0.5, 0.5}, 1); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	compressed := [2]int{}
	check := func(now time.Duration, st *coflow.State, al []coflow.Allocation) error {
		for _, a := range al {
			if a.Codec != coflow.Raw {
				compressed[cfs[a.Flow.Coflow].Flows[a.Flow.Flow].Class]++
			}
		}
		return nil
	}
	cfg := coflow.DefaultConfig()
	cfg.Check = check
	sim, err := coflow.NewSim(cfg, fab, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Run(cfs); err != nil {
		t.Fatal(err)
	}
	if compressed[0] == 0 || compressed[1] != 0 {
		t.Fatalf("compressed allocations per class %v, want some for class 0 and none for class 1", compressed)
	}
}
