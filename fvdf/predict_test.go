package fvdf

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/predictor"
)

func TestContention_DeterministicAnyQueryOrder(t *testing.T) {
	a, err := NewContention(ContentionConfig{}, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewContention(ContentionConfig{}, rand.New(rand.NewPCG(1, 2)))
	late := b.Factor(500 * time.Second) // b extends to step 500 first
	for s := 0; s <= 500; s++ {
		at := time.Duration(s) * time.Second
		if fa, fb := a.Factor(at), b.Factor(at); fa != fb {
			t.Fatalf("step %d: %v vs %v", s, fa, fb)
		}
	}
	if a.Factor(500*time.Second) != late {
		t.Fatal("late query differs")
	}
	var nilC *Contention
	if nilC.Factor(time.Hour) != 1 {
		t.Fatal("nil contention must be 1")
	}
	if _, err := NewContention(ContentionConfig{Levels: []float64{0}}, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("err = %v, want ErrConfig", err)
	}
}

// TestPredicted_LearnsOnlyFromThePast checks that an observation is folded
// in only at a strictly later decision time, and then moves the estimate.
func TestPredicted_LearnsOnlyFromThePast(t *testing.T) {
	fab := coflow.NewFabric(2, 125e6)
	fab.Codecs = []coflow.CodecProfile{{Name: "lz4", CompressSpeed: 600e6, DecompressSpeed: 4e9, Ratio: 0.4}}
	p, err := NewPredicted(predictor.NameLastValue, predictor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Estimate(0, fab, 1).CompressSpeed; got != 600e6 {
		t.Fatalf("prior = %v, want 600e6", got)
	}
	p.Observe(time.Second, 1, 100e6, 1e9)
	p.Observe(time.Second, 1, 300e6, 3e9) // same instant: averaged
	if got := p.Estimate(time.Second, fab, 1).CompressSpeed; got != 600e6 {
		t.Fatalf("same-time estimate = %v, want the prior", got)
	}
	e := p.Estimate(2*time.Second, fab, 1)
	if e.CompressSpeed != 200e6 || e.DecompressSpeed != 2e9 || e.Ratio != 0.4 {
		t.Fatalf("estimate = %+v, want s=200e6 u=2e9 ρ=0.4", e)
	}
	// The prior predicted 600e6 against a measured 200e6: relative error 2.
	if u := p.Uncertainty(1); math.Abs(u-2) > 1e-12 {
		t.Fatalf("uncertainty = %v, want 2", u)
	}
	if _, err := NewPredicted("nope", predictor.Config{}); !errors.Is(err, ErrUnknownPredictor) {
		t.Fatalf("err = %v, want ErrUnknownPredictor", err)
	}
}

func TestJobs_Model(t *testing.T) {
	cfs := []coflow.Coflow{{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 100 * coflow.MiB}, {Src: 2, Dst: 1, Bytes: 100 * coflow.MiB}}}}
	jobs, err := Jobs(cfs, JobConfig{Noise: -1})
	if err != nil {
		t.Fatal(err)
	}
	// map = 1 s + 10 ms × 200 MiB / 2 mappers = 2 s; reduce = 1 s + 10 ms × 200 MiB / 1 reducer = 3 s.
	if jobs[0].MapDuration != 2*time.Second || jobs[0].ReduceDuration != 3*time.Second {
		t.Fatalf("map %v reduce %v, want 2s and 3s", jobs[0].MapDuration, jobs[0].ReduceDuration)
	}
	a, _ := Jobs(cfs, JobConfig{Seed: 3})
	b, _ := Jobs(cfs, JobConfig{Seed: 3})
	if a[0].MapDuration != b[0].MapDuration {
		t.Fatal("same seed, different jobs")
	}
}

// TestRun_ReplayMetrics replays a small synthetic workload under every
// scheduler and predictor and checks the metrics are consistent.
func TestRun_ReplayMetrics(t *testing.T) {
	cfs, fab := synth(t, 12, 40, 11)
	for _, name := range SchedulerNames() {
		for _, pred := range []string{PredictorOracle, predictor.NameEWMA} {
			m, err := Run(name, cfs, fab.NumPorts(), ReplayConfig{Predictor: pred, Mix: nil})
			if err != nil {
				t.Fatalf("%s/%s: %v", name, pred, err)
			}
			if m.Coflows != len(cfs) || m.AvgCCT <= 0 || m.P95CCT < m.AvgCCT/10 || m.AvgJCT <= m.AvgCCT {
				t.Fatalf("%s/%s: implausible metrics %+v", name, pred, m)
			}
			red := m.TrafficReduction()
			b, err := ParseBaseline(name)
			compresses := err == nil && b.Comp != "none"
			if compresses && red <= 0 || !compresses && math.Abs(red) > 1e-9 {
				t.Fatalf("%s/%s: traffic reduction %v", name, pred, red)
			}
		}
	}
	ms, err := Replay([]string{"fvdf-raw", "sebf-guard"}, cfs, fab.NumPorts(), ReplayConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// FVDF without compression is SEBF with the same guard, coflow by coflow.
	for i := range ms[0].CCT {
		if ms[0].CCT[i] != ms[1].CCT[i] {
			t.Fatalf("coflow %d: fvdf-raw %v, sebf-guard %v", i, ms[0].CCT[i], ms[1].CCT[i])
		}
	}
	if _, err := Run("nope", cfs, fab.NumPorts(), ReplayConfig{}); !errors.Is(err, ErrBadInput) {
		t.Fatalf("err = %v, want ErrBadInput", err)
	}
}
