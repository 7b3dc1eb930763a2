package ps

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/transport"
)

// # Observers
//
// (This part of the package documentation sits beside the code it
// describes; the package doc in doc.go is the map.)
//
// An Observer sees pushes, applies and flushes, clock starts and ends,
// pulls and pushes done, releases, parallelism and batch changes,
// transfers and computed chunks; each EventKind names the role that emits
// it. Events carry a process-wide Seq, and the coordinator emits the
// event a request reports (EvClockDone, EvLeave, transfer answers) before
// the orders it caused, so Seq order is causal within a process.

// EventKind tells what an observed Event reports.
type EventKind uint8

// The kinds, with the role that emits each (Event.Node names the node).
const (
	// EvPushAdmitted (coordinator): the coordinator admitted a push (Push,
	// Decision).
	EvPushAdmitted EventKind = iota + 1
	// EvApplied (server): a server applied a push (Clock, Action =
	// ApplyNow) or buffered one (Action = Accumulate); Samples is the push
	// weight.
	EvApplied
	// EvFlushed (server): a server applied the buffered gradients of Clock.
	EvFlushed
	// EvClockStart (worker): Worker started computing Clock.
	EvClockStart
	// EvClockDone (coordinator): Worker's pushes of Clock are stored; it
	// waits for release. Emitted before the orders the policy answered
	// with, so before the EvRelease it caused.
	EvClockDone
	// EvRelease (coordinator): the coordinator released Worker into Clock.
	EvRelease
	// EvParallelism (coordinator when ordered, worker when applied):
	// Worker's parallelism was set to P.
	EvParallelism
	// EvBatch (coordinator when ordered, worker when applied): Worker's
	// batch was set to Samples.
	EvBatch
	// EvTransferOrdered (coordinator): the coordinator ordered Transfer.
	EvTransferOrdered
	// EvTransferResult (coordinator): the giver answered (Accepted, Lo, Hi
	// in Result); emitted before the orders the answer caused.
	EvTransferResult
	// EvTransferDone (coordinator): the taker (Worker) pushed the
	// transferred range; emitted before the orders it caused.
	EvTransferDone
	// EvChunk (worker): Worker computed samples [Lo, Hi) of Owner's batch
	// of Clock.
	EvChunk
	// EvLeave (coordinator): Worker finished training and left
	// (epsp.EventLeave); emitted before the orders it caused.
	EvLeave
	// EvPulled (worker): Worker has the parameters of Clock (its pull is
	// done; EvClockStart marks when it began).
	EvPulled
	// EvComputed (worker): Worker's goroutines finished computing its own
	// batch of Clock (Samples computed by it; transferred parts excluded).
	EvComputed
	// EvPushed (worker): Worker's push of Clock is stored on the servers
	// (admitted, then sent); next comes its clock request and the wait
	// for release.
	EvPushed
)

// String returns the kind's name, e.g. "clock-start".
func (k EventKind) String() string {
	names := [...]string{"", "push-admitted", "applied", "flushed", "clock-start", "clock-done", "release",
		"parallelism", "batch", "transfer-ordered", "transfer-result", "transfer-done", "chunk", "leave",
		"pulled", "computed", "pushed"}
	if int(k) < len(names) && k > 0 {
		return names[k]
	}
	if k == EvWorkerLost {
		return "worker-lost"
	}
	if k == EvJoin {
		return "join"
	}
	return "event?"
}

// Event is what an Observer sees. Only the fields its Kind names are set.
type Event struct {
	Kind EventKind
	// Seq numbers the events of one process in the order they were
	// emitted (from 1, shared by every role in the process). An event
	// caused by another — a release by the clock that completed its
	// barrier, a worker's clock start by its release — has a larger Seq,
	// so sorting by Seq gives a causal order of one process's events even
	// though Observe may be called concurrently, out of that order. Across
	// processes compare At (each role's own clock) instead.
	Seq      uint64
	At       time.Duration // time since the role started
	Node     string        // the node reporting
	Worker   epsp.WorkerID
	Owner    epsp.WorkerID
	Clock    int
	Lo, Hi   int
	Samples  int
	P        int
	Push     epsp.Push
	Decision epsp.PushDecision
	Transfer epsp.TransferOrder
	Result   epsp.TransferResult
}

// Observer receives events from servers, the coordinator and workers. It is
// called synchronously from the role's goroutines, possibly concurrently
// (so not necessarily in Seq order), so it must be safe for concurrent use
// and return quickly.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// Option configures a role with an injected dependency.
type Option func(*options)

type options struct {
	obs   Observer
	clock func() time.Duration
	log   *slog.Logger
}

// WithLogger sets the logger a role reports recovered panics and other
// faults to; the default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(p *options) { p.log = l } }

// WithObserver sets the observer of a role.
func WithObserver(o Observer) Option { return func(p *options) { p.obs = o } }

// WithClock sets the role's time source (the duration since the cluster
// started); the default measures from the role's construction.
func WithClock(now func() time.Duration) Option { return func(p *options) { p.clock = now } }

func buildOptions(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if o.clock == nil {
		start := time.Now()
		o.clock = func() time.Duration { return time.Since(start) }
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	return o
}

// recovered turns a panic caught while node served a message from peer
// into an error (wrapping ErrRemote, so it travels as an internal error)
// and one log line with the stack. Handlers call it from a deferred
// recover: no input, however crafted, ends the process.
func (o *options) recovered(node string, peer transport.NodeID, r any) error {
	err := fmt.Errorf("%w: %s recovered from a panic serving %s: %v", ErrRemote, node, peer, r)
	o.log.Error("ps: handler panic", "node", node, "peer", string(peer), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	return err
}

// eventSeq numbers the events of this process (Event.Seq).
var eventSeq atomic.Uint64

func (o *options) emit(e Event) {
	if o.obs != nil {
		e.Seq = eventSeq.Add(1)
		e.At = o.clock()
		o.obs.Observe(e)
	}
}
