package ps

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/event"
)

// # Observability
//
// (This part of the package documentation sits beside the code it
// describes; the package doc in doc.go is the map.)
//
// Timeline is an Observer that writes a run as a Chrome trace-event JSON
// timeline (pull, compute, push, wait and transfer spans per worker and
// clock; open it in chrome://tracing or ui.perfetto.dev). A Cluster with
// its coordinator in this process tracks every worker's state (clock,
// waiting or left, parallelism, batch, speed, straggler or pioneer):
// Cluster.WorkerStates on demand, ClusterConfig.StateEvery and OnState at
// an interval.

// Timeline is an Observer that keeps the events of a run and writes them
// as a timeline in the Chrome trace-event JSON format (the "JSON Object
// Format" of the Trace Event Format document, Google, 2016), which
// chrome://tracing, Perfetto (ui.perfetto.dev) and speedscope open. Each
// worker is a thread row (tid = its WorkerID) with complete events
// ("ph":"X") per clock:
//
//	pull      EvClockStart → EvPulled        (reading the parameters)
//	compute   EvPulled → EvComputed          (its own batch, p goroutines)
//	push      EvComputed → EvPushed          (admission and the push)
//	wait      EvPushed → next EvClockStart   (clock request, barrier wait)
//	transfer  EvTransferResult → EvTransferDone, on the taker's row
//	          (an accepted range, computed and pushed by the taker)
//
// Every span carries its clock in args. Times are the events' At: in one
// process every role of a Cluster shares one clock; a role observed on
// its own measures from its own start. Worker spans need the worker's
// events and transfers the coordinator's, so a process that runs only
// some nodes writes the part of the timeline it saw.
//
// Give it as ClusterConfig.Observer. Its zero value is ready and safe for
// concurrent use. WriteJSON writes what it has seen so far: call it after
// Cluster.Close for the whole run (until then the roles may still emit
// events).
type Timeline struct {
	mu     sync.Mutex
	events []event.Event
}

var _ event.Observer = (*Timeline)(nil)

// Observe implements Observer.
func (t *Timeline) Observe(e event.Event) {
	switch e.Kind {
	case event.ClockStart, event.Pulled, event.Computed, event.Pushed, event.TransferResult, event.TransferDone:
	default:
		return
	}
	t.mu.Lock()
	t.events = append(t.events, e)
	t.mu.Unlock()
}

// Span is one complete event of a timeline.
type Span struct {
	Name   string        // pull, compute, push, wait, transfer
	Worker epsp.WorkerID // the row
	Clock  int
	Start  time.Duration
	Dur    time.Duration
}

// Spans returns the spans of the events seen so far, ordered by start.
// A span whose end has not been seen yet is left out.
func (t *Timeline) Spans() []Span {
	t.mu.Lock()
	ev := slices.Clone(t.events)
	t.mu.Unlock()
	slices.SortStableFunc(ev, func(a, b event.Event) int { return int(a.Seq) - int(b.Seq) })
	type key struct {
		w epsp.WorkerID
		k event.Kind
	}
	last := map[key]event.Event{}               // last event of a kind per worker
	waitFrom := map[epsp.WorkerID]event.Event{} // EvPushed awaiting the next clock start
	accepted := map[uint64]event.Event{}        // transfer id → accepted result
	var spans []Span
	add := func(name string, w epsp.WorkerID, clock int, from, to time.Duration) {
		if to >= from {
			spans = append(spans, Span{Name: name, Worker: w, Clock: clock, Start: from, Dur: to - from})
		}
	}
	for _, e := range ev {
		w := e.Worker
		switch e.Kind {
		case event.ClockStart:
			if p, ok := waitFrom[w]; ok {
				add("wait", w, p.Clock, p.At, e.At)
				delete(waitFrom, w)
			}
		case event.Pulled:
			if s, ok := last[key{w, event.ClockStart}]; ok && s.Clock == e.Clock {
				add("pull", w, e.Clock, s.At, e.At)
			}
		case event.Computed:
			if s, ok := last[key{w, event.Pulled}]; ok && s.Clock == e.Clock {
				add("compute", w, e.Clock, s.At, e.At)
			}
		case event.Pushed:
			if s, ok := last[key{w, event.Computed}]; ok && s.Clock == e.Clock {
				add("push", w, e.Clock, s.At, e.At)
			}
			waitFrom[w] = e
		case event.TransferResult:
			if e.Result.Accepted {
				accepted[e.Transfer.ID] = e
			}
		case event.TransferDone:
			if s, ok := accepted[e.Result.ID]; ok {
				add("transfer", s.Transfer.To, s.Transfer.Clock, s.At, e.At)
				delete(accepted, e.Result.ID)
			}
		}
		last[key{w, e.Kind}] = e
	}
	slices.SortStableFunc(spans, func(a, b Span) int {
		if a.Start != b.Start {
			return int(a.Start - b.Start)
		}
		return int(a.Worker - b.Worker)
	})
	return spans
}

// traceEvent is one entry of a Chrome trace (times in microseconds).
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// WriteJSON writes the timeline as a Chrome trace-event JSON object: a
// process "falcon" with one named thread per worker ("worker-<i>") and
// its spans.
func (t *Timeline) WriteJSON(w io.Writer) error {
	spans := t.Spans()
	out := struct {
		TraceEvents     []traceEvent `json:"traceEvents"`
		DisplayTimeUnit string       `json:"displayTimeUnit"`
	}{DisplayTimeUnit: "ms"}
	out.TraceEvents = append(out.TraceEvents, traceEvent{Name: "process_name", Ph: "M", Pid: 1, Args: map[string]any{"name": "falcon"}})
	seen := map[epsp.WorkerID]bool{}
	for _, s := range spans {
		if !seen[s.Worker] {
			seen[s.Worker] = true
			out.TraceEvents = append(out.TraceEvents, traceEvent{Name: "thread_name", Ph: "M", Pid: 1, Tid: int(s.Worker),
				Args: map[string]any{"name": fmt.Sprintf("worker-%d", s.Worker)}})
		}
	}
	for _, s := range spans {
		out.TraceEvents = append(out.TraceEvents, traceEvent{Name: s.Name, Cat: "worker", Ph: "X",
			Ts: float64(s.Start) / 1e3, Dur: float64(s.Dur) / 1e3, Pid: 1, Tid: int(s.Worker), Args: map[string]any{"clock": s.Clock}})
	}
	enc := json.NewEncoder(w)
	return enc.Encode(out)
}
