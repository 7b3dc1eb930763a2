package straggler

import (
	"testing"
	"time"
)

func TestTracker_EWMA(t *testing.T) {
	tr, err := NewTracker(2, TrackerConfig{Alpha: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		r      Report
		sample bool
		want   float64
	}{
		{Report{Worker: 0, Clock: 0, Done: 100, Elapsed: time.Second}, true, 100},      // first sample sets
		{Report{Worker: 0, Clock: 0, Done: 400, Elapsed: 2 * time.Second}, true, 200},  // x=300: .5*300+.5*100
		{Report{Worker: 0, Clock: 0, Done: 400, Elapsed: 2 * time.Second}, false, 200}, // no time passed
		{Report{Worker: 0, Clock: 1, Done: 200, Elapsed: time.Second}, true, 200},      // new clock from (0,0): x=200
		{Report{Worker: 0, Clock: 0, Done: 900, Elapsed: 3 * time.Second}, false, 200}, // older clock ignored
		{Report{Worker: 0, Clock: 1, Done: 200, Elapsed: 3 * time.Second}, true, 100},  // stalled: x=0
	}
	for i, s := range steps {
		got, err := tr.Observe(s.r)
		if err != nil {
			t.Fatal(err)
		}
		if got != s.sample || !near(tr.Speed(0), s.want) {
			t.Fatalf("step %d: sample=%v speed=%v, want %v %v", i, got, tr.Speed(0), s.sample, s.want)
		}
	}
	if tr.Known(1) || tr.Speed(1) != 0 {
		t.Error("worker 1 should be unknown")
	}
	if _, err := tr.Observe(Report{Worker: 2}); err == nil {
		t.Error("out-of-range worker accepted")
	}
}

func TestTracker_RescaleOnParallelism(t *testing.T) {
	tr, _ := NewTracker(1, TrackerConfig{Alpha: 0.5, Curve: func(int) Speedup { return Amdahl{0} }})
	tr.Observe(Report{Worker: 0, Clock: 0, Done: 100, Elapsed: time.Second, Parallelism: 1})
	tr.SetParallelism(0, 4)
	if !near(tr.Speed(0), 400) {
		t.Fatalf("after p 1->4 with linear curve speed = %v, want 400", tr.Speed(0))
	}
}
