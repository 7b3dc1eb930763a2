package epsp_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/epsp/epsptest"
	"github.com/falconml/falcon/straggler"
)

// polModel returns a seeded heterogeneity model: n workers, random speed
// factors in [0.2, 1], transient slowdowns, two workers per host.
func polModel(t testing.TB, n int, seed uint64, equal bool) *straggler.Hetero {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 17))
	hc := straggler.DefaultHeteroConfig(n)
	hc.Seed = seed
	hc.Hosts = make([]int, n)
	for w := range n {
		hc.Hosts[w] = w / 2
	}
	if !equal {
		hc.Speed = make([]float64, n)
		for w := range hc.Speed {
			hc.Speed[w] = 0.2 + 0.8*rng.Float64()
		}
		hc.Transient = straggler.TransientConfig{Prob: 0.2, Period: 50 * time.Millisecond, Duration: 30 * time.Millisecond, Factor: 0.3}
	}
	m, err := straggler.NewHetero(hc)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func polEPSP(t testing.TB, mod func(*epsp.EPSPConfig)) *epsp.EPSP {
	t.Helper()
	c := epsp.DefaultEPSPConfig()
	if mod != nil {
		mod(&c)
	}
	p, err := epsp.NewEPSP(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// polTrace runs p in the loop and returns every decision as text.
func polTrace(t *testing.T, m straggler.Model, p epsp.Policy) (string, *epsptest.LoopResult) {
	t.Helper()
	var b strings.Builder
	res, err := epsptest.RunLoop(epsptest.LoopConfig{
		Model: m, Batch: 64, Clocks: 8, ProgressEvery: 7 * time.Millisecond, Tick: 20 * time.Millisecond,
		Check: func(l *epsptest.Loop, now time.Duration, out epsp.Output) error {
			if !out.Empty() {
				fmt.Fprintf(&b, "@%v%s\n", now, epsptest.FormatOutput(out))
			}
			return nil
		},
	}, p)
	if err != nil {
		t.Fatalf("%s: %v", p.Name(), err)
	}
	return b.String(), res
}

func TestEPSPConfig_Validate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*epsp.EPSPConfig)
	}{
		{"staleness", func(c *epsp.EPSPConfig) { c.Staleness = -1 }},
		{"theta", func(c *epsp.EPSPConfig) { c.Theta = 1 }},
		{"alpha", func(c *epsp.EPSPConfig) { c.Alpha = 2 }},
		{"control", func(c *epsp.EPSPConfig) { c.ControlEvery = -1 }},
		{"pmin", func(c *epsp.EPSPConfig) { c.Parallelism.PMin = 5; c.Parallelism.PMax = 2 }},
		{"fraction", func(c *epsp.EPSPConfig) { c.Transfers.Fraction = 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := epsp.DefaultEPSPConfig()
			tc.mod(&c)
			if _, err := epsp.NewEPSP(c); !errors.Is(err, epsp.ErrBadConfig) {
				t.Fatalf("NewEPSP = %v, want ErrBadConfig", err)
			}
		})
	}
}

// Reference: falcon.md §4 [reconstruction] and the spotlight ("EPSP
// supports both enforced and slack synchronization by adjusting the
// parameter of staleness"): with s = 0 and no slow worker, EPSP is BSP.
func TestEPSP_EnforcedIsBSPWhenNoWorkerIsSlow(t *testing.T) {
	for seed := range uint64(5) {
		m := polModel(t, 6, seed, true)
		bsp, rb := polTrace(t, m, epsp.NewBSP())
		p := polEPSP(t, func(c *epsp.EPSPConfig) {
			c.Topology = m // shared hosts: elastic control could move cores
			c.Parallelism.PMax = 4
		})
		got, re := polTrace(t, m, p)
		if got != bsp {
			t.Fatalf("seed %d: EPSP(enforced) decisions differ from BSP:\n%s\nBSP:\n%s", seed, got, bsp)
		}
		if re.End != rb.End || re.Stats.Flushes != rb.Stats.Flushes {
			t.Fatalf("seed %d: end %v vs %v", seed, re.End, rb.End)
		}
		if st := p.Stats(); st.ControlRounds == 0 {
			t.Fatalf("seed %d: the controller never ran (%+v), so the test proves nothing", seed, st)
		}
	}
	// The same on a hand-written script through the Driver.
	script := `
		progress w=0 done=16 elapsed=100ms
		progress w=1 done=16 elapsed=100ms
		progress w=2 done=16 elapsed=100ms
		@200ms
		push w=1
		clock w=1
		push w=0
		clock w=0
		tick
		push w=2
		clock w=2
		@250ms
		tick
	`
	var traces []string
	for _, p := range []epsp.Policy{epsp.NewBSP(), polEPSP(t, nil)} {
		d, err := epsptest.NewDriver(epsp.Config{NumWorkers: 3, Batch: 32}, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Run(script); err != nil {
			t.Fatalf("%s: %v", p.Name(), err)
		}
		traces = append(traces, d.Trace())
	}
	if traces[0] != traces[1] {
		t.Fatalf("script traces differ:\nBSP\n%s\nEPSP\n%s", traces[0], traces[1])
	}
}

// Reference: falcon.md §4-5: SSP with s = ∞ is ASP; EPSP's slack mode is
// an SSP gate, so with a huge s it must decide as ASP.
func TestEPSP_SlackHugeStalenessIsASP(t *testing.T) {
	for seed := range uint64(5) {
		m := polModel(t, 5, seed, false)
		asp, _ := polTrace(t, m, epsp.NewASP())
		got, _ := polTrace(t, m, polEPSP(t, func(c *epsp.EPSPConfig) {
			c.Staleness = math.MaxInt
			c.Elastic = false // ASP has no parallelism control to compare with
		}))
		if got != asp {
			t.Fatalf("seed %d: EPSP(s=MaxInt) differs from ASP:\n%s\nASP:\n%s", seed, got, asp)
		}
	}
}

// Reference: falcon.md spec "With all workers equal, Falcon degenerates to
// its sync mode with no transfers and no parallelism changes".
func TestEPSP_AllEqualOrdersNoTransferNoParallelism(t *testing.T) {
	for _, s := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("s=%d", s), func(t *testing.T) {
			for seed := range uint64(4) {
				m := polModel(t, 6, seed, true)
				p := polEPSP(t, func(c *epsp.EPSPConfig) {
					c.Staleness = s
					c.Topology = m
					c.Parallelism.PMax = 4
				})
				_, res := polTrace(t, m, p)
				if res.Stats.TransfersOrdered != 0 || res.Stats.ParallelismChanges != 0 {
					t.Fatalf("seed %d: %d transfers, %d parallelism changes; want none", seed, res.Stats.TransfersOrdered, res.Stats.ParallelismChanges)
				}
			}
		})
	}
}

// Reference: falcon.md §3 [reconstruction]: a blocked pioneer takes a tail
// of a straggler's batch; transfers must shorten a barrier run with a
// persistent straggler, and every sample is still pushed exactly once
// (RunLoop checks that).
func TestEPSP_TransferHelpsPersistentStraggler(t *testing.T) {
	hc := straggler.DefaultHeteroConfig(4)
	hc.Persistent = map[int]float64{3: 0.25}
	m, _ := straggler.NewHetero(hc)
	_, bsp := polTrace(t, m, epsp.NewBSP())
	p := polEPSP(t, func(c *epsp.EPSPConfig) { c.Elastic = false })
	_, got := polTrace(t, m, p)
	if got.Stats.TransfersAccepted == 0 {
		t.Fatal("no transfer accepted")
	}
	if got.End >= bsp.End {
		t.Fatalf("EPSP end %v, BSP end %v: transfers did not help", got.End, bsp.End)
	}
	snap := p.Snapshot()
	if len(snap.Workers) != 4 {
		t.Fatalf("snapshot %v", snap)
	}
}

// Reference: falcon.md §2 [reconstruction]: stragglers gain threads from
// co-located pioneers within the host's core budget.
func TestEPSP_ElasticMovesCoresToStraggler(t *testing.T) {
	hc := straggler.DefaultHeteroConfig(4)
	hc.Hosts = []int{0, 0, 1, 1}
	hc.Cores = []int{4, 4}
	hc.Persistent = map[int]float64{0: 0.4}
	m, _ := straggler.NewHetero(hc)
	p := polEPSP(t, func(c *epsp.EPSPConfig) {
		c.Transfer = false
		c.Topology = m
		c.Parallelism.Curve = func(w int) straggler.Speedup { return m.Curve(w) }
	})
	res, err := epsptest.RunLoop(epsptest.LoopConfig{Model: m, Batch: 64, Parallelism: 2, Clocks: 10,
		ProgressEvery: 5 * time.Millisecond, Tick: 10 * time.Millisecond}, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.ParallelismChanges == 0 {
		t.Fatal("no parallelism change")
	}
	// Worker 0 (slow) gained from worker 1 on the same host; host 1 untouched.
	if got := res.Parallelism; got[0] <= 2 || got[1] >= 2 || got[0]+got[1] > 4 || got[2] != 2 || got[3] != 2 {
		t.Fatalf("final parallelism %v, want worker 0 > 2 taken from worker 1, host 1 at [2 2]", got)
	}
}

// polBounded lists every built-in policy with a staleness bound, and the bound.
func polBounded(t testing.TB) []struct {
	p     epsp.Policy
	bound int
} {
	must := func(p epsp.Policy, err error) epsp.Policy {
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	slack := func(s int) epsp.Policy {
		return polEPSP(t, func(c *epsp.EPSPConfig) { c.Staleness = s })
	}
	return []struct {
		p     epsp.Policy
		bound int
	}{
		{polEPSP(t, nil), 0},
		{slack(1), 1},
		{slack(3), 3},
		{must(epsp.NewFlexRR(epsp.DefaultFlexRRConfig())), 1},
		{must(epsp.NewConSGD(epsp.ConSGDConfig{Staleness: 3})), 3}, // the gate option; the default has none
		{must(epsp.NewDynSGD(epsp.DynSGDConfig{Staleness: 2})), 2},
		{must(epsp.NewLBBSP(epsp.DefaultLBBSPConfig())), 0},
		{must(epsp.NewDSSP(epsp.DSSPConfig{Lower: 1, Upper: 3})), 3},
	}
}

// Reference: falcon.md §5 (SSP: a worker at clock c proceeds only while
// c − min_j c_j ≤ s) and the spec test "the SSP bound is never violated".
// Property over seeds: random speeds, transient slowdowns, transfers, the
// real Coordinator; no computing worker is ever more than s clocks ahead.
func TestPolicies_StalenessBoundProperty(t *testing.T) {
	seeds := uint64(25)
	if testing.Short() {
		seeds = 5
	}
	for seed := range seeds {
		m := polModel(t, 6, seed, false)
		for _, tc := range polBounded(t) {
			maxLead := 0
			_, err := epsptest.RunLoop(epsptest.LoopConfig{
				Model: m, Batch: 48, Clocks: 12, ProgressEvery: 6 * time.Millisecond, Tick: 15 * time.Millisecond,
				Check: func(l *epsptest.Loop, now time.Duration, _ epsp.Output) error {
					v := l.C.View()
					for w := range v.NumWorkers() {
						id := epsp.WorkerID(w)
						if lead := v.Clock(id) - v.MinClock(); !v.Waiting(id) {
							maxLead = max(maxLead, lead)
							if lead > tc.bound {
								return fmt.Errorf("at %v worker %d computes clock %d, min clock %d: lead %d > %d", now, w, v.Clock(id), v.MinClock(), lead, tc.bound)
							}
						}
					}
					return nil
				},
			}, tc.p)
			if err != nil {
				t.Fatalf("seed %d %s: %v", seed, tc.p.Name(), err)
			}
			_ = maxLead
		}
	}
}

// The bound is reached, so the property test above can fail: with a slow
// worker the slack policies do run ahead up to s.
func TestPolicies_StalenessBoundIsReached(t *testing.T) {
	hc := straggler.DefaultHeteroConfig(4)
	hc.Persistent = map[int]float64{0: 0.2}
	m, _ := straggler.NewHetero(hc)
	for _, tc := range polBounded(t) {
		maxLead := 0
		_, err := epsptest.RunLoop(epsptest.LoopConfig{Model: m, Batch: 48, Clocks: 12,
			Check: func(l *epsptest.Loop, _ time.Duration, _ epsp.Output) error {
				v := l.C.View()
				for w := range v.NumWorkers() {
					if id := epsp.WorkerID(w); !v.Waiting(id) {
						maxLead = max(maxLead, v.Clock(id)-v.MinClock())
					}
				}
				return nil
			}}, tc.p)
		if err != nil {
			t.Fatal(err)
		}
		if maxLead != tc.bound {
			t.Errorf("%s: max lead %d, want the bound %d to be reached", tc.p.Name(), maxLead, tc.bound)
		}
	}
}

// Reference: falcon.md §3-4 [reconstruction]: "while blocked, act as a
// pioneer and ask for a transferable task". After every step, no waiting
// worker that is blocked and idle (not computing a transfer) may coexist
// with a worker that blocks it and still has transferable work above the
// threshold (and is not already giving, and has not refused that worker
// this clock). In particular a giver whose transfer made it finish early
// becomes a taker itself.
func TestEPSP_IdleWorkerNeverLeftWaitingWithTransferableWork(t *testing.T) {
	for _, s := range []int{0, 2} {
		for seed := range uint64(15) {
			m := polModel(t, 6, seed, false)
			p := polEPSP(t, func(c *epsp.EPSPConfig) {
				c.Staleness = s
				c.Elastic = false
				c.NoExtrapolate = true // judge by the reports the view shows
			})
			const batch, threshold = 40, 4 // MinRemaining 0.1·40
			var idleGivers int
			_, err := epsptest.RunLoop(epsptest.LoopConfig{
				Model: m, Batch: batch, Clocks: 10, ProgressEvery: 4 * time.Millisecond, Tick: 10 * time.Millisecond,
				Check: func(l *epsptest.Loop, now time.Duration, _ epsp.Output) error {
					v := l.C.View()
					busyTaker, busyGiver := map[epsp.WorkerID]bool{}, map[epsp.WorkerID]bool{}
					for _, o := range l.Open() {
						busyTaker[o.To], busyGiver[o.From] = true, true
					}
					refused := map[[3]int]bool{}
					for _, o := range l.Refused() {
						refused[[3]int{int(o.From), int(o.To), o.Clock}] = true
					}
					for ti := range v.NumWorkers() {
						tk := epsp.WorkerID(ti)
						if !v.Waiting(tk) || busyTaker[tk] {
							continue
						}
						for gi := range v.NumWorkers() {
							g := epsp.WorkerID(gi)
							pr := v.Progress(g)
							if v.Waiting(g) || busyGiver[g] || v.Clock(g) >= v.Clock(tk)-s || pr.Clock != v.Clock(g) ||
								refused[[3]int{gi, ti, v.Clock(g)}] {
								continue
							}
							if r := pr.Remaining(); r >= threshold && r/2 >= 1 {
								return fmt.Errorf("s=%d at %v: worker %d idle at clock %d while worker %d has %d samples of clock %d left",
									s, now, ti, v.Clock(tk), gi, r, v.Clock(g))
							}
						}
					}
					return nil
				},
			}, p)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if p.Stats().TransfersPlanned == 0 {
				t.Fatalf("s=%d seed %d: no transfer planned; the property is vacuous", s, seed)
			}
			_ = idleGivers
		}
	}
}

// BenchmarkEPSP_Step measures one progress event (projection and transfer
// planning included) with a quarter of the workers blocked at the barrier.
func BenchmarkEPSP_Step(b *testing.B) {
	for _, n := range []int{16, 64, 256} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			p := polEPSP(b, nil)
			v := epsptest.NewFakeView(n, 128)
			for w := range n / 4 {
				v.Finish(epsp.WorkerID(w))
			}
			i := 0
			for b.Loop() {
				w := epsp.WorkerID(n/4 + i%(n-n/4))
				i++
				r := epsp.ProgressReport{Worker: w, Clock: 0, Done: min(127, i%128), Assigned: 128, Elapsed: time.Duration(i) * time.Millisecond}
				v.SetProgress(r)
				out := p.Step(time.Duration(i)*time.Millisecond, v, epsp.Event{Kind: epsp.EventProgress, Progress: r})
				v.Apply(out)
			}
		})
	}
}

// Reference: falcon.md §3 [reconstruction]: "claimed with a confirm/cancel
// handshake". A giver that refuses (it already passed Lo) keeps its range;
// the blocked pioneer is offered another straggler's tail at once, and is
// not asked to take from the refuser again in that clock.
func TestEPSP_RefusalReplans(t *testing.T) {
	p := polEPSP(t, func(c *epsp.EPSPConfig) {
		c.Elastic = false
		c.NoExtrapolate = true
		c.Transfers.SplitAll = false // FlexRR's pairwise φ = 0.5
	})
	v := epsptest.NewFakeView(3, 100)
	p.Step(time.Second, v, polProgress(v, 1, 10)) // 90 left: the longest
	p.Step(time.Second, v, polProgress(v, 2, 40)) // 60 left
	out := p.Step(time.Second, v, v.Finish(0))
	if len(out.Transfers) != 1 || out.Transfers[0].From != 1 || out.Transfers[0].Lo != 55 {
		t.Fatalf("first order %+v, want worker 1's tail [55,100)", out.Transfers)
	}
	ts := v.Apply(out)
	v.SetPending(0, 0)
	out = p.Step(time.Second, v, epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: ts[0].ID, From: 1, To: 0, Clock: 0}})
	if len(out.Transfers) != 1 || out.Transfers[0].From != 2 || out.Transfers[0].Lo != 70 || len(out.Release) != 0 {
		t.Fatalf("after refusal %+v, want worker 2's tail [70,100) and no release", out)
	}
	if st := p.Stats(); st.TransfersRefused != 1 || st.TransfersPlanned != 2 {
		t.Fatalf("stats %+v", st)
	}
}
