package epsp_test

import (
	"fmt"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/epsp/epsptest"
)

// damped is a custom policy: pushes apply on arrival, a gradient d updates
// behind is scaled by 1/(1+d)², and a worker may run at most one clock
// ahead of the slowest.
type damped struct{}

var _ epsp.Policy = damped{}

func (damped) Name() string { return "damped(s=1)" }

func (damped) Admit(_ time.Duration, v epsp.View, p epsp.Push) epsp.PushDecision {
	d := float64(v.Version() - p.BaseVersion)
	return epsp.PushDecision{Action: epsp.ApplyNow, Scale: 1 / ((1 + d) * (1 + d))}
}

func (damped) Step(_ time.Duration, v epsp.View, _ epsp.Event) epsp.Output {
	return epsp.Output{Release: epsp.GateRelease(v, 1)}
}

// A user-written policy in a few lines, tested by playing a script through
// a real Coordinator and printing the decisions.
func Example_customPolicy() {
	d, err := epsptest.NewDriver(epsp.Config{NumWorkers: 2, Batch: 16}, damped{})
	if err != nil {
		panic(err)
	}
	err = d.Run(`
		@10ms
		push w=0
		clock w=0      # one clock ahead of worker 1: may go on
		@20ms
		push w=0       # read version 1 at its release: fresh
		clock w=0      # two ahead: waits
		@30ms
		push w=1       # read version 0, now 2: scaled 1/9
		clock w=1      # worker 0 may go again
	`)
	if err != nil {
		panic(err)
	}
	fmt.Print(d.Trace())
	// Output:
	// @10ms push w=0 clock=0 base=0 samples=16/16 -> apply scale=1
	// @10ms clock w=0 c=0 -> release[0]
	// @20ms push w=0 clock=1 base=1 samples=16/16 -> apply scale=1
	// @20ms clock w=0 c=1 -> -
	// @30ms push w=1 clock=0 base=0 samples=16/16 -> apply scale=0.1111
	// @30ms clock w=1 c=0 -> release[0 1]
}
