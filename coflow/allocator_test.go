package coflow_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
)

// allocCase is a hand-made state for the Allocator property tests.
type allocCase struct {
	name string
	st   *coflow.State
}

// allocCases returns hand-made states (shared ports, unequal capacities,
// partly sent flows, several coflows on one port) plus seeded random ones.
func allocCases() []allocCase {
	var cs []allocCase
	// Three flows out of one port: the port is every flow's bottleneck.
	cs = append(cs, allocCase{"fan-out", coflowtest.NewState(coflow.NewFabric(4, 90)).
		Coflow(1, 0, coflowtest.F(0, 1, 100), coflowtest.F(0, 2, 300), coflowtest.F(0, 3, 50)).State()})
	// Bertsekas & Gallager's shape: one long flow crossing two contended
	// ports, short flows on each; unequal capacities.
	fab := coflow.NewFabric(4, 100)
	fab.Ports[1].Egress, fab.Ports[2].Ingress = 30, 250
	cs = append(cs, allocCase{"unequal capacities", coflowtest.NewState(fab).
		Coflow(1, 0, coflowtest.F(0, 1, 500), coflowtest.F(2, 1, 10)).
		Coflow(2, 0, coflowtest.F(2, 3, 80), coflowtest.F(0, 3, 40)).
		WeightedCoflow(3, 0, 3, coflowtest.F(3, 2, 20), coflowtest.FlowSpec{Src: 2, Dst: 2, Bytes: 90, Remaining: 9}).State()})
	// A coflow whose flows are partly sent, so remaining bytes differ.
	cs = append(cs, allocCase{"partly sent", coflowtest.NewState(coflow.NewFabric(3, 10)).
		Coflow(7, 0, coflowtest.FlowSpec{Src: 0, Dst: 1, Bytes: 10, Remaining: 4}, coflowtest.F(0, 2, 3), coflowtest.F(1, 2, 6)).
		Coflow(8, 0, coflowtest.F(2, 1, 5)).State()})
	rng := rand.New(rand.NewPCG(18, 9))
	for k := range 30 {
		ports := 2 + rng.IntN(6)
		fab := coflow.NewFabric(ports, 100)
		for p := range fab.Ports {
			fab.Ports[p].Ingress = 10 + 190*rng.Float64()
			fab.Ports[p].Egress = 10 + 190*rng.Float64()
		}
		b := coflowtest.NewState(fab)
		for c := range 1 + rng.IntN(4) {
			var fs []coflowtest.FlowSpec
			for range 1 + rng.IntN(6) {
				bytes := 1 + 999*rng.Float64()
				fs = append(fs, coflowtest.FlowSpec{Src: rng.IntN(ports), Dst: rng.IntN(ports), Bytes: bytes, Remaining: bytes * (0.05 + 0.95*rng.Float64())})
			}
			b.WeightedCoflow(c, 0, 0.5+3*rng.Float64(), fs...)
		}
		cs = append(cs, allocCase{fmt.Sprintf("random-%d", k), b.State()})
	}
	return cs
}

// rates returns the rate of every flow of st in allocs, keyed by FlowRef,
// after checking that allocs respect every port's capacity.
func rates(t *testing.T, st *coflow.State, allocs []coflow.Allocation) map[coflow.FlowRef]float64 {
	t.Helper()
	if err := coflowtest.CheckAllocation(0, st, allocs); err != nil {
		t.Fatalf("capacity exceeded: %v", err)
	}
	r := make(map[coflow.FlowRef]float64)
	for _, a := range allocs {
		r[a.Flow] = a.Rate
	}
	return r
}

// portUse sums the rates per ingress and egress side.
func portUse(st *coflow.State, r map[coflow.FlowRef]float64) (in, out []float64) {
	n := st.Fabric.NumPorts()
	in, out = make([]float64, n), make([]float64, n)
	for i := range st.Coflows {
		for _, f := range st.Coflows[i].Flows {
			in[f.Src] += r[f.Ref]
			out[f.Dst] += r[f.Ref]
		}
	}
	return in, out
}

const relTol = 1e-9

// TestAllocator_MaxMinBottleneck checks the characterisation of max-min
// fairness (Bertsekas & Gallager, Data Networks, §6.5.2): a feasible
// allocation is weighted max-min fair iff every flow has a bottleneck, a
// saturated port side on its path at which its rate/weight is the largest.
// Then no flow can grow without shrinking one whose rate/weight is not
// larger. Checked with unit weights and with each coflow's weight.
func TestAllocator_MaxMinBottleneck(t *testing.T) {
	for _, tc := range allocCases() {
		for _, weighted := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/weighted=%v", tc.name, weighted), func(t *testing.T) {
				st := tc.st
				w := func(i, j int) float64 { return 1 }
				var wf func(i, j int) float64
				if weighted {
					w = func(i, j int) float64 { return st.Coflows[i].Weight }
					wf = w
				}
				var a coflow.Allocator
				a.Reset(st)
				a.MaxMin(nil, wf)
				r := rates(t, st, a.Allocations())
				in, out := portUse(st, r)
				for i := range st.Coflows {
					for j, f := range st.Coflows[i].Flows {
						if r[f.Ref] <= 0 {
							t.Fatalf("flow %v got no rate", f.Ref)
						}
						if got := a.Rate(i, j); got != r[f.Ref] {
							t.Fatalf("Rate(%d,%d) = %v, allocation says %v", i, j, got, r[f.Ref])
						}
						norm := r[f.Ref] / w(i, j)
						// Largest rate/weight through each side of f's path.
						maxIn, maxOut := 0.0, 0.0
						for k := range st.Coflows {
							for l, g := range st.Coflows[k].Flows {
								ng := r[g.Ref] / w(k, l)
								if g.Src == f.Src {
									maxIn = math.Max(maxIn, ng)
								}
								if g.Dst == f.Dst {
									maxOut = math.Max(maxOut, ng)
								}
							}
						}
						fullIn := in[f.Src] >= st.Fabric.Ports[f.Src].Ingress*(1-relTol)
						fullOut := out[f.Dst] >= st.Fabric.Ports[f.Dst].Egress*(1-relTol)
						if !(fullIn && norm >= maxIn*(1-relTol)) && !(fullOut && norm >= maxOut*(1-relTol)) {
							t.Fatalf("flow %v (%d->%d) rate %.6g has no bottleneck: ingress %.6g/%.6g (max rate/weight %.6g), egress %.6g/%.6g (max %.6g)",
								f.Ref, f.Src, f.Dst, r[f.Ref], in[f.Src], st.Fabric.Ports[f.Src].Ingress, maxIn,
								out[f.Dst], st.Fabric.Ports[f.Dst].Egress, maxOut)
						}
					}
				}
			})
		}
	}
}

// TestAllocator_MaxMinSubset checks that MaxMin over listed coflows leaves
// the others without rates, that a coflow listed twice is shared once, and
// that a flow with a non-positive or non-finite weight gets nothing.
func TestAllocator_MaxMinSubset(t *testing.T) {
	st := allocCases()[1].st
	var once, twice coflow.Allocator
	once.Reset(st)
	once.MaxMin([]int{0, 2}, nil)
	twice.Reset(st)
	twice.MaxMin([]int{2, 0, 2}, nil)
	for i := range st.Coflows {
		for j := range st.Coflows[i].Flows {
			if i == 1 && once.Rate(i, j) != 0 {
				t.Fatalf("unlisted coflow 1 flow %d got %v", j, once.Rate(i, j))
			}
			if i != 1 && once.Rate(i, j) <= 0 {
				t.Fatalf("listed coflow %d flow %d got nothing", i, j)
			}
			if math.Abs(once.Rate(i, j)-twice.Rate(i, j)) > relTol*once.Rate(i, j) {
				t.Fatalf("coflow listed twice: flow (%d,%d) %v, listed once %v", i, j, twice.Rate(i, j), once.Rate(i, j))
			}
		}
	}
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		var a coflow.Allocator
		a.Reset(st)
		a.MaxMin(nil, func(i, j int) float64 {
			if i == 0 && j == 0 {
				return bad
			}
			return 1
		})
		if r := a.Rate(0, 0); r != 0 {
			t.Fatalf("weight %v: flow (0,0) got %v", bad, r)
		}
		rates(t, st, a.Allocations())
	}
}

// TestAllocator_MADD checks Varys' MADD: on the capacity its predecessors
// left, every flow of a coflow finishes at the same time Γ' (remaining /
// rate), Γ' equals the coflow's Bottleneck when it is alone, a port side
// the coflow uses is saturated, and capacities are never exceeded. A
// coflow that needs a full port gets nothing.
func TestAllocator_MADD(t *testing.T) {
	for _, tc := range allocCases() {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			var a coflow.Allocator
			a.Reset(st)
			for i := range st.Coflows {
				c := &st.Coflows[i]
				before := make([]float64, len(c.Flows))
				for j := range c.Flows {
					before[j] = a.Rate(i, j)
				}
				ok := a.MADD(i)
				if !ok {
					for j := range c.Flows {
						if a.Rate(i, j) != 0 {
							t.Fatalf("coflow %d: MADD refused but flow %d got %v", i, j, a.Rate(i, j))
						}
					}
					// Refused only if a port it needs is full.
					blocked := false
					for _, f := range c.Flows {
						fi, _ := a.Free(f.Src)
						_, fo := a.Free(f.Dst)
						if fi <= st.Fabric.Ports[f.Src].Ingress*1e-12 || fo <= st.Fabric.Ports[f.Dst].Egress*1e-12 {
							blocked = true
						}
					}
					if !blocked {
						t.Fatalf("coflow %d: MADD refused with every port open", i)
					}
					continue
				}
				gamma := -1.0
				for j, f := range c.Flows {
					if before[j] != 0 {
						t.Fatalf("flow (%d,%d) had a rate before MADD", i, j)
					}
					fin := f.Remaining / a.Rate(i, j)
					if gamma < 0 {
						gamma = fin
					}
					if math.Abs(fin-gamma) > relTol*gamma {
						t.Fatalf("coflow %d: flow %d finishes at %.12g, flow 0 at %.12g", i, j, fin, gamma)
					}
				}
				if i == 0 {
					if g := a.Bottleneck(0); math.Abs(g-gamma) > relTol*g {
						t.Fatalf("first coflow: MADD finish %.12g, Bottleneck %.12g", gamma, g)
					}
				} else if g := a.Bottleneck(i); gamma < g*(1-relTol) {
					t.Fatalf("coflow %d finishes at %.12g, before its isolated bottleneck %.12g", i, gamma, g)
				}
				full := false
				for _, f := range c.Flows {
					fi, _ := a.Free(f.Src)
					_, fo := a.Free(f.Dst)
					full = full || fi <= st.Fabric.Ports[f.Src].Ingress*relTol || fo <= st.Fabric.Ports[f.Dst].Egress*relTol
				}
				if !full {
					t.Fatalf("coflow %d: MADD saturates none of its ports", i)
				}
			}
			rates(t, st, a.Allocations())
			// Backfilling after MADD makes the allocation work-conserving.
			for i := range st.Coflows {
				a.Backfill(i)
			}
			if err := coflowtest.Checker(coflowtest.WorkConserving)(0, st, a.Allocations()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAllocator_BuiltinsUseIt checks that Fair is MaxMin over all flows
// and SEBF is MADD then Backfill in Bottleneck order, allocation for
// allocation.
func TestAllocator_BuiltinsUseIt(t *testing.T) {
	for _, tc := range allocCases() {
		st := tc.st
		var a coflow.Allocator
		a.Reset(st)
		a.MaxMin(nil, nil)
		want := fmt.Sprint(a.Allocations())
		if got := fmt.Sprint(coflow.NewFair().Schedule(0, st)); got != want {
			t.Fatalf("%s: fair %s, MaxMin %s", tc.name, got, want)
		}
		a.Reset(st)
		order := make([]int, len(st.Coflows))
		for i := range order {
			order[i] = i
		}
		keys := make([]float64, len(order))
		for i := range keys {
			keys[i] = a.Bottleneck(i)
		}
		// Insertion sort by key, ties by position (all arrivals are 0).
		for x := 1; x < len(order); x++ {
			for y := x; y > 0 && keys[order[y]] < keys[order[y-1]]; y-- {
				order[y], order[y-1] = order[y-1], order[y]
			}
		}
		for _, i := range order {
			a.MADD(i)
		}
		for _, i := range order {
			a.Backfill(i)
		}
		want = fmt.Sprint(a.Allocations())
		if got := fmt.Sprint(mustSched(t, "sebf").Schedule(0, st)); got != want {
			t.Fatalf("%s: sebf %s, Allocator %s", tc.name, got, want)
		}
	}
}
