package pscoflowlab

import (
	"math/rand/v2"
	"slices"
)

// Median returns the median of xs (the mean of the middle two for an even
// count); NaN-free input, at least one value.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// BootstrapMedian returns the median of xs and the 95 % percentile
// bootstrap interval of the median (resamples draws with replacement,
// from a generator seeded with seed, so the interval is reproducible).
func BootstrapMedian(xs []float64, resamples int, seed uint64) (med, lo, hi float64) {
	med = Median(xs)
	if len(xs) < 2 {
		return med, med, med
	}
	rng := rand.New(rand.NewPCG(seed, 0xb007))
	meds := make([]float64, resamples)
	buf := make([]float64, len(xs))
	for i := range meds {
		for k := range buf {
			buf[k] = xs[rng.IntN(len(xs))]
		}
		meds[i] = Median(buf)
	}
	slices.Sort(meds)
	return med, meds[int(0.025*float64(resamples))], meds[min(resamples-1, int(0.975*float64(resamples)))]
}
