package coflowsim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// naiveAdvance is the reference simulator's per-quantum loop.
func naiveAdvance(x, b, z float64, k int64) (float64, int64) {
	for i := int64(1); i <= k; i++ {
		d := b
		if d > x {
			d = x
		}
		x -= d
		if x <= z {
			return x, i
		}
	}
	return x, 0
}

func TestAdvanceMatchesSequentialSubtraction(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const z = 1e-3
	cases := [][3]float64{
		{1048576, 524288, 0}, {3 * 1048576, 1048576.0 / 3, 0}, {272 * 1048576, 16.76 * 1048576 / 128, 0},
		{1e9, 0.1, 0}, {5, 0.3, 0}, {1, 1e-17, 0}, {7.5e8, 3.3e5 + 0.5, 0},
		// b an odd multiple of half an ulp of x: rounding ties to even.
		{math.Ldexp(1, 30) + 12345, 3.5 * math.Ldexp(1, -22), 0},
		{math.Ldexp(1, 30) + 12346, 0.5 * math.Ldexp(1, -22), 0},
		{math.Ldexp(1, 30) + 3, 1.5 * math.Ldexp(1, -22), 0},
	}
	for i := 0; i < 3000; i++ {
		x := math.Ldexp(1+rng.Float64(), rng.IntN(40))
		if rng.IntN(3) == 0 {
			x = math.Round(x/1048576) * 1048576
		}
		b := x / (1 + rng.Float64()*float64(rng.IntN(5000)+1))
		if rng.IntN(4) == 0 {
			b = math.Ldexp(math.Round(b), 0)
		}
		cases = append(cases, [3]float64{x, b, 0})
	}
	for _, c := range cases {
		if c[0] <= z {
			continue // advance requires x > z, as the simulator only advances unfinished flows
		}
		for _, k := range []int64{1, 2, 7, 100, 5001, 1 << 40} {
			if k > 1<<20 && c[0]/c[1] > 1<<20 {
				continue // keep the naive loop short
			}
			gx, gn := advance(c[0], c[1], z, k)
			wx, wn := naiveAdvance(c[0], c[1], z, k)
			if gx != wx || gn != wn {
				t.Fatalf("advance(%v, %v, k=%d) = (%v, %d), sequential = (%v, %d)", c[0], c[1], k, gx, gn, wx, wn)
			}
		}
	}
}

// TestAccumulateMatchesSequentialAddition checks accumulate against the
// literal addition loop, for single rates (one flow) and vectors of them
// (a coflow's flows), including ties, binade crossings and a start at 0.
func TestAccumulateMatchesSequentialAddition(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	type tc struct {
		x  float64
		bs []float64
	}
	cases := []tc{
		{0, []float64{1048576.0 / 3}}, {0, []float64{0.1}}, {5, []float64{0.3}}, {1, []float64{1e-17}},
		{0, []float64{16.76 * 1048576 / 128}},
		{math.Ldexp(1, 30) + 12345, []float64{3.5 * math.Ldexp(1, -22)}},
		{math.Ldexp(1, 30) + 12346, []float64{0.5 * math.Ldexp(1, -22)}},
		{math.Ldexp(1, 30) + 3, []float64{1.5 * math.Ldexp(1, -22)}},
		{1e9, []float64{0.5 * math.Ldexp(1, -23)}},
		// 34 flows at 1/17 MiB per quantum: 10 MiB after 5 quanta, one
		// tie-free vector whose sums cross binades.
		{0, slices.Repeat([]float64{1048576.0 / 17}, 34)},
		{0, []float64{0, 1048576.0 / 3, 0, 7}},
	}
	for range 3000 {
		n := 1
		if rng.IntN(2) == 0 {
			n = rng.IntN(40) + 1
		}
		bs := make([]float64, n)
		for i := range bs {
			bs[i] = math.Ldexp(1+rng.Float64(), rng.IntN(30))
			if rng.IntN(3) == 0 {
				bs[i] = 1048576 / float64(rng.IntN(60)+1)
			}
			if rng.IntN(10) == 0 {
				bs[i] = 0
			}
		}
		x := 0.0
		if rng.IntN(2) == 0 {
			x = bs[0] * float64(rng.IntN(1000))
		}
		cases = append(cases, tc{x, bs})
	}
	for _, c := range cases {
		for _, k := range []int64{0, 1, 2, 7, 100, 5001, 20000} {
			want := c.x
			for range k {
				for _, b := range c.bs {
					want += b
				}
			}
			if got := accumulate(c.x, c.bs, k); got != want {
				t.Fatalf("accumulate(%v, %v, %d) = %v, sequential = %v", c.x, c.bs, k, got, want)
			}
		}
	}
}

// TestDrainMatchesLoop checks drain against the literal subtraction loop
// over random decrement vectors, including ties and binade crossings.
func TestDrainMatchesLoop(t *testing.T) {
	// A quantum that lands exactly on a power of two: the real result is
	// just below it, where the ulp halves.
	u := 0x1p-12
	if got, want := drain(0x1p40+10*u, []float64{2.3 * u}, 5), 0x1p40-u/2; got != want {
		t.Fatalf("drain across 2^40 = %v, want %v", got, want)
	}
	rng := rand.New(rand.NewPCG(3, 5))
	for trial := 0; trial < 6000; trial++ {
		acc := math.Ldexp(1+rng.Float64(), rng.IntN(40)+1)
		if trial%3 == 0 { // just above a power of two: the first quanta cross it
			acc = math.Ldexp(1+float64(rng.IntN(64))*0x1p-52, rng.IntN(40)+1)
		}
		bs := make([]float64, 1+rng.IntN(5))
		for i := range bs {
			switch rng.IntN(4) {
			case 0: // an exact multiple of a small power of two: ties happen
				bs[i] = math.Ldexp(float64(rng.IntN(1<<12)), rng.IntN(20)-10)
			case 1:
				bs[i] = 0
			default:
				bs[i] = acc * rng.Float64() / float64(50+rng.IntN(5000))
			}
		}
		k := int64(rng.IntN(3000))
		want := acc
		for q := int64(0); q < k; q++ {
			for _, b := range bs {
				want -= b
			}
		}
		if got := drain(acc, bs, k); got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("drain(%v, %v, %d) = %v, loop gives %v", acc, bs, k, got, want)
		}
	}
}

// TestAccumulateMovesMatchesLoop checks the incremental per-coflow count of
// bytes sent against the literal loop: k quanta in which every unfinished
// flow, in order, adds b, or its last bytes in the quantum it finishes.
func TestAccumulateMovesMatchesLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	s := &sim{}
	for trial := range 400 {
		nf := rng.IntN(60) + 1
		k := int64(rng.IntN(3000) + 1)
		moves := make([]flowMove, nf)
		for i := range moves {
			b := 1048576 / float64(rng.IntN(70)+1) * float64(rng.IntN(3)+1)
			if rng.IntN(5) == 0 {
				b = math.Ldexp(1+rng.Float64(), rng.IntN(25))
			}
			if rng.IntN(8) == 0 {
				b = 0
			}
			var n int64
			if rng.IntN(2) == 0 {
				n = int64(rng.IntN(int(k))) + 1
				if rng.IntN(3) == 0 && i > 0 && moves[i-1].n > 0 {
					n = moves[i-1].n // flows finishing together
				}
			}
			moves[i] = flowMove{b: b, last: b * rng.Float64(), n: n}
		}
		acc := 0.0
		if trial%3 == 0 {
			acc = math.Ldexp(1+rng.Float64(), rng.IntN(40))
		}
		want := acc
		for q := int64(1); q <= k; q++ {
			for _, m := range moves {
				switch {
				case m.n == q:
					want += m.last
				case m.n == 0 || m.n > q:
					want += m.b
				}
			}
		}
		if got := s.accumulateMoves(acc, moves, k); got != want {
			t.Fatalf("trial %d: accumulateMoves = %v, loop = %v (%d flows, k=%d)", trial, got, want, nf, k)
		}
	}
}
