package predictor

// LastValue predicts that the next measurement equals the last valid one
// (per component). It is the persistence forecast, the usual naive baseline.
type LastValue struct {
	def  Estimate
	last Estimate
	seen [3]bool
}

var (
	_ Predictor = (*LastValue)(nil)
	_ Resetter  = (*LastValue)(nil)
)

// NewLastValue returns a LastValue predictor answering def (with zero
// fields replaced by DefaultEstimate) before its first observation.
func NewLastValue(def Estimate) *LastValue {
	return &LastValue{def: fillEstimate(def)}
}

// Observe records m's valid components.
func (p *LastValue) Observe(m Measurement) {
	if validSpeed(m.CompressSpeed) {
		p.last.CompressSpeed, p.seen[0] = m.CompressSpeed, true
	}
	if validSpeed(m.DecompressSpeed) {
		p.last.DecompressSpeed, p.seen[1] = m.DecompressSpeed, true
	}
	if validRatio(m.Ratio) {
		p.last.Ratio, p.seen[2] = m.Ratio, true
	}
}

// Predict returns the last valid value of each component, or the default.
func (p *LastValue) Predict() Estimate { return pick(p.last, p.def, p.seen) }

// Reset forgets all observations.
func (p *LastValue) Reset() { p.last, p.seen = Estimate{}, [3]bool{} }

// EWMA predicts with an exponentially weighted moving average per component:
//
//	est_1 = x_1,   est_t = α·x_t + (1−α)·est_{t−1}
//
// Small α smooths noise but lags behind level shifts (regime changes); α = 1
// is LastValue.
type EWMA struct {
	alpha float64
	def   Estimate
	est   Estimate
	seen  [3]bool
}

var (
	_ Predictor = (*EWMA)(nil)
	_ Resetter  = (*EWMA)(nil)
)

// NewEWMA returns an EWMA predictor. It panics if alpha is not in (0, 1]
// (a programmer error; New validates instead).
func NewEWMA(alpha float64, def Estimate) *EWMA {
	if !(alpha > 0 && alpha <= 1) {
		panic("predictor: EWMA alpha must be in (0, 1]")
	}
	return &EWMA{alpha: alpha, def: fillEstimate(def)}
}

// Alpha returns the smoothing factor.
func (p *EWMA) Alpha() float64 { return p.alpha }

// Observe folds m's valid components into the averages.
func (p *EWMA) Observe(m Measurement) {
	p.est.CompressSpeed = ewmaStep(p.est.CompressSpeed, m.CompressSpeed, p.alpha, &p.seen[0], validSpeed)
	p.est.DecompressSpeed = ewmaStep(p.est.DecompressSpeed, m.DecompressSpeed, p.alpha, &p.seen[1], validSpeed)
	p.est.Ratio = ewmaStep(p.est.Ratio, m.Ratio, p.alpha, &p.seen[2], validRatio)
}

// Predict returns the current averages, or the default before any observation.
func (p *EWMA) Predict() Estimate { return pick(p.est, p.def, p.seen) }

// Reset forgets all observations.
func (p *EWMA) Reset() { p.est, p.seen = Estimate{}, [3]bool{} }

func ewmaStep(est, x, alpha float64, seen *bool, ok func(float64) bool) float64 {
	if !ok(x) {
		return est
	}
	if !*seen {
		*seen = true
		return x
	}
	return alpha*x + (1-alpha)*est
}

func pick(v, def Estimate, seen [3]bool) Estimate {
	if !seen[0] {
		v.CompressSpeed = def.CompressSpeed
	}
	if !seen[1] {
		v.DecompressSpeed = def.DecompressSpeed
	}
	if !seen[2] {
		v.Ratio = def.Ratio
	}
	return v
}

func fillEstimate(e Estimate) Estimate {
	if !validSpeed(e.CompressSpeed) {
		e.CompressSpeed = DefaultEstimate.CompressSpeed
	}
	if !validSpeed(e.DecompressSpeed) {
		e.DecompressSpeed = DefaultEstimate.DecompressSpeed
	}
	if !validRatio(e.Ratio) {
		e.Ratio = DefaultEstimate.Ratio
	}
	return e
}
