package coflowtest_test

import (
	"fmt"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
)

// halfRate is a deliberately lazy scheduler: every flow gets half of the
// smaller free capacity on its path, in arrival order.
type halfRate struct{}

func (halfRate) Name() string { return "half" }

func (halfRate) Schedule(now time.Duration, s *coflow.State) []coflow.Allocation {
	n := s.Fabric.NumPorts()
	in, out := make([]float64, n), make([]float64, n)
	for p, pt := range s.Fabric.Ports {
		in[p], out[p] = pt.Ingress, pt.Egress
	}
	var allocs []coflow.Allocation
	for _, c := range s.Coflows {
		for _, f := range c.Flows {
			r := min(in[f.Src], out[f.Dst]) / 2
			in[f.Src] -= r
			out[f.Dst] -= r
			allocs = append(allocs, coflow.Allocation{Flow: f.Ref, Rate: r})
		}
	}
	return allocs
}

// Example tests a custom scheduler in a few lines: build a state, check one
// decision, then run it end to end under the fake driver.
func Example() {
	st := coflowtest.NewState(coflow.NewFabric(2, 100)).
		Coflow(1, 0, coflowtest.F(0, 1, 50)).
		State()
	allocs := halfRate{}.Schedule(0, st)
	fmt.Println("capacity:", coflowtest.CheckAllocation(0, st, allocs))
	fmt.Println("work conservation:", coflowtest.Checker(coflowtest.WorkConserving)(0, st, allocs) != nil)

	d := coflowtest.Driver{Fabric: coflow.NewFabric(2, 100)}
	res, err := d.Run(halfRate{}, []coflow.Coflow{{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 50}}}})
	fmt.Println("CCT:", res.Coflows[0].CCT, "calls:", d.Calls, "err:", err)
	// Output:
	// capacity: <nil>
	// work conservation: true
	// CCT: 1s calls: 1 err: <nil>
}
