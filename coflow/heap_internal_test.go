package coflow

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestSim_EventHeapBounded replays a synthetic trace under SEBF rescheduling
// on every flow completion (the setting in which stale completion events
// piled up to gigabytes on FB2010) and checks that, after every scheduling
// step, the heap holds at most 2·running + heapSlack events.
func TestSim_EventHeapBounded(t *testing.T) {
	cfg := DefaultSynthConfig()
	cfg.Coflows, cfg.Ports = 60, 30
	cfg.MeanInterArrival = 200 * time.Millisecond
	tr, err := Synthetic(cfg, rand.New(rand.NewPCG(3, 0)))
	if err != nil {
		t.Fatal(err)
	}
	cfs, err := tr.ToCoflows()
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfs { // keep the test fast: shrink every flow
		for j := range cfs[i].Flows {
			cfs[i].Flows[j].Bytes = min(cfs[i].Flows[j].Bytes, 64*MiB)
		}
	}
	sched, err := NewSEBF(OrderedConfig{OnFlowCompletion: true})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := NewSim(DefaultConfig(), tr.Fabric(GigabitBytesPerSec), sched)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Run(cfs); err != nil {
		t.Fatal(err)
	}
	if sim.heapPeakExcess > heapSlack {
		t.Fatalf("event heap exceeded 2·running by %d entries (bound %d)", sim.heapPeakExcess, heapSlack)
	}
	if sim.res.Calls < 1000 {
		t.Fatalf("only %d calls: the trace does not exercise the heap", sim.res.Calls)
	}
}
