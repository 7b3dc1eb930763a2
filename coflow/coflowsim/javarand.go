package coflowsim

// javaRand reproduces java.util.Random bit for bit: a 48-bit linear
// congruential generator whose algorithm is fixed by the Java API
// documentation (seed scrambling with 0x5DEECE66D, next(bits) and
// nextDouble built from 26+27 bits). coflowsim draws one nextDouble per
// coflow, in trace order, from a generator seeded with 17.
type javaRand struct{ seed uint64 }

const (
	javaMultiplier = 0x5DEECE66D
	javaAddend     = 0xB
	javaMask       = (1 << 48) - 1
)

func newJavaRand(seed int64) *javaRand {
	return &javaRand{seed: (uint64(seed) ^ javaMultiplier) & javaMask}
}

// next returns the top bits of the advanced 48-bit state as a Java int.
func (r *javaRand) next(bits uint) int32 {
	r.seed = (r.seed*javaMultiplier + javaAddend) & javaMask
	return int32(int64(r.seed) >> (48 - bits))
}

// nextDouble returns ((next(26) << 27) + next(27)) * 2^-53, a value in [0, 1).
func (r *javaRand) nextDouble() float64 {
	hi := int64(r.next(26))
	lo := int64(r.next(27))
	return float64(hi<<27+lo) * (1.0 / (1 << 53))
}
