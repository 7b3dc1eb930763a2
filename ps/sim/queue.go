package sim

import (
	"container/heap"
	"fmt"
	"time"
)

// Queue is a goroutine-free discrete-event scheduler in virtual time.
// Events run in order of (time, insertion sequence), so two events at the
// same instant run in the order they were scheduled and a run is
// deterministic. The zero value is ready to use.
type Queue struct {
	now  time.Duration
	seq  uint64
	h    eventHeap
	runs uint64
}

type event struct {
	at  time.Duration
	seq uint64
	fn  func()
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = event{}
	*h = old[:n-1]
	return e
}

// Now is the current virtual time: the time of the event being run, or of
// the last one run.
func (q *Queue) Now() time.Duration { return q.now }

// Len is the number of scheduled events.
func (q *Queue) Len() int { return len(q.h) }

// Executed is the number of events run so far.
func (q *Queue) Executed() uint64 { return q.runs }

// Schedule runs fn at virtual time at. It panics if at is before Now (an
// event cannot be scheduled in the past).
func (q *Queue) Schedule(at time.Duration, fn func()) {
	if at < q.now {
		panic(fmt.Sprintf("sim: event scheduled at %v, before now %v", at, q.now))
	}
	q.seq++
	heap.Push(&q.h, event{at: at, seq: q.seq, fn: fn})
}

// After runs fn d after Now.
func (q *Queue) After(d time.Duration, fn func()) { q.Schedule(q.now+d, fn) }

// Step runs the next event and reports whether there was one.
func (q *Queue) Step() bool {
	if len(q.h) == 0 {
		return false
	}
	e := heap.Pop(&q.h).(event)
	q.now = e.at
	q.runs++
	e.fn()
	return true
}

// RunUntil runs every event scheduled at or before t, in order, or until
// stop (if not nil) returns true after an event; then it sets Now to t if
// it stopped for time. It returns true if it stopped because of stop.
func (q *Queue) RunUntil(t time.Duration, stop func() bool) bool {
	for len(q.h) > 0 && q.h[0].at <= t {
		q.Step()
		if stop != nil && stop() {
			return true
		}
	}
	if q.now < t {
		q.now = t
	}
	return false
}
