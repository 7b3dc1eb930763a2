package straggler

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// Reference: falcon.md §1 [reconstruction]: T̂_i = (B_i − n_i)/v_i and
// classification against the median with threshold θ.
func TestProject_BarrierFinishBlockedClass(t *testing.T) {
	ws := []WorkerState{
		{Clock: 3, Remaining: 100, Batch: 100, Speed: 100}, // 1 s left
		{Clock: 3, Remaining: 100, Batch: 100, Speed: 50},  // 2 s: straggler
		{Clock: 3, Remaining: 100, Batch: 100, Speed: 100},
		{Clock: 4, Waiting: true, Batch: 100, Speed: 200}, // done with clock 3
	}
	s := Project(10*time.Second, ws, ProjectConfig{Staleness: 0, Theta: 0.2})
	want := []struct {
		fin, blocked, lag time.Duration
		class             Class
	}{
		{time.Second, time.Second, time.Second, Normal},
		{2 * time.Second, 0, 2 * time.Second, Straggler},
		{time.Second, time.Second, time.Second, Normal},
		{0, 2 * time.Second, 0, Pioneer},
	}
	for i, w := range want {
		p := s.Workers[i]
		if p.Finish != w.fin || p.Blocked != w.blocked || p.Lag != w.lag || p.Class != w.class {
			t.Errorf("worker %d: finish %v blocked %v lag %v %v; want %v %v %v %v",
				i, p.Finish, p.Blocked, p.Lag, p.Class, w.fin, w.blocked, w.lag, w.class)
		}
	}
	if s.Ref != time.Second { // median of lags {0,1,1,2}
		t.Errorf("Ref = %v, want 1s", s.Ref)
	}
	if got := s.Stragglers(); !slices.Equal(got, []int{1}) {
		t.Errorf("Stragglers = %v", got)
	}
	if out := s.String(); !strings.Contains(out, "straggler") || strings.Count(out, "\n") != 6 {
		t.Errorf("String() =\n%s", out)
	}
}

// Reference: falcon.md §5 SSP: a worker at clock c may proceed while
// c − min_j c_j ≤ s.
func TestProject_SSPGateBlocksOnlyBeyondS(t *testing.T) {
	ws := []WorkerState{
		{Clock: 5, Remaining: 10, Batch: 100, Speed: 100}, // leader, 0.1 s left
		{Clock: 3, Remaining: 50, Batch: 100, Speed: 100}, // behind by 2
	}
	// s=2: leader finishes clock 5 and wants clock 6, needs worker 1 to
	// have completed clock 3: worker 1 needs 0.5 s, so the leader is
	// blocked 0.4 s.
	s := Project(0, ws, ProjectConfig{Staleness: 2})
	if got := s.Workers[0].Blocked; got != 400*time.Millisecond {
		t.Errorf("s=2 leader blocked %v, want 400ms", got)
	}
	if got := Project(0, ws, ProjectConfig{Staleness: 3}).Workers[0].Blocked; got != 0 {
		t.Errorf("s=3 leader blocked %v, want 0", got)
	}
	if got := Project(0, ws, ProjectConfig{Staleness: -1}).Workers[0].Blocked; got != 0 {
		t.Errorf("no gate: leader blocked %v, want 0", got)
	}
	// Lag: the lead clock is 5; worker 1 needs its 50 + two more batches.
	if got := s.Workers[1].Lag; got != 2500*time.Millisecond {
		t.Errorf("worker 1 lag %v, want 2.5s", got)
	}
}

func TestProject_UnknownSpeedUsesMedianAndEqualIsNormal(t *testing.T) {
	ws := []WorkerState{
		{Clock: 0, Remaining: 100, Batch: 100, Speed: 100},
		{Clock: 0, Remaining: 100, Batch: 100},
		{Clock: 0, Remaining: 100, Batch: 100, Speed: 100},
	}
	s := Project(0, ws, ProjectConfig{})
	for _, p := range s.Workers {
		if p.Class != Normal || p.Finish != time.Second {
			t.Errorf("worker %d: %v finish %v; want normal 1s", p.Worker, p.Class, p.Finish)
		}
	}
	if s.Workers[1].Known {
		t.Error("worker 1 marked known")
	}
}

// Project's O(n) blocked-time computation agrees with the naive O(n²)
// definition Blocked_i = max(0, max_{j≠i} reach_j(c'_i − s) − Finish_i).
func TestProject_BlockedAgreesWithNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for range 300 {
		n := 1 + rng.IntN(8)
		ws := make([]WorkerState, n)
		for i := range ws {
			ws[i] = WorkerState{Clock: rng.IntN(4), Waiting: rng.IntN(3) == 0, Remaining: rng.IntN(50), Batch: 50, Speed: 10 + 90*rng.Float64()}
		}
		s := rng.IntN(3)
		snap := Project(0, ws, ProjectConfig{Staleness: s})
		reach := func(j, k int) float64 {
			w := ws[j]
			if k <= w.Clock {
				return 0
			}
			if w.Waiting {
				return float64(k-w.Clock) * float64(w.Batch) / w.Speed
			}
			return (float64(w.Remaining) + float64(k-w.Clock-1)*float64(w.Batch)) / w.Speed
		}
		for i, w := range ws {
			fin, next := 0.0, w.Clock
			if !w.Waiting {
				fin, next = reach(i, w.Clock+1), w.Clock+1
			}
			block := 0.0
			for j := range ws {
				if j != i {
					block = max(block, reach(j, next-s))
				}
			}
			want := dur(max(block-fin, 0))
			if d := snap.Workers[i].Blocked - want; d > 1 || d < -1 { // 1 ns rounding
				t.Fatalf("worker %d of %+v (s=%d): blocked %v, naive %v", i, ws, s, snap.Workers[i].Blocked, want)
			}
		}
	}
}
