package sim

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/straggler"
)

func testJob(t testing.TB, workers int, speed []float64, pol epsp.Policy) Job {
	t.Helper()
	train, test, err := model.Synthetic(model.SyntheticConfig{Train: 2000, Test: 500, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	hc := straggler.DefaultHeteroConfig(workers)
	hc.Speed = speed
	hc.Seed = 3
	sp, err := straggler.NewHetero(hc)
	if err != nil {
		t.Fatal(err)
	}
	return Job{Model: model.NewSoftmax(train.D, train.Classes), Train: train, Test: test, Speed: sp, Policy: pol}
}

func testConfig(workers int) Config {
	c := DefaultConfig()
	c.Workers = workers
	c.Batch = 16
	c.Duration = 3 * time.Second
	c.EvalEvery = 250 * time.Millisecond
	c.Target = 0.6
	return c
}

// transferPolicy is BSP plus a simple transfer rule, to exercise the
// transfer machinery: a worker that waits at the barrier takes half of the
// remaining tail of the worker with most work left.
type transferPolicy struct {
	epsp.BSP
	flushed int
}

func (p *transferPolicy) Name() string { return "test-transfer" }
func (p *transferPolicy) Step(now time.Duration, v epsp.View, e epsp.Event) epsp.Output {
	out := epsp.Barrier(v, &p.flushed, 1)
	if e.Kind != epsp.EventClock && e.Kind != epsp.EventProgress {
		return out
	}
	for t := range v.NumWorkers() {
		taker := epsp.WorkerID(t)
		if !v.Waiting(taker) || v.Clock(taker) <= p.flushed {
			continue
		}
		best, rem := -1, 0
		for g := range v.NumWorkers() {
			gid := epsp.WorkerID(g)
			if v.Waiting(gid) || v.Clock(gid) != v.Clock(taker)-1 || v.PendingTransfers(v.Clock(gid)) > 0 {
				continue
			}
			if r := v.Progress(gid).Remaining(); r > rem {
				best, rem = g, r
			}
		}
		if best >= 0 && rem >= 4 {
			pr := v.Progress(epsp.WorkerID(best))
			out.Transfers = append(out.Transfers, epsp.TransferOrder{From: epsp.WorkerID(best), To: taker,
				Clock: v.Clock(epsp.WorkerID(best)), Lo: pr.Assigned - rem/2, Hi: pr.Assigned})
			return out
		}
	}
	return out
}

func TestRun_Deterministic(t *testing.T) {
	speed := []float64{1, 1, 1, 0.25, 1, 0.5, 1, 1}
	for _, mk := range []func() epsp.Policy{
		func() epsp.Policy { return epsp.NewBSP() },
		func() epsp.Policy { return epsp.NewSSP(2) },
		func() epsp.Policy { return &transferPolicy{} },
	} {
		name := mk().Name()
		t.Run(name, func(t *testing.T) {
			var outs [2][]byte
			for i := range outs {
				r, err := Run(testConfig(8), testJob(t, 8, speed, mk()))
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				if err := r.WriteCSV(&b); err != nil {
					t.Fatal(err)
				}
				outs[i] = b.Bytes()
			}
			if !bytes.Equal(outs[0], outs[1]) {
				t.Fatalf("two runs with the same seed differ")
			}
		})
	}
}

func TestRun_Trains(t *testing.T) {
	r, err := Run(testConfig(4), testJob(t, 4, nil, epsp.NewBSP()))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Reached || r.FinalAccuracy < 0.6 {
		t.Fatalf("BSP did not train: final acc %.3f, reached=%v", r.FinalAccuracy, r.Reached)
	}
	if r.Evals[0].Accuracy > 0.3 {
		t.Errorf("initial accuracy %.3f, want near chance", r.Evals[0].Accuracy)
	}
	for _, w := range r.Workers {
		if got := w.Busy + w.Blocked + w.Network; got != r.End {
			t.Errorf("worker %d: busy+blocked+network = %v, want end %v", w.Worker, got, r.End)
		}
	}
}

// TestRun_BSPClocksInLockstep: under BSP every worker completes the same
// number of clocks (±1 at the end), whatever the speeds, and the slow
// worker makes the fast ones wait.
// Reference: falcon.md §5 (BSP).
func TestRun_BSPLockstep(t *testing.T) {
	speed := []float64{1, 1, 1, 0.25}
	r, err := Run(testConfig(4), testJob(t, 4, speed, epsp.NewBSP()))
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := r.Workers[0].Clocks, r.Workers[0].Clocks
	for _, w := range r.Workers {
		lo, hi = min(lo, w.Clocks), max(hi, w.Clocks)
	}
	if hi-lo > 1 {
		t.Errorf("BSP clocks range %d..%d", lo, hi)
	}
	if r.Workers[0].Blocked <= r.Workers[3].Blocked {
		t.Errorf("fast worker blocked %v, slow %v: fast should wait more", r.Workers[0].Blocked, r.Workers[3].Blocked)
	}
	a, err := Run(testConfig(4), testJob(t, 4, speed, epsp.NewASP()))
	if err != nil {
		t.Fatal(err)
	}
	if a.Workers[0].Clocks < 3*a.Workers[3].Clocks {
		t.Errorf("ASP: fast worker did %d clocks, slow %d; want about 4x", a.Workers[0].Clocks, a.Workers[3].Clocks)
	}
	if a.BlockedFraction() > 0.01 {
		t.Errorf("ASP blocked fraction %.3f, want ~0", a.BlockedFraction())
	}
}

// TestRun_SSPBound: no worker is ever released more than s clocks ahead of
// the slowest. Reference: Ho et al. NIPS 2013; falcon.md §5 (SSP).
func TestRun_SSPBound(t *testing.T) {
	speed := []float64{1, 1, 0.2, 1}
	for _, s := range []int{0, 1, 3} {
		r, err := Run(testConfig(4), testJob(t, 4, speed, epsp.NewSSP(s)))
		if err != nil {
			t.Fatal(err)
		}
		if r.Stats.MaxLead > s {
			t.Errorf("ssp(%d): max lead %d", s, r.Stats.MaxLead)
		}
		if s == 3 && r.Stats.MaxLead != 3 {
			t.Errorf("ssp(3): max lead %d, want the bound reached with a 5x straggler", r.Stats.MaxLead)
		}
	}
}

// TestRun_Transfers: transfers happen, every sample of every clock is
// pushed exactly once (the simulator fails with ErrInvariant otherwise),
// and the straggler gives work away.
func TestRun_Transfers(t *testing.T) {
	speed := []float64{1, 1, 1, 0.25}
	r, err := Run(testConfig(4), testJob(t, 4, speed, &transferPolicy{}))
	if err != nil {
		t.Fatal(err)
	}
	if r.AcceptedTransfers() == 0 || r.Workers[3].Given == 0 {
		t.Fatalf("no transfers: %d accepted, straggler gave %d", r.AcceptedTransfers(), r.Workers[3].Given)
	}
	given, taken := 0, 0
	for _, w := range r.Workers {
		given += w.Given
		taken += w.Taken
	}
	if given < taken || given-taken > 4*8 {
		t.Errorf("given %d, taken %d", given, taken)
	}
	for _, tr := range r.Transfers {
		if tr.Accepted && tr.Done != 0 && tr.Done < tr.Answered {
			t.Errorf("transfer %d done at %v before its answer at %v", tr.ID, tr.Done, tr.Answered)
		}
	}
	b, err := Run(testConfig(4), testJob(t, 4, speed, epsp.NewBSP()))
	if err != nil {
		t.Fatal(err)
	}
	if r.Workers[0].Clocks <= b.Workers[0].Clocks {
		t.Errorf("transfers did not speed BSP up: %d clocks vs %d", r.Workers[0].Clocks, b.Workers[0].Clocks)
	}
}

type stuck struct{ epsp.BSP }

func (stuck) Name() string                                          { return "stuck" }
func (stuck) Step(time.Duration, epsp.View, epsp.Event) epsp.Output { return epsp.Output{} }

func TestRun_Stalled(t *testing.T) {
	c := testConfig(2)
	c.StallTimeout = time.Second
	_, err := Run(c, testJob(t, 2, nil, &stuck{}))
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("err = %v, want ErrStalled", err)
	}
}

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
	}{
		{"workers", func(c *Config) { c.Workers = 0 }},
		{"batch", func(c *Config) { c.Batch = 0 }},
		{"lr", func(c *Config) { c.LR = 0 }},
		{"duration", func(c *Config) { c.Duration = 0 }},
		{"target", func(c *Config) { c.Target = 2 }},
		{"latency", func(c *Config) { c.Network.Latency = -1 }},
		{"negative noise", func(c *Config) { c.ComputeNoise = -0.1 }},
		{"NaN noise", func(c *Config) { c.ComputeNoise = math.NaN() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			if err := c.Validate(); !errors.Is(err, ErrConfig) {
				t.Errorf("Validate() = %v, want ErrConfig", err)
			}
		})
	}
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
	_, err := New(testConfig(3), testJob(t, 4, nil, epsp.NewBSP()))
	if !errors.Is(err, ErrConfig) {
		t.Errorf("worker count mismatch: err = %v", err)
	}
}

func TestWriteCSV(t *testing.T) {
	r, err := Run(testConfig(4), testJob(t, 4, []float64{1, 1, 1, 0.25}, &transferPolicy{}))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, r, r); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "kind,") {
			continue
		}
		f := strings.Split(line, ",")
		if f[1] != r.Policy {
			t.Fatalf("row %q: policy column %q", line, f[1])
		}
		counts[f[0]]++
	}
	want := map[string]int{
		"eval": 2 * len(r.Evals), "worker": 8, "parallelism": 2 * len(r.Parallelism),
		"transfer": 2 * len(r.Transfers), "staleness": 2 * len(r.Stats.Staleness), "summary": 2,
	}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("%s rows: got %d, want %d", k, counts[k], v)
		}
	}
	if strings.Count(b.String(), "kind,") != 1 {
		t.Errorf("header written more than once")
	}
}

// badTransfer orders a transfer from a worker that is waiting, which the
// coordinator refuses; the simulator must stop with that error.
type badTransfer struct{ epsp.BSP }

func (*badTransfer) Name() string { return "bad-transfer" }
func (b *badTransfer) Step(now time.Duration, v epsp.View, e epsp.Event) epsp.Output {
	if e.Kind == epsp.EventClock {
		return epsp.Output{Transfers: []epsp.TransferOrder{{From: e.Worker, To: (e.Worker + 1) % 2, Clock: e.Clock, Lo: 0, Hi: 1}}}
	}
	return b.BSP.Step(now, v, e)
}

func TestRun_PolicyErrorStops(t *testing.T) {
	_, err := Run(testConfig(2), testJob(t, 2, nil, &badTransfer{}))
	if !errors.Is(err, epsp.ErrPolicyOutput) {
		t.Fatalf("err = %v, want epsp.ErrPolicyOutput", err)
	}
}

// TestRun_ComputeNoise checks the round-time noise: without it equal
// workers finish every clock together; with it their clock times spread
// about as independent rounds predict, and the run stays reproducible.
func TestRun_ComputeNoise(t *testing.T) {
	run := func(noise float64) *Result {
		c := testConfig(8)
		c.ComputeNoise = noise
		r, err := Run(c, testJob(t, 8, nil, epsp.NewBSP()))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	quiet := run(0)
	if quiet.ClockTime.N == 0 || quiet.ClockTime.CV() > 1e-9 {
		t.Fatalf("no noise: clock times %d with CV %v, want some with CV 0", quiet.ClockTime.N, quiet.ClockTime.CV())
	}
	const c = 0.2
	a, b := run(c), run(c)
	var ba, bb bytes.Buffer
	if err := a.WriteCSV(&ba); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteCSV(&bb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ba.Bytes(), bb.Bytes()) || a.ClockTime != b.ClockTime {
		t.Fatal("two noisy runs with the same seed differ")
	}
	// Batch 16 in rounds of 2 samples: 8 independent rounds per clock, so
	// the compute part of a clock has CV c/√8; the fixed network part
	// dilutes it a little.
	want := c / math.Sqrt(8)
	if got := a.ClockTime.CV(); got < 0.5*want || got > 1.2*want {
		t.Errorf("clock-time CV %.4f with round CV %.2f, want about %.4f", got, c, want)
	}
	if d := a.ClockTime.Mean - quiet.ClockTime.Mean; d < -quiet.ClockTime.Mean/10 || d > quiet.ClockTime.Mean/10 {
		t.Errorf("mean clock time %v with noise, %v without: the noise should have mean 1", a.ClockTime.Mean, quiet.ClockTime.Mean)
	}
}

func TestTiming(t *testing.T) {
	var tm Timing
	if tm.CV() != 0 {
		t.Fatalf("empty CV = %v", tm.CV())
	}
	for _, d := range []time.Duration{1, 2, 3} {
		tm.Add(d * time.Millisecond)
	}
	if tm.N != 3 || tm.Mean != 2*time.Millisecond {
		t.Fatalf("N, Mean = %d, %v; want 3, 2ms", tm.N, tm.Mean)
	}
	if want := math.Sqrt(2.0/3) / 2; math.Abs(tm.CV()-want) > 1e-12 {
		t.Fatalf("CV = %v, want %v", tm.CV(), want)
	}
}
