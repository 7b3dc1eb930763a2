package coflow_test

import (
	"reflect"
	"testing"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
)

// TestBackfill_GroupedEqualsPlain checks that the grouped backfill path
// (coflows with ≥ 256 flows and few open destinations, per-port loads
// present) gives exactly the allocation of the plain loop (loads absent),
// also after the flow list shrank in place as the simulator compacts it.
func TestBackfill_GroupedEqualsPlain(t *testing.T) {
	const ports = 48
	b := coflowtest.NewState(coflow.NewFabric(ports, 100))
	// C0 (small, first under SEBF) saturates egress 0..35 with one flow
	// each from ingress 10..45; only C1's destinations 36..39 stay open.
	var small []coflowtest.FlowSpec
	for d := range 36 {
		small = append(small, coflowtest.F(10+d, d, 1))
	}
	b.Coflow(0, 0, small...)
	// C1: 10 sources × 40 destinations = 400 flows of different sizes.
	var big []coflowtest.FlowSpec
	for d := range 40 {
		for s := range 10 {
			big = append(big, coflowtest.F(s, d, float64(1000+7*s+13*d)))
		}
	}
	b.Coflow(1, 0, big...)
	grouped := b.State()
	plain := b.State()
	for i := range plain.Coflows {
		plain.Coflows[i].Send, plain.Coflows[i].Recv = nil, nil
	}
	sebf := func() coflow.Scheduler { return mustSched(t, "sebf") }
	sg, sp := sebf(), sebf()
	check := func(step string) {
		t.Helper()
		ag := append([]coflow.Allocation(nil), sg.Schedule(0, grouped)...)
		ap := append([]coflow.Allocation(nil), sp.Schedule(0, plain)...)
		if !reflect.DeepEqual(ag, ap) {
			t.Fatalf("%s: grouped and plain backfill differ:\n%v\n%v", step, ag, ap)
		}
		if err := coflowtest.Checker(coflowtest.WorkConserving)(0, grouped, ag); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	check("fresh")
	// Drop every third flow of C1 in place, keeping order, as the simulator
	// does when flows finish; recompute the per-port loads.
	for _, st := range []*coflow.State{grouped, plain} {
		c := &st.Coflows[1]
		k := 0
		for j, f := range c.Flows {
			if j%3 != 0 {
				c.Flows[k] = f
				k++
			}
		}
		c.Flows = c.Flows[:k]
	}
	grouped.Coflows[1].ComputePortLoads()
	check("compacted")
}
