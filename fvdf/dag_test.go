package fvdf

import (
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
