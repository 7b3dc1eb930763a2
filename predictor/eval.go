package predictor

import (
	"fmt"
	"math"
)

// Result holds the accuracy of one predictor on the held-out part of a
// series. Errors are of one-step-ahead predictions: the estimate made before
// measurement t is compared with measurement t.
type Result struct {
	N          int     // predictions scored
	MAPE       float64 // mean |pred − actual| / actual of compress speed
	RMSE       float64 // root mean squared error of compress speed, bytes/s
	DecompMAPE float64 // MAPE of decompress speed
	RatioMAPE  float64 // MAPE of the ratio
	// Around regime changes: steps t with a class or contention change at
	// some step in (t − span, t] (span as passed to Evaluate).
	RegimeN    int
	RegimeMAPE float64
	// Steady: all other steps.
	SteadyMAPE float64
}

// Warm prepares p for evaluation on what follows train: if p is a Trainer
// it is fitted on train, otherwise train is replayed (see Replay).
func Warm(p Predictor, train []Measurement) error {
	if t, ok := p.(Trainer); ok {
		return t.Fit(train)
	}
	Replay(p, train)
	return nil
}

// Replay resets p if it is a Resetter and feeds ms through Observe,
// without fitting (a loaded RNN keeps its weights, apart from any online
// fine-tuning it is configured to do).
func Replay(p Predictor, ms []Measurement) {
	if r, ok := p.(Resetter); ok {
		r.Reset()
	}
	for _, m := range ms {
		p.Observe(m)
	}
}

// Evaluate scores p on series[from:]: for each t ≥ from it calls Predict,
// scores the estimate against series[t], then calls Observe(series[t]). p
// must already have seen series[:from] (see Warm); it keeps learning online
// during the evaluation as it would in use, but is never fitted on the
// scored part. span ≥ 1 sets the width of the "around regime changes"
// window; a regime change at t is a change of Class or Contention between
// series[t−1] and series[t].
func Evaluate(p Predictor, series []Measurement, from, span int) Result {
	var r Result
	var se, sa, sd, sr, sReg, sSteady float64
	var nd, nr, nSteady int
	lastChange := math.MinInt / 2
	for t := max(from, 0); t < len(series); t++ {
		m := series[t]
		if t > 0 && (m.Class != series[t-1].Class || m.Contention != series[t-1].Contention) {
			lastChange = t
		}
		e := p.Predict()
		if validSpeed(m.CompressSpeed) {
			ape := math.Abs(e.CompressSpeed-m.CompressSpeed) / m.CompressSpeed
			d := e.CompressSpeed - m.CompressSpeed
			sa += ape
			se += d * d
			r.N++
			if t-lastChange < span {
				sReg += ape
				r.RegimeN++
			} else {
				sSteady += ape
				nSteady++
			}
		}
		if validSpeed(m.DecompressSpeed) {
			sd += math.Abs(e.DecompressSpeed-m.DecompressSpeed) / m.DecompressSpeed
			nd++
		}
		if validRatio(m.Ratio) {
			sr += math.Abs(e.Ratio-m.Ratio) / m.Ratio
			nr++
		}
		p.Observe(m)
	}
	div := func(a float64, n int) float64 {
		if n == 0 {
			return math.NaN()
		}
		return a / float64(n)
	}
	r.MAPE, r.RMSE = div(sa, r.N), math.Sqrt(div(se, r.N))
	r.DecompMAPE, r.RatioMAPE = div(sd, nd), div(sr, nr)
	r.RegimeMAPE, r.SteadyMAPE = div(sReg, r.RegimeN), div(sSteady, nSteady)
	return r
}

// AlphaGrid is the default grid of TuneAlpha: 0.05, 0.1, 0.2, …, 1.
var AlphaGrid = []float64{0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}

// TuneAlpha chooses the EWMA smoothing factor from grid (AlphaGrid if nil)
// with the lowest compress-speed MAPE on the last valFrac of train, the EWMA
// having observed the part before it. Only train is read, so the choice
// never sees held-out data. Ties go to the earlier grid value.
func TuneAlpha(train []Measurement, valFrac float64, grid []float64) (float64, error) {
	if grid == nil {
		grid = AlphaGrid
	}
	from := len(train) - int(float64(len(train))*valFrac)
	if !(valFrac > 0 && valFrac < 1) || from < 1 || from >= len(train) || len(grid) == 0 {
		return 0, fmt.Errorf("%w: TuneAlpha with %d measurements, valFrac %v, %d grid values", ErrTooShort, len(train), valFrac, len(grid))
	}
	best, bestMAPE := grid[0], math.Inf(1)
	for _, a := range grid {
		if !(a > 0 && a <= 1) {
			return 0, fmt.Errorf("%w: alpha %v not in (0, 1]", ErrConfig, a)
		}
		p := NewEWMA(a, Estimate{})
		for _, m := range train[:from] {
			p.Observe(m)
		}
		if r := Evaluate(p, train, from, 1); r.MAPE < bestMAPE {
			best, bestMAPE = a, r.MAPE
		}
	}
	return best, nil
}
