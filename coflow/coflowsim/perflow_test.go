package coflowsim

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
)

// TestPerFlowEngine checks that runPerFlow, which keeps each flow's bytes
// left lazily and reallocates incrementally, gives FAIR and PFP exactly
// the records of run's event jump (every flow advanced, every rate
// recomputed at each event) and, on the smaller traces, of the literal
// quantum loop. The traces include wide coflows (many flows finishing in
// the same quantum, ports shared by many flows) and coflows admitted
// while others run (PFP's queues take newcomers by bytes left).
func TestPerFlowEngine(t *testing.T) {
	type tc struct {
		name   string
		tr     *coflow.Trace
		quanta bool
	}
	cases := []tc{
		{"synthetic-1", smallTrace(t, 1), true},
		{"synthetic-2", smallTrace(t, 2), true},
		{"wide-3", wideTrace(t, 3, 40, 60), true},
		{"wide-4", wideTrace(t, 4, 100, 120), false},
	}
	if dir, err := coflowtest.SharedData("coflowsim-fixtures"); err == nil {
		for _, name := range []string{"synth-a", "synth-b"} {
			cases = append(cases, tc{name, coflowtest.ReadTraceFile(t, filepath.Join(dir, name+".txt")), false})
		}
	}
	for _, c := range cases {
		for _, sched := range []string{"FAIR", "PFP"} {
			t.Run(c.name+"/"+sched, func(t *testing.T) {
				got := replayWith(t, c.tr, sched, lazyFlows)
				want := []*Result{replayWith(t, c.tr, sched, eventJump)}
				if c.quanta {
					want = append(want, replayWith(t, c.tr, sched, quantumLoop))
				}
				for _, w := range want {
					for i := range w.Records {
						if got.Records[i] != w.Records[i] {
							t.Fatalf("coflow %d: runPerFlow %+v, reference engine %+v", w.Records[i].ID, got.Records[i], w.Records[i])
						}
					}
				}
			})
		}
	}
}

// wideTrace is a generated trace of the given size with the default bin
// mix (wide coflows included), reducers capped at 300 MB so that the
// quantum loop stays short.
func wideTrace(t *testing.T, seed uint64, ports, coflows int) *coflow.Trace {
	t.Helper()
	cfg := coflow.SynthConfig{Ports: ports, Coflows: coflows, MeanInterArrival: 2 * time.Second,
		ShortNarrow: 0.5, LongNarrow: 0.2, ShortWide: 0.2}
	tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(seed, 11)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range tr.Coflows {
		for k := range tr.Coflows[i].Reducers {
			if r := &tr.Coflows[i].Reducers[k]; r.MB > 300 {
				r.MB = 300
			}
		}
	}
	return tr
}

// TestFinishBound checks finishBound against advance: never later than
// the quantum in which the flow finishes.
func TestFinishBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	checked := 0
	for range 20000 {
		x := math.Ldexp(1+rng.Float64(), rng.IntN(45)-5)
		b := x / math.Ldexp(1+rng.Float64(), rng.IntN(22))
		if rng.IntN(2) == 0 { // the replay's rates: a port split n ways
			x = float64(rng.IntN(1<<12)+1) * mib
			b = DefaultConfig().PortBps / float64(rng.IntN(300)+1) / 8 * 8 / 1024
		}
		if x <= zeroBytes || b <= 0 {
			continue
		}
		lb := finishBound(x, b)
		if lb == 0 {
			continue
		}
		_, n := advance(x, b, zeroBytes, math.MaxInt64)
		if n != 0 && lb > n {
			t.Fatalf("finishBound(%v, %v) = %d, the flow finishes in quantum %d", x, b, lb, n)
		}
		if n != 0 && float64(lb) < 0.99*float64(n)-5 {
			t.Fatalf("finishBound(%v, %v) = %d, loose against %d", x, b, lb, n)
		}
		checked++
	}
	if checked < 10000 {
		t.Fatalf("only %d cases had a bound", checked)
	}
	if finishBound(1e6, 0) != 0 || finishBound(1e6, 5e5) != 0 {
		t.Fatal("finishBound must decline b = 0 and flows about to finish")
	}
}
