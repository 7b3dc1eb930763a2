package predictor

import "math"

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
// it is fitted on train, otherwise train is replayed through Observe.
func Warm(p Predictor, train []Measurement) error {
	if t, ok := p.(Trainer); ok {
		return t.Fit(train)
	}
	if r, ok := p.(Resetter); ok {
		r.Reset()
	}
	for _, m := range train {
		p.Observe(m)
	}
	return nil
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
