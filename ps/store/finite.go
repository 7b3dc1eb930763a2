package store

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/falconml/falcon/ps/internal/codec"
)

// Non-finite values. A NaN or ±Inf, once stored, poisons a key for good
// (every later step keeps it NaN), so with the check on (the default) the
// Store refuses, with ErrNonFinite and before it changes anything, both
// a request that carries one and a request whose arithmetic would make
// one: a value, an optimizer state or an accumulation buffer that would
// overflow float32 (a finite scale of 1e300, two accumulated gradients
// near 3e38, a flush scale that pushes a step past float32's range).
//
// The test on the carried values is on the bits: an IEEE-754 single is
// NaN or ±Inf exactly when its 8 exponent bits are all ones,
//
//	bits & 0x7f800000 == 0x7f800000
//
// (IEEE 754-2008 §3.4), checked 16 lanes at a time on amd64 in a pass over
// the request's values just before they are applied (they are then in
// cache for the apply). The same pass returns h, the largest high
// half-word of their magnitudes, so that |g| < G = the single with bits
// (h+1)<<16 (hiBound) bounds every gradient of the request for free.
//
// The test on the results is check-then-apply with an overflow bound.
// Every key keeps upper bounds on the magnitude of its values and of each
// optimizer state slot (entry.mag), and every accumulation buffer row on
// the magnitude of its sum. Before a request changes anything, the bounds
// after it are computed in float64 from the bounds before it and G, one
// step of the optimizer's formula at a time, each operation rounded up
// by a factor 1+2^-20 (float32 rounds a result by at most 1+2^-24, float64
// the bound by at most 1+2^-53; FMA contraction rounds once instead of
// twice, which the same factor covers):
//
//	|fl(x·y)| ≤ X·Y·(1+2^-20),  |fl(x±y)| ≤ (X+Y)·(1+2^-20)
//
// A result whose bound, and every intermediate's, is at most
// math.MaxFloat32 is finite (rounding is monotone, so a float32 operation
// on values whose exact result is at most MaxFloat32 returns at most
// MaxFloat32). The bound is monotone in the bounds before the step, so it
// is checked once, at their largest over the request's keys, and key by
// key only when that fails. When it passes, the request is applied in
// place as before and each key's new bounds are stored: the check costs a
// few float64 operations per key and no pass over the values. When one does
// not pass (values near float32's range, bounds grown over many steps, an
// optimizer other than SGD, Momentum and Adam), the request is computed
// exactly into scratch memory the size of the request, every result is
// checked, and the scratch is copied in only when all are finite; the
// exact path also resets the bounds to the results' true magnitudes. Why
// not always two passes: a second pass over the values and state costs
// a second read of them per request (measured in the package doc,
// Performance); the bound costs nothing measurable, and the exact pass runs
// only for the rare request the bound cannot clear.

// expMask is the exponent field of an IEEE-754 single.
const expMask = 0x7f800000

// hiNonFinite is the smallest maxHi of a set holding a NaN or ±Inf.
const hiNonFinite = expMask >> 16

// anyNonFinite reports whether some value of v is NaN or ±Inf.
func anyNonFinite(v []float32) bool { return maxHi(v) >= hiNonFinite }

// hiBound is an upper bound on |x| for every x of a set whose maxHi is h
// (+Inf when h says non-finite or when x may be within 2^-7 relative of
// MaxFloat32: the bound then fails every check).
func hiBound(h uint32) float64 {
	return float64(math.Float32frombits((h + 1) << 16))
}

// maxHiGo is the portable maxHi: the largest (bits>>16)&0x7fff of v.
func maxHiGo(v []float32) uint32 {
	var m0, m1, m2, m3 uint32
	for len(v) >= 4 {
		x := v[:4:4]
		m0 = max(m0, math.Float32bits(x[0])&0x7fff0000)
		m1 = max(m1, math.Float32bits(x[1])&0x7fff0000)
		m2 = max(m2, math.Float32bits(x[2])&0x7fff0000)
		m3 = max(m3, math.Float32bits(x[3])&0x7fff0000)
		v = v[4:]
	}
	for _, x := range v {
		m0 = max(m0, math.Float32bits(x)&0x7fff0000)
	}
	return max(m0, m1, m2, m3) >> 16
}

// anyNonFiniteGo is the portable anyNonFinite.
func anyNonFiniteGo(v []float32) bool { return maxHiGo(v) >= hiNonFinite }

// isAllOnes is 1 when the exponent of the single with bits b is all ones.
func isAllOnes(b uint32) uint32 {
	// (b & m) ^ m is 0 exactly for an all-ones exponent; x−1 then borrows
	// into bit 31, which x itself never has set (x ≤ m < 2^31).
	x := (b & expMask) ^ expMask
	return (x - 1) >> 31
}

// maxHiBytes is maxHi over little-endian wire bytes (len(b) a multiple
// of 4).
func maxHiBytes(b []byte) uint32 {
	if v, ok := codec.View(b); ok {
		return maxHi(v)
	}
	var m uint32
	for i := 0; i+4 <= len(b); i += 4 {
		m = max(m, binary.LittleEndian.Uint32(b[i:])&0x7fff0000)
	}
	return m >> 16
}

// anyNonFiniteBytes is anyNonFinite over wire bytes.
func anyNonFiniteBytes(b []byte) bool { return maxHiBytes(b) >= hiNonFinite }

// nonFiniteError names the first non-finite value of a request whose
// values are those of keys back to back (key i has lenOf(i) of them; at
// reads value i): its key and position. It runs only after anyNonFinite
// found one, so its cost does not matter.
func nonFiniteError(keys []uint64, lenOf func(i int) int, n int, at func(i int) uint32) error {
	off := 0
	for k, key := range keys {
		l := lenOf(k)
		for i := range l {
			if off+i < n && isAllOnes(at(off+i)) != 0 {
				return fmt.Errorf("%w: key %d element %d is %v", ErrNonFinite, key, i, math.Float32frombits(at(off+i)))
			}
		}
		off += l
	}
	return ErrNonFinite
}

// checkFinite refuses vals, the values of keys back to back, if one of
// them is NaN or ±Inf; lens nil means the lengths resolved into s.idx.
// It returns the bound G on their magnitudes (hiBound), 0 when the check
// is off.
func (s *Store) checkFinite(keys []uint64, lens []int, vals []float32) (float64, error) {
	if !s.finite {
		return 0, nil
	}
	h := maxHi(vals)
	if h < hiNonFinite {
		return hiBound(h), nil
	}
	return 0, nonFiniteError(keys, s.lenOf(lens), len(vals), func(i int) uint32 { return math.Float32bits(vals[i]) })
}

// checkFiniteBytes is checkFinite over wire bytes.
func (s *Store) checkFiniteBytes(keys []uint64, lens []int, b []byte) (float64, error) {
	if !s.finite {
		return 0, nil
	}
	h := maxHiBytes(b)
	if h < hiNonFinite {
		return hiBound(h), nil
	}
	return 0, nonFiniteError(keys, s.lenOf(lens), len(b)/4, func(i int) uint32 { return binary.LittleEndian.Uint32(b[4*i:]) })
}

func (s *Store) lenOf(lens []int) func(int) int {
	if lens != nil {
		return func(i int) int { return lens[i] }
	}
	return func(i int) int { return s.ents[s.idx[i]].n }
}

// Overflow bounds (see the comment at the top of this file).

// maxF32 is float32's largest finite value.
const maxF32 = math.MaxFloat32

// up is the factor by which every bounded operation is rounded up.
const up = 1 + 0x1p-20

// magMax is the number of bounds an entry keeps: its values and up to two
// optimizer state slots (the built-in optimizers have at most two).
const magMax = 3

// mags are the bounds of one key: [0] on |w|, [1+q] on |state slot q|.
type mags [magMax]float64

// bounder is implemented by the optimizers whose step the Store can bound
// without computing it: stepBound returns the coefficients of one step's
// bound at scale (for every step number), false when it has none.
type bounder interface {
	stepBound(scale float32) (stepBound, bool)
}

// stepBound bounds one optimizer step, for every key, in a form costing a
// few float64 operations per key. With m the bounds before the step and g
// the bound on the key's gradients, the bounds after it are
//
//	s1 = (a1·m[1] + k1·g)·up
//	s2 = (a2·m[2] + k2·g²)·up
//	w  = (m[0] + c1·s1 + k0·g)·up
//
// and they hold when kg·g, w ≤ maxF32, s1 ≤ lim1 and s2 ≤ lim2 (the limits
// keep the intermediates that are not themselves stored, such as Adam's
// v·ic2 and a·m, finite). Every coefficient includes the rounding factors
// of the operations it stands for.
type stepBound struct {
	a1, a2, k0, k1, k2, kg, c1 float64
	lim1, lim2                 float64
}

// next returns the bounds after one step from m with gradients bounded by
// g, and whether they pass.
func (b *stepBound) next(m mags, g float64) (mags, bool) {
	s1 := (b.a1*m[1] + b.k1*g) * up
	s2 := (b.a2*m[2] + b.k2*g*g) * up
	w := (m[0] + b.c1*s1 + b.k0*g) * up
	return mags{w, s1, s2}, b.kg*g <= maxF32 && s1 <= b.lim1 && s2 <= b.lim2 && w <= maxF32
}

func abs32(x float32) float64 { return math.Abs(float64(x)) }

// stepBound: w ← w − a·g with a = fl(η·scale), as Update and the fused
// wire-bytes kernel compute it.
func (o SGD) stepBound(scale float32) (stepBound, bool) {
	a := abs32(o.LR * scale)
	return stepBound{k0: a * up, kg: 1, lim1: maxF32, lim2: maxF32}, a <= maxF32
}

// stepBound: v ← μ·v + scale·g; w ← w − η·v.
func (o Momentum) stepBound(scale float32) (stepBound, bool) {
	return stepBound{a1: abs32(o.Mu) * up, k1: abs32(scale) * up, c1: abs32(o.LR) * up,
		kg: abs32(scale) * up, lim1: maxF32, lim2: maxF32}, true
}

// stepBound: the steps of Update with its bias-corrected rate
// a_t = η/(1−β1^t) and ic2_t = 1/(1−β2^t) at their largest, t = 1 (both
// fall with t for β in [0, 1)), and the denominator √v̂+ε at least ε (so ε
// must be positive and β1, β2 in [0, 1) for a bound):
//
//	m' = β1·m + (1−β1)·s·g,  v' = β2·v + (1−β2)·(s·g)²,  |w'| ≤ |w| + a·m'/ε
//
// with v'·ic2 and a·m' kept finite through lim2 and lim1.
func (o Adam) stepBound(scale float32) (stepBound, bool) {
	b1, b2, eps := o.params()
	if !(eps > 0 && eps <= maxF32) || !(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1) {
		return stepBound{}, false
	}
	a := abs32(o.LR) / (1 - float64(b1)) * up * up
	ic2 := 1 / (1 - float64(b2)) * up * up
	s := abs32(scale)
	return stepBound{
		a1: float64(b1) * up, k1: float64(1-b1) * s * up * up,
		a2: float64(b2) * up, k2: float64(1-b2) * s * s * up * up * up,
		kg:   s * up * up,
		c1:   a * up * up / float64(eps),
		lim1: min(maxF32, maxF32/(a*up)),
		lim2: maxF32 / (ic2 * up),
	}, a <= maxF32 && ic2 <= maxF32
}

// exactMags returns the bounds of one key from its values w and state
// (slots slices of len(w), back to back), and false if one is NaN or ±Inf.
func exactMags(w, state []float32, slots int) (mags, bool) {
	var m mags
	h := maxHi(w)
	m[0] = hiBound(h)
	ok := h < hiNonFinite
	n := len(w)
	for q := range slots {
		hq := maxHi(state[q*n : (q+1)*n])
		if q+1 < magMax {
			m[q+1] = hiBound(hq)
		}
		ok = ok && hq < hiNonFinite
	}
	return m, ok
}
