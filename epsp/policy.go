package epsp

import (
	"fmt"
	"time"
)

// WorkerID indexes a worker: 0 .. NumWorkers-1.
type WorkerID int

// Push describes a gradient push before it is applied. Workers push the mean
// gradient over the samples they processed.
type Push struct {
	Worker WorkerID // the worker that computed the gradient
	Owner  WorkerID // the worker whose batch the samples belong to (== Worker unless the part was transferred)
	Clock  int      // the owner's clock (iteration) the gradient was computed for
	// BaseVersion is the model version the worker read before computing:
	// the coordinator's Version() at the time of its pull.
	BaseVersion uint64
	Samples     int // samples the gradient covers
	// BatchSamples is the size of the owner's whole batch for this clock,
	// so that a transferred part can be weighted Samples/BatchSamples. A
	// push that carries assigned samples (Parts) counts them in both.
	BatchSamples int
	// Parts, when not empty, says whose samples a push of several owners
	// covers: the worker's own part and the parts of other workers'
	// batches assigned to it at release (Output.Assign). Σ Parts.Samples
	// = Samples, and every part has the push's Clock. A push with no
	// Parts covers Owner's samples alone.
	Parts []PushPart
	// Busy is the compute time the push's samples took: from the start of
	// the worker's computation for the clock to its last sample, without
	// the pull before it or the waits after it. Zero means unknown.
	// Samples/Busy is the worker's speed at its parallelism.
	Busy time.Duration
}

// PushPart is one owner's share of a push (see Push.Parts).
type PushPart struct {
	Owner   WorkerID
	Clock   int
	Samples int
}

// OwnSamples returns the samples of p that belong to the pushing worker's
// own batch.
func (p Push) OwnSamples() int {
	if len(p.Parts) == 0 {
		if p.Owner == p.Worker {
			return p.Samples
		}
		return 0
	}
	n := 0
	for _, x := range p.Parts {
		if x.Owner == p.Worker {
			n += x.Samples
		}
	}
	return n
}

// PushAction says what the runtime does with a push.
type PushAction uint8

const (
	// ApplyNow applies the gradient on arrival, multiplied by
	// Scale·Samples/BatchSamples (so the parts of a transferred batch add up
	// to the update the owner would have pushed alone).
	ApplyNow PushAction = iota
	// Accumulate adds Samples·g to the buffer of clock Clock; a later
	// FlushOrder applies Σ Samples·g / Σ Samples in one update.
	Accumulate
	// Drop discards the gradient (counted in the coordinator's statistics).
	Drop
)

func (a PushAction) String() string {
	switch a {
	case ApplyNow:
		return "apply"
	case Accumulate:
		return "accumulate"
	case Drop:
		return "drop"
	}
	return fmt.Sprintf("PushAction(%d)", uint8(a))
}

// PushDecision is a policy's answer for one push. The zero value applies the
// push now with scale 1.
type PushDecision struct {
	Action PushAction
	// Scale multiplies the gradient before the server-side optimizer sees
	// it; 0 means 1. It is used for ApplyNow.
	Scale float64
	// Clock names the buffer for Accumulate.
	Clock int
}

// EffectiveScale is Scale with 0 read as 1.
func (d PushDecision) EffectiveScale() float64 {
	if d.Scale == 0 {
		return 1
	}
	return d.Scale
}

// EventKind tells which field of an Event is set.
type EventKind uint8

const (
	// EventClock: Worker finished its clock Clock (its push is stored)
	// and waits to be released into clock Clock+1.
	EventClock EventKind = iota + 1
	// EventProgress: a progress report in Progress.
	EventProgress
	// EventTick: the periodic control tick (Config.TickPeriod).
	EventTick
	// EventTransferResult: the giver answered a TransferOrder (Transfer).
	EventTransferResult
	// EventTransferDone: the taker pushed the transferred part (Transfer.ID).
	EventTransferDone
	// EventLeave: Worker has finished training (its last clock is Clock)
	// and will push its own batch and clock no more; it may still compute
	// transferred ranges it has accepted. The Coordinator stops counting
	// it in MinClock and drops releases of it; a policy that waits for a
	// number of pushes per step must stop counting it too.
	EventLeave
	// EventJoin: Worker joins the run mid-run (a new slot, see
	// Config.MaxWorkers, or a worker that left, after Config.RejoinAfter).
	// Before the policy sees it the Coordinator has made it a member at
	// Clock = JoinClock(), waiting to be released into that clock, as if it
	// had just finished the one before: barrier policies count it from
	// that clock on, staleness gates measure it from there. Only policies
	// that accept joins (Elastic) see it.
	EventJoin
)

func (k EventKind) String() string {
	switch k {
	case EventClock:
		return "clock"
	case EventProgress:
		return "progress"
	case EventTick:
		return "tick"
	case EventTransferResult:
		return "transfer-result"
	case EventTransferDone:
		return "transfer-done"
	case EventLeave:
		return "leave"
	case EventJoin:
		return "join"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one input to a policy.
type Event struct {
	Kind     EventKind
	Worker   WorkerID
	Clock    int
	Progress ProgressReport
	Transfer TransferResult
	// Quit, for EventLeave, says the worker departs before the end of its
	// schedule (it quit, or the runtime lost it): it counts against
	// Config.MinWorkers and may rejoin after Config.RejoinAfter. A leave
	// without Quit is a worker that finished: the run is ending, and the
	// minimum no longer holds the others.
	Quit bool
}

// ProgressReport is what a worker says about its current clock.
type ProgressReport struct {
	Worker WorkerID
	Clock  int // the clock being computed
	// Done is the number of samples of the worker's own batch processed so
	// far this clock; Assigned is how many it still owns (its batch minus
	// what it gave away). Remaining work is Assigned-Done.
	Done, Assigned int
	// Claimed counts the samples of the own batch that the worker's
	// compute goroutines have claimed (processed or in progress): a
	// transfer can only take samples past it. Zero means Done (nothing in
	// progress). Done/Elapsed is the throughput; Claimed is the position.
	Claimed int
	// Parallelism is the number of goroutines computing.
	Parallelism int
	// Elapsed is the time since the clock began.
	Elapsed time.Duration
	// Extra counts the samples of other workers' batches assigned to this
	// worker at its release (Output.Assign), which it computes after its
	// own; ExtraDone those of them processed. A worker with Extra > 0
	// cannot give work away: its tail is not its own.
	Extra, ExtraDone int
}

// Cursor is the position from which the worker's batch can still be
// given away: max(Claimed, Done).
func (r ProgressReport) Cursor() int { return max(r.Claimed, r.Done) }

// Remaining is Assigned-Done, never negative.
func (r ProgressReport) Remaining() int {
	if r.Assigned < r.Done {
		return 0
	}
	return r.Assigned - r.Done
}

// Output is what a policy orders after an event. The runtime carries out
// Flush before Release, so a released worker reads the flushed update.
type Output struct {
	Flush          []FlushOrder
	Release        []WorkerID
	SetParallelism []ParallelismOrder
	SetBatch       []BatchOrder
	Transfers      []TransferOrder
	// Assign moves samples between workers released by the same Output,
	// before either has started: the orders ride on the releases, so
	// planning at clock start costs no message (see Assignment).
	Assign []Assignment
}

// Empty reports whether the output orders nothing.
func (o Output) Empty() bool {
	return len(o.Flush) == 0 && len(o.Release) == 0 && len(o.SetParallelism) == 0 &&
		len(o.SetBatch) == 0 && len(o.Transfers) == 0 && len(o.Assign) == 0
}

// Merge appends the orders of p to o.
func (o *Output) Merge(p Output) {
	o.Flush = append(o.Flush, p.Flush...)
	o.Release = append(o.Release, p.Release...)
	o.SetParallelism = append(o.SetParallelism, p.SetParallelism...)
	o.SetBatch = append(o.SetBatch, p.SetBatch...)
	o.Transfers = append(o.Transfers, p.Transfers...)
	o.Assign = append(o.Assign, p.Assign...)
}

// Assignment gives the samples [Lo, Hi) of worker From's batch of clock
// Clock to worker To, at the release of both into Clock. From computes its
// batch minus what it gives (the pieces of one giver are its batch's tail,
// so it keeps one prefix [0, keep)); To computes its own batch and then the
// assigned samples, and pushes them all in one push whose Parts name each
// owner. Nothing is asked of the giver: it has claimed nothing yet. The
// runtime sends each released worker its own pieces with its release.
//
// Assignments suit Accumulate (a flush weighs every sample by 1/Σ n,
// whoever computed it); under ApplyNow the taker's push is scaled by
// Samples/BatchSamples of its own enlarged batch, so a policy that applies
// assigned samples at once must correct the scale itself. A worker driven
// by a manual loop (ps.Worker.PushGradient and Clock) pushes no Parts: do
// not assign to it. Workers enter their first clock without a release, so
// clock 0 is never assigned; an Output may not assign and resize the same
// worker's batch.
type Assignment struct {
	From, To WorkerID
	Clock    int
	Lo, Hi   int
}

// Samples is Hi-Lo.
func (a Assignment) Samples() int { return a.Hi - a.Lo }

// FlushOrder applies the buffered gradients of Clock as one update, scaled.
type FlushOrder struct {
	Clock int
	Scale float64 // 0 means 1
}

// ParallelismOrder sets the number of compute goroutines of a worker.
type ParallelismOrder struct {
	Worker WorkerID
	P      int
}

// BatchOrder sets a worker's batch size from its next clock on.
type BatchOrder struct {
	Worker WorkerID
	Size   int
}

// TransferOrder asks worker From to give the sample range [Lo, Hi) of its
// batch for clock Clock to worker To. The giver answers with a
// TransferResult: accepted only if it has not yet started on Lo.
// The Coordinator assigns ID; a policy leaves it zero.
type TransferOrder struct {
	ID       uint64
	From, To WorkerID
	Clock    int
	Lo, Hi   int
}

// Samples is Hi-Lo.
func (t TransferOrder) Samples() int { return t.Hi - t.Lo }

// TransferResult is the giver's answer to a TransferOrder. When Accepted,
// [Lo, Hi) is the range actually handed over (it may start later than
// ordered, never earlier; it always ends at the ordered Hi, so the giver
// keeps one contiguous range).
//
// The runtime sets ID, Accepted, Lo and Hi; the Coordinator fills From, To
// and Clock from the order before the policy sees the event.
type TransferResult struct {
	ID       uint64
	Accepted bool
	Lo, Hi   int
	From, To WorkerID
	Clock    int
}

// View is the read-only state a policy decides on. The runtime (a
// Coordinator) maintains it; policies never modify it.
type View interface {
	NumWorkers() int
	// Clock is the number of clocks worker w has completed; it is
	// computing (or waiting to start) clock Clock(w).
	Clock(w WorkerID) int
	// MinClock is the smallest Clock of the workers that have not left.
	MinClock() int
	MaxClock() int
	// Version counts updates applied so far (each ApplyNow push and each
	// flush is one update).
	Version() uint64
	// Waiting reports whether w has finished its clock and waits for release.
	Waiting(w WorkerID) bool
	// Progress is w's latest report for its current clock.
	Progress(w WorkerID) ProgressReport
	Batch(w WorkerID) int
	Parallelism(w WorkerID) int
	// PendingTransfers counts transfers of clock c ordered but not yet
	// done (neither refused nor pushed by the taker).
	PendingTransfers(clock int) int
}

// Elastic is implemented by policies that accept workers joining mid-run
// (EventJoin) and leaving it: their state does not depend on the set of
// workers fixed at the start. AcceptsJoins reports whether this instance
// does (a wrapper forwards its inner policy's answer). BSP, SSP and ASP
// do; the EPSP policies (Falcon, Falcon2) and the load-balancing and
// step-counting ones do not: they size per-worker estimates, tiers and
// ledgers at the first Step (see the package doc, "Membership").
type Elastic interface {
	Policy
	AcceptsJoins() bool
}

// Policy is a synchronization policy: a pure, deterministic state machine.
// It must not start goroutines, read the wall clock or use global
// randomness; time is passed in as the duration since the run began.
// A Coordinator calls a policy from one goroutine at a time.
type Policy interface {
	// Name is a short identifier, e.g. "bsp" or "ssp(s=3)".
	Name() string
	// Admit decides how a push is applied.
	Admit(now time.Duration, v View, p Push) PushDecision
	// Step reacts to an event and returns orders.
	Step(now time.Duration, v View, e Event) Output
}
