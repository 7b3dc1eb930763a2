package fvdf

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// BenchmarkReplay replays synthetic FB-like traces under FVDF and SEBF.
func BenchmarkReplay(b *testing.B) {
	for _, n := range []int{50, 200} {
		cfg := coflow.DefaultSynthConfig()
		cfg.Coflows, cfg.Ports = n, 50
		tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(1, 0)))
		if err != nil {
			b.Fatal(err)
		}
		cfs, err := tr.ToCoflows()
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range []string{"fvdf", "sebf"} {
			b.Run(fmt.Sprintf("coflows=%d/%s", n, name), func(b *testing.B) {
				for range b.N {
					if _, err := Run(name, cfs, tr.Ports, ReplayConfig{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSchedule measures one FVDF decision on a state with all coflows
// of a synthetic trace active at once.
func BenchmarkSchedule(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		cfg := coflow.DefaultSynthConfig()
		cfg.Coflows, cfg.Ports = n, 150
		tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(2, 0)))
		if err != nil {
			b.Fatal(err)
		}
		cfs, err := tr.ToCoflows()
		if err != nil {
			b.Fatal(err)
		}
		fab := tr.Fabric(coflow.GigabitBytesPerSec).SetCores(4)
		fab.Codecs = []coflow.CodecProfile{{Name: "lz4", CompressSpeed: 600e6, DecompressSpeed: 4.9e9, Ratio: 0.36}}
		st := &coflow.State{Fabric: fab}
		flows := 0
		for i, c := range cfs {
			cs := coflow.CoflowState{Index: i, ID: c.ID, Arrival: c.Arrival, Weight: 1, Width: len(c.Flows), Bytes: c.TotalBytes()}
			for j, f := range c.Flows {
				cs.Flows = append(cs.Flows, coflow.FlowState{Ref: coflow.FlowRef{Coflow: i, Flow: j}, Src: f.Src, Dst: f.Dst, Bytes: f.Bytes, Remaining: f.Bytes})
			}
			flows += len(c.Flows)
			st.Coflows = append(st.Coflows, cs)
		}
		s, err := New(Config{StarvationPeriod: -1}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("coflows=%d/flows=%d", n, flows), func(b *testing.B) {
			for range b.N {
				s.Schedule(time.Second, st)
			}
		})
	}
}

// ladderTrace returns BenchmarkSynthetic's trace of size k (package coflow's
// ladder: 150 ports, 100·k coflows, 0.5 s mean inter-arrival, seed (1, 1));
// k = 1, 4, 16 give 41,848, 144,380 and 500,235 flows.
func ladderTrace(tb testing.TB, k int) (*coflow.Trace, []coflow.Coflow) {
	tb.Helper()
	cfg := coflow.DefaultSynthConfig()
	cfg.Ports, cfg.Coflows, cfg.MeanInterArrival = 150, 100*k, 500*time.Millisecond
	tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		tb.Fatal(err)
	}
	cfs, err := tr.ToCoflows()
	if err != nil {
		tb.Fatal(err)
	}
	return tr, cfs
}

// ladderScheduler builds one of the ladder's schedulers: "fvdf" (the
// defaults: compression on, T/δ guard 10 s / 200 ms), "fvdf-noguard"
// (StarvationPeriod < 0), "fvdf-replan8" (the approximation
// Config.ReplanPeriod = 8), "dclas" and "sebf" (package coflow's defaults).
func ladderScheduler(tb testing.TB, name string) coflow.Scheduler {
	tb.Helper()
	var (
		s   coflow.Scheduler
		err error
	)
	switch name {
	case "fvdf":
		s, err = New(Config{}, nil)
	case "fvdf-noguard":
		s, err = New(Config{StarvationPeriod: -1}, nil)
	case "fvdf-replan8":
		s, err = New(Config{ReplanPeriod: 8}, nil)
	default:
		s, err = coflow.NewScheduler(name)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// ladderFabric is the replay fabric: 1 Gbit/s ports, 4 cores, lz4 and
// snappy with the shuffle mix's nominal profiles (static speeds).
func ladderFabric(tb testing.TB, ports int) *coflow.Fabric {
	tb.Helper()
	rc := ReplayConfig{Static: true}
	fab, err := rc.Fabric(ports)
	if err != nil {
		tb.Fatal(err)
	}
	return fab
}

// counting forwards to a scheduler and sums the unfinished flows it was
// shown over its calls and, when the caller has locked its goroutine to
// its OS thread, the thread CPU time spent inside the scheduler's
// Schedule (the decision cost, without the simulator).
type counting struct {
	coflow.Scheduler
	calls, flows int
	cpu          time.Duration
	cpuOK        bool
}

func (c *counting) Schedule(now time.Duration, s *coflow.State) []coflow.Allocation {
	c.calls++
	c.flows += s.NumFlows()
	t0, ok0 := threadCPU()
	out := c.Scheduler.Schedule(now, s)
	t1, ok1 := threadCPU()
	c.cpuOK = ok0 && ok1
	c.cpu += t1 - t0
	return out
}

func (c *counting) OnlyOnArrivalsAndCompletions() bool {
	e, ok := c.Scheduler.(coflow.EventDriven)
	return ok && e.OnlyOnArrivalsAndCompletions()
}

func (c *counting) NextWakeup(now time.Duration) (time.Duration, bool) {
	if t, ok := c.Scheduler.(coflow.Timer); ok {
		return t.NextWakeup(now)
	}
	return 0, false
}

// BenchmarkCostLadder is the cost ladder of issue 20 item 7: one whole
// simulation per op of package coflow's synthetic ladder (size=1x, 4x,
// 16x) under FVDF, D-CLAS and SEBF, on the replay fabric (1 Gbit/s, 4
// cores, lz4 and snappy). ns/op is the CPU time of one replay (one
// goroutine); ns/flowcall is ns/op divided by the sum, over Schedule
// calls, of the unfinished flows in the State (simulator included);
// sched-ms/call is the thread CPU time spent inside Schedule per call
// (Linux only; the decision cost without the simulator, measured with
// getrusage(RUSAGE_THREAD) around each call, the goroutine locked to its
// thread).
//
//	go test ./fvdf -run '^$' -bench CostLadder -benchtime 1x -count 3
func BenchmarkCostLadder(b *testing.B) {
	for _, k := range []int{1, 4, 16} {
		tr, cfs := ladderTrace(b, k)
		flows := 0
		for i := range cfs {
			flows += len(cfs[i].Flows)
		}
		for _, name := range []string{"fvdf", "fvdf-noguard", "fvdf-replan8", "dclas", "sebf"} {
			b.Run(fmt.Sprintf("sched=%s/size=%dx", name, k), func(b *testing.B) {
				b.ReportAllocs()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				var c *counting
				for b.Loop() {
					c = &counting{Scheduler: ladderScheduler(b, name)}
					sim, err := coflow.NewSim(coflow.DefaultConfig(), ladderFabric(b, tr.Ports), c)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := sim.Run(cfs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(flows), "flows")
				b.ReportMetric(float64(c.calls), "calls")
				b.ReportMetric(float64(c.flows)/float64(c.calls), "flows/call")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(c.flows), "ns/flowcall")
				if c.cpuOK {
					b.ReportMetric(c.cpu.Seconds()*1e3/float64(c.calls), "sched-ms/call")
				}
			})
		}
	}
}
