package store

import (
	"math"

	"github.com/falconml/falcon/ps/internal/codec"
)

// Initializer produces the initial value of a key. Init fills vals with the
// elements off, off+1, … of key's value; the result for an element depends
// only on (key, element index), never on how the value is split, so a key
// split across servers initialises the same as an unsplit one.
type Initializer interface {
	Init(key uint64, off int, vals []float32)
}

// Zeros initialises every element to 0.
type Zeros struct{}

// Init fills vals with zeros.
func (Zeros) Init(_ uint64, _ int, vals []float32) { clear(vals) }

// Constant initialises every element to C.
type Constant struct{ C float32 }

// Init fills vals with C.
func (c Constant) Init(_ uint64, _ int, vals []float32) {
	for i := range vals {
		vals[i] = c.C
	}
}

// Uniform initialises each element to a pseudo-random value in [Lo, Hi)
// drawn from a counter-based generator: element i of key k gets
// Lo + (Hi−Lo)·u(Seed, k, i), where u is the top 24 bits of a SplitMix64
// hash of (Seed, k, i) scaled to [0, 1). Deterministic and split-invariant.
type Uniform struct {
	Lo, Hi float32
	Seed   uint64
}

// Init fills vals.
func (u Uniform) Init(key uint64, off int, vals []float32) {
	base := codec.Mix64(u.Seed ^ codec.Mix64(key))
	for i := range vals {
		h := codec.Mix64(base + uint64(off+i)*0x9e3779b97f4a7c15)
		f := float32(h>>40) / (1 << 24)
		vals[i] = u.Lo + (u.Hi-u.Lo)*f
	}
}

// Normal initialises each element to Mean + Std·z with z standard normal,
// from the same counter-based generator as Uniform (Box–Muller on two
// hashed uniforms).
type Normal struct {
	Mean, Std float32
	Seed      uint64
}

// Init fills vals.
func (n Normal) Init(key uint64, off int, vals []float32) {
	base := codec.Mix64(n.Seed ^ codec.Mix64(key) ^ 0x5bd1e995)
	for i := range vals {
		h := codec.Mix64(base + uint64(off+i)*0x9e3779b97f4a7c15)
		u1 := (float64(h>>40) + 1) / (1<<24 + 1) // (0,1]
		u2 := float64(h&(1<<24-1)) / (1 << 24)
		z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
		vals[i] = n.Mean + n.Std*float32(z)
	}
}
