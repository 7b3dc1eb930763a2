package coflow_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
)

// tol is the relative tolerance for float comparisons of simulated times
// and volumes (the simulator rounds times to 1 ns).
const tol = 1e-6

func near(a, b float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// fixed is a test scheduler that gives every unfinished flow the same
// allocation template.
type fixed struct {
	rate, ks, kr float64
	codec        int
	out          []coflow.Allocation
}

func (f *fixed) Name() string { return "fixed" }
func (f *fixed) Schedule(now time.Duration, s *coflow.State) []coflow.Allocation {
	f.out = f.out[:0]
	for i := range s.Coflows {
		for _, fl := range s.Coflows[i].Flows {
			f.out = append(f.out, coflow.Allocation{Flow: fl.Ref, Rate: f.rate, Codec: f.codec, SendCores: f.ks, RecvCores: f.kr})
		}
	}
	return f.out
}

// funcSched adapts a function to coflow.Scheduler.
type funcSched func(now time.Duration, s *coflow.State) []coflow.Allocation

func (f funcSched) Name() string { return "func" }
func (f funcSched) Schedule(now time.Duration, s *coflow.State) []coflow.Allocation {
	return f(now, s)
}

func oneFlow(bytes float64) []coflow.Coflow {
	return []coflow.Coflow{{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: bytes}}}}
}

func TestSim_SingleRawFlow(t *testing.T) {
	sched, _ := coflow.NewFIFO(coflow.DefaultOrderedConfig())
	sim, err := coflow.NewSim(coflow.DefaultConfig(), coflow.NewFabric(2, coflow.GigabitBytesPerSec), sched)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(oneFlow(125e6)) // 1 Gbit at 1 Gbit/s
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Coflows[0].CCT; got != time.Second {
		t.Fatalf("CCT = %v, want 1s", got)
	}
	if res.RawBytes != 125e6 || res.WireBytes != 125e6 || res.CPUSeconds != 0 {
		t.Fatalf("raw %v wire %v cpu %v", res.RawBytes, res.WireBytes, res.CPUSeconds)
	}
}

// TestSim_CompressionStages checks the compression model against its closed
// forms (package doc; research notes swallow.md §1, §3). Codec: ρ = 0.5,
// s = 100 MB/s per core, u = 200 MB/s per core; 2 cores each end; wire rate
// 50 MB/s; V = 1 GB. Stage rates: compress 200 MB/s, transmit 100 MB/s raw,
// decompress 400 MB/s, so D = 100 MB/s.
func TestSim_CompressionStages(t *testing.T) {
	const V = 1e9
	codec := coflow.CodecProfile{Name: "test", CompressSpeed: 100e6, DecompressSpeed: 200e6, Ratio: 0.5}
	tests := []struct {
		name     string
		pipeline bool
		chunk    float64
		speed    func(port, codec int, now time.Duration) (float64, float64)
		want     float64 // seconds
	}{
		{"pipelined fluid", true, 0, nil, V / 100e6},
		// Fill/drain of one 1 MB chunk through the two other stages:
		// 1e6/200e6 + 1e6/400e6 = 7.5 ms.
		{"pipelined chunked", true, 1e6, nil, V/100e6 + 0.0075},
		// V/(k_s s) + ρV/r + V/(k_r u) = 5 + 10 + 2.5 s.
		{"sequential", false, 1e6, nil, 17.5},
		// True compress speed a quarter of the profile: stage 50 MB/s binds.
		{"true speed hook", true, 0, func(port, codec int, now time.Duration) (float64, float64) { return 25e6, 200e6 }, V / 50e6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fab := coflow.NewFabric(2, coflow.GigabitBytesPerSec).SetCores(4)
			fab.Codecs = []coflow.CodecProfile{codec}
			cfg := coflow.Config{Pipelining: tc.pipeline, ChunkBytes: tc.chunk, CodecSpeed: tc.speed}
			sim, err := coflow.NewSim(cfg, fab, &fixed{rate: 50e6, codec: 1, ks: 2, kr: 2})
			if err != nil {
				t.Fatal(err)
			}
			res, err := sim.Run(oneFlow(V))
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Coflows[0].CCT.Seconds(); !near(got, tc.want) {
				t.Errorf("CCT = %.9fs, want %.9fs", got, tc.want)
			}
			if !near(res.WireBytes, 0.5*V) || !near(res.RawBytes, V) {
				t.Errorf("wire %v raw %v, want %v %v", res.WireBytes, res.RawBytes, 0.5*V, V)
			}
			cs := 100e6
			if tc.speed != nil {
				cs = 25e6
			}
			if want := V/cs + V/200e6; !near(res.CPUSeconds, want) {
				t.Errorf("CPU-seconds %v, want %v", res.CPUSeconds, want)
			}
			if res.ReservedCoreSeconds < res.CPUSeconds*(1-tol) {
				t.Errorf("reserved core-seconds %v < busy %v", res.ReservedCoreSeconds, res.CPUSeconds)
			}
		})
	}
}

func TestSim_BadAllocations(t *testing.T) {
	fab := coflow.NewFabric(3, 100).SetCores(2)
	fab.Ports[2].Background = 1.5
	fab.Codecs = []coflow.CodecProfile{{Name: "c", CompressSpeed: 10, DecompressSpeed: 10, Ratio: 0.5}}
	cfs := []coflow.Coflow{{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 100}, {Src: 0, Dst: 2, Bytes: 100}}}}
	ref0, ref1 := coflow.FlowRef{Coflow: 0, Flow: 0}, coflow.FlowRef{Coflow: 0, Flow: 1}
	tests := []struct {
		name   string
		allocs []coflow.Allocation
		msg    string
	}{
		{"ingress over", []coflow.Allocation{{Flow: ref0, Rate: 60}, {Flow: ref1, Rate: 60}}, "port 0 ingress"},
		{"single flow over", []coflow.Allocation{{Flow: ref0, Rate: 101}}, "over capacity"},
		{"cores over", []coflow.Allocation{{Flow: ref1, Rate: 10, Codec: 1, SendCores: 1, RecvCores: 1}}, "port 2 uses"},
		{"raw with cores", []coflow.Allocation{{Flow: ref0, Rate: 10, SendCores: 1}}, "raw flow reserves"},
		{"compressed without cores", []coflow.Allocation{{Flow: ref0, Rate: 10, Codec: 1}}, "needs cores"},
		{"codec range", []coflow.Allocation{{Flow: ref0, Rate: 10, Codec: 2, SendCores: 1, RecvCores: 1}}, "codec 2"},
		{"duplicate", []coflow.Allocation{{Flow: ref0, Rate: 10}, {Flow: ref0, Rate: 10}}, "twice"},
		{"unknown coflow", []coflow.Allocation{{Flow: coflow.FlowRef{Coflow: 5}, Rate: 10}}, "not active"},
		{"unknown flow", []coflow.Allocation{{Flow: coflow.FlowRef{Coflow: 0, Flow: 9}, Rate: 10}}, "no such flow"},
		{"negative rate", []coflow.Allocation{{Flow: ref0, Rate: -1}}, "rate"},
		{"NaN rate", []coflow.Allocation{{Flow: ref0, Rate: math.NaN()}}, "rate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sim, err := coflow.NewSim(coflow.DefaultConfig(), fab, funcSched(func(time.Duration, *coflow.State) []coflow.Allocation { return tc.allocs }))
			if err != nil {
				t.Fatal(err)
			}
			_, err = sim.Run(cfs)
			if !errors.Is(err, coflow.ErrBadAllocation) {
				t.Fatalf("err = %v, want ErrBadAllocation", err)
			}
			if !contains(err.Error(), tc.msg) {
				t.Fatalf("err = %q, want it to mention %q", err, tc.msg)
			}
		})
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub)))
}

func TestSim_Stalled(t *testing.T) {
	sim, _ := coflow.NewSim(coflow.DefaultConfig(), coflow.NewFabric(2, 100), funcSched(func(time.Duration, *coflow.State) []coflow.Allocation { return nil }))
	if _, err := sim.Run(oneFlow(10)); !errors.Is(err, coflow.ErrStalled) {
		t.Fatalf("err = %v, want ErrStalled", err)
	}
}

func TestSim_InvalidInput(t *testing.T) {
	if _, err := coflow.NewSim(coflow.DefaultConfig(), &coflow.Fabric{}, &fixed{}); !errors.Is(err, coflow.ErrInvalidFabric) {
		t.Errorf("empty fabric: %v", err)
	}
	if _, err := coflow.NewSim(coflow.Config{ChunkBytes: -1}, coflow.NewFabric(2, 1), &fixed{}); !errors.Is(err, coflow.ErrInvalidConfig) {
		t.Errorf("negative chunk: %v", err)
	}
	sim, _ := coflow.NewSim(coflow.DefaultConfig(), coflow.NewFabric(2, 1), &fixed{rate: 1})
	bad := []coflow.Coflow{{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 5, Bytes: 1}}}}
	if _, err := sim.Run(bad); !errors.Is(err, coflow.ErrInvalidCoflow) {
		t.Errorf("port out of range: %v", err)
	}
}

// TestSim_PausedAndResumed checks that remaining bytes carry over when a
// scheduler pauses a flow and resumes it later at another rate.
func TestSim_PausedAndResumed(t *testing.T) {
	// 0-1 s: rate 100; 1-2 s: paused (timer); then rate 50 until done.
	sch := &phased{}
	sim, _ := coflow.NewSim(coflow.DefaultConfig(), coflow.NewFabric(2, 100), sch)
	res, err := sim.Run(oneFlow(300))
	if err != nil {
		t.Fatal(err)
	}
	// 100 bytes by 1 s, 200 left at 50 B/s from 2 s: done at 6 s.
	if got := res.Coflows[0].CCT; got != 6*time.Second {
		t.Fatalf("CCT = %v, want 6s", got)
	}
	if sch.seen[1] != 200 || sch.seen[2] != 200 {
		t.Fatalf("remaining seen at calls = %v, want [300 200 200]", sch.seen)
	}
}

type phased struct {
	seen []float64
}

func (p *phased) Name() string { return "phased" }
func (p *phased) NextWakeup(now time.Duration) (time.Duration, bool) {
	if now < 2*time.Second {
		return now + time.Second, true
	}
	return 0, false
}
func (p *phased) Schedule(now time.Duration, s *coflow.State) []coflow.Allocation {
	f := s.Coflows[0].Flows[0]
	p.seen = append(p.seen, f.Remaining)
	switch {
	case now < time.Second:
		return []coflow.Allocation{{Flow: f.Ref, Rate: 100}}
	case now < 2*time.Second:
		return nil
	}
	return []coflow.Allocation{{Flow: f.Ref, Rate: 50}}
}

var _ coflow.Timer = (*phased)(nil)

func TestCoflowtest_DriverCatchesOverload(t *testing.T) {
	d := coflowtest.Driver{Fabric: coflow.NewFabric(2, 100)}
	_, err := d.Run(&fixed{rate: 1000}, oneFlow(10))
	if err == nil {
		t.Fatal("overloaded allocation accepted")
	}
}

func TestSim_RecordFlows(t *testing.T) {
	cfg := coflow.DefaultConfig()
	cfg.RecordFlows = true
	d := coflowtest.Driver{Fabric: coflow.NewFabric(3, mb), Config: &cfg}
	// FIFO on the Varys example: C2's flow ends at 4 s; C1's flows at 8 s.
	res, err := d.Run(mustSched(t, "fifo"), varysExample())
	if err != nil {
		t.Fatal(err)
	}
	got := [][]time.Duration{res.Coflows[0].FlowFinish, res.Coflows[1].FlowFinish}
	want := [][]time.Duration{{8 * time.Second, 8 * time.Second}, {4 * time.Second}}
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("flow finish times %v, want %v", got, want)
			}
		}
	}
}

func TestSim_Deterministic(t *testing.T) {
	cfg := coflow.DefaultSynthConfig()
	cfg.Ports, cfg.Coflows = 12, 40
	tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(5, 5)))
	if err != nil {
		t.Fatal(err)
	}
	cfs, _ := tr.ToCoflows()
	for _, name := range coflow.SchedulerNames() {
		var prev *coflow.Result
		for range 2 {
			sim, err := coflow.NewSim(coflow.DefaultConfig(), tr.Fabric(coflow.GigabitBytesPerSec), mustSched(t, name))
			if err != nil {
				t.Fatal(err)
			}
			res, err := sim.Run(cfs)
			if err != nil {
				t.Fatal(err)
			}
			if prev != nil && !reflect.DeepEqual(prev, res) {
				t.Fatalf("%s: two runs differ", name)
			}
			prev = res
		}
	}
}

// TestSim_ReplayFB replays the FB2010 trace under SEBF end to end: every
// allocation is validated by the simulator, every byte must arrive, and no
// coflow may beat its isolated bottleneck time.
func TestSim_ReplayFB(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the 706k-flow replay in -short mode")
	}
	tr, cfs := readFB(t)
	fab := tr.Fabric(coflow.CoflowsimBytesPerSec)
	sim, _ := coflow.NewSim(coflow.DefaultConfig(), fab, mustSched(t, "sebf"))
	res, err := sim.Run(cfs)
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for i := range cfs {
		total += cfs[i].TotalBytes()
		if lb := coflowtest.IsolatedBound(&cfs[i], fab); res.Coflows[i].CCT.Seconds() < lb*(1-tol) {
			t.Fatalf("coflow %d: CCT %v below bound %.3fs", cfs[i].ID, res.Coflows[i].CCT, lb)
		}
	}
	if !near(res.RawBytes, total) {
		t.Fatalf("delivered %v of %v bytes", res.RawBytes, total)
	}
	// The mean isolated bound is 14.38 s (research notes, swallow.md §7).
	if m := coflow.Summarize(res).Mean; m < 14380*time.Millisecond {
		t.Fatalf("mean CCT %v below the mean isolated bound", m)
	}
}
