package epsp_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/epsp/epsptest"
	"github.com/falconml/falcon/straggler"
)

func polSlack(t testing.TB, mod func(*epsp.EPSPv2Config)) *epsp.EPSPv2 {
	t.Helper()
	c := epsp.DefaultEPSPv2SlackConfig()
	if mod != nil {
		mod(&c)
	}
	p, err := epsp.NewEPSPv2(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// layerOff is the slack scheme with the throughput layer off: no rate
// balancing, no residual transfers, no parallelism control.
func layerOff(c *epsp.EPSPv2Config) { c.NoBalance, c.NoResidual, c.Elastic = true, true, false }

func TestEPSPv2Config_Scheme(t *testing.T) {
	m, _ := straggler.NewHetero(straggler.DefaultHeteroConfig(2))
	for _, tc := range []struct {
		name string
		cfg  epsp.EPSPv2Config
		want string // the policy's name, "" if the config is refused
	}{
		{"enforced default", epsp.DefaultEPSPv2Config(), "epsp-v2(no-elastic)"},
		{"enforced elastic", epsp.EPSPv2Config{Elastic: true, Topology: m}, "epsp-v2"},
		{"enforced with a gate", epsp.EPSPv2Config{Staleness: 3}, ""},
		{"enforced without balance", epsp.EPSPv2Config{NoBalance: true}, ""},
		{"unknown scheme", epsp.EPSPv2Config{Scheme: 7}, ""},
		{"slack default", epsp.DefaultEPSPv2SlackConfig(), "epsp-v2-slack(no-elastic)"},
		{"slack elastic", epsp.EPSPv2Config{Scheme: epsp.Slack, Elastic: true, Topology: m}, "epsp-v2-slack"},
		{"slack s=1", epsp.EPSPv2Config{Scheme: epsp.Slack, Staleness: 1, Elastic: true, Topology: m}, "epsp-v2-slack(s=1)"},
		{"slack no gate", epsp.EPSPv2Config{Scheme: epsp.Slack, Staleness: -1, Elastic: true, Topology: m}, "epsp-v2-slack(s=inf)"},
		{"slack layer off", epsp.EPSPv2Config{Scheme: epsp.Slack, NoBalance: true, NoResidual: true}, "epsp-v2-slack(no-elastic,no-balance,no-residual)"},
		{"slack negative gate", epsp.EPSPv2Config{Scheme: epsp.Slack, Staleness: -2}, ""},
		{"slack elastic without topology", epsp.EPSPv2Config{Scheme: epsp.Slack, Elastic: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := epsp.NewEPSPv2(tc.cfg)
			if tc.want == "" {
				if !errors.Is(err, epsp.ErrBadConfig) {
					t.Fatalf("NewEPSPv2 = %v, want ErrBadConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Name() != tc.want {
				t.Fatalf("name %q, want %q", p.Name(), tc.want)
			}
			if tc.cfg.Scheme == epsp.Slack && tc.cfg.Staleness == 0 && p.Config().Staleness != epsp.DefaultSlackStaleness {
				t.Fatalf("staleness %d, want the default %d filled in", p.Config().Staleness, epsp.DefaultSlackStaleness)
			}
		})
	}
	if epsp.Enforced.String() != "enforced" || epsp.Slack.String() != "slack" || epsp.Scheme(9).String() != "Scheme(9)" {
		t.Fatal("Scheme.String")
	}
}

// TestEPSPv2Slack_AdmitDamped: through the Coordinator, every push is
// applied on arrival with DynSGD's 1/(d+1), d the updates applied since
// the pusher's pull, and a worker one clock ahead is let through the
// gate.
func TestEPSPv2Slack_AdmitDamped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    epsp.EPSPv2Config
		action epsp.PushAction
		scales []float64 // one per push of the script below
	}{
		// w0 and w1 pull at version 0; w0's push is update 1, w1's is 1
		// behind; w0, released at its clock (version 1) while w1 and w2
		// are in clock 0, is 1 behind after w1's push; w2, pulled at 0,
		// is 3 behind.
		{"slack", epsp.DefaultEPSPv2SlackConfig(), epsp.ApplyNow, []float64{1, 0.5, 0.5, 0.25}},
		{"slack, layer off", func() epsp.EPSPv2Config { c := epsp.DefaultEPSPv2SlackConfig(); layerOff(&c); return c }(), epsp.ApplyNow, []float64{1, 0.5, 0.5, 0.25}},
		{"slack, no gate", epsp.EPSPv2Config{Scheme: epsp.Slack, Staleness: -1}, epsp.ApplyNow, []float64{1, 0.5, 0.5, 0.25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := epsp.NewEPSPv2(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			d, err := epsptest.NewDriver(epsp.Config{NumWorkers: 3, Batch: 8}, p)
			if err != nil {
				t.Fatal(err)
			}
			var got []float64
			push := func(w epsp.WorkerID) {
				t.Helper()
				dec, err := d.PushOwn(w)
				if err != nil {
					t.Fatal(err)
				}
				if dec.Action != tc.action {
					t.Fatalf("push %d: action %v, want %v", len(got), dec.Action, tc.action)
				}
				got = append(got, dec.EffectiveScale())
			}
			push(0)
			if _, err := d.Clock(0); err != nil {
				t.Fatal(err)
			}
			push(1)
			if _, err := d.Clock(1); err != nil {
				t.Fatal(err)
			}
			if d.View().Waiting(0) {
				t.Fatal("worker 0, one clock ahead of worker 2, is not released under the gate")
			}
			push(0)
			if _, err := d.Clock(0); err != nil {
				t.Fatal(err)
			}
			push(2)
			if fmt.Sprint(got) != fmt.Sprint(tc.scales) {
				t.Fatalf("scales %v, want %v", got, tc.scales)
			}
		})
	}
}

// slackRun is one loop run of a policy with every admission checked.
type slackRun struct {
	res *epsptest.LoopResult
	// lead is the mean over pushes of the pusher's clock minus the
	// slowest worker's: the clock staleness the gate bounds.
	lead float64
	// maxD is the largest d (updates behind) of a push.
	maxD   uint64
	starts [][]time.Duration
}

// runSlack runs p on m and checks every admission: applied now, scale
// 1/(d+1)·b/B̄ exactly (b/B̄ = 1 while batches are the initial ones), and
// no computing worker ever more than gate clocks ahead of the slowest.
func runSlack(t *testing.T, m straggler.Model, p epsp.Policy, gate, clocks int, batch int) slackRun {
	t.Helper()
	rec := &polRecorder{Policy: p}
	var out slackRun
	n := m.NumWorkers()
	out.starts = make([][]time.Duration, n)
	leads, pushes := 0, 0
	checked := 0
	res, err := epsptest.RunLoop(epsptest.LoopConfig{Model: m, Batch: batch, Parallelism: 2, Clocks: clocks,
		ProgressEvery: 3 * time.Millisecond, Tick: 10 * time.Millisecond,
		Check: func(l *epsptest.Loop, now time.Duration, o epsp.Output) error {
			v := l.C.View()
			for _, a := range rec.admits[checked:] {
				if a.d.Action != epsp.ApplyNow {
					return fmt.Errorf("push %+v: action %v, want apply", a.p, a.d.Action)
				}
				var d uint64
				if a.version > a.p.BaseVersion {
					d = a.version - a.p.BaseVersion
				}
				want := epsp.DynSGDScale(d) * (float64(a.p.BatchSamples) * float64(n) / float64(n*batch))
				if a.d.Scale != want {
					return fmt.Errorf("push %+v at version %d: scale %v, want 1/(d+1)·b/B̄ = %v", a.p, a.version, a.d.Scale, want)
				}
				out.maxD = max(out.maxD, d)
				leads += v.Clock(a.p.Worker) - v.MinClock()
				pushes++
			}
			checked = len(rec.admits)
			for w := range n {
				id := epsp.WorkerID(w)
				if !v.Waiting(id) && gate >= 0 && v.Clock(id)-v.MinClock() > gate {
					return fmt.Errorf("at %v worker %d computes clock %d, min clock %d: beyond the gate %d", now, w, v.Clock(id), v.MinClock(), gate)
				}
			}
			for _, w := range o.Release {
				out.starts[w] = append(out.starts[w], now)
			}
			return nil
		}}, rec)
	if err != nil {
		t.Fatalf("%s: %v", p.Name(), err)
	}
	out.res = res
	out.lead = float64(leads) / float64(pushes)
	return out
}

// Reference: the slack scheme (bounded staleness, DynSGD's
// damping, planning that balances push rates). A persistent 2x straggler
// among four workers: with the layer on, its batch falls to about half
// the others' (r·T*: 256·0.5/3.5 ≈ 37 against 73), so without a gate its
// clocks per second equal the others' instead of half of them, and under
// the default gate the fast workers stop waiting for it: the run's clocks
// end sooner and pushes are fewer clocks apart. Asserted on the policy's
// orders and the loop's virtual time.
func TestEPSPv2Slack_BalancesStraggler(t *testing.T) {
	hc := straggler.DefaultHeteroConfig(4)
	hc.Persistent = map[int]float64{0: 0.5}
	m, _ := straggler.NewHetero(hc)
	const clocks = 30
	for _, gate := range []int{-1, epsp.DefaultSlackStaleness} {
		t.Run(fmt.Sprintf("s=%d", gate), func(t *testing.T) {
			off := runSlack(t, m, polSlack(t, func(c *epsp.EPSPv2Config) { c.Staleness = gate; layerOff(c) }), gate, clocks, 64)
			pol := polSlack(t, func(c *epsp.EPSPv2Config) { c.Staleness = gate })
			on := runSlack(t, m, pol, gate, clocks, 64)
			if b := on.res.Batch; b[0] < 34 || b[0] > 40 || b[1] < 70 || b[1] > 76 || b[2] != b[1] || b[3] != b[1] {
				t.Fatalf("final batches %v, want about [37 73 73 73]", b)
			}
			if st := pol.Stats(); st.BatchChanges < 4 || st.BatchChanges > 8 {
				t.Fatalf("%d batch changes (%+v), want each worker resized once or twice", st.BatchChanges, st)
			}
			if b := off.res.Batch; b[0] != 64 || b[1] != 64 {
				t.Fatalf("layer off: batches %v", b)
			}
			// clocks per second over the run: the straggler's against the
			// fastest other worker's
			ratio := func(r slackRun) float64 {
				return float64(r.res.Clocks[0]) / float64(max(r.res.Clocks[1], r.res.Clocks[2], r.res.Clocks[3]))
			}
			t.Logf("layer off: clocks %v, end %v, mean lead %.2f, max d %d; on: clocks %v, end %v, mean lead %.2f, max d %d",
				off.res.Clocks, off.res.End, off.lead, off.maxD, on.res.Clocks, on.res.End, on.lead, on.maxD)
			if gate < 0 {
				if r := ratio(off); r > 0.55 {
					t.Fatalf("layer off, no gate: the straggler's clock rate is %.2f of the others', want about 0.5", r)
				}
				if r := ratio(on); r < 0.85 {
					t.Fatalf("layer on, no gate: the straggler's clock rate is %.2f of the others', want near 1 (off: %.2f)", r, ratio(off))
				}
			}
			if on.lead >= off.lead/2 {
				t.Fatalf("mean lead %.2f with the layer, %.2f without: want it at least halved", on.lead, off.lead)
			}
			if on.res.End >= off.res.End {
				t.Fatalf("end %v with the layer, %v without", on.res.End, off.res.End)
			}
		})
	}
}

// slackTrace runs p in the loop and returns every admission and every
// order as text.
func slackTrace(t *testing.T, m straggler.Model, p epsp.Policy) (string, *epsptest.LoopResult) {
	t.Helper()
	rec := &polRecorder{Policy: p}
	var b strings.Builder
	checked := 0
	res, err := epsptest.RunLoop(epsptest.LoopConfig{
		Model: m, Batch: 64, Parallelism: 2, Clocks: 12, ProgressEvery: 7 * time.Millisecond, Tick: 20 * time.Millisecond,
		Check: func(l *epsptest.Loop, now time.Duration, out epsp.Output) error {
			for _, a := range rec.admits[checked:] {
				fmt.Fprintf(&b, "@%v push w=%d clock=%d base=%d version=%d -> %v scale=%v\n", now, a.p.Worker, a.p.Clock, a.p.BaseVersion, a.version, a.d.Action, a.d.Scale)
			}
			checked = len(rec.admits)
			if !out.Empty() {
				fmt.Fprintf(&b, "@%v%s\n", now, epsptest.FormatOutput(out))
			}
			return nil
		},
	}, rec)
	if err != nil {
		t.Fatalf("%s: %v", p.Name(), err)
	}
	return b.String(), res
}

// Homogeneous workers on fully used hosts (two per 4-core host at 2
// goroutines each): the layer sees nothing to do. Every admission and
// order is DynSGD's with the same gate, bit for bit: no transfer, no
// parallelism change, no batch change, scales 1/(d+1).
func TestEPSPv2Slack_HomogeneousIsGatedDynSGD(t *testing.T) {
	for seed := range uint64(4) {
		m := polModel(t, 6, seed, true)
		dyn, err := epsp.NewDynSGD(epsp.DynSGDConfig{Staleness: epsp.DefaultSlackStaleness})
		if err != nil {
			t.Fatal(err)
		}
		want, rd := slackTrace(t, m, dyn)
		p := polSlack(t, func(c *epsp.EPSPv2Config) { c.Elastic, c.Topology = true, m })
		got, rs := slackTrace(t, m, p)
		if got != want {
			t.Fatalf("seed %d: %s differs from %s:\n%s\n%s:\n%s", seed, p.Name(), dyn.Name(), got, dyn.Name(), want)
		}
		if rs.Stats.TransfersOrdered != 0 || rs.Stats.ParallelismChanges != 0 || rs.Stats.BatchChanges != 0 || rs.End != rd.End {
			t.Fatalf("seed %d: stats %+v, end %v vs %v", seed, rs.Stats, rs.End, rd.End)
		}
		if st := p.Stats(); st.ControlRounds == 0 {
			t.Fatalf("seed %d: the controller never ran (%+v), so the test proves nothing", seed, st)
		}
	}
}

// Random speeds, transient slowdowns and transfers (polModel): every
// sample pushed once (RunLoop), every push damped by 1/(d+1)·b/B̄, never
// beyond the gate, for the default gate and s = 1.
func TestEPSPv2Slack_Property(t *testing.T) {
	seeds := uint64(15)
	if testing.Short() {
		seeds = 4
	}
	for seed := range seeds {
		m := polModel(t, 6, seed, false)
		for _, s := range []int{1, epsp.DefaultSlackStaleness} {
			p := polSlack(t, func(c *epsp.EPSPv2Config) { c.Staleness, c.Elastic, c.Topology = s, true, m })
			r := runSlack(t, m, p, s, 15, 48)
			if seed == 0 {
				t.Logf("s=%d: %+v, policy %+v", s, r.res.Stats, p.Stats())
			}
		}
	}
}

// The slack scheme's balance band: a released worker's batch is lowered
// when its projected clock time b/r runs past T* by more than the margin
// (5 %), and raised only when it ends early by more than twice the
// margin, so that a worker whose batch stops on a partial round of
// claims (a lower busy speed at the larger batch) does not oscillate
// between the two. Two workers, batch 60, α = 1 (each clock's busy speed
// is the estimate): worker 0 at 20 samples/s and worker 1 at 60 give
// T* = 120/80 s and the batches 30 and 90; then worker 0's next speed
// decides.
func TestEPSPv2Slack_BalanceBand(t *testing.T) {
	for _, tc := range []struct {
		name string
		r0   float64 // worker 0's speed over its clock at batch 30
		want int     // its next batch, 0 if unchanged
	}{
		{"within the band", 20, 0},
		{"raised by less than twice the margin: kept", 22, 0}, // want 120·22/82 = 32.2: 30 ≥ 0.9·32.2
		{"raised by more", 25, 35},                            // want 120·25/85 = 35.3
		{"lowered past the margin", 18, 28},                   // want 120·18/78 = 27.7: 30 > 1.05·27.7
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := polSlack(t, func(c *epsp.EPSPv2Config) { c.Alpha = 1; c.NoResidual = true })
			c, err := epsp.NewCoordinator(epsp.Config{NumWorkers: 2, Batch: 60}, p)
			if err != nil {
				t.Fatal(err)
			}
			run := func(w epsp.WorkerID, r float64) epsp.Output {
				t.Helper()
				v := c.View()
				b := v.Batch(w)
				busy := time.Duration(float64(b) / r * float64(time.Second))
				if _, err := c.Admit(0, epsp.Push{Worker: w, Owner: w, Clock: v.Clock(w), BaseVersion: v.Version(), Samples: b, BatchSamples: b, Busy: busy}); err != nil {
					t.Fatal(err)
				}
				out, err := c.Step(0, epsp.Event{Kind: epsp.EventClock, Worker: w, Clock: v.Clock(w)})
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			if out := run(0, 20); len(out.SetBatch) != 0 {
				t.Fatalf("resized with worker 1's speed unknown: %+v", out.SetBatch)
			}
			if out := run(1, 60); len(out.SetBatch) != 1 || out.SetBatch[0] != (epsp.BatchOrder{Worker: 1, Size: 90}) {
				t.Fatalf("worker 1: %+v, want batch 90", out.SetBatch)
			}
			if out := run(0, 20); len(out.SetBatch) != 1 || out.SetBatch[0] != (epsp.BatchOrder{Worker: 0, Size: 30}) {
				t.Fatalf("worker 0: %+v, want batch 30", out.SetBatch)
			}
			out := run(0, tc.r0)
			switch {
			case tc.want == 0 && len(out.SetBatch) != 0:
				t.Fatalf("speed %v: %+v, want no change", tc.r0, out.SetBatch)
			case tc.want != 0 && (len(out.SetBatch) != 1 || out.SetBatch[0] != (epsp.BatchOrder{Worker: 0, Size: tc.want})):
				t.Fatalf("speed %v: %+v, want batch %d", tc.r0, out.SetBatch, tc.want)
			}
			if b := c.View().Batch(0); tc.want != 0 && b != tc.want {
				t.Fatalf("view batch %d", b)
			}
		})
	}
}
