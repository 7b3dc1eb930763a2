package study

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// ErrInput reports unusable input (mismatched lengths, no values, a level
// outside (0, 1), NaN).
var ErrInput = errors.New("study: invalid input")

// Reduction is the paired reduction (base − cand)/base of one seed, with
// the limits for +Inf times described in the package doc. Times must be
// positive or +Inf; anything else gives NaN.
func Reduction(base, cand float64) float64 {
	switch {
	case math.IsNaN(base) || math.IsNaN(cand) || base <= 0 || cand <= 0:
		return math.NaN()
	case math.IsInf(base, 1) && math.IsInf(cand, 1):
		return 0
	case math.IsInf(base, 1):
		return 1
	case math.IsInf(cand, 1):
		return math.Inf(-1)
	}
	return (base - cand) / base
}

// Reductions returns the paired reductions of two series indexed by seed.
func Reductions(base, cand []float64) ([]float64, error) {
	if len(base) != len(cand) || len(base) == 0 {
		return nil, fmt.Errorf("%w: %d baseline and %d candidate times", ErrInput, len(base), len(cand))
	}
	r := make([]float64, len(base))
	for i := range base {
		r[i] = Reduction(base[i], cand[i])
		if math.IsNaN(r[i]) {
			return nil, fmt.Errorf("%w: times %v and %v of pair %d", ErrInput, base[i], cand[i], i)
		}
	}
	return r, nil
}

// Median is the median of xs (±Inf allowed and ordered as usual): the
// middle value for an odd count, the mean of the two middle values for an
// even count (which is ±Inf if one of them is and the other is finite or of
// the same sign). It returns NaN for no values.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return medianSorted(s)
}

func medianSorted(s []float64) float64 {
	n := len(s)
	if n%2 == 1 || s[n/2-1] == s[n/2] {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// BootstrapConfig configures [BootstrapMedian].
type BootstrapConfig struct {
	// Resamples is B, the number of bootstrap resamples (> 0).
	Resamples int
	// Level is the confidence level in (0, 1), e.g. 0.95.
	Level float64
	// Seed seeds the PCG generator that draws the resamples.
	Seed uint64
}

// DefaultBootstrapConfig is the protocol's setting: 10000 resamples, 95 %,
// seed 20261201.
func DefaultBootstrapConfig() BootstrapConfig {
	return BootstrapConfig{Resamples: 10000, Level: 0.95, Seed: 20261201}
}

// Validate checks the configuration.
func (c BootstrapConfig) Validate() error {
	if c.Resamples <= 0 || !(c.Level > 0 && c.Level < 1) {
		return fmt.Errorf("%w: bootstrap %d resamples at level %v", ErrInput, c.Resamples, c.Level)
	}
	return nil
}

// Interval is a median with its confidence interval.
type Interval struct {
	Median, Lo, Hi float64
	N              int // number of paired values
}

// BootstrapMedian returns the median of xs and the percentile-bootstrap
// interval of the median (package doc). The quantile q of the B sorted
// resampled medians m_(1) ≤ … ≤ m_(B) is m_(⌈q·B⌉) (at least m_(1)).
func BootstrapMedian(xs []float64, cfg BootstrapConfig) (Interval, error) {
	if err := cfg.Validate(); err != nil {
		return Interval{}, err
	}
	if len(xs) == 0 {
		return Interval{}, fmt.Errorf("%w: no values", ErrInput)
	}
	for _, x := range xs {
		if math.IsNaN(x) {
			return Interval{}, fmt.Errorf("%w: NaN value", ErrInput)
		}
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xb007))
	n := len(xs)
	meds := make([]float64, cfg.Resamples)
	res := make([]float64, n)
	for b := range meds {
		for i := range res {
			res[i] = xs[rng.IntN(n)]
		}
		slices.Sort(res)
		meds[b] = medianSorted(res)
	}
	slices.Sort(meds)
	alpha := 1 - cfg.Level
	q := func(p float64) float64 {
		k := int(math.Ceil(p*float64(len(meds)))) - 1
		return meds[min(max(k, 0), len(meds)-1)]
	}
	return Interval{Median: Median(xs), Lo: q(alpha / 2), Hi: q(1 - alpha/2), N: n}, nil
}

// Verdict is what a row of the study may claim.
type Verdict int

// Verdicts: a win only where the interval lies above zero, a loss only
// where it lies below, a tie otherwise.
const (
	Tie Verdict = iota
	Win
	Loss
)

// String implements fmt.Stringer.
func (v Verdict) String() string {
	switch v {
	case Win:
		return "win"
	case Loss:
		return "loss"
	}
	return "tie"
}

// Judge gives the verdict of an interval of reductions: Win if Lo > 0,
// Loss if Hi < 0, Tie otherwise.
func Judge(iv Interval) Verdict {
	switch {
	case iv.Lo > 0:
		return Win
	case iv.Hi < 0:
		return Loss
	}
	return Tie
}

// Compare pairs two time series by seed and returns the bootstrap interval
// of the median paired reduction and its verdict.
func Compare(base, cand []float64, cfg BootstrapConfig) (Interval, Verdict, error) {
	r, err := Reductions(base, cand)
	if err != nil {
		return Interval{}, Tie, err
	}
	iv, err := BootstrapMedian(r, cfg)
	if err != nil {
		return Interval{}, Tie, err
	}
	return iv, Judge(iv), nil
}
