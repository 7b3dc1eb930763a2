package coflowsim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
)

// runQuanta is the literal form of coflowsim's time loop, one quantum at a
// time; run must produce exactly the same records.
func (s *sim) runQuanta() {
	E, Q := s.cfg.EpochMs, s.cfg.QuantumMs
	perFlow := s.policy.perFlow()
	next := 0
	for epoch := int64(0); next < len(s.jobs) || len(s.active) > 0; epoch += E {
		added := false
		for next < len(s.jobs) && s.jobs[next].arrival <= epoch+E {
			s.jobs[next].start = epoch
			s.policy.insert(s, s.jobs[next])
			next++
			added = true
		}
		if added {
			s.now = epoch
			s.policy.allocate(s)
		}
		for q := int64(0); q < E; q += Q {
			departed, flowDone := s.step(epoch+q, 1)
			if departed || (perFlow && flowDone) {
				s.now = epoch + q + Q
				s.policy.allocate(s)
			}
		}
		if epoch > 1<<40 {
			s.stalled = true
			return
		}
	}
}

// engine selects how replay runs a trace.
type engine int

const (
	quantumLoop engine = iota // runQuanta: one quantum at a time
	eventJump                 // run: every active flow advanced to each event
	lazyFlows                 // what Run uses: runPerFlow for FAIR and PFP, run otherwise
)

func replay(t *testing.T, tr *coflow.Trace, sched string, quanta bool) *Result {
	t.Helper()
	if quanta {
		return replayWith(t, tr, sched, quantumLoop)
	}
	return replayWith(t, tr, sched, lazyFlows)
}

func replayWith(t *testing.T, tr *coflow.Trace, sched string, e engine) *Result {
	t.Helper()
	cfg := DefaultConfig()
	pol, _ := newPolicy(sched)
	s := newSim(tr, cfg, sched, pol)
	switch pf, ok := pol.(perFlowPolicy); {
	case e == quantumLoop:
		s.runQuanta()
	case e == lazyFlows && ok:
		s.runPerFlow(pf)
	default:
		s.run()
	}
	if s.stalled {
		t.Fatalf("%s stalled", sched)
	}
	res := &Result{Scheduler: sched}
	for _, j := range s.jobs {
		var sum int64
		for _, f := range j.redFinish {
			sum += f - j.start
		}
		res.Records = append(res.Records, Record{ID: j.id, StartMs: j.start, FinishMs: j.finish, IndividualSumsMs: sum})
	}
	return res
}

func smallTrace(t *testing.T, seed uint64) *coflow.Trace {
	t.Helper()
	cfg := coflow.SynthConfig{Ports: 12, Coflows: 25, MeanInterArrival: 3 * time.Second, MaxWidth: 6,
		ShortNarrow: 0.5, LongNarrow: 0.2, ShortWide: 0.2}
	tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(seed, 7)))
	if err != nil {
		t.Fatal(err)
	}
	// Keep the replay short: cap reducer sizes.
	for i := range tr.Coflows {
		for k := range tr.Coflows[i].Reducers {
			if r := &tr.Coflows[i].Reducers[k]; r.MB > 400 {
				r.MB = 400
			}
		}
	}
	return tr
}

// TestEventJumpMatchesQuantumLoop checks that jumping from event to event
// gives exactly the records of the quantum-by-quantum loop, for every
// scheduler, on small synthetic traces and (when present) the fixtures.
func TestEventJumpMatchesQuantumLoop(t *testing.T) {
	traces := map[string]*coflow.Trace{"synthetic-1": smallTrace(t, 1), "synthetic-2": smallTrace(t, 2)}
	if dir, err := coflowtest.SharedData("coflowsim-fixtures"); err == nil && !testing.Short() {
		traces["synth-a"] = coflowtest.ReadTraceFile(t, filepath.Join(dir, "synth-a.txt"))
		// DARK's queues depend on float64 sums of bytes sent landing
		// exactly on a limit: check the jump on the larger trace too.
		tb := coflowtest.ReadTraceFile(t, filepath.Join(dir, "synth-b.txt"))
		t.Run("synth-b/DARK", func(t *testing.T) {
			a, b := replay(t, tb, "DARK", true), replay(t, tb, "DARK", false)
			for i := range a.Records {
				if a.Records[i] != b.Records[i] {
					t.Fatalf("coflow %d: quantum loop %+v, event jump %+v", a.Records[i].ID, a.Records[i], b.Records[i])
				}
			}
		})
	}
	for name, tr := range traces {
		for _, sched := range Schedulers() {
			t.Run(name+"/"+sched, func(t *testing.T) {
				a := replay(t, tr, sched, true)
				b := replay(t, tr, sched, false)
				for i := range a.Records {
					if a.Records[i] != b.Records[i] {
						t.Fatalf("coflow %d: quantum loop %+v, event jump %+v", a.Records[i].ID, a.Records[i], b.Records[i])
					}
				}
			})
		}
	}
}

func TestRunErrors(t *testing.T) {
	tr := &coflow.Trace{Ports: 2, Coflows: []coflow.TraceCoflow{{ID: 1, Mappers: []int{0}, Reducers: []coflow.TraceReducer{{Port: 1, MB: 1}}}}}
	if _, err := Run(tr, "nope", DefaultConfig()); !errors.Is(err, ErrUnknownScheduler) {
		t.Errorf("unknown scheduler: got %v", err)
	}
	if _, err := Run(nil, "FIFO", DefaultConfig()); !errors.Is(err, ErrTrace) {
		t.Errorf("nil trace: got %v", err)
	}
	bad := &coflow.Trace{Ports: 2, Coflows: []coflow.TraceCoflow{{ID: 1, Mappers: []int{5}, Reducers: []coflow.TraceReducer{{Port: 1, MB: 1}}}}}
	if _, err := Run(bad, "FIFO", DefaultConfig()); !errors.Is(err, ErrTrace) {
		t.Errorf("port out of range: got %v", err)
	}
	cfg := DefaultConfig()
	cfg.EpochMs = 10
	if _, err := Run(tr, "FIFO", cfg); !errors.Is(err, ErrConfig) {
		t.Errorf("epoch not a multiple of the quantum: got %v", err)
	}
	if res, err := Run(tr, "fifo", DefaultConfig()); err != nil || res.Scheduler != "FIFO" {
		t.Errorf("lower-case name: %v %v", res, err)
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"default", func(*Config) {}, true},
		{"zero quantum", func(c *Config) { c.QuantumMs = 0 }, false},
		{"zero epoch", func(c *Config) { c.EpochMs = 0 }, false},
		{"ragged epoch", func(c *Config) { c.EpochMs = 10241 }, false},
		{"zero second", func(c *Config) { c.SecondMs = 0 }, false},
		{"zero rate", func(c *Config) { c.PortBps = 0 }, false},
		{"NaN rate", func(c *Config) { c.PortBps = math.NaN() }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			c.mod(&cfg)
			if err := cfg.Validate(); (err == nil) != c.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, c.ok)
			}
		})
	}
}

// A single 25 MiB flow alone on its ports takes 25/128 s = 200 ms; two
// 1 MiB flows into one port share it and finish after 16 ms (synth-a's
// first two coflows).
func TestIsolatedCoflowTimes(t *testing.T) {
	tr, err := coflow.ReadTrace(strings.NewReader("40 2\n1 0 2 4 34 1 6:1.0\n2 3606 1 15 1 5:25.0\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sched := range Schedulers() {
		res, err := Run(tr, sched, DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		if d0, d1 := res.Records[0].DurationMs(), res.Records[1].DurationMs(); d0 != 16 || d1 != 200 {
			t.Errorf("%s: durations %d, %d ms; want 16, 200", sched, d0, d1)
		}
		if s := res.Records[1].StartMs; s != 0 {
			t.Errorf("%s: coflow arriving at 3606 ms admitted at epoch %d, want 0", sched, s)
		}
	}
}

func mustTrace(t *testing.T, text string) *coflow.Trace {
	t.Helper()
	tr, err := coflow.ReadTrace(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// Two coflows admitted in the same epoch share reducer port 1: a 64 MiB one
// that arrives first and an 8 MiB one. FIFO serves the big one first
// (512 ms, then 64 ms more); SEBF, SCF and LCF serve the small one first.
// Reference: Varys §5.1 (SEBF), coflowsim's FIFO/SCF/LCF orders.
func TestOrderingSchedulers(t *testing.T) {
	tr := mustTrace(t, "4 2\n1 0 1 0 1 1:64.0\n2 100 1 2 1 1:8.0\n")
	cases := []struct {
		sched      string
		big, small int64
	}{
		{"FIFO", 512, 576}, {"SEBF", 576, 64}, {"SCF", 576, 64}, {"LCF", 576, 64},
	}
	for _, c := range cases {
		t.Run(c.sched, func(t *testing.T) {
			res, err := Run(tr, c.sched, DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			if b, s := res.Records[0].DurationMs(), res.Records[1].DurationMs(); b != c.big || s != c.small {
				t.Fatalf("durations %d, %d ms; want %d, %d", b, s, c.big, c.small)
			}
		})
	}
}

// A coflow that needs a full port is skipped by MADD but its other flows
// still use the free ports: coflow 2's flow to port 3 finishes in 64 ms
// while its flow to port 1 waits for coflow 1 (512 ms) and then takes 64 ms.
func TestSkippedCoflowUsesFreePorts(t *testing.T) {
	tr := mustTrace(t, "4 2\n1 0 1 0 1 1:64.0\n2 100 1 2 2 1:8.0 3:8.0\n")
	res, err := Run(tr, "FIFO", DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	r := res.Records[1]
	if r.FinishMs != 576 || r.IndividualSumsMs != 576+64 {
		t.Fatalf("coflow 2 finished at %d ms with reducer sums %d; want 576 and %d", r.FinishMs, r.IndividualSumsMs, 576+64)
	}
}

// FAIR splits each port equally among the flows using it: two flows into
// port 1 from different mappers each get half, so 8 MiB each take 128 ms;
// a third flow alone on ports 3→4 runs at full rate (64 ms).
func TestFairSplitsPorts(t *testing.T) {
	tr := mustTrace(t, "5 2\n1 0 2 0 2 1 1:16.0\n2 0 1 3 1 4:8.0\n")
	res, err := Run(tr, "FAIR", DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if a, b := res.Records[0].DurationMs(), res.Records[1].DurationMs(); a != 128 || b != 64 {
		t.Fatalf("durations %d, %d ms; want 128, 64", a, b)
	}
}

// TestEpochBoundaryAdmission: an epoch admits the coflows arriving up to
// and including the next epoch's start. Start times as CoflowSim prints
// them for a coflow arriving at each of these times.
func TestEpochBoundaryAdmission(t *testing.T) {
	for _, c := range []struct{ arrival, start int64 }{
		{0, 0}, {10239, 0}, {10240, 0}, {10241, 10240}, {20480, 10240}, {20488, 20480},
	} {
		tr := mustTrace(t, fmt.Sprintf("3 2\n1 0 1 2 1 1:1.0\n2 %d 1 1 1 0:1.0\n", c.arrival))
		res, err := Run(tr, "FIFO", DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Records[1].StartMs; got != c.start {
			t.Errorf("arrival %d: admitted at %d, want %d", c.arrival, got, c.start)
		}
	}
}
