package epsptest_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/epsp/epsptest"
	"github.com/falconml/falcon/straggler"
)

func TestFakeView(t *testing.T) {
	v := epsptest.NewFakeView(3, 10)
	v.SetClock(0, 4).SetClock(1, 2).SetClock(2, 3).SetVersion(7).SetPending(2, 1)
	if v.MinClock() != 2 || v.MaxClock() != 4 || v.Version() != 7 || v.PendingTransfers(2) != 1 {
		t.Fatalf("view %+v", v)
	}
	if c, ok := v.OldestPendingTransferClock(); !ok || c != 2 || epsp.EffectiveMinClock(v) != 2 {
		t.Fatalf("oldest pending %d %v", c, ok)
	}
	e := v.Finish(1)
	if e.Kind != epsp.EventClock || e.Clock != 2 || v.Clock(1) != 3 || !v.Waiting(1) {
		t.Fatalf("Finish: %+v, view clock %d waiting %v", e, v.Clock(1), v.Waiting(1))
	}
	ts := v.Apply(epsp.Output{Flush: []epsp.FlushOrder{{Clock: 2}}, Release: []epsp.WorkerID{1},
		SetParallelism: []epsp.ParallelismOrder{{Worker: 0, P: 3}}, SetBatch: []epsp.BatchOrder{{Worker: 2, Size: 5}},
		Transfers: []epsp.TransferOrder{{From: 2, To: 1, Clock: 3, Lo: 2, Hi: 5}}})
	if v.Version() != 8 || v.Waiting(1) || v.Parallelism(0) != 3 || v.Batch(2) != 5 || len(ts) != 1 || ts[0].ID != 1 || v.PendingTransfers(3) != 1 {
		t.Fatalf("Apply: %+v %+v", v, ts)
	}
}

func TestDriver_RunErrors(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   error
		line   string
	}{
		{"tick\nfrobnicate", epsptest.ErrScript, "line 2"},
		{"clock w=9", epsptest.ErrScript, "line 1"},
		{"@xyz tick", epsptest.ErrScript, "line 1"},
		{"push w=0 samples=x", epsptest.ErrScript, "line 1"},
		{"result id=4 accept", epsptest.ErrScript, "line 1"},
		{"\n\nclock w=0\nclock w=0", epsp.ErrBadEvent, "line 4"}, // clocks twice while waiting
		{"push w=0 base=5", epsp.ErrBadPush, "line 1"},           // a version from the future
	} {
		d, err := epsptest.NewDriver(epsp.Config{NumWorkers: 2, Batch: 4}, epsp.NewBSP())
		if err != nil {
			t.Fatal(err)
		}
		err = d.Run(tc.script)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.line) {
			t.Errorf("Run(%q) = %v, want %v at %s", tc.script, err, tc.want, tc.line)
		}
	}
}

func TestDriver_TransferScript(t *testing.T) {
	p, err := epsp.NewEPSP(epsp.EPSPConfig{Transfer: true, NoExtrapolate: true})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := epsptest.NewDriver(epsp.Config{NumWorkers: 2, Batch: 20}, p)
	err = d.Run(`
		@1s
		progress w=1 done=4 elapsed=1s
		push w=0
		clock w=0                  # worker 0 blocked at the barrier: takes a tail of worker 1
		result id=1 accept lo=14   # worker 1 hands over [14,20)
		push w=0 owner=1 samples=6
		progress w=1 done=13 elapsed=1s # 1 left: nothing more to move
		done id=1
		push w=1 samples=14
		clock w=1
	`)
	if err != nil {
		t.Fatal(err)
	}
	want := `@1s progress w=1 done=4/20 -> -
@1s push w=0 clock=0 base=0 samples=20/20 -> accumulate clock=0
@1s clock w=0 c=0 -> transfer[1:1->0 c0 [12,20)]
@1s result id=1 accepted=true [14,20) -> -
@1s push w=0 owner=1 clock=0 base=0 samples=6/20 -> accumulate clock=0
@1s progress w=1 done=13/14 -> -
@1s done id=1 -> -
@1s push w=1 clock=0 base=0 samples=14/20 -> accumulate clock=0
@1s clock w=1 c=0 -> flush[0] release[0 1]
`
	if got := d.Trace(); got != want {
		t.Fatalf("trace:\n%s\nwant:\n%s", got, want)
	}
}

type never struct{}

func (never) Name() string                                                { return "never" }
func (never) Admit(time.Duration, epsp.View, epsp.Push) epsp.PushDecision { return epsp.PushDecision{} }
func (never) Step(time.Duration, epsp.View, epsp.Event) epsp.Output       { return epsp.Output{} }

func TestRunLoop_DeadlockAndDeterminism(t *testing.T) {
	m, _ := straggler.NewHetero(straggler.DefaultHeteroConfig(3))
	if _, err := epsptest.RunLoop(epsptest.LoopConfig{Model: m}, never{}); !errors.Is(err, epsptest.ErrDeadlock) {
		t.Fatalf("never-releasing policy: %v, want ErrDeadlock", err)
	}
	if _, err := epsptest.RunLoop(epsptest.LoopConfig{}, never{}); !errors.Is(err, epsptest.ErrLoopConfig) {
		t.Fatalf("nil model: %v", err)
	}
	hc := straggler.DefaultHeteroConfig(5)
	hc.SpeedJitter = 0.5
	hc.Seed = 4
	hc.Transient = straggler.TransientConfig{Prob: 0.3, Period: 20 * time.Millisecond, Duration: 10 * time.Millisecond, Factor: 0.2}
	m, _ = straggler.NewHetero(hc)
	run := func() *epsptest.LoopResult {
		p, _ := epsp.NewEPSP(epsp.DefaultEPSPConfig())
		r, err := epsptest.RunLoop(epsptest.LoopConfig{Model: m, ProgressEvery: 3 * time.Millisecond, Tick: 10 * time.Millisecond}, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := run(), run()
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs differ:\n%+v\n%+v", a, b)
	}
}
