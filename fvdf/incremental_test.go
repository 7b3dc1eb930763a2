package fvdf

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
)

// lockstep drives the incremental Scheduler and the reference (the
// non-incremental FVDF kept in reference_test.go) with the same State at
// every call and fails at the first call whose allocations differ in any
// field or in order. The simulator applies the incremental one's.
type lockstep struct {
	tb    testing.TB
	inc   *Scheduler
	ref   *refScheduler
	calls int
}

func (l *lockstep) Name() string                       { return l.inc.Name() }
func (l *lockstep) OnlyOnArrivalsAndCompletions() bool { return l.inc.OnlyOnArrivalsAndCompletions() }
func (l *lockstep) NextWakeup(now time.Duration) (time.Duration, bool) {
	return l.inc.NextWakeup(now)
}

func (l *lockstep) Schedule(now time.Duration, st *coflow.State) []coflow.Allocation {
	l.calls++
	want := l.ref.Schedule(now, st)
	got := l.inc.Schedule(now, st)
	if len(got) != len(want) {
		l.tb.Fatalf("call %d at %v: %d allocations, reference %d", l.calls, now, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			l.tb.Fatalf("call %d at %v: allocation %d is %+v, reference %+v", l.calls, now, i, got[i], want[i])
		}
	}
	if o, r := l.inc.Order(), l.ref.order; len(o) != len(r) || fmt.Sprint(o) != fmt.Sprint(r) {
		l.tb.Fatalf("call %d at %v: order %v, reference %v", l.calls, now, o, r)
	}
	return got
}

// runBoth replays cfs on fab under the lockstep pair and under the
// reference alone, and requires every coflow's CCT to be identical.
func runBoth(t *testing.T, cfs []coflow.Coflow, fab *coflow.Fabric, simCfg coflow.Config, cfg Config, est func() Estimator) int {
	t.Helper()
	inc, err := New(cfg, est())
	if err != nil {
		t.Fatal(err)
	}
	ls := &lockstep{tb: t, inc: inc, ref: newRef(t, cfg, est())}
	sim, err := coflow.NewSim(simCfg, fab, ls)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sim.Run(cfs)
	if err != nil {
		t.Fatal(err)
	}
	ref := newRef(t, cfg, est())
	sim, err = coflow.NewSim(simCfg, fab, refOnly{ref})
	if err != nil {
		t.Fatal(err)
	}
	want, err := sim.Run(cfs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.Coflows {
		if g, w := got.Coflows[i].CCT, want.Coflows[i].CCT; g != w {
			t.Fatalf("coflow %d: CCT %v, reference %v", i, g, w)
		}
	}
	if got.Calls != want.Calls || got.WireBytes != want.WireBytes || got.CPUSeconds != want.CPUSeconds {
		t.Fatalf("calls %d wire %v cpu %v, reference %d %v %v", got.Calls, got.WireBytes, got.CPUSeconds, want.Calls, want.WireBytes, want.CPUSeconds)
	}
	return ls.calls
}

// refOnly hides the embedded Scheduler's Schedule and Order so the
// simulator drives the reference.
type refOnly struct{ r *refScheduler }

func (r refOnly) Name() string { return r.r.Name() }
func (r refOnly) Schedule(now time.Duration, st *coflow.State) []coflow.Allocation {
	return r.r.Schedule(now, st)
}
func (r refOnly) OnlyOnArrivalsAndCompletions() bool { return r.r.OnlyOnArrivalsAndCompletions() }
func (r refOnly) NextWakeup(now time.Duration) (time.Duration, bool) {
	return r.r.NextWakeup(now)
}

// varying is an Estimator whose codec speeds change every 3 s, so that a
// plan cached on the previous profiles is stale.
type varying struct{}

func (varying) Estimate(now time.Duration, f *coflow.Fabric, k int) coflow.CodecProfile {
	p := f.Codec(k)
	step := float64(now / (3 * time.Second) % 4)
	p.CompressSpeed *= 0.5 + step/4
	return p
}

// TestIncremental_SameAsReference replays seeded synthetic traces under
// every FVDF variant (guard on and off, every flow event, whole cores,
// sequential stages, no compression, a CPU budget, per-flow classes,
// codec speeds that change between calls) with the incremental scheduler
// and the reference in lockstep: every call's allocations and order, and
// every coflow's CCT, must be identical.
func TestIncremental_SameAsReference(t *testing.T) {
	nominal := func() Estimator { return Nominal{} }
	lz4 := coflow.CodecProfile{Name: "lz4", CompressSpeed: 600e6, DecompressSpeed: 4.9e9, Ratio: 0.36}
	snappy := coflow.CodecProfile{Name: "snappy", CompressSpeed: 450e6, DecompressSpeed: 1.4e9, Ratio: 0.33}
	cases := []struct {
		name    string
		cfg     Config
		seq     bool
		classes bool
		cores   float64
		est     func() Estimator
	}{
		{name: "default", cfg: Config{}, cores: 2},
		{name: "noguard", cfg: Config{StarvationPeriod: -1}, cores: 2},
		{name: "everyflow", cfg: Config{EveryFlowEvent: true}, cores: 2},
		{name: "wholecores", cfg: Config{WholeCores: true, StarvationPeriod: -1}, cores: 3},
		{name: "sequential", cfg: Config{SequentialStages: true}, seq: true, cores: 2},
		{name: "raw", cfg: Config{DisableCompression: true}, cores: 2},
		{name: "budget", cfg: Config{CPUFraction: 0.5, NoCoreHeadroom: true}, cores: 1},
		{name: "classes", cfg: Config{StarvationPeriod: -1}, classes: true, cores: 2},
		{name: "varying", cfg: Config{EveryFlowEvent: true}, cores: 2, est: func() Estimator { return varying{} }},
	}
	for _, tc := range cases {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", tc.name, seed), func(t *testing.T) {
				cfg := coflow.SynthConfig{Ports: 24, Coflows: 70, MeanInterArrival: 300 * time.Millisecond, MaxWidth: 12}
				tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(seed, 20)))
				if err != nil {
					t.Fatal(err)
				}
				cfs, err := tr.ToCoflows()
				if err != nil {
					t.Fatal(err)
				}
				fab := tr.Fabric(coflow.GigabitBytesPerSec).SetCores(tc.cores)
				fab.Codecs = []coflow.CodecProfile{lz4, snappy}
				if tc.classes {
					fab.Classes = []coflow.DataClass{
						{Name: "text", Codecs: []coflow.CodecProfile{lz4, snappy}},
						{Name: "random", Codecs: []coflow.CodecProfile{{Name: "lz4", CompressSpeed: 900e6, DecompressSpeed: 5e9, Ratio: 1}, {Name: "snappy", CompressSpeed: 700e6, DecompressSpeed: 2e9, Ratio: 0.98}}},
					}
					if err := coflow.AssignClasses(cfs, []float64{0.6, 0.4}, seed); err != nil {
						t.Fatal(err)
					}
				}
				sc := coflow.DefaultConfig()
				sc.Pipelining = !tc.seq
				est := tc.est
				if est == nil {
					est = nominal
				}
				calls := runBoth(t, cfs, fab, sc, tc.cfg, est)
				t.Logf("%d calls identical", calls)
			})
		}
	}
}

// TestIncremental_FB2010 is the same check on the first 150 coflows of
// the FB2010 trace (skipped when the shared data is absent).
func TestIncremental_FB2010(t *testing.T) {
	if testing.Short() {
		t.Skip("FB2010 differential replay skipped in -short mode")
	}
	path := coflowtest.SharedFile(t, "coflow-benchmark", "FB2010-1Hr-150-0.txt")
	tr := coflowtest.ReadTraceFile(t, path)
	tr.Coflows = tr.Coflows[:150]
	cfs, err := tr.ToCoflows()
	if err != nil {
		t.Fatal(err)
	}
	rc := ReplayConfig{Static: true}
	fab, err := rc.Fabric(tr.Ports)
	if err != nil {
		t.Fatal(err)
	}
	calls := runBoth(t, cfs, fab, coflow.DefaultConfig(), Config{}, func() Estimator { return Nominal{} })
	t.Logf("%d calls identical", calls)
}

// containerHeap is tHeap under container/heap, the implementation greedy
// used before.
type containerHeap struct{ tHeap }

func (h containerHeap) Swap(i, j int) { h.tHeap[i], h.tHeap[j] = h.tHeap[j], h.tHeap[i] }
func (h *containerHeap) Push(x any)   { h.tHeap = append(h.tHeap, x.(tEntry)) }
func (h *containerHeap) Pop() any {
	x := h.tHeap[len(h.tHeap)-1]
	h.tHeap = h.tHeap[:len(h.tHeap)-1]
	return x
}

// TestTHeap_SameAsContainerHeap: the typed heap pops the same sequence as
// container/heap for random interleavings of pushes and pops with many
// ties in t (and in (t, p)).
func TestTHeap_SameAsContainerHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 7))
	for trial := range 200 {
		var a tHeap
		b := &containerHeap{}
		n := 1 + rng.IntN(40)
		for range n {
			e := tEntry{t: float64(rng.IntN(5)), p: rng.IntN(8)}
			a = append(a, e)
			b.tHeap = append(b.tHeap, e)
		}
		a.init()
		heap.Init(b)
		for step := 0; a.Len() > 0 || step < 60; step++ {
			if a.Len() > 0 && rng.IntN(3) > 0 {
				x, y := a.pop(), heap.Pop(b).(tEntry)
				if x != y {
					t.Fatalf("trial %d step %d: pop %+v, container/heap %+v", trial, step, x, y)
				}
				continue
			}
			if step >= 60 {
				continue
			}
			e := tEntry{t: float64(rng.IntN(5)), p: rng.IntN(8)}
			a.push(e)
			heap.Push(b, e)
		}
	}
}

// TestWaits_AgreesWithPlan: whenever planner.waits says a coflow must
// wait, plan returns Γ' = +Inf on the same resources — on random coflows
// whose driver loads may lag their flows (the simulator's per-port sums
// and per-flow remainders round independently) and random partly full
// ports; and waits says false where compressing the flow at a full port
// clears it (a load below the flow's remaining bytes).
func TestWaits_AgreesWithPlan(t *testing.T) {
	fab := coflow.NewFabric(6, 100).SetCores(2)
	fab.Codecs = []coflow.CodecProfile{{Name: "z", CompressSpeed: 50, DecompressSpeed: 80, Ratio: 0.36}}
	s, err := New(Config{StarvationPeriod: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pl := &s.pl
	pl.reset(fab, s.cfg, s.codecProfiles(0, fab))

	// The constructed case: port 0's ingress is full, the flow there has
	// 100 B left but the driver's load says 10 B.
	c := coflow.CoflowState{Flows: []coflow.FlowState{{Src: 0, Dst: 1, Bytes: 100, Remaining: 100}}}
	c.ComputePortLoads()
	c.Send[0].Bytes = 10
	in, out, cores := []float64{0, 100, 100, 100, 100, 100}, slices.Clone(pl.capOut), slices.Clone(pl.capCores)
	g, _ := pl.plan(&c, in, out, cores, nil, nil)
	if pl.waits(&c, in, out, cores) || math.IsInf(g, 1) {
		t.Fatalf("constructed case: waits %v, plan Γ' %v (want false, finite)", pl.waits(&c, in, out, cores), g)
	}

	rng := rand.New(rand.NewPCG(20, 1))
	yes, no := 0, 0
	for trial := range 3000 {
		c := coflow.CoflowState{}
		for range 1 + rng.IntN(6) {
			v := float64(1 + rng.IntN(100))
			c.Flows = append(c.Flows, coflow.FlowState{Src: rng.IntN(6), Dst: rng.IntN(6), Bytes: v, Remaining: v})
		}
		c.ComputePortLoads()
		for k := range c.Send {
			if rng.IntN(4) == 0 {
				c.Send[k].Bytes *= rng.Float64()
			}
		}
		in, out, cores := slices.Clone(pl.capIn), slices.Clone(pl.capOut), slices.Clone(pl.capCores)
		for p := range in {
			switch rng.IntN(4) {
			case 0:
				in[p] = 0
			case 1:
				out[p] = 0
			case 2:
				cores[p] = 0
			}
		}
		w := pl.waits(&c, in, out, cores)
		g, _ := pl.plan(&c, in, out, cores, nil, nil)
		if w && !math.IsInf(g, 1) {
			t.Fatalf("trial %d: waits but plan Γ' = %v: %+v in %v out %v cores %v", trial, g, c, in, out, cores)
		}
		if w {
			yes++
		} else {
			no++
		}
	}
	if yes == 0 || no == 0 {
		t.Fatalf("waits true %d, false %d times: the cases do not cover both", yes, no)
	}
}

// TestBounds_BracketPlan: planner.bounds brackets the Γ' plan computes
// on the full resources, on random coflows, fabrics with uneven ports and
// speed factors, both stage modes and a class that does not compress.
func TestBounds_BracketPlan(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 2))
	for trial := range 2000 {
		fab := coflow.NewFabric(5, 100).SetCores(float64(rng.IntN(3)))
		for p := range fab.Ports {
			fab.Ports[p].Ingress *= 0.5 + rng.Float64()
			fab.Ports[p].SpeedFactor = 0.5 + rng.Float64()
		}
		fab.Codecs = []coflow.CodecProfile{{Name: "a", CompressSpeed: 20 + 200*rng.Float64(), DecompressSpeed: 100, Ratio: 0.2 + 0.7*rng.Float64()},
			{Name: "b", CompressSpeed: 60, DecompressSpeed: 30 + 300*rng.Float64(), Ratio: 0.5}}
		fab.Classes = []coflow.DataClass{{Name: "x", Codecs: fab.Codecs}, {Name: "y", Codecs: []coflow.CodecProfile{{Name: "a", CompressSpeed: 900, DecompressSpeed: 900, Ratio: 1}, fab.Codecs[1]}}}
		s, err := New(Config{StarvationPeriod: -1, SequentialStages: trial%3 == 0}, nil)
		if err != nil {
			t.Fatal(err)
		}
		pl := &s.pl
		pl.reset(fab, s.cfg, s.codecProfiles(0, fab))
		pl.boundSetup()
		c := coflow.CoflowState{}
		for range 1 + rng.IntN(8) {
			v := float64(1 + rng.IntN(1000))
			c.Flows = append(c.Flows, coflow.FlowState{Src: rng.IntN(5), Dst: rng.IntN(5), Bytes: v, Remaining: v, Class: rng.IntN(2)})
		}
		c.ComputePortLoads()
		var lo, hi float64
		if !pl.bounds(&c, &lo, &hi) {
			t.Fatal("bounds refused driver loads")
		}
		g, _ := pl.plan(&c, pl.capIn, pl.capOut, pl.capCores, nil, nil)
		if !(lo <= g && g <= hi) {
			t.Fatalf("trial %d: Γ' %v outside [%v, %v]", trial, g, lo, hi)
		}
	}
}
