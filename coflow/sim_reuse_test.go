package coflow_test

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

func synthCoflows(t *testing.T, seed uint64, n int) (*coflow.Trace, []coflow.Coflow) {
	t.Helper()
	cfg := coflow.DefaultSynthConfig()
	cfg.Ports, cfg.Coflows, cfg.MeanInterArrival = 12, n, 200*time.Millisecond
	tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(seed, 7)))
	if err != nil {
		t.Fatal(err)
	}
	cfs, err := tr.ToCoflows()
	if err != nil {
		t.Fatal(err)
	}
	// Later stages exercise the release path too.
	cfs[n-1].Parent, cfs[n-1].ReleaseDelay = 1, 50*time.Millisecond
	return tr, cfs
}

// TestSim_RunTwice checks the documented reuse rule: a Sim (with its
// scheduler) may be Run again, one run at a time, and every run equals a
// run on a fresh Sim with a fresh scheduler; a run does not change the
// Result an earlier run returned; a run that failed leaves nothing behind.
// Every built-in scheduler keeps only scratch space across calls, so this
// holds for each of them.
func TestSim_RunTwice(t *testing.T) {
	trA, a := synthCoflows(t, 1, 30)
	_, b := synthCoflows(t, 2, 20)
	fab := trA.Fabric(coflow.GigabitBytesPerSec)
	cfg := coflow.DefaultConfig()
	cfg.RecordFlows = true
	fresh := func(name string, cfs []coflow.Coflow) *coflow.Result {
		sim, err := coflow.NewSim(cfg, fab, mustSched(t, name))
		if err != nil {
			t.Fatal(err)
		}
		res, err := sim.Run(cfs)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, name := range coflow.SchedulerNames() {
		t.Run(name, func(t *testing.T) {
			wantA, wantB := fresh(name, a), fresh(name, b)
			sim, err := coflow.NewSim(cfg, fab, mustSched(t, name))
			if err != nil {
				t.Fatal(err)
			}
			var first *coflow.Result
			for k, step := range []struct {
				cfs  []coflow.Coflow
				want *coflow.Result
			}{{a, wantA}, {a, wantA}, {b, wantB}, {a, wantA}} {
				got, err := sim.Run(step.cfs)
				if err != nil {
					t.Fatalf("run %d: %v", k+1, err)
				}
				if !reflect.DeepEqual(got, step.want) {
					t.Fatalf("run %d differs from a fresh Sim's: makespan %v vs %v, calls %d vs %d",
						k+1, got.Makespan, step.want.Makespan, got.Calls, step.want.Calls)
				}
				if k == 0 {
					first = got
				}
			}
			if !reflect.DeepEqual(first, wantA) {
				t.Fatal("a later run changed the Result of the first")
			}
		})
	}
}

// TestSim_RunAfterError checks that a run stopped by an error (a bad
// allocation, MaxCalls) does not affect the next run of the same Sim.
func TestSim_RunAfterError(t *testing.T) {
	tr, cfs := synthCoflows(t, 3, 15)
	fab := tr.Fabric(coflow.GigabitBytesPerSec)
	sebf := mustSched(t, "sebf")
	fail := true
	sched := funcSched(func(now time.Duration, s *coflow.State) []coflow.Allocation {
		out := sebf.Schedule(now, s)
		if fail && now > 0 && len(out) > 0 {
			out = append(out, out[0]) // a duplicate: ErrBadAllocation
		}
		return out
	})
	sim, err := coflow.NewSim(coflow.DefaultConfig(), fab, sched)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Run(cfs); !errors.Is(err, coflow.ErrBadAllocation) {
		t.Fatalf("first run: err = %v, want ErrBadAllocation", err)
	}
	fail = false
	got, err := sim.Run(cfs)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := coflow.NewSim(coflow.DefaultConfig(), fab, funcSched(mustSched(t, "sebf").Schedule))
	want, err := ref.Run(cfs)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("run after a failed run: makespan %v, fresh %v", got.Makespan, want.Makespan)
	}
}
