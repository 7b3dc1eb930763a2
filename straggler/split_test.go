package straggler

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The analysis behind SplitAll (EPSP's doc): one straggler of speed 1 and
// 11 blocked pioneers of speed 4. Halving hands the first pioneer R/2
// (R/8 time units); the proportional split among all 12 finishes in R/45.
func TestPlanner_SplitAllProportional(t *testing.T) {
	p, _ := NewPlanner(TransferConfig{SplitAll: true})
	var ts []Taker
	for w := 1; w <= 11; w++ {
		ts = append(ts, Taker{Worker: w, Speed: 4})
	}
	got := p.Plan([]Giver{{Worker: 0, Clock: 3, Batch: 500, Cursor: 50, Speed: 1}}, ts)
	if len(got) != 11 {
		t.Fatalf("Plan = %v, want 11 pieces", got)
	}
	// R = 450, V = 45: each taker ⌊450·4/45⌋ = 40, the giver keeps 10.
	hi := 500
	for i, a := range got {
		if a.From != 0 || a.To != i+1 || a.Hi != hi || a.Samples() != 40 || a.Clock != 3 {
			t.Fatalf("piece %d = %+v, want [%d,%d) to worker %d", i, a, hi-40, hi, i+1)
		}
		if i > 0 && a.ID <= got[i-1].ID {
			t.Fatalf("pieces not ordered tail-first by id: %v", got)
		}
		hi = a.Lo
	}
	if hi != 60 {
		t.Fatalf("giver keeps [50,%d), want [50,60)", hi)
	}
	// Every piece takes 10 time units, the giver's 10 samples too: all
	// finish together, at R/45 of the straggler's time alone.
	if !p.GiverBusy(0) || len(p.Pending()) != 11 {
		t.Fatalf("pending %v", p.Pending())
	}
	// No second round while the first is unanswered.
	if more := p.Plan([]Giver{{Worker: 0, Clock: 3, Batch: 500, Cursor: 50, Speed: 1}}, []Taker{{Worker: 12, Speed: 4}}); len(more) != 0 {
		t.Fatalf("second Plan = %v", more)
	}
	// Answers tail-first: the top is accepted, the next trimmed, the
	// rest refused (the giver passed them): the giver holds one prefix.
	p.Resolve(got[0].ID, true, got[0].Lo, got[0].Hi)
	p.Resolve(got[1].ID, true, got[1].Lo+5, got[1].Hi)
	for _, a := range got[2:] {
		p.Resolve(a.ID, false, 0, 0)
	}
	if end, _ := p.Held(0, 3); end != got[1].Lo+5 {
		t.Fatalf("giver holds [0,%d), want [0,%d)", end, got[1].Lo+5)
	}
	if h, _ := p.HeldSpans(0, 3); len(h) != 1 {
		t.Fatalf("held spans %v, want one prefix", h)
	}
}

// Shares below MinChunk are skipped; a giver's only taker still gets at
// least MinChunk. Several givers share the takers by remaining time.
func TestPlanner_SplitAllMinChunkAndSeveralGivers(t *testing.T) {
	t.Run("min-chunk", func(t *testing.T) {
		p, _ := NewPlanner(TransferConfig{SplitAll: true, MinChunk: 8})
		// R = 40, giver speed 4, takers 4, 4, 1: the slow one's share would
		// be ⌊40·1/13⌋ = 3 < 8: skipped; the others get ⌊40·4/12⌋ = 13.
		got := p.Plan([]Giver{{Worker: 0, Batch: 40, Speed: 4}}, []Taker{{Worker: 3, Speed: 1}, {Worker: 1, Speed: 4}, {Worker: 2, Speed: 4}})
		want := []Assignment{{ID: 1, From: 0, To: 1, Lo: 27, Hi: 40}, {ID: 2, From: 0, To: 2, Lo: 14, Hi: 27}}
		if !slices.Equal(got, want) {
			t.Fatalf("Plan = %v, want %v", got, want)
		}
		p2, _ := NewPlanner(TransferConfig{SplitAll: true, MinChunk: 8})
		// Only taker, share ⌊40·1/41⌋ = 0: it still gets MinChunk.
		got = p2.Plan([]Giver{{Worker: 0, Batch: 40, Speed: 40}}, []Taker{{Worker: 1, Speed: 1}})
		if len(got) != 1 || got[0].Samples() != 8 || got[0].Hi != 40 {
			t.Fatalf("Plan = %v, want [32,40)", got)
		}
	})
	t.Run("two-givers", func(t *testing.T) {
		p, _ := NewPlanner(TransferConfig{SplitAll: true})
		gs := []Giver{
			{Worker: 0, Batch: 300, Speed: 1}, // 300 time units left
			{Worker: 1, Batch: 100, Speed: 1}, // 100
		}
		var ts []Taker
		for w := 2; w < 10; w++ {
			ts = append(ts, Taker{Worker: w, Speed: 1})
		}
		got := p.Plan(gs, ts)
		per := map[int]int{}
		for _, a := range got {
			per[a.From]++
		}
		// Greedy by projected finish: 300/(1+k0) vs 100/(1+k1) with
		// k0+k1 = 8 ends at k0 = 6, k1 = 2 (both ≈ 43 and 33).
		if per[0] != 6 || per[1] != 2 {
			t.Fatalf("takers per giver %v, want 6 and 2 (%v)", per, got)
		}
	})
	t.Run("allowed-pairs", func(t *testing.T) {
		p, _ := NewPlanner(TransferConfig{SplitAll: true})
		gs := []Giver{{Worker: 0, Batch: 100, Speed: 1}, {Worker: 1, Batch: 100, Speed: 1}}
		got := p.PlanFor(gs, []Taker{{Worker: 2, Speed: 1}, {Worker: 3, Speed: 1}}, func(g, t int) bool { return g == 1 })
		for _, a := range got {
			if a.From != 1 {
				t.Fatalf("piece %+v from a giver not allowed", a)
			}
		}
		if len(got) != 2 {
			t.Fatalf("Plan = %v, want two pieces of worker 1", got)
		}
	})
}

// Property (SplitAll; falcon.md §3 [reconstruction]: "claimed with a
// confirm/cancel handshake so that no sample is lost or done twice"):
// with several orders outstanding per giver, answered in random order
// with random acceptance, front trims and refusals within the contract
// (an accepted range starts at or after the ordered Lo and the giver's
// next unstarted own sample, and ends at the ordered Hi), every sample of
// every clock is assigned exactly once: to its owner, which processes it,
// or to exactly one taker. The planner's view of what each owner holds
// equals the owner's; orders never cover started or given samples. A
// runtime that answers tail-first (ps, ps/sim) keeps each owner's part
// one prefix; the random order here also exercises holes.
func TestPlanner_SplitAllConservesSamples(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		cfg := TransferConfig{SplitAll: true, MinChunk: 1 + rng.IntN(3), MinRemaining: 0.05 + 0.2*rng.Float64()}
		p, err := NewPlanner(cfg)
		if err != nil {
			t.Fatal(err)
		}
		tailFirst := seed%2 == 0
		const n, clocks = 6, 2
		type book struct {
			owner  []int // -1: the owner itself; else the taker
			cursor int   // next index the owner processes (skipping given)
		}
		books := map[[2]int]*book{}
		batch := map[[2]int]int{}
		for w := range n {
			for c := range clocks {
				b := 1 + rng.IntN(80)
				batch[[2]int{w, c}] = b
				o := make([]int, b)
				for i := range o {
					o[i] = -1
				}
				books[[2]int{w, c}] = &book{owner: o}
			}
		}
		skipGiven := func(bk *book) {
			for bk.cursor < len(bk.owner) && bk.owner[bk.cursor] != -1 {
				bk.cursor++
			}
		}
		for step := range 120 {
			switch rng.IntN(3) {
			case 0: // progress
				k := [2]int{rng.IntN(n), rng.IntN(clocks)}
				bk := books[k]
				for range rng.IntN(6) {
					skipGiven(bk)
					if bk.cursor < len(bk.owner) {
						bk.cursor++
					}
				}
				skipGiven(bk)
			case 1: // plan
				var gs []Giver
				var ts []Taker
				for w := range n {
					if rng.IntN(2) == 0 {
						c := rng.IntN(clocks)
						gs = append(gs, Giver{Worker: w, Clock: c, Batch: batch[[2]int{w, c}], Cursor: books[[2]int{w, c}].cursor, Speed: 0.5 + rng.Float64()})
					} else {
						ts = append(ts, Taker{Worker: w, Speed: 0.5 + rng.Float64()})
					}
				}
				for _, a := range p.Plan(gs, ts) {
					bk := books[[2]int{a.From, a.Clock}]
					if a.Lo < bk.cursor || a.Lo >= a.Hi || a.Hi > len(bk.owner) {
						t.Fatalf("seed %d step %d: bad order %+v (cursor %d)", seed, step, a, bk.cursor)
					}
					for i := a.Lo; i < a.Hi; i++ {
						if bk.owner[i] != -1 {
							t.Fatalf("seed %d step %d: order %+v covers sample %d given to %d", seed, step, a, i, bk.owner[i])
						}
					}
				}
			case 2: // answer one pending order
				pend := p.Pending()
				if len(pend) == 0 {
					continue
				}
				a := pend[rng.IntN(len(pend))]
				if tailFirst {
					// The oldest pending order of the same giver and clock
					// first (ps and ps/sim get them in that order).
					for _, b := range pend {
						if b.From == a.From && b.Clock == a.Clock {
							a = b
							break
						}
					}
				}
				bk := books[[2]int{a.From, a.Clock}]
				lo := max(a.Lo, bk.cursor)
				ok := lo < a.Hi && rng.IntN(4) != 0
				if tailFirst {
					// The runtimes' tail rule: a piece is taken only if
					// everything above it is given.
					for i := a.Hi; i < len(bk.owner); i++ {
						if bk.owner[i] == -1 {
							ok = false
						}
					}
				}
				if ok && rng.IntN(3) == 0 {
					lo += rng.IntN(a.Hi - lo) // a later front trim
				}
				if ok {
					for i := lo; i < a.Hi; i++ {
						bk.owner[i] = a.To
					}
					if _, err := p.Resolve(a.ID, true, lo, a.Hi); err != nil {
						t.Fatal(err)
					}
				} else if _, err := p.Resolve(a.ID, false, 0, 0); err != nil {
					t.Fatal(err)
				}
				skipGiven(bk)
			}
			// Exactly once, and the planner agrees with the owner.
			for k, bk := range books {
				cover := make([]int, len(bk.owner))
				h, ok := p.HeldSpans(k[0], k[1])
				if !ok {
					h = [][2]int{{0, len(bk.owner)}}
				}
				for _, s := range h {
					for i := s[0]; i < s[1]; i++ {
						cover[i]++
						if bk.owner[i] != -1 {
							t.Fatalf("seed %d step %d: %v sample %d held by the owner in the planner, by %d in fact", seed, step, k, i, bk.owner[i])
						}
					}
				}
				pendingOrAccepted := p.Given(k[0], k[1])
				for _, g := range pendingOrAccepted {
					for i := g[0]; i < g[1]; i++ {
						cover[i]++
					}
				}
				for i, c := range cover {
					if c != 1 {
						t.Fatalf("seed %d step %d: %v sample %d assigned %d times (held %v, given %v)", seed, step, k, i, c, h, pendingOrAccepted)
					}
				}
				if tailFirst && len(h) > 1 {
					// Holes only while a piece below a trimmed one is
					// still pending; none once nothing is pending.
					busy := false
					for _, a := range p.Pending() {
						if a.From == k[0] && a.Clock == k[1] {
							busy = true
						}
					}
					if !busy {
						t.Fatalf("seed %d step %d: %v owner holds %v, not one prefix, with nothing pending", seed, step, k, h)
					}
				}
			}
		}
	}
}
