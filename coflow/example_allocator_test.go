package coflow_test

import (
	"fmt"
	"sort"
	"time"

	"github.com/falconml/falcon/coflow"
)

// heaviestFirst is a user scheduler built on coflow.Allocator: coflows in
// decreasing weight, each given Varys' MADD rates on the capacity left,
// then leftover capacity backfilled in the same order.
type heaviestFirst struct {
	a     coflow.Allocator
	order []int
}

func (h *heaviestFirst) Name() string { return "heaviest-first" }

func (h *heaviestFirst) Schedule(now time.Duration, s *coflow.State) []coflow.Allocation {
	h.a.Reset(s)
	h.order = h.order[:0]
	for i := range s.Coflows {
		h.order = append(h.order, i)
	}
	sort.SliceStable(h.order, func(x, y int) bool { return s.Coflows[h.order[x]].Weight > s.Coflows[h.order[y]].Weight })
	for _, i := range h.order {
		h.a.MADD(i)
	}
	for _, i := range h.order {
		h.a.Backfill(i)
	}
	return h.a.Allocations()
}

// ExampleAllocator runs a ten-line weighted scheduler: the heavy but large
// coflow 2 goes first, where SEBF would serve the small coflow 1 first.
func ExampleAllocator() {
	cfs := []coflow.Coflow{
		{ID: 1, Weight: 1, Flows: []coflow.Flow{{Src: 0, Dst: 2, Bytes: 2e6}}},
		{ID: 2, Weight: 5, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 4e6}, {Src: 1, Dst: 2, Bytes: 4e6}}},
	}
	sebf, _ := coflow.NewSEBF(coflow.DefaultOrderedConfig())
	for _, sched := range []coflow.Scheduler{&heaviestFirst{}, sebf} {
		sim, _ := coflow.NewSim(coflow.DefaultConfig(), coflow.NewFabric(3, 1e6), sched)
		res, err := sim.Run(cfs)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: C1 %v, C2 %v\n", sched.Name(), res.Coflows[0].CCT, res.Coflows[1].CCT)
	}
	// Output:
	// heaviest-first: C1 6s, C2 4s
	// sebf: C1 2s, C2 6s
}
