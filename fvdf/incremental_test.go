package fvdf

import (
	"fmt"
	"math/rand/v2"
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
