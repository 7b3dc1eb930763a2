package coflow

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// AssignClasses gives every flow of every coflow a data class drawn from the
// declared distribution weights (class c with probability
// weights[c]/Σweights), one draw per coflow in input order: a coflow is
// one job's shuffle, which moves one kind of data. The draws come from a
// PCG seeded with seed, so the same inputs give the same classes. Since the
// class is drawn independently of size, class c's expected share of the
// bytes is its weight; the realised share of a trace dominated by a few
// large coflows can differ a lot (ClassBytes reports it).
func AssignClasses(cfs []Coflow, weights []float64, seed uint64) error {
	var sum float64
	for c, w := range weights {
		if !(w >= 0) || math.IsInf(w, 0) {
			return fmt.Errorf("%w: class %d weight %v must be finite and non-negative", ErrInvalidConfig, c, w)
		}
		sum += w
	}
	if !(sum > 0) {
		return fmt.Errorf("%w: class weights sum to %v", ErrInvalidConfig, sum)
	}
	rng := rand.New(rand.NewPCG(seed, 0x636c6173))
	for i := range cfs {
		u := rng.Float64() * sum
		c := len(weights) - 1
		for k, w := range weights {
			if u < w {
				c = k
				break
			}
			u -= w
		}
		for c > 0 && weights[c] == 0 { // rounding at the top end
			c--
		}
		for j := range cfs[i].Flows {
			cfs[i].Flows[j].Class = c
		}
	}
	return nil
}

// ClassBytes returns the raw bytes of each class 0..n-1 in cfs (classes ≥ n
// are not counted).
func ClassBytes(cfs []Coflow, n int) []float64 {
	out := make([]float64, n)
	for i := range cfs {
		for _, f := range cfs[i].Flows {
			if f.Class >= 0 && f.Class < n {
				out[f.Class] += f.Bytes
			}
		}
	}
	return out
}
