package live

import (
	"errors"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// everyTick is SEBF that also asks to be called every period (a Timer).
type everyTick struct {
	*coflow.Ordered
	period time.Duration
}

func (e everyTick) NextWakeup(now time.Duration) (time.Duration, bool) { return now + e.period, true }

// The coordinator applies the simulator's rescheduling rules. One coflow
// of two flows on disjoint ports at 1 MB/s, 100 kB (0→1) and 800 kB (2→3):
//   - SEBF is EventDriven and MADD makes both flows finish together, so
//     its only call is the arrival (the completion leaves nothing active);
//   - Fair is called on every flow completion too: arrival and the 100 kB
//     flow's end;
//   - Fair with CoalesceFlowEvents of 10 s: the flow's end, within 10 s of
//     the arrival's call, waits for a call the coflow's end pre-empts (with
//     nothing left to schedule): one call;
//   - SEBF with a 40 ms Timer is also called at its timers: over the
//     ≈ 0.8 s coflow, several more calls.
func TestReschedulingRules(t *testing.T) {
	sebf := func() coflow.Scheduler { return mustSched(t, "sebf") }
	for _, tc := range []struct {
		name     string
		sched    coflow.Scheduler
		coalesce time.Duration
		min, max int
	}{
		{"sebf", sebf(), 0, 1, 1},
		{"fair", mustSched(t, "fair"), 0, 2, 2},
		{"fair-coalesced", mustSched(t, "fair"), 10 * time.Second, 1, 1},
		{"sebf-timer", everyTick{sebf().(*coflow.Ordered), 40 * time.Millisecond}, 0, 4, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, acfg := testConfigs(4, coflow.NewFabric(4, 1e6), tc.sched)
			cfg.CoalesceFlowEvents = tc.coalesce
			cl := newCluster(t, cfg, acfg)
			flows := []coflow.Flow{{Src: 0, Dst: 1, Bytes: 100e3}, {Src: 2, Dst: 3, Bytes: 800e3}}
			id, err := cl.run(testCtx(t), flows, [][]byte{randomBytes(100e3, 1), randomBytes(800e3, 2)})
			if err != nil {
				t.Fatal(err)
			}
			waitResult(t, cl.coord, id)
			if n := cl.coord.Calls(); n < tc.min || n > tc.max {
				t.Fatalf("%d scheduler calls, want %d..%d", n, tc.min, tc.max)
			}
		})
	}
}

// greedy gives every flow twice its source port's capacity; panicky
// panics. Neither takes the coordinator down: the active coflows fail with
// ErrBadAllocation, at the coordinator and at the agents.
type greedy struct{}

func (greedy) Name() string { return "greedy" }
func (greedy) Schedule(_ time.Duration, s *coflow.State) []coflow.Allocation {
	var out []coflow.Allocation
	for _, c := range s.Coflows {
		for _, f := range c.Flows {
			out = append(out, coflow.Allocation{Flow: f.Ref, Rate: 2 * s.Fabric.Ports[f.Src].Ingress})
		}
	}
	return out
}

type panicky struct{}

func (panicky) Name() string                                              { return "panicky" }
func (panicky) Schedule(time.Duration, *coflow.State) []coflow.Allocation { panic("boom") }

func TestBadSchedulerFailsCoflows(t *testing.T) {
	for _, s := range []coflow.Scheduler{greedy{}, panicky{}} {
		t.Run(s.Name(), func(t *testing.T) {
			cfg, acfg := testConfigs(2, coflow.NewFabric(2, 1e6), s)
			cl := newCluster(t, cfg, acfg)
			flows := []coflow.Flow{{Src: 0, Dst: 1, Bytes: 100e3}}
			id, err := cl.run(testCtx(t), flows, [][]byte{randomBytes(100e3, 1)})
			if !errors.Is(err, ErrBadAllocation) {
				t.Fatalf("got %v, want ErrBadAllocation", err)
			}
			r := cl.coord.Results()
			if len(r) != 1 || r[0].ID != id || !errors.Is(r[0].Err, ErrBadAllocation) {
				t.Fatalf("results %+v", r)
			}
		})
	}
}

// always is SEBF with every flow compressed with codec k on half a core at
// each end (an always-compress baseline such as "sebf+lz4").
type always struct {
	*coflow.Ordered
	k int
}

func (a always) Schedule(now time.Duration, s *coflow.State) []coflow.Allocation {
	out := a.Ordered.Schedule(now, s)
	for i := range out {
		out[i].Codec, out[i].SendCores, out[i].RecvCores = a.k, 0.5, 0.5
	}
	return out
}

// Both codecs the agents run (lz4 and snappy blocks) carry text exactly and
// shrink it on the wire.
func TestAlwaysCompressEachCodec(t *testing.T) {
	for k, name := range []string{"lz4", "snappy"} {
		t.Run(name, func(t *testing.T) {
			fab := coflow.NewFabric(3, 4e6).SetCores(4)
			fab.Codecs = []coflow.CodecProfile{
				{Name: "lz4", CompressSpeed: 100e6, DecompressSpeed: 500e6, Ratio: 0.4},
				{Name: "snappy", CompressSpeed: 100e6, DecompressSpeed: 300e6, Ratio: 0.45},
			}
			cfg, acfg := testConfigs(3, fab, always{mustSched(t, "sebf").(*coflow.Ordered), k + 1})
			cl := newCluster(t, cfg, acfg)
			flows := []coflow.Flow{{Src: 0, Dst: 1, Bytes: 500_001}, {Src: 2, Dst: 1, Bytes: 70_000}}
			id, err := cl.run(testCtx(t), flows, [][]byte{textBytes(500_001, 7), textBytes(70_000, 8)})
			if err != nil {
				t.Fatal(err)
			}
			if r := waitResult(t, cl.coord, id); !(r.WireBytes < 0.6*r.Bytes) {
				t.Fatalf("%s: wire %v of raw %v", name, r.WireBytes, r.Bytes)
			}
			if p := cl.coord.Profile(0, k+1); p.CompressSpeed == 100e6 {
				t.Fatalf("%s: profile %+v not measured", name, p)
			}
		})
	}
}

// A codec job's cost is its thread's CPU time, not its wall time: a job
// that sleeps 50 ms costs next to nothing (an earlier version charged the
// wall time, so a job stalled by a CFS quota held its worker's slot idle
// for (1/duty − 1) times the stall).
func TestPoolChargesCPUTime(t *testing.T) {
	if _, ok := threadCPU(); !ok {
		t.Skip("no per-thread CPU clock here")
	}
	p := newPool(1, false)
	var cost time.Duration
	err := p.run(testCtx(t), func() { time.Sleep(50 * time.Millisecond) }, func(c time.Duration) { cost = c })
	if err != nil {
		t.Fatal(err)
	}
	if cost == 0 || cost > 25*time.Millisecond {
		t.Fatalf("a sleeping job cost %v", cost)
	}
}

// burn spins for about d of CPU time.
func burn(d time.Duration) {
	c0, _ := threadCPU()
	start := time.Now()
	x := 0
	for {
		for i := range 10000 {
			x += i
		}
		if c, ok := threadCPU(); ok && c-c0 >= d || time.Since(start) >= 10*d {
			break
		}
	}
	_ = x
}

// A worker's duty-cycle idle holds its slot, not its caller: a job under a
// sliver of a core (0.0001, as schedulers grant compressed flows on the
// bed) returns as soon as it ran, and a larger grant shortens the idle at
// once. Before, run slept the idle itself (2 ms · 9999 = 20 s here), so a
// receiver's chunk answer waited past the sender's 10 s ChunkTimeout and
// the sender called the receiver dead (slice 100 of CALIBRATION.md).
func TestPoolIdleHoldsSlotNotCaller(t *testing.T) {
	if _, ok := threadCPU(); !ok {
		t.Skip("no per-thread CPU clock here")
	}
	p := newPool(1, false)
	defer p.close()
	p.setCores(0.0001)
	start := time.Now()
	if err := p.run(testCtx(t), func() { burn(2 * time.Millisecond) }, func(time.Duration) {}); err != nil {
		t.Fatal(err)
	}
	// Bounds: a 2 ms job on a loaded machine takes well under 5 s; the
	// idle it must not include is 20 s.
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("run returned after %v: its caller waited out the idle", d)
	}
	p.setCores(1)
	start = time.Now()
	if err := p.run(testCtx(t), func() {}, func(time.Duration) {}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the next job waited %v after the grant grew to a core", d)
	}
}

// With SpeedPerGrantedCore a codec job costs the granted core-seconds its
// slot was held, so a stall the CPU clock cannot see (here a 40 ms sleep,
// standing in for a CFS quota the agent's networking exhausts) lowers the
// measured speed: under a grant of 0.5 core the job costs at least
// 0.5 · 40 ms = 20 ms, where by CPU time it costs next to nothing. The
// agent passes the option to both pools.
func TestPoolGrantedCostSeesStalls(t *testing.T) {
	if _, ok := threadCPU(); !ok {
		t.Skip("no per-thread CPU clock here")
	}
	const stall = 40 * time.Millisecond
	const cores = 0.5
	costs := map[bool]time.Duration{}
	for _, granted := range []bool{false, true} {
		p := newPool(4, granted)
		p.setCores(cores)
		got := make(chan time.Duration, 1)
		if err := p.run(testCtx(t), func() { time.Sleep(stall) }, func(c time.Duration) { got <- c }); err != nil {
			t.Fatal(err)
		}
		select { // the hold is t·(1/duty − 1) of a job with no CPU time: short
		case costs[granted] = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("granted=%v: no cost accounted within 10 s", granted)
		}
		p.close()
	}
	if c := costs[false]; c > stall/2 {
		t.Fatalf("by CPU time a sleeping job cost %v", c)
	}
	if c := costs[true]; c < time.Duration(cores*float64(stall)) {
		t.Fatalf("by granted core-seconds a job stalled %v under %.1f core cost %v, want at least %v", stall, cores, c, time.Duration(cores*float64(stall)))
	}
	for _, on := range []bool{false, true} {
		a, err := NewAgent(AgentConfig{Coordinator: "c", SpeedPerGrantedCore: on})
		if err != nil {
			t.Fatal(err)
		}
		if a.cpool.granted != on || a.dpool.granted != on {
			t.Fatalf("SpeedPerGrantedCore=%v: pools have %v, %v", on, a.cpool.granted, a.dpool.granted)
		}
		a.Close()
	}
}

// The duty-cycle hold is part of a granted cost: a job of CPU time t under
// a quarter of a core holds its slot t + 3t, which is t granted
// core-seconds, so an unstalled job costs about its CPU time either way
// (the option changes nothing where the pool gets the cores it was
// granted). Bounds: at least 0.9 t (timers fire late, never early).
func TestPoolGrantedCostCountsHold(t *testing.T) {
	if _, ok := threadCPU(); !ok {
		t.Skip("no per-thread CPU clock here")
	}
	p := newPool(1, true)
	defer p.close()
	p.setCores(0.25)
	got := make(chan time.Duration, 1)
	var cpu time.Duration
	if err := p.run(testCtx(t), func() {
		c0, _ := threadCPU()
		burn(4 * time.Millisecond)
		c1, _ := threadCPU()
		cpu = c1 - c0
	}, func(c time.Duration) { got <- c }); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-got:
		if c < cpu*9/10 {
			t.Fatalf("a job of %v CPU under 0.25 core cost %v granted core-seconds, want at least %v", cpu, c, cpu*9/10)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no cost accounted within 10 s")
	}
}

// A job that runs while its pool has no grant (a paused or finished
// flow's chunks still in the pipeline) runs on no granted core: with
// SpeedPerGrantedCore it costs its CPU time, not a full core's wall time.
// The first version charged 1 × wall here, so a stalled leftover chunk
// under a 0.06-core quota counted up to 1/0.06 times its CPU time, and on
// the bed FVDF's measured lz4 speeds fell to 9–32 MB/s per core (slice
// 350 of LIVE.md's granted-speeds runs, FVDF 44× slower than before).
func TestPoolGrantedCostWithoutGrantIsCPUTime(t *testing.T) {
	if _, ok := threadCPU(); !ok {
		t.Skip("no per-thread CPU clock here")
	}
	const stall = 40 * time.Millisecond
	p := newPool(1, true)
	defer p.close()
	p.setCores(0.5)
	p.setCores(0) // the grant withdrawn
	got := make(chan time.Duration, 1)
	if err := p.run(testCtx(t), func() { time.Sleep(stall) }, func(c time.Duration) { got <- c }); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-got:
		if c > stall/2 {
			t.Fatalf("a sleeping job with no grant cost %v, want its CPU time", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no cost accounted within 10 s")
	}
}
