package coflow

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestSim_SameAllocationSkip: a step whose allocation equals the one
// applied last, with no flow completed since, is neither validated nor
// applied again; runs with and without that shortcut give the same flow
// finish times, CCTs, bytes and calls, to the nanosecond and the bit. The
// workloads make it happen often: D-CLAS with slowed flows (its threshold
// timer fires before the coflow crosses, and the next call sees the same
// queues), SEBF rescheduling on every flow completion, and a compressing
// scheduler.
func TestSim_SameAllocationSkip(t *testing.T) {
	mk := map[string]func() Scheduler{
		"dclas-slow": func() Scheduler {
			d, err := NewDCLAS(DCLASConfig{Queues: 6, FirstThreshold: MiB, Multiplier: 4})
			if err != nil {
				t.Fatal(err)
			}
			return refOnlyDCLAS{r: &refDCLAS{DCLAS: d}, slow: 0.3}
		},
		"dclas": func() Scheduler {
			d, err := NewDCLAS(DefaultDCLASConfig())
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		"sebf-every": func() Scheduler {
			s, err := NewSEBF(OrderedConfig{OnFlowCompletion: true})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"fair": func() Scheduler { return NewFair() },
	}
	for name, f := range mk {
		for seed := uint64(1); seed <= 2; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", name, seed), func(t *testing.T) {
				sc := SynthConfig{Ports: 20, Coflows: 30, MeanInterArrival: 300 * time.Millisecond, MaxWidth: 12}
				tr, err := Synthetic(sc, rand.New(rand.NewPCG(seed, 31)))
				if err != nil {
					t.Fatal(err)
				}
				cfs, err := tr.ToCoflows()
				if err != nil {
					t.Fatal(err)
				}
				fab := tr.Fabric(GigabitBytesPerSec)
				cfg := DefaultConfig()
				cfg.RecordFlows = true
				run := func(noSkip bool) (*Result, int) {
					sim, err := NewSim(cfg, fab, f())
					if err != nil {
						t.Fatal(err)
					}
					sim.noSameSkip = noSkip
					res, err := sim.Run(cfs)
					if err != nil {
						t.Fatal(err)
					}
					return res, sim.sameSkips
				}
				got, skips := run(false)
				want, none := run(true)
				if none != 0 {
					t.Fatalf("%d skips with the shortcut off", none)
				}
				if got.Calls != want.Calls || got.Events != want.Events || got.WireBytes != want.WireBytes || got.RawBytes != want.RawBytes || got.Makespan != want.Makespan {
					t.Fatalf("calls %d/%d events %d/%d wire %v/%v raw %v/%v makespan %v/%v", got.Calls, want.Calls, got.Events, want.Events, got.WireBytes, want.WireBytes, got.RawBytes, want.RawBytes, got.Makespan, want.Makespan)
				}
				for i := range want.Coflows {
					g, w := got.Coflows[i], want.Coflows[i]
					if g.CCT != w.CCT || g.Start != w.Start || g.WireBytes != w.WireBytes {
						t.Fatalf("coflow %d: %+v, without the shortcut %+v", i, g, w)
					}
					for j := range w.FlowFinish {
						if g.FlowFinish[j] != w.FlowFinish[j] {
							t.Fatalf("coflow %d flow %d: finish %v, without the shortcut %v", i, j, g.FlowFinish[j], w.FlowFinish[j])
						}
					}
				}
				if name == "dclas-slow" && skips == 0 {
					t.Fatalf("%d calls, no step skipped", got.Calls)
				}
				t.Logf("%d calls, %d skipped", got.Calls, skips)
			})
		}
	}
}

// staleScheduler returns its first allocation at every call, finished
// flows included.
type staleScheduler struct {
	fair  *Fair
	first []Allocation
}

func (s *staleScheduler) Name() string { return "stale" }
func (s *staleScheduler) Schedule(now time.Duration, st *State) []Allocation {
	if s.first == nil {
		s.first = append([]Allocation(nil), s.fair.Schedule(now, st)...)
	}
	return s.first
}

// TestSim_SameAllocationAfterCompletionIsValidated: the shortcut does not
// hide an allocation that names a flow finished since it was applied.
func TestSim_SameAllocationAfterCompletionIsValidated(t *testing.T) {
	fab := NewFabric(2, 100)
	cfs := []Coflow{{ID: 1, Flows: []Flow{{Src: 0, Dst: 1, Bytes: 100}, {Src: 1, Dst: 0, Bytes: 300}}}}
	sim, err := NewSim(DefaultConfig(), fab, &staleScheduler{fair: NewFair()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Run(cfs); !errors.Is(err, ErrBadAllocation) {
		t.Fatalf("err %v, want ErrBadAllocation", err)
	}
}
