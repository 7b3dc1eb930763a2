package ps

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Non-finite values. A NaN or ±Inf gradient, once applied, poisons a key
// for good (every later step keeps it NaN), so the Store refuses any push,
// accumulation or initial value that holds one with ErrNonFinite before it
// changes anything. The test is on the bits: an IEEE-754 single is NaN or
// ±Inf exactly when its 8 exponent bits are all ones,
//
//	bits & 0x7f800000 == 0x7f800000
//
// (IEEE 754-2008 §3.4), checked 16 lanes at a time on amd64 in a pass over
// the request's values just before they are applied (they are then in
// cache for the apply).

// expMask is the exponent field of an IEEE-754 single.
const expMask = 0x7f800000

// anyNonFiniteGo is the portable anyNonFinite: OR of the per-value tests,
// branch-free, four values per iteration.
func anyNonFiniteGo(v []float32) bool {
	var bad uint32
	for len(v) >= 4 {
		x := v[:4:4]
		bad |= isAllOnes(math.Float32bits(x[0])) | isAllOnes(math.Float32bits(x[1])) |
			isAllOnes(math.Float32bits(x[2])) | isAllOnes(math.Float32bits(x[3]))
		v = v[4:]
	}
	for _, x := range v {
		bad |= isAllOnes(math.Float32bits(x))
	}
	return bad != 0
}

// isAllOnes is 1 when the exponent of the single with bits b is all ones.
func isAllOnes(b uint32) uint32 {
	// (b & m) ^ m is 0 exactly for an all-ones exponent; x−1 then borrows
	// into bit 31, which x itself never has set (x ≤ m < 2^31).
	x := (b & expMask) ^ expMask
	return (x - 1) >> 31
}

// anyNonFiniteBytes is anyNonFinite over little-endian wire bytes
// (len(b) a multiple of 4).
func anyNonFiniteBytes(b []byte) bool {
	if v, ok := asF32s(b); ok {
		return anyNonFinite(v)
	}
	var bad uint32
	for i := 0; i+4 <= len(b); i += 4 {
		bad |= isAllOnes(binary.LittleEndian.Uint32(b[i:]))
	}
	return bad != 0
}

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
func (s *Store) checkFinite(keys []uint64, lens []int, vals []float32) error {
	if !s.finite || !anyNonFinite(vals) {
		return nil
	}
	return nonFiniteError(keys, s.lenOf(lens), len(vals), func(i int) uint32 { return math.Float32bits(vals[i]) })
}

// checkFiniteBytes is checkFinite over wire bytes.
func (s *Store) checkFiniteBytes(keys []uint64, lens []int, b []byte) error {
	if !s.finite || !anyNonFiniteBytes(b) {
		return nil
	}
	return nonFiniteError(keys, s.lenOf(lens), len(b)/4, func(i int) uint32 { return binary.LittleEndian.Uint32(b[4*i:]) })
}

func (s *Store) lenOf(lens []int) func(int) int {
	if lens != nil {
		return func(i int) int { return lens[i] }
	}
	return func(i int) int { return s.ents[s.idx[i]].n }
}
