package coflow_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/falconml/falcon/coflow"
)

func TestAssignClasses_Deterministic(t *testing.T) {
	cfg := coflow.DefaultSynthConfig()
	cfg.Coflows = 2000
	tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(1, 0)))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := tr.ToCoflows()
	b, _ := tr.ToCoflows()
	w := []float64{0.5, 0, 0.3, 0.2}
	if err := coflow.AssignClasses(a, w, 9); err != nil {
		t.Fatal(err)
	}
	if err := coflow.AssignClasses(b, w, 9); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different classes")
	}
	count := make([]float64, len(w))
	for _, c := range a {
		k := c.Flows[0].Class
		for _, f := range c.Flows {
			if f.Class != k {
				t.Fatalf("coflow %d mixes classes", c.ID)
			}
		}
		count[k]++
	}
	for k := range w {
		// Binomial: 4 standard deviations.
		n := float64(len(a))
		if sd := math.Sqrt(n * w[k] * (1 - w[k])); math.Abs(count[k]-n*w[k]) > 4*sd+1e-9 {
			t.Fatalf("class %d drawn %v times, want about %v", k, count[k], n*w[k])
		}
	}
	if err := coflow.AssignClasses(a, []float64{0, 0}, 1); !errors.Is(err, coflow.ErrInvalidConfig) {
		t.Fatalf("zero weights: %v", err)
	}
	if err := coflow.AssignClasses(a, []float64{1, math.NaN()}, 1); !errors.Is(err, coflow.ErrInvalidConfig) {
		t.Fatalf("NaN weight: %v", err)
	}
}

// TestClasses_OneClassBitIdentical: a fabric with one explicit class whose
// profiles are the fabric's codecs gives bit-identical results to a fabric
// without classes, for a compressing scheduler.
func TestClasses_OneClassBitIdentical(t *testing.T) {
	cfs := synthSmall(t)
	run := func(classes bool) *coflow.Result {
		fab := coflow.NewFabric(30, coflow.GigabitBytesPerSec).SetCores(4)
		fab.Codecs = []coflow.CodecProfile{pipeCodec}
		if classes {
			fab.Classes = []coflow.DataClass{{Name: "only", Codecs: []coflow.CodecProfile{pipeCodec}}}
		}
		sim, err := coflow.NewSim(coflow.DefaultConfig(), fab, &fixed{rate: 1e6, codec: 1, ks: 0.01, kr: 0.01})
		if err != nil {
			t.Fatal(err)
		}
		res, err := sim.Run(cfs)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if a, b := run(false), run(true); !reflect.DeepEqual(a, b) {
		t.Fatal("one explicit class differs from no classes")
	}
}

// TestClasses_PerFlowProfile: two flows alike but for their class finish at
// their own class's disposal rate, and a class beyond the fabric's is
// refused.
func TestClasses_PerFlowProfile(t *testing.T) {
	fab := coflow.NewFabric(4, coflow.GigabitBytesPerSec).SetCores(4)
	fab.Codecs = []coflow.CodecProfile{pipeCodec}
	fab.Classes = []coflow.DataClass{
		{Name: "half", Codecs: []coflow.CodecProfile{pipeCodec}},
		{Name: "quarter", Codecs: []coflow.CodecProfile{{Name: "q", CompressSpeed: 1e9, DecompressSpeed: 2e9, Ratio: 0.25}}},
	}
	cfs := []coflow.Coflow{{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 1e9}, {Src: 2, Dst: 3, Bytes: 1e9, Class: 1}}}}
	cfg := coflow.DefaultConfig()
	cfg.ChunkBytes = 0
	cfg.RecordFlows = true
	sim, err := coflow.NewSim(cfg, fab, &fixed{rate: 100e6, codec: 1, ks: 1, kr: 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(cfs)
	if err != nil {
		t.Fatal(err)
	}
	// Wire-bound: D = r/ρ = 200 MB/s and 400 MB/s.
	if got := res.Coflows[0].FlowFinish; got[0].Seconds() != 5 || got[1].Seconds() != 2.5 {
		t.Fatalf("flow finishes %v, want [5s 2.5s]", got)
	}
	if want := 0.5e9 + 0.25e9; math.Abs(res.WireBytes-want) > 1 {
		t.Fatalf("wire bytes %v, want %v", res.WireBytes, want)
	}
	cfs[0].Flows[1].Class = 2
	if _, err := sim.Run(cfs); !errors.Is(err, coflow.ErrInvalidCoflow) {
		t.Fatalf("class beyond the fabric: %v", err)
	}
	bad := *fab
	bad.Classes = []coflow.DataClass{{Name: "none"}}
	if err := bad.Validate(); !errors.Is(err, coflow.ErrInvalidFabric) {
		t.Fatalf("class without profiles: %v", err)
	}
}

func synthSmall(t *testing.T) []coflow.Coflow {
	t.Helper()
	cfg := coflow.DefaultSynthConfig()
	cfg.Coflows, cfg.Ports = 60, 30
	tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(5, 0)))
	if err != nil {
		t.Fatal(err)
	}
	cfs, err := tr.ToCoflows()
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfs {
		for j := range cfs[i].Flows {
			cfs[i].Flows[j].Bytes = min(cfs[i].Flows[j].Bytes, 64*coflow.MiB)
		}
	}
	return cfs
}
