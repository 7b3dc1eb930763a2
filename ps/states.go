package ps

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/straggler"
)

// WorkerState is one worker as the coordinator's events show it: its
// clock, parallelism, batch, speed and class (straggler or pioneer). It is
// a value, from Cluster.WorkerStates or ClusterConfig.OnState every
// StateEvery.
type WorkerState struct {
	Worker epsp.WorkerID
	// Clock is the clock the worker was last released into (or 0);
	// Waiting is set once it has finished that clock and waits for the
	// next release; Left once it has finished training.
	Clock         int
	Waiting, Left bool
	// Parallelism and Batch are the last ordered (initially unknown, 0).
	Parallelism, Batch int
	// Speed is the worker's throughput in samples/s: the samples of the
	// pushes it computed in its last finished clock (its own and taken
	// ranges) over the time from its release into that clock to its
	// EvClockDone. 0 until a clock after its first has finished.
	Speed float64
	// Class is "straggler" when Speed < (1−θ)·median, "pioneer" when
	// Speed > (1+θ)·median, "" otherwise or while speeds are unknown
	// (θ = straggler.DefaultTheta; the classification is ours, a simple
	// speed rule, not EPSP's projection).
	Class string
}

// String is one line: "worker-1 clock 7 waiting p=2 batch=32 speed=812/s straggler".
func (s WorkerState) String() string {
	st := "computing"
	switch {
	case s.Left:
		st = "left"
	case s.Waiting:
		st = "waiting"
	}
	line := fmt.Sprintf("worker-%d clock %d %s p=%d batch=%d speed=%.0f/s", s.Worker, s.Clock, st, s.Parallelism, s.Batch, s.Speed)
	if s.Class != "" {
		line += " " + s.Class
	}
	return line
}

// stateTracker follows the workers from coordinator events.
type stateTracker struct {
	mu      sync.Mutex
	st      []WorkerState
	relAt   []time.Duration // At of the last release (−1: none seen)
	samples []int           // samples pushed in the current clock
}

func newStateTracker(workers, batch, par int) *stateTracker {
	t := &stateTracker{st: make([]WorkerState, workers), relAt: make([]time.Duration, workers), samples: make([]int, workers)}
	for w := range t.st {
		t.st[w] = WorkerState{Worker: epsp.WorkerID(w), Batch: batch, Parallelism: max(par, 1)}
		t.relAt[w] = -1
	}
	return t
}

func (t *stateTracker) Observe(e event.Event) {
	if e.Node != string(CoordinatorNode) {
		return // the coordinator's view only: it sees every worker
	}
	w := int(e.Worker)
	t.mu.Lock()
	defer t.mu.Unlock()
	if w < 0 || w >= len(t.st) {
		return
	}
	s := &t.st[w]
	switch e.Kind {
	case event.Release:
		s.Clock, s.Waiting = e.Clock, false
		t.relAt[w], t.samples[w] = e.At, 0
	case event.ClockDone:
		s.Waiting = true
		if t.relAt[w] >= 0 && e.At > t.relAt[w] && t.samples[w] > 0 {
			s.Speed = float64(t.samples[w]) / (e.At - t.relAt[w]).Seconds()
		}
	case event.PushAdmitted:
		t.samples[w] += e.Samples
	case event.Parallelism:
		s.Parallelism = e.P
	case event.Batch:
		s.Batch = e.Samples
	case event.Leave:
		s.Left = true
	}
}

// states returns a copy with the classes filled in.
func (t *stateTracker) states() []WorkerState {
	t.mu.Lock()
	out := slices.Clone(t.st)
	t.mu.Unlock()
	var speeds []float64
	for _, s := range out {
		if s.Speed > 0 && !s.Left {
			speeds = append(speeds, s.Speed)
		}
	}
	if len(speeds) < 2 {
		return out
	}
	slices.Sort(speeds)
	med := speeds[len(speeds)/2]
	if len(speeds)%2 == 0 {
		med = (speeds[len(speeds)/2-1] + speeds[len(speeds)/2]) / 2
	}
	th := straggler.DefaultTheta
	for i := range out {
		switch s := out[i].Speed; {
		case s <= 0 || out[i].Left:
		case s < (1-th)*med:
			out[i].Class = "straggler"
		case s > (1+th)*med:
			out[i].Class = "pioneer"
		}
	}
	return out
}
