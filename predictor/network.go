package predictor

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Network is a one-layer recurrent network (LSTM or GRU cell) with a linear
// head, together with the input/target normalisation it was trained with.
// Parameters live in one flat slice (Params) so that the optimiser, gradient
// clipping, the gradient check and serialisation treat them uniformly.
//
// Layout of Params, with G = 4 gates for LSTM (i, f, g, o) and 3 for GRU
// (z, r, n), H = Hidden, I = In, O = Out, matrices row-major:
//
//	Wx [I × G·H] | Wh [H × G·H] | b [G·H] | Wy [O × H] | by [O]
//
// Wx and Wh are stored input-major (row k holds input k's weights to every
// gate unit) so that the forward pass is a sum of contiguous axpy updates,
// which skips zero inputs (the class one-hot) and has no floating-point
// dependency chain; on hidden sizes of 8–32 this is several times faster
// than row dot products, and than gonum/BLAS calls, whose per-call overhead
// dominates at these sizes.
//
// Step only reads the parameters, and each Tape has its own buffers, so
// concurrent Steps and Forwards on separate tapes are safe as long as no one
// updates Params at the same time.
type Network struct {
	Cell   Cell
	In     int // input width
	Hidden int // hidden size H
	Out    int // output width
	Params []float64
	Norm   Norm // feature normalisation, fitted on training data
}

// Norm holds what the RNN predictor needs to turn measurements into
// network inputs and outputs back into estimates. Components k = 0, 1, 2 are
// log compress speed, log decompress speed and log ratio; z_k = (v_k − Mean[k])
// / Std[k]. Component 3 is the contention level.
type Norm struct {
	Mean, Std  [4]float64
	NumClasses int     // one-hot width
	Alpha      float64 // smoothing of the EWMA-level input features
}

// gates returns G for the cell.
func (n *Network) gates() int {
	if n.Cell == CellGRU {
		return 3
	}
	return 4
}

// NumParams returns len(Params) for a network of this shape.
func numParams(cell Cell, in, hidden, out int) int {
	g := 4
	if cell == CellGRU {
		g = 3
	}
	return g*hidden*in + g*hidden*hidden + g*hidden + out*hidden + out
}

// NewNetwork returns a network with weights drawn from src:
// Wx, Wh ~ U(−k, k) with k = 1/√H (the usual recurrent-layer initialisation),
// Wy ~ U(−k, k), biases 0 except the LSTM forget-gate bias, set to 1 so that
// the cell remembers by default at the start of training (Jozefowicz et al.
// 2015). It panics if a size is not positive.
func NewNetwork(cell Cell, in, hidden, out int, src rand.Source) *Network {
	if in < 1 || hidden < 1 || out < 1 {
		panic("predictor: network sizes must be positive")
	}
	if cell != CellGRU {
		cell = CellLSTM
	}
	n := &Network{Cell: cell, In: in, Hidden: hidden, Out: out, Params: make([]float64, numParams(cell, in, hidden, out))}
	rng := rand.New(src)
	k := 1 / math.Sqrt(float64(hidden))
	wx, wh, b, wy, _ := n.views(n.Params)
	for _, w := range [][]float64{wx, wh, wy} {
		for i := range w {
			w[i] = (2*rng.Float64() - 1) * k
		}
	}
	if cell == CellLSTM {
		for j := hidden; j < 2*hidden; j++ {
			b[j] = 1
		}
	}
	return n
}

// views splits a parameter-shaped slice into Wx, Wh, b, Wy, by.
func (n *Network) views(p []float64) (wx, wh, b, wy, by []float64) {
	gh := n.gates() * n.Hidden
	o := 0
	wx, o = p[o:o+gh*n.In], o+gh*n.In
	wh, o = p[o:o+gh*n.Hidden], o+gh*n.Hidden
	b, o = p[o:o+gh], o+gh
	wy, o = p[o:o+n.Out*n.Hidden], o+n.Out*n.Hidden
	by = p[o : o+n.Out]
	return
}

// Clone returns a deep copy.
func (n *Network) Clone() *Network {
	c := *n
	c.Params = append([]float64(nil), n.Params...)
	return &c
}

func (n *Network) check() error {
	if n.Cell != CellLSTM && n.Cell != CellGRU {
		return fmt.Errorf("%w: cell %v", ErrCorrupt, n.Cell)
	}
	if n.In < 1 || n.Hidden < 1 || n.Out < 1 || n.In > 1<<16 || n.Hidden > 1<<12 || n.Out > 1<<8 {
		return fmt.Errorf("%w: sizes in=%d hidden=%d out=%d", ErrCorrupt, n.In, n.Hidden, n.Out)
	}
	if len(n.Params) != numParams(n.Cell, n.In, n.Hidden, n.Out) {
		return fmt.Errorf("%w: %d parameters, want %d", ErrCorrupt, len(n.Params), numParams(n.Cell, n.In, n.Hidden, n.Out))
	}
	return nil
}

// Tape holds the activations of up to Cap steps for backpropagation through
// time, plus the gradient and scratch buffers. Reuse one Tape for every
// window: Forward and Backward do not allocate.
type Tape struct {
	n     *Network
	cap   int
	steps int
	xs    []float64 // [cap × In]
	act   []float64 // [cap × G·H] post-activation gates (GRU: z, r, n)
	hs    []float64 // [(cap+1) × H], hs[0] = initial h
	cs    []float64 // [(cap+1) × H] LSTM cell; GRU: Uh·h_{t−1} for the n gate
	tc    []float64 // [cap × H] tanh(c_t) (LSTM)
	ys    []float64 // [cap × O]
	Grad  []float64 // gradient, parameter-shaped
	da    []float64 // [G·H]
	dh    []float64 // [H]
	dc    []float64 // [H]
	dhn   []float64 // [H]
	drec  []float64 // [G·H] GRU: gradient of the recurrent pre-activations
}

// NewTape returns a tape for windows of up to capSteps steps.
func (n *Network) NewTape(capSteps int) *Tape {
	gh, h := n.gates()*n.Hidden, n.Hidden
	return &Tape{n: n, cap: capSteps,
		xs: make([]float64, capSteps*n.In), act: make([]float64, capSteps*gh),
		hs: make([]float64, (capSteps+1)*h), cs: make([]float64, (capSteps+1)*h),
		tc: make([]float64, capSteps*h), ys: make([]float64, capSteps*n.Out),
		Grad: make([]float64, len(n.Params)), da: make([]float64, gh),
		dh: make([]float64, h), dc: make([]float64, h), dhn: make([]float64, h), drec: make([]float64, gh)}
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// tanh computes tanh(x) as 2σ(2x) − 1: one call to math.Exp instead of
// math.Tanh's slower general path. The absolute error is a few ulps of 1,
// which is all an activation needs.
func tanh(x float64) float64 { return 2/(1+math.Exp(-2*x)) - 1 }

// axpy computes y += a·x for len(y) == len(x).
func axpy(a float64, x, y []float64) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// dot returns x·y for len(x) == len(y), with four accumulators so the adds
// do not form one dependency chain.
func dot(x, y []float64) float64 {
	y = y[:len(x)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i] * y[i]
		s1 += x[i+1] * y[i+1]
		s2 += x[i+2] * y[i+2]
		s3 += x[i+3] * y[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// Step advances one time step: from state (h, c) and input x it writes the
// new state into (hOut, cOut), the gate activations into act (len G·H) and,
// if y is not nil, the head output y = Wy·h + by. For a GRU, c is unused on
// input and cOut receives Wh_n·h (needed by Backward). hOut and cOut must
// not alias h, c or each other. If tc is not nil (LSTM), tanh(c_t) is
// written to it for Backward.
func (n *Network) Step(x, h, c, hOut, cOut, act, y, tc []float64) {
	H, I := n.Hidden, n.In
	gh := n.gates() * H
	wx, wh, b, wy, by := n.views(n.Params)
	act = act[:gh]
	x = x[:I]
	h = h[:H]
	copy(act, b[:gh])
	for k, xv := range x {
		if xv != 0 {
			axpy(xv, wx[k*gh:(k+1)*gh], act)
		}
	}
	if n.Cell == CellGRU {
		// z, r: Wx x + Wh h + b;  n: tanh(Wx x + b + r ⊙ (Wh_n h)).
		un := cOut[:H]
		clear(un)
		for k, hv := range h {
			row := wh[k*gh : (k+1)*gh]
			axpy(hv, row[:2*H], act[:2*H])
			axpy(hv, row[2*H:], un)
		}
		for j := 0; j < H; j++ {
			z := sigmoid(act[j])
			r := sigmoid(act[H+j])
			nn := tanh(act[2*H+j] + r*un[j])
			act[j], act[H+j], act[2*H+j] = z, r, nn
			hOut[j] = (1-z)*nn + z*h[j]
		}
	} else {
		for k, hv := range h {
			axpy(hv, wh[k*gh:(k+1)*gh], act)
		}
		for j := 0; j < H; j++ {
			i := sigmoid(act[j])
			f := sigmoid(act[H+j])
			g := tanh(act[2*H+j])
			o := sigmoid(act[3*H+j])
			act[j], act[H+j], act[2*H+j], act[3*H+j] = i, f, g, o
			cn := f*c[j] + i*g
			cOut[j] = cn
			th := tanh(cn)
			hOut[j] = o * th
			if tc != nil {
				tc[j] = th
			}
		}
	}
	if y != nil {
		for k := 0; k < n.Out; k++ {
			y[k] = by[k] + dot(wy[k*H:(k+1)*H], hOut[:H])
		}
	}
}

// Forward runs the window xs (steps × In, row-major) from state (h0, c0)
// and records everything Backward needs. It returns the outputs (steps × Out,
// a view into the tape) and leaves the final state in FinalState.
func (t *Tape) Forward(xs []float64, steps int, h0, c0 []float64) []float64 {
	n := t.n
	if steps > t.cap || len(xs) < steps*n.In {
		panic("predictor: window longer than tape")
	}
	H, I, O, gh := n.Hidden, n.In, n.Out, n.gates()*n.Hidden
	t.steps = steps
	copy(t.xs, xs[:steps*I])
	copy(t.hs[:H], h0)
	if n.Cell == CellLSTM {
		copy(t.cs[:H], c0)
	}
	for s := 0; s < steps; s++ {
		n.Step(t.xs[s*I:], t.hs[s*H:], t.cs[s*H:], t.hs[(s+1)*H:(s+2)*H], t.cs[(s+1)*H:(s+2)*H], t.act[s*gh:], t.ys[s*O:(s+1)*O], t.tc[s*H:(s+1)*H])
	}
	return t.ys[:steps*O]
}

// FinalState returns views of the state after the last Forward step.
func (t *Tape) FinalState() (h, c []float64) {
	H := t.n.Hidden
	return t.hs[t.steps*H : (t.steps+1)*H], t.cs[t.steps*H : (t.steps+1)*H]
}

// Backward computes the gradient of the loss with respect to Params into
// t.Grad (overwriting it), given dys = ∂loss/∂y for each step (steps × Out).
// Gradients do not flow into the initial state (truncated BPTT).
func (t *Tape) Backward(dys []float64) {
	n := t.n
	H, I, O := n.Hidden, n.In, n.Out
	gh := n.gates() * H
	clear(t.Grad)
	_, wh, _, wy, _ := n.views(n.Params)
	gwx, gwh, gb, gwy, gby := n.views(t.Grad)
	dh, dc, da, dhn := t.dh, t.dc, t.da, t.dhn
	clear(dh)
	clear(dc)
	for s := t.steps - 1; s >= 0; s-- {
		hPrev := t.hs[s*H : (s+1)*H]
		hCur := t.hs[(s+1)*H : (s+2)*H]
		act := t.act[s*gh : (s+1)*gh]
		x := t.xs[s*I : (s+1)*I]
		dy := dys[s*O : (s+1)*O]
		// head: y = Wy h + by
		for k, d := range dy {
			if d == 0 {
				continue
			}
			gby[k] += d
			row := wy[k*H : (k+1)*H]
			grow := gwy[k*H : (k+1)*H]
			for j := 0; j < H; j++ {
				grow[j] += d * hCur[j]
				dh[j] += d * row[j]
			}
		}
		if n.Cell == CellLSTM {
			cPrev := t.cs[s*H : (s+1)*H]
			tc := t.tc[s*H : (s+1)*H]
			for j := 0; j < H; j++ {
				i, f, g, o := act[j], act[H+j], act[2*H+j], act[3*H+j]
				dcj := dc[j] + dh[j]*o*(1-tc[j]*tc[j])
				da[j] = dcj * g * i * (1 - i)
				da[H+j] = dcj * cPrev[j] * f * (1 - f)
				da[2*H+j] = dcj * i * (1 - g*g)
				da[3*H+j] = dh[j] * tc[j] * o * (1 - o)
				dc[j] = dcj * f
			}
			axpy(1, da, gb[:gh])
			for k, xv := range x {
				if xv != 0 {
					axpy(xv, da, gwx[k*gh:(k+1)*gh])
				}
			}
			// gWh[k,:] += h_{t−1}[k]·da;  dh_{t−1}[k] = Wh[k,:]·da.
			for k := 0; k < H; k++ {
				axpy(hPrev[k], da, gwh[k*gh:(k+1)*gh])
				dhn[k] = dot(wh[k*gh:(k+1)*gh], da)
			}
		} else {
			un := t.cs[(s+1)*H : (s+2)*H] // Wh_n·h_{t−1}
			drec := t.drec
			for j := 0; j < H; j++ {
				z, r, nn := act[j], act[H+j], act[2*H+j]
				dnPre := dh[j] * (1 - z) * (1 - nn*nn)
				da[j] = dh[j] * (hPrev[j] - nn) * z * (1 - z)
				da[H+j] = dnPre * un[j] * r * (1 - r)
				da[2*H+j] = dnPre
				// the recurrent part of the n gate is multiplied by r
				drec[j], drec[H+j], drec[2*H+j] = da[j], da[H+j], dnPre*r
			}
			axpy(1, da, gb[:gh])
			for k, xv := range x {
				if xv != 0 {
					axpy(xv, da, gwx[k*gh:(k+1)*gh])
				}
			}
			for k := 0; k < H; k++ {
				axpy(hPrev[k], drec, gwh[k*gh:(k+1)*gh])
				dhn[k] = dh[k]*act[k] + dot(wh[k*gh:(k+1)*gh], drec)
			}
		}
		dh, dhn = dhn, dh
	}
	t.dh, t.dhn = dh, dhn
}

// Adam is the Adam optimiser (Kingma & Ba 2015) with bias correction:
//
//	m ← β1·m + (1−β1)·g,  v ← β2·v + (1−β2)·g²
//	θ ← θ − lr · (m / (1−β1ᵗ)) / (√(v / (1−β2ᵗ)) + ε)
//
// with β1 = 0.9, β2 = 0.999, ε = 1e-8 (the paper's defaults).
type Adam struct {
	M, V []float64
	T    int
}

// NewAdam returns an optimiser for n parameters.
func NewAdam(n int) *Adam { return &Adam{M: make([]float64, n), V: make([]float64, n)} }

// Step applies one update with learning rate lr to params given grad.
func (a *Adam) Step(params, grad []float64, lr float64) {
	const b1, b2, eps = 0.9, 0.999, 1e-8
	a.T++
	c1 := 1 - math.Pow(b1, float64(a.T))
	c2 := 1 - math.Pow(b2, float64(a.T))
	m, v := a.M[:len(params)], a.V[:len(params)]
	grad = grad[:len(params)]
	for i, g := range grad {
		m[i] = b1*m[i] + (1-b1)*g
		v[i] = b2*v[i] + (1-b2)*g*g
		params[i] -= lr * (m[i] / c1) / (math.Sqrt(v[i]/c2) + eps)
	}
}

// ClipGlobalNorm scales g in place so that ‖g‖₂ ≤ maxNorm, and returns the
// norm before clipping.
func ClipGlobalNorm(g []float64, maxNorm float64) float64 {
	s := 0.0
	for _, v := range g {
		s += v * v
	}
	norm := math.Sqrt(s)
	if norm > maxNorm {
		k := maxNorm / norm
		for i := range g {
			g[i] *= k
		}
	}
	return norm
}
