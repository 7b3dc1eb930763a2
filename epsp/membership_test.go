package epsp_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
)

func elasticCoord(t *testing.T, cfg epsp.Config, p epsp.Policy) *epsp.Coordinator {
	t.Helper()
	if cfg.Batch == 0 {
		cfg.Batch = 10
	}
	c, err := epsp.NewCoordinator(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func join(w int) epsp.Event { return epsp.Event{Kind: epsp.EventJoin, Worker: epsp.WorkerID(w)} }
func quit(w int) epsp.Event {
	return epsp.Event{Kind: epsp.EventLeave, Worker: epsp.WorkerID(w), Quit: true}
}
func finish(w int) epsp.Event { return epsp.Event{Kind: epsp.EventLeave, Worker: epsp.WorkerID(w)} }

func ids(ws ...int) []epsp.WorkerID {
	out := make([]epsp.WorkerID, len(ws))
	for i, w := range ws {
		out[i] = epsp.WorkerID(w)
	}
	return out
}

func sorted(ws []epsp.WorkerID) []epsp.WorkerID {
	ws = slices.Clone(ws)
	slices.Sort(ws)
	return ws
}

// TestBSP_ScaleUpJoinsAtNextClock: 2 → 3 under BSP. A worker joining
// while clock 0 is in progress waits at clock 1; the barrier of clock 0
// does not wait for it, the barrier of clock 1 does.
func TestBSP_ScaleUpJoinsAtNextClock(t *testing.T) {
	c := elasticCoord(t, epsp.Config{NumWorkers: 2, MaxWorkers: 3}, epsp.NewBSP())
	step(t, c, clockEvent(0, 0))
	out := step(t, c, join(2))
	v := c.View()
	if len(out.Release) != 0 || len(out.Flush) != 0 {
		t.Fatalf("join during clock 0 ordered %+v", out)
	}
	if v.Clock(2) != 1 || !v.Waiting(2) || c.JoinClock() != 1 {
		t.Fatalf("joiner at clock %d waiting %v, want clock 1 waiting", v.Clock(2), v.Waiting(2))
	}
	out = step(t, c, clockEvent(1, 0))
	if len(out.Flush) != 1 || out.Flush[0].Clock != 0 || !slices.Equal(sorted(out.Release), ids(0, 1, 2)) {
		t.Fatalf("barrier of clock 0: %+v, want flush 0 and release of 0, 1, 2", out)
	}
	step(t, c, clockEvent(0, 1))
	if out := step(t, c, clockEvent(1, 1)); len(out.Flush) != 0 {
		t.Fatalf("barrier of clock 1 flushed without the joiner: %+v", out)
	}
	if out := step(t, c, clockEvent(2, 1)); len(out.Flush) != 1 || len(out.Release) != 3 {
		t.Fatalf("barrier of clock 1 with the joiner: %+v", out)
	}
	if st := c.Stats(); st.Joined != 1 || v.NumWorkers() != 3 {
		t.Errorf("stats %+v, %d slots", st, v.NumWorkers())
	}
	if m, ok := v.(epsp.Membership); !ok || !m.Member(2) {
		t.Error("the view does not report the joiner as a member")
	}
}

// TestBSP_ScaleDownBarrierSkipsDeparted: 3 → 2. A worker that quits in
// the middle of a clock is not waited for, by this barrier or later ones.
func TestBSP_ScaleDownBarrierSkipsDeparted(t *testing.T) {
	c := elasticCoord(t, epsp.Config{NumWorkers: 3}, epsp.NewBSP())
	step(t, c, clockEvent(0, 0))
	step(t, c, clockEvent(1, 0))
	out := step(t, c, quit(2))
	if len(out.Flush) != 1 || !slices.Equal(sorted(out.Release), ids(0, 1)) {
		t.Fatalf("after the quit: %+v, want flush 0 and release of 0, 1", out)
	}
	step(t, c, clockEvent(0, 1))
	if out := step(t, c, clockEvent(1, 1)); len(out.Flush) != 1 {
		t.Fatalf("barrier of clock 1 waits for the departed worker: %+v", out)
	}
	if got := c.Members(); !slices.Equal(got, ids(0, 1)) {
		t.Errorf("members %v", got)
	}
}

// TestMembership_PauseBelowMinimum: with MinWorkers 3, a quit pauses the
// run: the completed clock is flushed but nobody is released, and no
// ErrStalled (no tick could end the wait: only a join can) — until a new
// worker joins; then the held releases and the joiner go together.
func TestMembership_PauseBelowMinimum(t *testing.T) {
	for _, p := range []epsp.Policy{epsp.NewBSP(), epsp.NewSSP(1), epsp.NewASP()} {
		t.Run(p.Name(), func(t *testing.T) {
			c := elasticCoord(t, epsp.Config{NumWorkers: 3, MaxWorkers: 4, MinWorkers: 3}, p)
			step(t, c, quit(2))
			if !c.Paused() {
				t.Fatal("not paused with 2 of at least 3 workers")
			}
			var rel []epsp.WorkerID
			var flushes int
			for w := range 2 {
				out := step(t, c, clockEvent(w, 0)) // no ErrStalled
				rel = append(rel, out.Release...)
				flushes += len(out.Flush)
			}
			if len(rel) != 0 {
				t.Fatalf("released %v while paused", rel)
			}
			if _, ok := p.(*epsp.BSP); ok && flushes != 1 {
				t.Errorf("BSP flushed %d clocks while paused, want the completed one", flushes)
			}
			if out := step(t, c, epsp.Event{Kind: epsp.EventTick}); len(out.Release) != 0 {
				t.Fatalf("tick released %v while paused", out.Release)
			}
			out := step(t, c, join(3))
			if c.Paused() || !slices.Equal(sorted(out.Release), ids(0, 1, 3)) {
				t.Fatalf("after the join: paused %v, released %v, want 0, 1, 3", c.Paused(), out.Release)
			}
			if v := c.View(); v.Clock(3) != 1 || v.Clock(0) != 1 {
				t.Errorf("clocks after resume: joiner %d, worker 0 %d; want 1, 1", v.Clock(3), v.Clock(0))
			}
		})
	}
}

// TestMembership_FinishedWorkerEndsMinimum: a worker that leaves having
// finished its schedule does not pause the others (the run is ending).
func TestMembership_FinishedWorkerEndsMinimum(t *testing.T) {
	c := elasticCoord(t, epsp.Config{NumWorkers: 2, MinWorkers: 2}, epsp.NewASP())
	step(t, c, finish(1))
	if c.Paused() {
		t.Fatal("paused after a worker finished")
	}
	if out := step(t, c, clockEvent(0, 0)); !slices.Equal(out.Release, ids(0)) {
		t.Fatalf("release %v, want [0]", out.Release)
	}
}

// TestMembership_RejoinCooldown: a worker that quit is refused before
// RejoinAfter with ErrRejoinTooSoon (state unchanged) and admitted after;
// joins of a member, of an unknown slot, and under a policy that does
// not accept joins are refused.
func TestMembership_RejoinCooldown(t *testing.T) {
	c := elasticCoord(t, epsp.Config{NumWorkers: 3, RejoinAfter: time.Second}, epsp.NewBSP())
	if _, err := c.Step(time.Second, quit(2)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Step(1500*time.Millisecond, join(2))
	if !errors.Is(err, epsp.ErrRejoinTooSoon) || !errors.Is(err, epsp.ErrBadEvent) {
		t.Fatalf("rejoin after 500 ms: %v, want ErrRejoinTooSoon", err)
	}
	if m := c.Members(); !slices.Equal(m, ids(0, 1)) || c.Stats().Joined != 0 {
		t.Fatalf("refused rejoin changed the members: %v", m)
	}
	if _, err := c.Step(2100*time.Millisecond, join(2)); err != nil {
		t.Fatalf("rejoin after the cooldown: %v", err)
	}
	if m := c.Members(); !slices.Equal(m, ids(0, 1, 2)) {
		t.Fatalf("members %v after the rejoin", m)
	}
	for _, tc := range []struct {
		name string
		w    int
	}{{"member", 1}, {"no such slot", 3}} {
		if _, err := c.Step(3*time.Second, join(tc.w)); !errors.Is(err, epsp.ErrJoinRefused) {
			t.Errorf("join of a %s: %v, want ErrJoinRefused", tc.name, err)
		}
	}
	// A policy that does not accept joins: refused at NewCoordinator when
	// the config is elastic, and at the join otherwise.
	if _, err := epsp.NewCoordinator(epsp.Config{NumWorkers: 2, MaxWorkers: 3, Batch: 1}, &scripted{}); !errors.Is(err, epsp.ErrBadConfig) {
		t.Errorf("elastic config with a non-elastic policy: %v, want ErrBadConfig", err)
	}
	s := newCoord(t, 2, &scripted{})
	step(t, s, quit(1))
	if _, err := s.Step(0, join(1)); !errors.Is(err, epsp.ErrJoinRefused) {
		t.Errorf("join under a non-elastic policy: %v, want ErrJoinRefused", err)
	}
	for _, cfg := range []epsp.Config{
		{NumWorkers: 3, Batch: 1, MaxWorkers: 2},
		{NumWorkers: 3, Batch: 1, MinWorkers: 4},
		{NumWorkers: 3, Batch: 1, MinWorkers: -1},
		{NumWorkers: 3, Batch: 1, RejoinAfter: -time.Second},
	} {
		if err := cfg.Validate(); !errors.Is(err, epsp.ErrBadConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrBadConfig", cfg, err)
		}
	}
}

// TestASP_JoinReleasedAtOnce and SSP: a joiner starts at the join clock,
// ASP at once, SSP(s) when the gate lets it.
func TestASPSSP_Join(t *testing.T) {
	c := elasticCoord(t, epsp.Config{NumWorkers: 2, MaxWorkers: 3}, epsp.NewASP())
	step(t, c, clockEvent(0, 0))
	if out := step(t, c, join(2)); !slices.Equal(out.Release, ids(2)) || c.View().Clock(2) != 2 {
		t.Fatalf("ASP join: %+v at clock %d; want released into 2", out, c.View().Clock(2))
	}
	c = elasticCoord(t, epsp.Config{NumWorkers: 2, MaxWorkers: 3}, epsp.NewSSP(1))
	step(t, c, clockEvent(0, 0)) // worker 0 released into 1 (1 - 0 <= 1)
	out := step(t, c, join(2))   // joins at 2: 2 - min 0 > 1, held by the gate
	if len(out.Release) != 0 || c.View().Clock(2) != 2 {
		t.Fatalf("SSP(1) join: %+v at clock %d; want waiting at 2", out, c.View().Clock(2))
	}
	if out := step(t, c, clockEvent(1, 0)); !slices.Contains(out.Release, 2) {
		t.Fatalf("SSP(1): joiner not released once the minimum reached 1: %+v", out)
	}
}

// TestBSP_ElasticProperty: random joins, quits and clocks under BSP with
// 2..5 workers. Invariants: a worker is released into clock k only after
// clock k-1 is flushed; a flush of clock k comes only when every member
// released into k (and not departed) has clocked it; a joiner starts at
// JoinClock; the run reaches the last clock (no deadlock) whatever the
// membership did.
func TestBSP_ElasticProperty(t *testing.T) {
	const clocks = 12
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 7))
		c := elasticCoord(t, epsp.Config{NumWorkers: 2, MaxWorkers: 5}, epsp.NewBSP())
		running := map[int]int{0: 0, 1: 0} // computing worker → clock
		waiting := map[int]bool{}
		flushed := -1
		clocked := map[[2]int]bool{}
		released := map[int]map[int]bool{0: {0: true, 1: true}}
		apply := func(out epsp.Output) {
			for _, f := range out.Flush {
				if f.Clock != flushed+1 {
					t.Fatalf("seed %d: flush of %d after %d", seed, f.Clock, flushed)
				}
				for w := range released[f.Clock] {
					if !clocked[[2]int{w, f.Clock}] {
						t.Fatalf("seed %d: clock %d flushed before member %d clocked it", seed, f.Clock, w)
					}
				}
				flushed = f.Clock
			}
			for _, w := range out.Release {
				k := c.View().Clock(w)
				if k-1 > flushed {
					t.Fatalf("seed %d: worker %d released into %d, flushed %d", seed, w, k, flushed)
				}
				if released[k] == nil {
					released[k] = map[int]bool{}
				}
				released[k][int(w)] = true
				running[int(w)] = k
				delete(waiting, int(w))
			}
		}
		for steps := 0; flushed < clocks-1; steps++ {

			if steps > 10000 {
				t.Fatalf("seed %d: no progress (flushed %d)", seed, flushed)
			}
			members := len(c.Members())
			switch r := rng.IntN(10); {
			case r == 0 && members > 1: // quit a random member
				m := c.Members()
				w := int(m[rng.IntN(len(m))])
				out := step(t, c, quit(w))
				for k := range released {
					if !clocked[[2]int{w, k}] {
						delete(released[k], w) // departed: not waited for
					}
				}
				delete(running, w)
				delete(waiting, w)
				apply(out)
			case r == 1: // a free or departed slot joins
				var free []int
				for w := range 5 {
					if !c.View().(epsp.Membership).Member(epsp.WorkerID(w)) {
						free = append(free, w)
					}
				}
				if len(free) == 0 {
					continue
				}
				w := free[rng.IntN(len(free))]
				jc := c.JoinClock()
				out := step(t, c, join(w))
				if c.View().Clock(epsp.WorkerID(w)) != jc {
					t.Fatalf("seed %d: joiner at %d, JoinClock was %d", seed, c.View().Clock(epsp.WorkerID(w)), jc)
				}
				waiting[w] = true
				apply(out)
			default: // a computing worker clocks
				var ws []int
				for w := range running {
					if !waiting[w] {
						ws = append(ws, w)
					}
				}
				if len(ws) == 0 {
					continue
				}
				slices.Sort(ws)
				w := ws[rng.IntN(len(ws))]
				k := running[w]
				clocked[[2]int{w, k}] = true
				waiting[w] = true
				apply(step(t, c, clockEvent(w, k)))
			}
		}
	}
}

// TestMembership_FreeSlotIsOutside: a slot that has not joined cannot
// clock, leave or push its own batch, and counts in no barrier.
func TestMembership_FreeSlotIsOutside(t *testing.T) {
	c := elasticCoord(t, epsp.Config{NumWorkers: 2, MaxWorkers: 3}, epsp.NewBSP())
	if _, err := c.Step(0, clockEvent(2, 0)); !errors.Is(err, epsp.ErrBadEvent) {
		t.Errorf("clock of a free slot: %v, want ErrBadEvent", err)
	}
	if _, err := c.Step(0, quit(2)); !errors.Is(err, epsp.ErrBadEvent) {
		t.Errorf("leave of a free slot: %v, want ErrBadEvent", err)
	}
	if _, err := c.Admit(0, epsp.Push{Worker: 2, Owner: 2, Samples: 1, BatchSamples: 1}); !errors.Is(err, epsp.ErrBadPush) {
		t.Errorf("push of a free slot: %v, want ErrBadPush", err)
	}
	step(t, c, clockEvent(0, 0))
	if out := step(t, c, clockEvent(1, 0)); len(out.Flush) != 1 || len(out.Release) != 2 {
		t.Errorf("the barrier waits for a free slot: %+v", out)
	}
	if m := c.Members(); !slices.Equal(m, ids(0, 1)) {
		t.Errorf("members %v", m)
	}
}
