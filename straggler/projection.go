package straggler

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Class is a worker's role in a [Snapshot].
type Class uint8

const (
	// Normal: neither straggler nor pioneer.
	Normal Class = iota
	// Straggler: projected to reach the leading clock well after the others.
	Straggler
	// Pioneer: waiting at the barrier/gate, or projected well ahead.
	Pioneer
)

func (c Class) String() string {
	switch c {
	case Normal:
		return "normal"
	case Straggler:
		return "straggler"
	case Pioneer:
		return "pioneer"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// WorkerState is what the projection needs to know about one worker.
type WorkerState struct {
	// Clock is the number of clocks the worker has completed; it is
	// computing (or waiting to start) clock Clock.
	Clock int
	// Waiting reports that the worker finished its clock and waits to be
	// released; Remaining is then ignored.
	Waiting bool
	// Remaining is the samples of the current clock it still has to do.
	Remaining int
	// Batch is its batch size for later clocks.
	Batch int
	// Speed is its throughput in samples/s; <= 0 means unknown, in which
	// case the median of the known speeds is assumed.
	Speed float64
}

// ProjectConfig configures [Project].
type ProjectConfig struct {
	// Staleness is the gate: a worker that has completed clock c-1 may
	// start clock c once every worker has completed clock c-1-Staleness
	// (0 = barrier, BSP). Negative means no gate (ASP): nobody blocks.
	Staleness int
	// Theta is the classification threshold: straggler if E > (1+Theta)·Ref,
	// pioneer if E < (1-Theta)·Ref. 0 means 0.2 (ours; Falcon's θ is not public).
	Theta float64
}

// DefaultTheta is the classification threshold used when none is given.
// It is ours: Falcon's value is not public (falcon.md §1).
const DefaultTheta = 0.2

// Projection is one worker's line in a [Snapshot]. Durations are from the
// snapshot's Now.
type Projection struct {
	Worker  int
	Clock   int
	Waiting bool
	Speed   float64 // samples/s used (the median if the worker's was unknown)
	Known   bool    // whether Speed was the worker's own estimate
	// Finish is the projected time until it completes its current clock
	// (0 if waiting).
	Finish time.Duration
	// Blocked is the projected time it will then sit at the gate before
	// it may start its next clock.
	Blocked time.Duration
	// Lag is the projected time until it has completed the leading clock
	// (the highest clock any non-waiting worker is computing): the
	// quantity it is classified by.
	Lag   time.Duration
	Class Class
}

// Snapshot is the result of one straggler projection.
type Snapshot struct {
	Now       time.Duration
	Staleness int
	Theta     float64
	// Lead is the leading clock: workers are measured by when they will
	// have completed it.
	Lead int
	// Ref is the median Lag, the classification reference.
	Ref     time.Duration
	Workers []Projection
}

// Project is straggler projection [RECONSTRUCTION of Falcon's method, whose
// formula is not public; falcon.md §1]. With speed v_i, remaining R_i,
// batch B_i and clock c_i, the time until worker i has completed clock k > c_i is
//
//	reach_i(k) = R_i/v_i + (k-c_i-1)·B_i/v_i      (R_i = 0 if waiting, when c_i counts the finished clock)
//
// and 0 for k <= c_i. Finish_i = reach_i(c_i+1) for a computing worker.
// After finishing, worker i wants to start clock c' and is blocked until
// every other worker j has completed clock c'-1-s:
//
//	Blocked_i = max(0, max_j reach_j(c'-s) - Finish_i)
//
// Lag_i = reach_i(L+1) where L is the highest clock under computation, and
// Ref = median Lag. Straggler: Lag > (1+θ)·Ref; pioneer: waiting, or
// Lag < (1-θ)·Ref. Later clocks ignore the worker's own future waits, so
// reach is a lower bound. It panics if a Batch is negative.
func Project(now time.Duration, ws []WorkerState, cfg ProjectConfig) Snapshot {
	theta := cfg.Theta
	if theta == 0 {
		theta = DefaultTheta
	}
	snap := Snapshot{Now: now, Staleness: cfg.Staleness, Theta: theta, Workers: make([]Projection, len(ws))}
	if len(ws) == 0 {
		return snap
	}
	var known []float64
	for _, w := range ws {
		if w.Speed > 0 {
			known = append(known, w.Speed)
		}
	}
	med := median(known)
	lead := math.MinInt
	for _, w := range ws {
		c := w.Clock
		if w.Waiting {
			c--
		}
		lead = max(lead, c)
	}
	reach := func(i, k int) float64 { // seconds
		w := ws[i]
		v := snap.Workers[i].Speed
		if k <= w.Clock {
			return 0
		}
		if v <= 0 {
			return math.Inf(1)
		}
		r := float64(max(w.Remaining, 0))
		extra := k - w.Clock - 1
		if w.Waiting {
			r = 0
			extra = k - w.Clock
		}
		return (r + float64(extra)*float64(w.Batch)) / v
	}
	for i, w := range ws {
		p := &snap.Workers[i]
		p.Worker, p.Clock, p.Waiting = i, w.Clock, w.Waiting
		p.Speed, p.Known = w.Speed, w.Speed > 0
		if !p.Known {
			p.Speed = med
		}
	}
	// top(k) holds the two largest reach_j(k) (and the argmax), so that
	// max over j != i costs O(1); there are few distinct k.
	type top2 struct {
		v1, v2 float64
		i1     int
	}
	tops := map[int]top2{}
	top := func(k int) top2 {
		if t, ok := tops[k]; ok {
			return t
		}
		t := top2{i1: -1}
		for j := range ws {
			switch r := reach(j, k); {
			case t.i1 < 0 || r > t.v1:
				t.v2 = t.v1
				t.v1, t.i1 = r, j
			case r > t.v2:
				t.v2 = r
			}
		}
		tops[k] = t
		return t
	}
	lags := make([]float64, len(ws))
	for i, w := range ws {
		p := &snap.Workers[i]
		fin := 0.0
		next := w.Clock
		if !w.Waiting {
			fin = reach(i, w.Clock+1)
			next = w.Clock + 1
		}
		p.Finish = dur(fin)
		if cfg.Staleness >= 0 {
			t := top(next - cfg.Staleness)
			block := t.v1
			if t.i1 == i {
				block = t.v2
			}
			p.Blocked = dur(max(block-fin, 0))
		}
		lags[i] = reach(i, lead+1)
		p.Lag = dur(lags[i])
	}
	snap.Lead = lead
	ref := median(lags)
	snap.Ref = dur(ref)
	for i, w := range ws {
		p := &snap.Workers[i]
		switch {
		case w.Waiting:
			p.Class = Pioneer
		case lags[i] > (1+theta)*ref && lags[i] > 0:
			p.Class = Straggler
		case lags[i] < (1-theta)*ref:
			p.Class = Pioneer
		}
	}
	return snap
}

func dur(sec float64) time.Duration {
	if math.IsInf(sec, 1) || sec*1e9 >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(math.Round(sec * 1e9))
}

// median returns the median of xs (the mean of the two middle values for
// an even count), 0 for none. xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	if math.IsInf(s[n/2], 1) {
		return s[n/2-1]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Stragglers returns the workers classified as stragglers, ascending.
func (s Snapshot) Stragglers() []int { return s.of(Straggler) }

// Pioneers returns the workers classified as pioneers, ascending.
func (s Snapshot) Pioneers() []int { return s.of(Pioneer) }

func (s Snapshot) of(c Class) []int {
	var out []int
	for _, p := range s.Workers {
		if p.Class == c {
			out = append(out, p.Worker)
		}
	}
	return out
}

// String renders the snapshot as a small table, one line per worker.
func (s Snapshot) String() string {
	var b strings.Builder
	gate := fmt.Sprintf("s=%d", s.Staleness)
	if s.Staleness < 0 {
		gate = "no gate"
	}
	fmt.Fprintf(&b, "projection at %v (%s, θ=%.2f, lead clock %d, ref lag %v)\n", s.Now, gate, s.Theta, s.Lead, fmtDur(s.Ref))
	fmt.Fprintf(&b, "%-6s %-5s %-10s %-10s %-10s %-10s %s\n", "worker", "clock", "speed/s", "finish", "blocked", "lag", "class")
	for _, p := range s.Workers {
		clock := fmt.Sprint(p.Clock)
		if p.Waiting {
			clock += "w"
		}
		speed := fmt.Sprintf("%.1f", p.Speed)
		if !p.Known {
			speed += "?"
		}
		fmt.Fprintf(&b, "%-6d %-5s %-10s %-10s %-10s %-10s %s\n", p.Worker, clock, speed, fmtDur(p.Finish), fmtDur(p.Blocked), fmtDur(p.Lag), p.Class)
	}
	return b.String()
}

func fmtDur(d time.Duration) string {
	if d == math.MaxInt64 {
		return "∞"
	}
	return d.Round(time.Millisecond).String()
}
