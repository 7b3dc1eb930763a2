package predictor

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// ARModel is an autoregressive model of order p with intercept:
//
//	y_{t+1} = c + Σ_{i=1..p} a_i · y_{t+1−i}
//
// FitAR estimates (c, a) by ridge-regularised least squares.
type ARModel struct {
	C float64   // intercept
	A []float64 // A[i-1] multiplies y_{t+1−i}; len(A) = p
}

// arRidge is λ in min ‖Xβ − y‖² + λ·n·‖β‖². A tiny ridge (ours) only keeps
// the problem well posed on constant stretches (a common case: the ratio of
// incompressible data is the same every chunk); it does not shrink a fit on
// varying data measurably.
const arRidge = 1e-8

// FitAR fits an AR(p) model to y (oldest first) by least squares, solved with
// a QR factorisation (gonum mat). It needs at least 2p+2 values.
func FitAR(y []float64, p int) (ARModel, error) {
	if p < 1 {
		return ARModel{}, fmt.Errorf("%w: AR order %d < 1", ErrConfig, p)
	}
	n := len(y) - p // number of regression rows
	if n < p+2 {
		return ARModel{}, fmt.Errorf("%w: AR(%d) needs at least %d values, got %d", ErrTooShort, p, 2*p+2, len(y))
	}
	k := p + 1
	x := mat.NewDense(n+k, k, nil)
	t := mat.NewVecDense(n+k, nil)
	for r := 0; r < n; r++ {
		x.Set(r, 0, 1)
		for i := 1; i <= p; i++ {
			x.Set(r, i, y[r+p-i])
		}
		t.SetVec(r, y[r+p])
	}
	l := math.Sqrt(arRidge * float64(n))
	for i := 0; i < k; i++ {
		x.Set(n+i, i, l)
	}
	var beta mat.VecDense
	if err := beta.SolveVec(x, t); err != nil {
		return ARModel{}, fmt.Errorf("predictor: AR least squares: %w", err)
	}
	m := ARModel{C: beta.AtVec(0), A: make([]float64, p)}
	for i := 0; i < p; i++ {
		m.A[i] = beta.AtVec(i + 1)
	}
	return m, nil
}

// Next returns the one-step forecast given the history y (oldest first,
// at least p values).
func (m ARModel) Next(y []float64) float64 {
	s := m.C
	n := len(y)
	for i, a := range m.A {
		s += a * y[n-1-i]
	}
	return s
}

// AR predicts each component with an AR(p) model on its logarithm. It refits
// online every Config.ARRefit observations on the last Config.ARHistory
// valid values of the component; until the first fit it answers like EWMA.
// Forecasts are clamped to [½·min, 2·max] of the window of the last fit
// (ours) so a poorly conditioned fit cannot produce absurd speeds.
type AR struct {
	p, refit int
	fallback EWMA
	comp     [3]arComp
	scratch  []float64
}

type arComp struct {
	ring   []float64 // log values
	n      int       // total valid values seen
	since  int       // values since last fit
	model  ARModel
	fitted bool
	lo, hi float64 // range of the window of the last fit (log values)
}

var (
	_ Predictor = (*AR)(nil)
	_ Trainer   = (*AR)(nil)
	_ Resetter  = (*AR)(nil)
)

// NewAR returns an online AR predictor configured by cfg.
func NewAR(cfg Config) (*AR, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	p := &AR{p: c.AROrder, refit: c.ARRefit, fallback: *NewEWMA(c.Alpha, c.Default), scratch: make([]float64, c.ARHistory)}
	for i := range p.comp {
		p.comp[i].ring = make([]float64, c.ARHistory)
	}
	return p, nil
}

// Order returns p.
func (p *AR) Order() int { return p.p }

// Models returns the current fitted models of (compress speed, decompress
// speed, ratio) in log-space, and whether each is fitted.
func (p *AR) Models() ([3]ARModel, [3]bool) {
	var m [3]ARModel
	var ok [3]bool
	for i := range p.comp {
		m[i], ok[i] = p.comp[i].model, p.comp[i].fitted
	}
	return m, ok
}

// Reset forgets all observations and fits.
func (p *AR) Reset() {
	p.fallback.Reset()
	for i := range p.comp {
		c := &p.comp[i]
		c.n, c.since, c.fitted, c.model = 0, 0, false, ARModel{}
	}
}

// Fit resets p, fits each component on the whole training series and replays
// it, so that p is positioned at its end.
func (p *AR) Fit(train []Measurement) error {
	p.Reset()
	for i := range p.comp {
		var y []float64
		for _, m := range train {
			if v, ok := component(m, i); ok {
				y = append(y, math.Log(v))
			}
		}
		mod, err := FitAR(y, p.p)
		if err != nil {
			return fmt.Errorf("predictor: AR fit of component %d: %w", i, err)
		}
		p.comp[i].model, p.comp[i].fitted = mod, true
		p.comp[i].lo, p.comp[i].hi = span(y)
	}
	for _, m := range train {
		p.observe(m, false)
	}
	return nil
}

// Observe records m and refits a component when it is due.
func (p *AR) Observe(m Measurement) { p.observe(m, true) }

func (p *AR) observe(m Measurement, refit bool) {
	p.fallback.Observe(m)
	h := len(p.scratch)
	for i := range p.comp {
		v, ok := component(m, i)
		if !ok {
			continue
		}
		c := &p.comp[i]
		c.ring[c.n%h] = math.Log(v)
		c.n++
		c.since++
		if refit && c.since >= p.refit && c.n >= 4*p.p+4 {
			c.since = 0
			y := p.window(c)
			if mod, err := FitAR(y, p.p); err == nil {
				c.model, c.fitted = mod, true
				c.lo, c.hi = span(y)
			}
		}
	}
}

// window copies the component's history, oldest first, into p.scratch.
func (p *AR) window(c *arComp) []float64 {
	h := len(c.ring)
	k := min(c.n, h)
	y := p.scratch[:k]
	for j := 0; j < k; j++ {
		y[j] = c.ring[(c.n-k+j)%h]
	}
	return y
}

// Predict returns the AR forecast of each fitted component with at least p
// observations, and the EWMA forecast otherwise.
func (p *AR) Predict() Estimate {
	e := p.fallback.Predict()
	for i := range p.comp {
		c := &p.comp[i]
		if !c.fitted || c.n < p.p {
			continue
		}
		h := len(c.ring)
		s := c.model.C
		for j, a := range c.model.A {
			s += a * c.ring[(c.n-1-j)%h]
		}
		s = math.Max(c.lo-math.Ln2, math.Min(c.hi+math.Ln2, s))
		setComponent(&e, i, math.Exp(s))
	}
	return e
}

// component returns field i (0 compress speed, 1 decompress speed, 2 ratio)
// of m and whether it is valid.
func component(m Measurement, i int) (float64, bool) {
	switch i {
	case 0:
		return m.CompressSpeed, validSpeed(m.CompressSpeed)
	case 1:
		return m.DecompressSpeed, validSpeed(m.DecompressSpeed)
	default:
		return m.Ratio, validRatio(m.Ratio)
	}
}

func setComponent(e *Estimate, i int, v float64) {
	switch i {
	case 0:
		e.CompressSpeed = v
	case 1:
		e.DecompressSpeed = v
	default:
		e.Ratio = v
	}
}

// span returns the minimum and maximum of y.
func span(y []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range y {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return lo, hi
}
