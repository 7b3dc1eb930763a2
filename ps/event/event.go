// Package event is what the roles of package ps report as they run: an
// Event of a Kind (a push admitted, a clock started, a transfer done, ...),
// handed to an Observer. ps.Timeline is an Observer that draws a run.
//
// An Observer sees pushes, applies and flushes, clock starts and ends,
// pulls and pushes done, releases, parallelism and batch changes,
// transfers and computed chunks; each Kind names the role that emits
// it. Events carry a process-wide Seq, and the coordinator emits the
// event a request reports (ClockDone, Leave, transfer answers) before
// the orders it caused, so Seq order is causal within a process.
//
// It imports nothing of ps; the roles import it. An Event is a plain
// value (its zero value reports nothing: Kind 0 is no kind).
package event

import (
	"time"

	"github.com/falconml/falcon/epsp"
)

// Kind tells what an observed Event reports.
type Kind uint8

// The kinds, with the role that emits each (Event.Node names the node).
const (
	// PushAdmitted (coordinator): the coordinator admitted a push (Push,
	// Decision).
	PushAdmitted Kind = iota + 1
	// Applied (server): a server applied a push (Clock, Action =
	// ApplyNow) or buffered one (Action = Accumulate); Samples is the push
	// weight.
	Applied
	// Flushed (server): a server applied the buffered gradients of Clock.
	Flushed
	// ClockStart (worker): Worker started computing Clock.
	ClockStart
	// ClockDone (coordinator): Worker's pushes of Clock are stored; it
	// waits for release. Emitted before the orders the policy answered
	// with, so before the Release it caused.
	ClockDone
	// Release (coordinator): the coordinator released Worker into Clock.
	Release
	// Parallelism (coordinator when ordered, worker when applied):
	// Worker's parallelism was set to P.
	Parallelism
	// Batch (coordinator when ordered, worker when applied): Worker's
	// batch was set to Samples.
	Batch
	// TransferOrdered (coordinator): the coordinator ordered Transfer.
	TransferOrdered
	// TransferResult (coordinator): the giver answered (Accepted, Lo, Hi
	// in Result); emitted before the orders the answer caused.
	TransferResult
	// TransferDone (coordinator): the taker (Worker) pushed the
	// transferred range; emitted before the orders it caused.
	TransferDone
	// Chunk (worker): Worker computed samples [Lo, Hi) of Owner's batch
	// of Clock.
	Chunk
	// Leave (coordinator): Worker finished training and left
	// (epsp.EventLeave); emitted before the orders it caused.
	Leave
	// Pulled (worker): Worker has the parameters of Clock (its pull is
	// done; ClockStart marks when it began).
	Pulled
	// Computed (worker): Worker's goroutines finished computing its own
	// batch of Clock (Samples computed by it; transferred parts excluded).
	Computed
	// Pushed (worker): Worker's push of Clock is stored on the servers
	// (admitted, then sent); next comes its clock request and the wait
	// for release.
	Pushed
)

// String returns the kind's name, e.g. "clock-start".
func (k Kind) String() string {
	names := [...]string{"", "push-admitted", "applied", "flushed", "clock-start", "clock-done", "release",
		"parallelism", "batch", "transfer-ordered", "transfer-result", "transfer-done", "chunk", "leave",
		"pulled", "computed", "pushed"}
	if int(k) < len(names) && k > 0 {
		return names[k]
	}
	if k == WorkerLost {
		return "worker-lost"
	}
	if k == Join {
		return "join"
	}
	if k == PartialFlush {
		return "partial-flush"
	}
	if k == LeftOut {
		return "left-out"
	}
	return "event?"
}

// Event is what an Observer sees. Only the fields its Kind names are set.
type Event struct {
	Kind Kind
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

// Func adapts a function to Observer.
type Func func(Event)

// Observe calls f(e).
func (f Func) Observe(e Event) { f(e) }

// WorkerLost: the coordinator declared Worker lost (its lease expired).
const WorkerLost Kind = 64

// Join (coordinator): Worker joined the run at Clock (epsp.EventJoin).
const Join Kind = 65

// PartialFlush (coordinator): at the flush of buffer Clock, in which
// Worker, declared lost, had Samples samples admitted, the servers'
// weights of the clock differed, or fell short of what was admitted:
// Worker's push was stored on some servers only, or on none (package
// ps's doc, Partial updates, reported).
const PartialFlush Kind = 66

// LeftOut (server): the flush of Clock left out the pushes of a worker the
// coordinator lost (Samples: their weight): buffered (Applied) and never
// applied (package ps's doc, Partial updates).
const LeftOut Kind = 67
