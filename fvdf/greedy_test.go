package fvdf

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// TestPlan_SameAsReferenceGreedy: planner.plan (indexed port heap, one
// sort of the candidates started from the hint of the coflow's previous
// plan) returns the Γ' and per-flow choice of the reference greedy (a lazy
// heap of (t, port) entries, per-port lists sorted when first the
// bottleneck; reference_test.go), bit for bit, on random coflows with many
// ties in remaining bytes, uneven ports and speed factors, partly used
// resources, both stage modes, whole cores, two classes, driver loads that
// lag their flows, and hints that are stale (flows finished, remaining
// bytes reshuffled, ids out of range) or absent.
func TestPlan_SameAsReferenceGreedy(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 7))
	const ports = 7
	var hint candHint
	for trial := range 3000 {
		fab := coflow.NewFabric(ports, 100).SetCores(float64(rng.IntN(4)))
		for p := range fab.Ports {
			fab.Ports[p].Ingress *= 0.5 + rng.Float64()
			fab.Ports[p].SpeedFactor = 0.5 + rng.Float64()
		}
		fab.Codecs = []coflow.CodecProfile{{Name: "a", CompressSpeed: 20 + 200*rng.Float64(), DecompressSpeed: 100, Ratio: 0.2 + 0.7*rng.Float64()},
			{Name: "b", CompressSpeed: 60, DecompressSpeed: 30 + 300*rng.Float64(), Ratio: 0.5}}
		fab.Classes = []coflow.DataClass{{Name: "x", Codecs: fab.Codecs}, {Name: "y", Codecs: []coflow.CodecProfile{{Name: "a", CompressSpeed: 900, DecompressSpeed: 900, Ratio: 1}, fab.Codecs[1]}}}
		cfg := Config{StarvationPeriod: -1, SequentialStages: trial%5 == 0, WholeCores: trial%7 == 0, MinGain: []float64{0, 0.01, 0.2}[trial%3]}
		s, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		pl := &s.pl
		pl.reset(fab, s.cfg, s.codecProfiles(0, fab))
		ref := &refScheduler{Scheduler: s}
		rpl := &ref.pl
		rpl.reset(fab, s.cfg, s.codecProfiles(0, fab))

		c := coflow.CoflowState{}
		n := 1 + rng.IntN(40)
		for j := range n {
			v := float64(1 + rng.IntN(8)) // many ties
			if rng.IntN(3) == 0 {
				v = 1000 * rng.Float64()
			}
			c.Flows = append(c.Flows, coflow.FlowState{Ref: coflow.FlowRef{Flow: j}, Src: rng.IntN(ports), Dst: rng.IntN(ports), Bytes: v, Remaining: v, Class: rng.IntN(2)})
		}
		c.Width = n
		// Finished flows leave (ids keep their values), some are at 0.
		c.Flows = slices.DeleteFunc(c.Flows, func(coflow.FlowState) bool { return rng.IntN(6) == 0 })
		for j := range c.Flows {
			if rng.IntN(10) == 0 {
				c.Flows[j].Remaining = 0
			}
		}
		c.ComputePortLoads()
		for k := range c.Send {
			if rng.IntN(5) == 0 {
				c.Send[k].Bytes *= rng.Float64()
			}
		}
		in, out, cores := slices.Clone(pl.capIn), slices.Clone(pl.capOut), slices.Clone(pl.capCores)
		for p := range in {
			switch rng.IntN(6) {
			case 0:
				in[p] *= rng.Float64()
			case 1:
				out[p] = 0
			case 2:
				cores[p] *= rng.Float64()
			}
		}
		// The hint: none, the previous trial's (foreign ids and slots, some
		// out of range), or this coflow's ids or slots in a random order
		// (a stale hint of the same flow list).
		var h *candHint
		switch trial % 4 {
		case 1:
			h = &hint
		case 2:
			hint = candHint{}
			for _, j := range rng.Perm(len(c.Flows)) {
				hint.ids = append(hint.ids, int32(c.Flows[j].Ref.Flow))
			}
			h = &hint
		case 3:
			hint = candHint{n: len(c.Flows)}
			if len(c.Flows) > 0 {
				hint.first = &c.Flows[0]
			}
			for _, j := range rng.Perm(len(c.Flows) + 2) {
				hint.slots = append(hint.slots, int32(j))
			}
			h = &hint
		}
		for rep := range 3 { // later plans start from the previous one's hint
			g, ch := pl.plan(&c, in, out, cores, make([]int, 0), h)
			rg, rch := ref.rp.plan(rpl, &c, in, out, cores, make([]int, 0))
			if math.Float64bits(g) != math.Float64bits(rg) || !slices.Equal(ch, rch) {
				t.Fatalf("trial %d rep %d: Γ' %v choice %v, reference %v %v", trial, rep, g, ch, rg, rch)
			}
			if h == nil {
				break
			}
			for j := range c.Flows {
				c.Flows[j].Remaining *= 0.9 + 0.1*float64(rng.IntN(2))
			}
		}
	}
}

// TestHints_FreedWhenCoflowLeaves: the candidate order kept for a coflow
// (planner.greedy's hint) is dropped at the first call the coflow is
// absent from, so hints hold memory only for present coflows.
func TestHints_FreedWhenCoflowLeaves(t *testing.T) {
	fab := coflow.NewFabric(4, 100).SetCores(2)
	fab.Codecs = []coflow.CodecProfile{{Name: "z", CompressSpeed: 50, DecompressSpeed: 80, Ratio: 0.36}}
	s, err := New(Config{StarvationPeriod: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(index int) coflow.CoflowState {
		c := coflow.CoflowState{Index: index, ID: index, Width: 3}
		for j := range 3 {
			c.Flows = append(c.Flows, coflow.FlowState{Ref: coflow.FlowRef{Coflow: index, Flow: j}, Src: j, Dst: j + 1, Bytes: 100, Remaining: float64(100 - j)})
		}
		c.ComputePortLoads()
		return c
	}
	st := &coflow.State{Fabric: fab, Coflows: []coflow.CoflowState{mk(0), mk(3)}}
	s.Schedule(0, st)
	if s.memo[3].hint == nil || len(s.hinted) != 2 {
		t.Fatalf("after a call with coflows 0 and 3: hint of 3 %v, %d hinted; want kept, 2", s.memo[3].hint, len(s.hinted))
	}
	st.Coflows = st.Coflows[:1]
	s.Schedule(time.Millisecond, st)
	if s.memo[3].hint != nil || len(s.hinted) != 1 {
		t.Fatalf("after coflow 3 left: hint %v, %d hinted; want nil, 1", s.memo[3].hint, len(s.hinted))
	}
}
