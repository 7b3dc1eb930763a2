package pstest_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/pstest"
	"github.com/falconml/falcon/ps/store"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTB records Errorf calls.
type fakeTB struct {
	testing.TB
	errs []string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func chunk(owner, clock, lo, hi int) event.Event {
	return event.Event{Kind: event.Chunk, Owner: epsp.WorkerID(owner), Clock: clock, Lo: lo, Hi: hi}
}

func push(owner, clock, batch int) event.Event {
	return pushPart(owner, owner, clock, batch, batch)
}

// pushPart is a push by worker of samples of owner's batch.
func pushPart(worker, owner, clock, samples, batch int) event.Event {
	return event.Event{Kind: event.PushAdmitted, Push: epsp.Push{Worker: epsp.WorkerID(worker), Owner: epsp.WorkerID(owner), Clock: clock, Samples: samples, BatchSamples: batch}}
}

// pushParts is worker's own push with parts (owner, samples) pairs; own is
// its own batch.
func pushParts(worker, clock, own int, parts ...int) event.Event {
	e := pushPart(worker, worker, clock, 0, own)
	for i := 0; i+1 < len(parts); i += 2 {
		e.Push.Parts = append(e.Push.Parts, epsp.PushPart{Owner: epsp.WorkerID(parts[i]), Clock: clock, Samples: parts[i+1]})
		e.Push.Samples += parts[i+1]
		if parts[i] != worker {
			e.Push.BatchSamples += parts[i+1]
		}
	}
	return e
}

func TestCheckExactlyOnce(t *testing.T) {
	tests := []struct {
		name     string
		events   []event.Event
		complete []int
		wantErrs int
	}{
		{"tiled", []event.Event{chunk(0, 0, 0, 2), chunk(0, 0, 2, 4), push(0, 0, 4)}, []int{1}, 0},
		{"transferred part", []event.Event{chunk(0, 0, 0, 1), chunk(0, 0, 1, 4), pushPart(0, 0, 0, 1, 4), pushPart(1, 0, 0, 3, 4)}, []int{1}, 0},
		{"part pushed twice", []event.Event{chunk(0, 0, 0, 1), chunk(0, 0, 1, 4), push(0, 0, 4), pushPart(1, 0, 0, 3, 4)}, []int{1}, 1},
		{"batches disagree", []event.Event{chunk(0, 0, 0, 1), chunk(0, 0, 1, 4), pushPart(0, 0, 0, 1, 4), pushPart(1, 0, 0, 3, 5)}, []int{1, 0}, 1},
		// worker 1 keeps [0,2) of 4, worker 0 computes its 3 and [2,4) of 1's
		{"assigned", []event.Event{chunk(0, 0, 0, 3), chunk(1, 0, 2, 4), chunk(1, 0, 0, 2), pushParts(0, 0, 3, 0, 3, 1, 2), pushPart(1, 1, 0, 2, 4)}, []int{1, 1}, 0},
		{"assigned, giver kept nothing", []event.Event{chunk(0, 0, 0, 3), chunk(1, 0, 0, 4), pushParts(0, 0, 3, 0, 3, 1, 4)}, []int{1, 1}, 0},
		{"assigned part not pushed", []event.Event{chunk(0, 0, 0, 3), chunk(1, 0, 2, 4), chunk(1, 0, 0, 2), push(0, 0, 3), pushPart(1, 1, 0, 2, 4)}, []int{1, 1}, 1},
		{"assigned part not computed", []event.Event{chunk(0, 0, 0, 3), chunk(1, 0, 0, 2), pushParts(0, 0, 3, 0, 3, 1, 2), pushPart(1, 1, 0, 2, 4)}, []int{1, 1}, 1},
		{"duplicate", []event.Event{chunk(0, 0, 0, 3), chunk(0, 0, 2, 4), push(0, 0, 4)}, []int{1}, 1},
		{"missing", []event.Event{chunk(0, 0, 0, 3), push(0, 0, 4)}, []int{1}, 1},
		{"no push", []event.Event{chunk(0, 0, 0, 4)}, []int{1}, 1},
		{"outside batch", []event.Event{chunk(0, 0, 0, 4), chunk(0, 0, 4, 5), push(0, 0, 4)}, []int{1}, 2},
		{"incomplete clock may be partial", []event.Event{chunk(0, 1, 0, 1)}, []int{0}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeTB{}
			pstest.CheckExactlyOnce(f, tt.events, tt.complete)
			if (len(f.errs) == 0) != (tt.wantErrs == 0) {
				t.Errorf("errors = %q, want %d", f.errs, tt.wantErrs)
			}
		})
	}
}

func TestLedgerModel_DetectsStaleReads(t *testing.T) {
	m := &pstest.LedgerModel{Workers: 2, Clocks: 3, Staleness: 0, Full: 1}
	s := pstest.LedgerSampler{Clocks: 3}
	grad := make([]float32, m.NumParams())
	// Worker 1 at clock 2 with s = 0 must see (0,0),(0,1),(1,0),(1,1).
	params := []float32{1, 1, 0, 1, 1, 0}
	m.Gradient(params, s.Batch(1, 2, 2), grad)
	if v := m.Violations(); len(v) != 0 {
		t.Errorf("complete read flagged: %v", v)
	}
	params[1] = 0 // worker 0's clock 1 missing
	m.Gradient(params, s.Batch(1, 2, 2), grad)
	if v := m.Violations(); len(v) != 1 {
		t.Errorf("violations = %v, want one", v)
	}
	if grad[1*3+2] != -4 {
		t.Errorf("gradient on (1,2) = %v, want -4 (two calls of two samples)", grad[5])
	}
}

func TestRunPolicy_BSP(t *testing.T) {
	st := pstest.RunPolicy(t, func() epsp.Policy { return epsp.NewBSP() }, pstest.PolicyRun{Clocks: 4})
	if st.Flushes != 4 || st.Releases != 3*4 {
		t.Errorf("stats: %d flushes, %d releases; want 4, 12", st.Flushes, st.Releases)
	}
}

// line is y = 2x + 1 with squared loss over x_i = i/n.
type line struct{ n int }

func (m line) Gradient(p []float32, samples []int, grad []float32) float64 {
	loss := 0.0
	for _, s := range samples {
		x := float32(s) / float32(m.n)
		e := p[0]*x + p[1] - (2*x + 1)
		grad[0] += e * x
		grad[1] += e
		loss += float64(e*e) / 2
	}
	return loss
}

// NewCluster with TCP runs the same cluster over loopback TCP with a
// secret: training works and Close leaves no goroutine (the cleanup's
// goleak check).
func TestNewCluster_TCP(t *testing.T) {
	c := pstest.NewCluster(t, pstest.TCP("a secret, 16 bytes+"), pstest.Workers(2), pstest.Optimizer(store.SGD{LR: 0.5}))
	if c.Net != nil {
		t.Fatal("TCP cluster has an in-process network")
	}
	tc := ps.TrainConfig{Keys: []uint64{0, 1}, Lens: []int{1, 1}, Init: store.Zeros{}, Clocks: 150}
	if _, err := c.Train(t.Context(), line{n: 32}, ps.ShardSampler{N: 32, Workers: 2}, tc); err != nil {
		t.Fatal(err)
	}
	p := make([]float32, 2)
	if err := c.NewClient(t).Pull(t.Context(), tc.Keys, p, tc.Lens); err != nil {
		t.Fatal(err)
	}
	if math.Abs(float64(p[0]-2)) > 0.1 || math.Abs(float64(p[1]-1)) > 0.1 {
		t.Errorf("learned %v, want [2 1]", p)
	}
}
