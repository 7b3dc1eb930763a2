package fvdf

import (
	"errors"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// TestPlanJobs_Degenerate: one stage and no I/O term reproduce the
// one-stage formula JCT = map + CCT + reduce of Jobs exactly.
func TestPlanJobs_Degenerate(t *testing.T) {
	cfs, fab := synth(t, 20, 60, 5)
	plan, err := PlanJobs(cfs, DAGConfig{Jobs: DefaultJobConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Coflows) != len(cfs) {
		t.Fatalf("%d coflows planned, want %d", len(plan.Coflows), len(cfs))
	}
	sched, _ := coflow.NewSEBF(coflow.DefaultOrderedConfig())
	sim, _ := coflow.NewSim(coflow.DefaultConfig(), fab, sched)
	res, err := sim.Run(plan.Coflows)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := Jobs(cfs, DefaultJobConfig())
	if err != nil {
		t.Fatal(err)
	}
	got := plan.JCTs(res)
	for i, j := range jobs {
		if want := j.MapDuration + res.Coflows[i].CCT + j.ReduceDuration; got[i] != want {
			t.Fatalf("job %d: JCT %v, want %v", i, got[i], want)
		}
	}
}

// TestPlanJobs_Stages: a job of three stages releases each shuffle after
// its parent's reducers and is charged the io of reading the shuffle as
// written, so compressing shortens the job beyond its CCTs.
func TestPlanJobs_Stages(t *testing.T) {
	cfs := []coflow.Coflow{{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 1e9}, {Src: 2, Dst: 1, Bytes: 1e9}}}}
	cfg := DAGConfig{Jobs: DefaultJobConfig(), StageWeights: []float64{0, 0, 1}, DiskBps: 100e6}
	cfg.Jobs.Noise = -1
	plan, err := PlanJobs(cfs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Coflows) != 3 || len(plan.Stages[0]) != 3 {
		t.Fatalf("planned %d coflows, stages %v", len(plan.Coflows), plan.Stages)
	}
	c2 := plan.Coflows[1]
	if c2.Parent != 1 || c2.Flows[0].Src != 1 || c2.Flows[0].Dst != 0 || c2.Flows[0].Bytes != 0.5e9 {
		t.Fatalf("stage 2 = %+v", c2)
	}
	// One destination port: io = W / 100 MB/s.
	if c2.ReleasePerWireByte != 1/100e6 {
		t.Fatalf("io per byte %v", c2.ReleasePerWireByte)
	}
	fab := coflow.NewFabric(3, coflow.GigabitBytesPerSec)
	sched, _ := coflow.NewSEBF(coflow.DefaultOrderedConfig())
	sim, _ := coflow.NewSim(coflow.DefaultConfig(), fab, sched)
	res, err := sim.Run(plan.Coflows)
	if err != nil {
		t.Fatal(err)
	}
	// Stage 1: 2 GB into port 1 at 125 MB/s = 16 s; reduce = 1 s + 10 ms ×
	// 1907.3 MiB = 20.07 s; io = 20 s. Stage 2 released at 56.07 s.
	mib := 2e9 / coflow.MiB
	red1 := time.Second + time.Duration(float64(10*time.Millisecond)*mib)
	if want := 16*time.Second + red1 + 20*time.Second; res.Coflows[1].Arrival != want {
		t.Fatalf("stage 2 released at %v, want %v", res.Coflows[1].Arrival, want)
	}
	jct := plan.JCTs(res)[0]
	last := res.Coflows[2]
	if jct <= last.Finish {
		t.Fatalf("JCT %v not after the last shuffle's finish %v", jct, last.Finish)
	}
}

// TestCompressAtWrite: a two-stage job on two ports (one codec, ρ ½,
// 100 MB/s per core compressing, 400 MB/s decompressing, 2 free cores):
// the shuffles carry half their bytes, the first map ends 2 s later
// (4e8 B / 1e8 / 2 cores), the second shuffle is released 0.5 s
// (decompressing 4e8 B) + 1 s (compressing 2e8 B) later, the last
// reduce takes 0.25 s longer; the JCT of a run is the raw formula with
// those terms; the input plan is unchanged; no cores or no such codec is
// refused.
func TestCompressAtWrite(t *testing.T) {
	fab := coflow.NewFabric(2, 1e8).SetCores(2)
	fab.Codecs = []coflow.CodecProfile{{Name: "lz4", CompressSpeed: 1e8, DecompressSpeed: 4e8, Ratio: 0.5}}
	cfs := []coflow.Coflow{{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 4e8}}}}
	jc := DefaultJobConfig()
	jc.Noise = -1
	p, err := PlanJobs(cfs, DAGConfig{Jobs: jc, StageWeights: []float64{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := p.CompressAtWrite(fab, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Coflows) != 2 || p.Coflows[0].Flows[0].Bytes != 4e8 || p.Raw != nil {
		t.Fatalf("input plan changed or wrong stages: %+v", p)
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"stage 1 bytes", q.Coflows[0].Flows[0].Bytes, 2e8},
		{"stage 2 bytes", q.Coflows[1].Flows[0].Bytes, 1e8},
		{"stage 1 arrival", q.Coflows[0].Arrival, p.Coflows[0].Arrival + 2*time.Second},
		{"map", q.Map[0], p.Map[0] + 2*time.Second},
		{"stage 2 release", q.Coflows[1].ReleaseDelay, p.Coflows[1].ReleaseDelay + 1500*time.Millisecond},
		{"final", q.Final[0], p.Final[0] + 250*time.Millisecond},
		{"raw", q.Raw[0] + q.Raw[1], 6e8},
		{"cpu", q.CodecCPUSeconds, 7.5},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	sebf, _ := coflow.NewSEBF(coflow.DefaultOrderedConfig())
	sim, _ := coflow.NewSim(coflow.DefaultConfig(), fab, sebf)
	res, err := sim.Run(q.Coflows)
	if err != nil {
		t.Fatal(err)
	}
	// Stage 1: 2e8 B at 1e8 B/s; stage 2: 1e8 B.
	want := q.Map[0] + 2*time.Second + q.Coflows[1].ReleaseDelay + time.Second + q.Final[0]
	if got := q.JCTs(res)[0]; got != want || res.WireBytes != 3e8 {
		t.Fatalf("JCT %v, want %v; wire %v, want 3e8", got, want, res.WireBytes)
	}
	fab.Ports[1].Background = 2
	if _, err := p.CompressAtWrite(fab, 1); !errors.Is(err, ErrConfig) {
		t.Fatalf("no free cores: %v", err)
	}
	if _, err := p.CompressAtWrite(fab, 2); !errors.Is(err, ErrConfig) {
		t.Fatalf("codec 2: %v", err)
	}
}
