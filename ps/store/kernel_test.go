package store

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/falconml/falcon/ps/internal/codec"
)

// TestStore_OverflowRefusedSlices: the float32-slice entry points (the
// simulator's) refuse the same arithmetic as the wire's: an apply whose
// scale is ±Inf or whose step overflows, an accumulate weight beyond
// float32, a buffer sum that overflows; each legitimate twin passes.
func TestStore_OverflowRefusedSlices(t *testing.T) {
	s, err := New(Config{Optimizer: SGD{LR: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InitValues(ovKeys, ovLens, g2(1)); err != nil {
		t.Fatal(err)
	}
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		name      string
		bad, good func() error
	}{
		{"apply scale +Inf", func() error { return s.Apply(ovKeys, nil, g2(0), inf) }, func() error { return s.Apply(ovKeys, nil, g2(0), 1) }},
		{"apply step overflows", func() error { return s.Apply(ovKeys, nil, g2(3e38), 1e3) }, func() error { return s.Apply(ovKeys, nil, g2(3e38), 1e-3) }},
		{"accumulate weight 1e300", func() error { return s.Accumulate(0, ovKeys, nil, g2(1), 1e300) }, func() error { return s.Accumulate(0, ovKeys, nil, g2(1), 1) }},
		{"accumulate sum overflows", func() error { return s.Accumulate(0, ovKeys, nil, g2(3e38), 2) }, func() error { return s.Accumulate(0, ovKeys, nil, g2(3e38), 1) }},
	} {
		vals, steps, pend := append([]float32(nil), s.vals...), s.Steps(2), s.Pending()
		var sums []float32
		if b := s.bufs[0]; b != nil {
			sums = append(sums, b.sum...)
		}
		if err := c.bad(); !errors.Is(err, ErrNonFinite) {
			t.Errorf("%s: err %v, want ErrNonFinite", c.name, err)
		}
		if b := s.bufs[0]; !equalBits(vals, s.vals) || s.Steps(2) != steps || len(s.Pending()) != len(pend) || (b != nil && !equalBits(sums, b.sum)) {
			t.Errorf("%s: the refused request changed the store", c.name)
		}
		if err := c.good(); err != nil {
			t.Errorf("%s: legitimate twin: %v", c.name, err)
		}
	}
}

// TestMaxHi_Kernel: the SSE maxHi agrees with the portable one and the
// byte form on every length up to 70, every offset of a largest value,
// and random bit patterns; hiBound bounds every finite value it covers.
func TestMaxHi_Kernel(t *testing.T) {
	rng := uint64(1)
	next := func() uint32 { rng = rng*6364136223846793005 + 1442695040888963407; return uint32(rng >> 32) }
	for n := range 71 {
		v := make([]float32, n+1)[1:]
		for at := range n {
			for _, b := range []uint32{0x7f7fffff, 0xff7fffff, 0x3f800000, 0x80000001, 0x7f800000, 0xffc00000} {
				for i := range v {
					v[i] = math.Float32frombits(next() & 0x3fffffff) // below 2
				}
				v[at] = math.Float32frombits(b)
				want := maxHiGo(v)
				if got := maxHi(v); got != want {
					t.Fatalf("n=%d at=%d bits=%#x: kernel %#x, want %#x", n, at, b, got, want)
				}
				if got := maxHiBytes(codec.AsBytes(v)); got != want {
					t.Fatalf("n=%d at=%d bits=%#x: bytes %#x, want %#x", n, at, b, got, want)
				}
				if want < hiNonFinite {
					for _, x := range v {
						if !(math.Abs(float64(x)) < hiBound(want)) {
							t.Fatalf("|%v| not below hiBound %v", x, hiBound(want))
						}
					}
				}
			}
		}
	}
}

// TestStepBound_Sound: for each optimizer with a bound, random values,
// states and gradients at or near their bounds (magnitudes spread from
// 1e-30 to float32's maximum) are stepped in float32, and whenever the
// bound passes, every result is finite and within the bound it gives. A
// bound that missed a rounding or an intermediate would let an overflow
// through.
func TestStepBound_Sound(t *testing.T) {
	rng := uint64(7)
	u := func() float64 {
		rng = rng*6364136223846793005 + 1442695040888963407
		return float64(rng>>11) / (1 << 53)
	}
	// mag: a magnitude up to ≈ 4e38, some past float32's range; at: a
	// float32 of magnitude at most b, often exactly at it.
	mag := func() float64 { return math.Pow(10, -30+u()*68.6) }
	at := func(b float64) float32 {
		x := float32(b)
		if float64(x) > b || math.IsInf(float64(x), 0) {
			x = math.Nextafter32(x, 0)
		}
		if u() < 0.5 {
			x *= float32(u())
		}
		if u() < 0.5 {
			x = -x
		}
		return x
	}
	passed := 0
	for _, opt := range []Optimizer{SGD{LR: 0.01}, SGD{LR: 3}, Momentum{LR: 0.1, Mu: 0.9}, Momentum{LR: 2, Mu: 0.99}, Adam{LR: 0.001}, Adam{LR: 0.5, Beta1: 0.5, Beta2: 0.6, Eps: 1e-3}} {
		bd := opt.(bounder)
		for range 20000 {
			m := mags{mag(), mag(), mag()}
			g := mag()
			scale := float32(math.Pow(10, -5+u()*10))
			step := int64(1 + u()*5)
			sb, ok := bd.stepBound(scale)
			if !ok {
				continue
			}
			next, ok := sb.next(m, g)
			if !ok {
				continue
			}
			passed++
			const n = 8
			w, gs := make([]float32, n), make([]float32, n)
			st := [][]float32{make([]float32, n), make([]float32, n)}
			for i := range n {
				w[i], gs[i] = at(m[0]), at(g)
				st[0][i], st[1][i] = at(m[1]), float32(math.Abs(float64(at(m[2]))))
			}
			opt.Update(w, gs, scale, st[:opt.Slots()], step)
			for i := range n {
				got := []float32{w[i], st[0][i], st[1][i]}
				for q := range 1 + opt.Slots() {
					if x := math.Abs(float64(got[q])); !(x <= next[q]) {
						t.Fatalf("%s: bounds %v, g %v, scale %v, step %d: result %d[%d] = %v beyond its bound %v", opt.Name(), m, g, scale, step, q, i, got[q], next[q])
					}
				}
			}
		}
	}
	if passed < 10000 {
		t.Fatalf("only %d bounds passed: the test checks little", passed)
	}
}

// Two keys per request: key 1 always benign, key 2 carries the case, so a
// refusal must also leave key 1 alone (no partial update).
var ovKeys, ovLens = []uint64{1, 2}, []int{3, 5}

// g2 is a gradient whose key-1 part is small and whose key-2 part is x.
func g2(x float32) []float32 { return []float32{0.5, -0.5, 1, x, x, x, 0, x} }

func equalBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestStore_NonFiniteRefused: a NaN or Inf gradient or initial value is
// refused with ErrNonFinite by every store entry point and leaves the
// values, the optimizer state, the step counts and the buffers unchanged.
func TestStore_NonFiniteRefused(t *testing.T) {
	const n = 1031
	for _, opt := range []Optimizer{SGD{LR: 0.5}, Momentum{LR: 0.1, Mu: 0.9}, Adam{LR: 0.01}} {
		for name, g := range nonFiniteCases(n) {
			s, err := New(Config{Optimizer: opt})
			if err != nil {
				t.Fatal(err)
			}
			keys, lens := []uint64{3, 9}, []int{n - 31, 31}
			init := make([]float32, n)
			for i := range init {
				init[i] = float32(i) / n
			}
			if err := s.InitValues(keys, lens, init); err != nil {
				t.Fatal(err)
			}
			ok := make([]float32, n)
			for i := range ok {
				ok[i] = 1
			}
			// one good step so that the optimizer state is not zero
			if err := s.Apply(keys, lens, ok, 1); err != nil {
				t.Fatal(err)
			}
			before := slices.Clone(s.vals)
			state := slices.Clone(s.state)
			steps := []int64{s.Steps(3), s.Steps(9)}
			gb := codec.AsBytes(g)
			calls := map[string]func() error{
				"Apply":           func() error { return s.Apply(keys, lens, g, 1) },
				"ApplyBytes":      func() error { return s.ApplyBytes(keys, lens, gb, 1) },
				"Accumulate":      func() error { return s.Accumulate(0, keys, lens, g, 2) },
				"AccumulateBytes": func() error { return s.AccumulateBytes(0, keys, lens, gb, 2) },
				"InitValues":      func() error { return s.InitValues([]uint64{20, 21}, []int{n - 31, 31}, g) },
			}
			for call, f := range calls {
				if err := f(); !errors.Is(err, ErrNonFinite) {
					t.Fatalf("%s %s %s: err %v, want ErrNonFinite", opt.Name(), name, call, err)
				}
			}
			if !slices.Equal(f32Bits(before), f32Bits(s.vals)) || !slices.Equal(f32Bits(state), f32Bits(s.state)) {
				t.Fatalf("%s %s: values or state changed by a refused request", opt.Name(), name)
			}
			if s.Steps(3) != steps[0] || s.Steps(9) != steps[1] || s.NumKeys() != 2 || len(s.Pending()) != 0 {
				t.Fatalf("%s %s: steps %d,%d keys %d pending %v", opt.Name(), name, s.Steps(3), s.Steps(9), s.NumKeys(), s.Pending())
			}
		}
	}
}

// TestAnyNonFinite_Kernel: the SSE kernel agrees with the per-value test
// on every length up to 70 and every position of one NaN, Inf or
// largest-finite value, and on random bit patterns.
func TestAnyNonFinite_Kernel(t *testing.T) {
	specials := []uint32{0x7fc00000, 0x7f800000, 0xff800000, 0x7f800001, 0xffffffff, 0x7f7fffff, 0xff7fffff, 0x00000001}
	for n := range 71 {
		v := make([]float32, n+1)[1:] // misaligned by one value for the kernel's unaligned loads
		for at := range n {
			for _, b := range specials {
				clear(v)
				v[at] = math.Float32frombits(b)
				want := math.IsNaN(float64(v[at])) || math.IsInf(float64(v[at]), 0)
				if got := anyNonFinite(v); got != want {
					t.Fatalf("n=%d at=%d bits=%#x: kernel %v, want %v", n, at, b, got, want)
				}
				if got := anyNonFiniteGo(v); got != want {
					t.Fatalf("n=%d at=%d bits=%#x: portable %v, want %v", n, at, b, got, want)
				}
				if got := anyNonFiniteBytes(codec.AsBytes(v)[0:]); got != want {
					t.Fatalf("n=%d at=%d bits=%#x: bytes %v, want %v", n, at, b, got, want)
				}
			}
		}
	}
}

// nonFiniteCases are gradients with one NaN or ±Inf at positions that hit
// the kernels' 16-lane, 4-lane and scalar tails.
func nonFiniteCases(n int) map[string][]float32 {
	out := map[string][]float32{}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for _, at := range []int{0, 5, 17, n - 3, n - 1} {
			g := make([]float32, n)
			for i := range g {
				g[i] = float32(i%7) - 3
			}
			g[at] = bad
			out[fmtCase(bad, at)] = g
		}
	}
	return out
}

func fmtCase(v float32, at int) string { return fmt.Sprintf("%v@%d", v, at) }

func f32Bits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}
