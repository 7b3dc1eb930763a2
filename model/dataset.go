package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// Sentinel errors of package model.
var (
	// ErrShape reports inconsistent dataset or parameter dimensions.
	ErrShape = errors.New("model: shape mismatch")
	// ErrConfig reports an invalid configuration value.
	ErrConfig = errors.New("model: invalid config")
)

// Dataset is a dense classification dataset: N rows of D float32 features
// stored row-major in X, and N labels in [0, Classes).
type Dataset struct {
	X       []float32
	Y       []uint8
	N, D    int
	Classes int
}

// NewDataset checks the shapes and returns a dataset over x and y (not
// copied).
func NewDataset(x []float32, y []uint8, d, classes int) (*Dataset, error) {
	if d <= 0 || classes <= 1 || classes > 256 {
		return nil, fmt.Errorf("%w: d=%d classes=%d", ErrShape, d, classes)
	}
	if len(x) != len(y)*d {
		return nil, fmt.Errorf("%w: len(x)=%d, want len(y)*d=%d", ErrShape, len(x), len(y)*d)
	}
	for i, l := range y {
		if int(l) >= classes {
			return nil, fmt.Errorf("%w: label %d of row %d outside [0,%d)", ErrShape, l, i, classes)
		}
	}
	return &Dataset{X: x, Y: y, N: len(y), D: d, Classes: classes}, nil
}

// Row returns the features of row i (a sub-slice of X, not a copy).
func (d *Dataset) Row(i int) []float32 { return d.X[i*d.D : (i+1)*d.D] }

// Head returns a dataset sharing the first n rows (all rows if n <= 0 or
// n >= N).
func (d *Dataset) Head(n int) *Dataset {
	if n <= 0 || n >= d.N {
		return d
	}
	return &Dataset{X: d.X[:n*d.D], Y: d.Y[:n], N: n, D: d.D, Classes: d.Classes}
}

// Subset returns a new dataset holding copies of the rows idx, in that
// order. It panics if an index is out of range.
func (d *Dataset) Subset(idx []int) *Dataset {
	out := &Dataset{X: make([]float32, len(idx)*d.D), Y: make([]uint8, len(idx)), N: len(idx), D: d.D, Classes: d.Classes}
	for i, r := range idx {
		copy(out.X[i*d.D:(i+1)*d.D], d.Row(r))
		out.Y[i] = d.Y[r]
	}
	return out
}

// Sample returns a copy of n rows drawn without replacement by rng (all
// rows, shuffled, if n <= 0 or n >= N).
func (d *Dataset) Sample(n int, rng *rand.Rand) *Dataset {
	perm := rng.Perm(d.N)
	if n > 0 && n < d.N {
		perm = perm[:n]
	}
	return d.Subset(perm)
}

// Shuffled returns a copy of d with its rows permuted by rng.
func (d *Dataset) Shuffled(rng *rand.Rand) *Dataset {
	perm := rng.Perm(d.N)
	out := &Dataset{X: make([]float32, len(d.X)), Y: make([]uint8, d.N), N: d.N, D: d.D, Classes: d.Classes}
	for i, p := range perm {
		copy(out.X[i*d.D:(i+1)*d.D], d.Row(p))
		out.Y[i] = d.Y[p]
	}
	return out
}

// All returns the indices 0..N-1.
func (d *Dataset) All() []int {
	idx := make([]int, d.N)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// SyntheticConfig configures [Synthetic].
type SyntheticConfig struct {
	// Train and Test are the numbers of rows generated for each split;
	// zero means 4000 and 1000.
	Train, Test int
	// Dim is the feature dimension; zero means 20.
	Dim int
	// Classes is the number of Gaussian clusters; zero means 10.
	Classes int
	// Separation is the standard deviation of the cluster centres; the
	// samples around each centre have unit standard deviation. Zero means
	// 1.0, which gives overlapping clusters (a linear model saturates
	// below 100% accuracy, so convergence takes some hundred updates).
	Separation float64
	// Seed seeds the generator.
	Seed uint64
}

// DefaultSyntheticConfig returns the defaults described on the fields.
func DefaultSyntheticConfig() SyntheticConfig {
	return SyntheticConfig{Train: 4000, Test: 1000, Dim: 20, Classes: 10, Separation: 1.0, Seed: 1}
}

func (c *SyntheticConfig) fill() {
	d := DefaultSyntheticConfig()
	if c.Train == 0 {
		c.Train = d.Train
	}
	if c.Test == 0 {
		c.Test = d.Test
	}
	if c.Dim == 0 {
		c.Dim = d.Dim
	}
	if c.Classes == 0 {
		c.Classes = d.Classes
	}
	if c.Separation == 0 {
		c.Separation = d.Separation
	}
}

// Validate checks the configuration (after zero fields are read as their
// defaults).
func (c SyntheticConfig) Validate() error {
	c.fill()
	switch {
	case c.Train < 0 || c.Test < 0:
		return fmt.Errorf("%w: negative split size", ErrConfig)
	case c.Dim < 0:
		return fmt.Errorf("%w: Dim=%d", ErrConfig, c.Dim)
	case c.Classes < 2 || c.Classes > 256:
		return fmt.Errorf("%w: Classes=%d outside [2,256]", ErrConfig, c.Classes)
	case c.Separation < 0 || math.IsNaN(c.Separation) || math.IsInf(c.Separation, 0):
		return fmt.Errorf("%w: Separation=%v", ErrConfig, c.Separation)
	}
	return nil
}

// Synthetic generates a seeded Gaussian-cluster classification problem:
// class k has centre μ_k ~ N(0, Separation²·I) and rows x = μ_k + N(0, I),
// with labels drawn uniformly. The same config gives the same data, bit
// for bit.
func Synthetic(cfg SyntheticConfig) (train, test *Dataset, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	cfg.fill()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	centres := make([]float32, cfg.Classes*cfg.Dim)
	for i := range centres {
		centres[i] = float32(rng.NormFloat64() * cfg.Separation)
	}
	gen := func(n int) *Dataset {
		ds := &Dataset{X: make([]float32, n*cfg.Dim), Y: make([]uint8, n), N: n, D: cfg.Dim, Classes: cfg.Classes}
		for i := 0; i < n; i++ {
			k := rng.IntN(cfg.Classes)
			ds.Y[i] = uint8(k)
			row := ds.Row(i)
			mu := centres[k*cfg.Dim : (k+1)*cfg.Dim]
			for j := range row {
				row[j] = mu[j] + float32(rng.NormFloat64())
			}
		}
		return ds
	}
	return gen(cfg.Train), gen(cfg.Test), nil
}
