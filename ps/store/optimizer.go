package store

import (
	"fmt"
	"math"
)

// Optimizer is a server-side update rule. A Store calls it once per key per
// update, from one goroutine at a time, so implementations need no locking.
//
// Update applies one step to the parameters w given the gradient g (the same
// length as w), multiplied by scale before anything else: g' = scale·g.
// state holds Slots() slices, each len(w) long, owned by the optimizer for
// these parameters and zero before the first update. step is the 1-based
// number of this update for the key. The Store may call Update on
// consecutive pieces of a key's value within one step (same step, matching
// pieces of state), so an update must be element-wise.
type Optimizer interface {
	Name() string
	Slots() int
	Update(w, g []float32, scale float32, state [][]float32, step int64)
}

// SGD is plain stochastic gradient descent:
//
//	w ← w − η·g'
//
// where η is LR and g' = scale·g.
type SGD struct {
	LR float32 // learning rate η
}

var _ Optimizer = SGD{}

// Name returns "sgd(lr=<η>)".
func (o SGD) Name() string { return fmt.Sprintf("sgd(lr=%g)", o.LR) }

// Slots returns 0: SGD keeps no state.
func (SGD) Slots() int { return 0 }

// Update applies w ← w − η·scale·g.
func (o SGD) Update(w, g []float32, scale float32, _ [][]float32, _ int64) {
	a := o.LR * scale
	g = g[:len(w)]
	for i := range w {
		w[i] -= a * g[i]
	}
}

// Momentum is SGD with heavy-ball momentum (Polyak; the form PyTorch uses):
//
//	v ← μ·v + g'
//	w ← w − η·v
//
// with one state slot v per parameter, zero at the start.
type Momentum struct {
	LR float32 // learning rate η
	Mu float32 // momentum μ, usually 0.9
}

var _ Optimizer = Momentum{}

// Name returns "momentum(lr=<η>,mu=<μ>)".
func (o Momentum) Name() string { return fmt.Sprintf("momentum(lr=%g,mu=%g)", o.LR, o.Mu) }

// Slots returns 1: the velocity v.
func (Momentum) Slots() int { return 1 }

// Update applies one momentum step.
func (o Momentum) Update(w, g []float32, scale float32, state [][]float32, _ int64) {
	v := state[0][:len(w)]
	g = g[:len(w)]
	for i := range w {
		v[i] = o.Mu*v[i] + scale*g[i]
		w[i] -= o.LR * v[i]
	}
}

// Adam is the optimizer of Kingma and Ba (ICLR 2015, Algorithm 1) with bias
// correction, t being the per-key step:
//
//	m ← β1·m + (1−β1)·g'
//	v ← β2·v + (1−β2)·g'²
//	m̂ = m/(1−β1^t),  v̂ = v/(1−β2^t)
//	w ← w − η·m̂/(√v̂ + ε)
//
// Two state slots (m, v) per parameter. Zero Beta1, Beta2 or Eps take the
// paper's defaults 0.9, 0.999 and 1e-8.
type Adam struct {
	LR, Beta1, Beta2, Eps float32
}

var _ Optimizer = Adam{}

// Name returns "adam(lr=<η>)".
func (o Adam) Name() string { return fmt.Sprintf("adam(lr=%g)", o.LR) }

// Slots returns 2: the moments m and v.
func (Adam) Slots() int { return 2 }

func (o Adam) params() (b1, b2, eps float32) {
	b1, b2, eps = o.Beta1, o.Beta2, o.Eps
	if b1 == 0 {
		b1 = 0.9
	}
	if b2 == 0 {
		b2 = 0.999
	}
	if eps == 0 {
		eps = 1e-8
	}
	return
}

// Update applies one Adam step.
func (o Adam) Update(w, g []float32, scale float32, state [][]float32, step int64) {
	b1, b2, eps := o.params()
	n := len(w)
	m, v := state[0][:n], state[1][:n]
	g = g[:n]
	t := float64(step)
	// η·m̂/(√v̂+ε) with the bias corrections folded into two constants:
	// a = η/(1−β1^t), ic2 = 1/(1−β2^t).
	a := float32(float64(o.LR) / (1 - math.Pow(float64(b1), t)))
	ic2 := float32(1 / (1 - math.Pow(float64(b2), t)))
	c1, c2 := 1-b1, 1-b2
	for i := range w {
		gi := scale * g[i]
		mi := b1*m[i] + c1*gi
		vi := b2*v[i] + c2*gi*gi
		m[i], v[i] = mi, vi
		w[i] -= a * mi / (float32(math.Sqrt(float64(vi*ic2))) + eps)
	}
}
