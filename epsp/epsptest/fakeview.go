package epsptest

import (
	"github.com/falconml/falcon/epsp"
)

// FakeView is a scripted [epsp.View]. Its fields may be set directly or
// through the chainable setters; a policy only reads it. Not a stable API.
type FakeView struct {
	Clocks      []int
	WaitingSet  []bool
	Progresses  []epsp.ProgressReport
	Batches     []int
	Par         []int
	Ver         uint64
	Pending     map[int]int // clock -> transfers not yet done
	nextOrderID uint64
}

var (
	_ epsp.View                  = (*FakeView)(nil)
	_ epsp.PendingTransferClocks = (*FakeView)(nil)
)

// NewFakeView returns a view of n workers at clock 0, not waiting, each
// with the given batch and parallelism 1.
func NewFakeView(n, batch int) *FakeView {
	v := &FakeView{
		Clocks: make([]int, n), WaitingSet: make([]bool, n),
		Progresses: make([]epsp.ProgressReport, n), Batches: make([]int, n), Par: make([]int, n),
		Pending: map[int]int{},
	}
	for w := range n {
		v.Batches[w] = batch
		v.Par[w] = 1
		v.Progresses[w] = epsp.ProgressReport{Worker: epsp.WorkerID(w), Assigned: batch, Parallelism: 1}
	}
	return v
}

// NumWorkers implements epsp.View.
func (v *FakeView) NumWorkers() int { return len(v.Clocks) }

// Clock implements epsp.View.
func (v *FakeView) Clock(w epsp.WorkerID) int { return v.Clocks[w] }

// MinClock implements epsp.View.
func (v *FakeView) MinClock() int {
	m := v.Clocks[0]
	for _, c := range v.Clocks {
		m = min(m, c)
	}
	return m
}

// MaxClock implements epsp.View.
func (v *FakeView) MaxClock() int {
	m := v.Clocks[0]
	for _, c := range v.Clocks {
		m = max(m, c)
	}
	return m
}

// Version implements epsp.View.
func (v *FakeView) Version() uint64 { return v.Ver }

// Waiting implements epsp.View.
func (v *FakeView) Waiting(w epsp.WorkerID) bool { return v.WaitingSet[w] }

// Progress implements epsp.View.
func (v *FakeView) Progress(w epsp.WorkerID) epsp.ProgressReport { return v.Progresses[w] }

// Batch implements epsp.View.
func (v *FakeView) Batch(w epsp.WorkerID) int { return v.Batches[w] }

// Parallelism implements epsp.View.
func (v *FakeView) Parallelism(w epsp.WorkerID) int { return v.Par[w] }

// PendingTransfers implements epsp.View.
func (v *FakeView) PendingTransfers(clock int) int { return v.Pending[clock] }

// OldestPendingTransferClock implements epsp.PendingTransferClocks.
func (v *FakeView) OldestPendingTransferClock() (int, bool) {
	first, m := true, 0
	for c, n := range v.Pending {
		if n > 0 && (first || c < m) {
			m, first = c, false
		}
	}
	return m, !first
}

// SetClock sets w's clock.
func (v *FakeView) SetClock(w epsp.WorkerID, c int) *FakeView { v.Clocks[w] = c; return v }

// SetWaiting sets whether w waits for release.
func (v *FakeView) SetWaiting(w epsp.WorkerID, b bool) *FakeView { v.WaitingSet[w] = b; return v }

// SetProgress stores r as r.Worker's latest report.
func (v *FakeView) SetProgress(r epsp.ProgressReport) *FakeView { v.Progresses[r.Worker] = r; return v }

// SetVersion sets the model version.
func (v *FakeView) SetVersion(ver uint64) *FakeView { v.Ver = ver; return v }

// SetBatch sets w's batch.
func (v *FakeView) SetBatch(w epsp.WorkerID, b int) *FakeView { v.Batches[w] = b; return v }

// SetParallelism sets w's parallelism.
func (v *FakeView) SetParallelism(w epsp.WorkerID, p int) *FakeView { v.Par[w] = p; return v }

// SetPending sets the number of pending transfers of a clock.
func (v *FakeView) SetPending(clock, n int) *FakeView { v.Pending[clock] = n; return v }

// Finish does what a coordinator does on EventClock from w: its clock
// advances and it waits. It returns the event to give the policy.
func (v *FakeView) Finish(w epsp.WorkerID) epsp.Event {
	e := epsp.Event{Kind: epsp.EventClock, Worker: w, Clock: v.Clocks[w]}
	v.Clocks[w]++
	v.WaitingSet[w] = true
	v.Progresses[w] = epsp.ProgressReport{Worker: w, Clock: v.Clocks[w], Assigned: v.Batches[w], Parallelism: v.Par[w]}
	return e
}

// Apply carries out an Output the way a coordinator records it: flushes
// bump the version, released workers stop waiting, parallelism and batch
// orders apply, transfers get ids and count as pending. It returns the
// transfers with their ids.
func (v *FakeView) Apply(out epsp.Output) []epsp.TransferOrder {
	v.Ver += uint64(len(out.Flush))
	for _, w := range out.Release {
		v.WaitingSet[w] = false
	}
	for _, o := range out.SetParallelism {
		v.Par[o.Worker] = o.P
	}
	for _, o := range out.SetBatch {
		v.Batches[o.Worker] = o.Size
	}
	ts := append([]epsp.TransferOrder(nil), out.Transfers...)
	for i := range ts {
		v.nextOrderID++
		ts[i].ID = v.nextOrderID
		v.Pending[ts[i].Clock]++
	}
	return ts
}
