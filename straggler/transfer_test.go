package straggler

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// Reference: baselines-params.md §1 (FlexRR reproduction): a helper steals
// 0.5 of the remaining samples from the tail if the helpee is ≤ 0.9·batch done.
func TestPlanner_TailFractionAndThreshold(t *testing.T) {
	p, _ := NewPlanner(DefaultTransferConfig())
	gs := []Giver{
		{Worker: 0, Clock: 2, Batch: 100, Cursor: 20, Speed: 10}, // 80 left, 8 s
		{Worker: 1, Clock: 2, Batch: 100, Cursor: 95, Speed: 10}, // 5 left < 10% of batch
		{Worker: 2, Clock: 2, Batch: 100, Cursor: 40, Speed: 50}, // 60 left, 1.2 s
	}
	got := p.Plan(gs, []Taker{{Worker: 3}, {Worker: 4}, {Worker: 5}})
	want := []Assignment{
		{ID: 1, From: 0, To: 3, Clock: 2, Lo: 60, Hi: 100}, // longest remaining time first
		{ID: 2, From: 2, To: 4, Clock: 2, Lo: 70, Hi: 100},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Plan = %v, want %v", got, want)
	}
	// Givers with a pending transfer and busy takers are skipped.
	if more := p.Plan(gs, []Taker{{Worker: 3}, {Worker: 5}}); len(more) != 0 {
		t.Fatalf("second Plan = %v, want none", more)
	}
	// Refusal returns the tail: worker 0 holds [0,100) again.
	if _, err := p.Resolve(1, false, 0, 0); err != nil {
		t.Fatal(err)
	}
	if end, _ := p.Held(0, 2); end != 100 {
		t.Fatalf("after refusal worker 0 holds [0,%d)", end)
	}
	// Partial acceptance [80,100) of [70,100) returns [70,80).
	if a, err := p.Resolve(2, true, 80, 100); err != nil || a.Lo != 80 {
		t.Fatalf("Resolve = %v, %v", a, err)
	}
	if end, _ := p.Held(2, 2); end != 80 {
		t.Fatalf("worker 2 holds [0,%d), want [0,80)", end)
	}
	if _, err := p.Resolve(2, true, 80, 100); !errors.Is(err, ErrUnknownTransfer) {
		t.Fatalf("double resolve: %v", err)
	}
}

func TestPlanner_ResolveRejectsBadRange(t *testing.T) {
	p, _ := NewPlanner(DefaultTransferConfig())
	a := p.Plan([]Giver{{Worker: 0, Batch: 10}}, []Taker{{Worker: 1}})
	if len(a) != 1 {
		t.Fatalf("Plan = %v", a)
	}
	for _, r := range [][2]int{{a[0].Lo - 1, a[0].Hi}, {a[0].Lo, a[0].Hi + 1}} {
		if _, err := p.Resolve(a[0].ID, true, r[0], r[1]); !errors.Is(err, ErrRange) {
			t.Errorf("Resolve %v: %v, want ErrRange", r, err)
		}
	}
}

// Reference: falcon.md §3 [reconstruction]: "claimed with a confirm/cancel
// handshake so that no sample is lost or done twice".
// Property: under random interleavings of progress, planning, acceptance,
// partial acceptance and refusal, every sample of every (worker, clock) is
// held by exactly one worker, and each worker processes exactly what it
// holds.
func TestPlanner_ConservesSamples(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 99))
		cfg := DefaultTransferConfig()
		cfg.Proportional = seed%2 == 0
		cfg.MinChunk = 1 + rng.IntN(3)
		p, _ := NewPlanner(cfg)
		const n = 5
		batch := make([]int, n)
		cursor := make([]int, n) // next own index each worker will process
		for w := range batch {
			batch[w] = 1 + rng.IntN(64)
		}
		owner := func(w int) int { // what the owner holds
			if e, ok := p.Held(w, 0); ok {
				return e
			}
			return batch[w]
		}
		for range 60 {
			switch rng.IntN(3) {
			case 0: // progress: the owner advances within what it holds
				w := rng.IntN(n)
				cursor[w] = min(cursor[w]+rng.IntN(8), owner(w))
			case 1:
				var gs []Giver
				var ts []Taker
				for w := range n {
					if rng.IntN(2) == 0 {
						gs = append(gs, Giver{Worker: w, Batch: batch[w], Cursor: cursor[w], Speed: 1 + rng.Float64()})
					} else {
						ts = append(ts, Taker{Worker: w, Speed: 1 + rng.Float64()})
					}
				}
				for _, a := range p.Plan(gs, ts) {
					if a.Lo < cursor[a.From] || a.Hi > batch[a.From] || a.Lo >= a.Hi {
						t.Fatalf("seed %d: bad assignment %+v (cursor %d)", seed, a, cursor[a.From])
					}
				}
			case 2: // the giver answers the oldest pending order
				pend := p.Pending()
				if len(pend) == 0 {
					continue
				}
				a := pend[0]
				switch {
				case cursor[a.From] > a.Lo && cursor[a.From] < a.Hi && rng.IntN(2) == 0:
					// partial: hand over what it has not started
					if _, err := p.Resolve(a.ID, true, cursor[a.From], a.Hi); err != nil {
						t.Fatal(err)
					}
				case cursor[a.From] > a.Lo:
					p.Resolve(a.ID, false, 0, 0)
				default:
					p.Resolve(a.ID, true, a.Lo, a.Hi)
				}
			}
			// Invariant: [0,End) ⊎ given == [0,Batch) for every worker.
			for w := range n {
				cover := make([]int, batch[w])
				for i := range owner(w) {
					cover[i]++
				}
				for _, r := range p.Given(w, 0) {
					for i := r[0]; i < r[1]; i++ {
						cover[i]++
					}
				}
				for i, c := range cover {
					if c != 1 {
						t.Fatalf("seed %d: worker %d sample %d held %d times (end %d, given %v)", seed, w, i, c, owner(w), p.Given(w, 0))
					}
				}
				if cursor[w] > owner(w) {
					t.Fatalf("seed %d: worker %d processed %d beyond what it holds (%d)", seed, w, cursor[w], owner(w))
				}
			}
		}
	}
}

func TestTransferConfig_Validate(t *testing.T) {
	for _, c := range []TransferConfig{{Fraction: 1.5}, {MinChunk: -1}, {MinRemaining: 2}} {
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}
