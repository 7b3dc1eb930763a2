package model

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Model is a differentiable classifier whose parameters are one flat
// float32 vector. Implementations are stateless apart from their shape and
// scratch buffers, so one value must not be used from two goroutines at
// once; use [Model.Clone] to get one per goroutine.
type Model interface {
	// Name is a short description, e.g. "softmax(784x10)".
	Name() string
	// NumParams is the length of the parameter vector.
	NumParams() int
	// Init writes a seeded initial parameter vector into params.
	Init(params []float32, rng *rand.Rand)
	// LossGrad computes the mean loss over the rows idx of data and writes
	// the mean gradient into grad (overwritten, len NumParams). It returns
	// the mean loss. An empty idx gives loss 0 and a zero gradient.
	LossGrad(params []float32, data *Dataset, idx []int, grad []float32) float64
	// Evaluate returns the mean loss and the accuracy (fraction of rows
	// whose arg-max class equals the label) over the rows idx; idx == nil
	// means every row.
	Evaluate(params []float32, data *Dataset, idx []int) (loss, acc float64)
	// Clone returns an independent model of the same shape.
	Clone() Model
}

var (
	_ Model = (*Softmax)(nil)
	_ Model = (*MLP)(nil)
)

// Softmax is multinomial logistic regression: logits z = W·x + b with W a
// Classes×Dim matrix, loss −log softmax(z)_y + (L2/2)·‖W‖². Parameters are
// laid out as W row-major, then b.
type Softmax struct {
	Dim, Classes int
	// L2 is the weight-decay coefficient on W (not b); zero means none.
	L2 float64

	z []float64
}

// NewSoftmax returns a softmax-regression model.
func NewSoftmax(dim, classes int) *Softmax {
	if dim <= 0 || classes < 2 {
		panic(fmt.Sprintf("model: NewSoftmax(%d, %d): need dim > 0, classes >= 2", dim, classes))
	}
	return &Softmax{Dim: dim, Classes: classes}
}

// Name implements [Model].
func (m *Softmax) Name() string { return fmt.Sprintf("softmax(%dx%d)", m.Dim, m.Classes) }

// NumParams implements [Model]: Classes·Dim + Classes.
func (m *Softmax) NumParams() int { return m.Classes*m.Dim + m.Classes }

// Clone implements [Model].
func (m *Softmax) Clone() Model { return &Softmax{Dim: m.Dim, Classes: m.Classes, L2: m.L2} }

// Init implements [Model]: W ~ N(0, 0.01²), b = 0.
func (m *Softmax) Init(params []float32, rng *rand.Rand) {
	m.check(params)
	nw := m.Classes * m.Dim
	for i := range params {
		if i < nw {
			params[i] = float32(0.01 * rng.NormFloat64())
		} else {
			params[i] = 0
		}
	}
}

func (m *Softmax) check(params []float32) {
	if len(params) != m.NumParams() {
		panic(fmt.Sprintf("model: %s: len(params)=%d, want %d", m.Name(), len(params), m.NumParams()))
	}
}

func (m *Softmax) checkData(data *Dataset) {
	if data.D != m.Dim || data.Classes > m.Classes {
		panic(fmt.Sprintf("model: %s: dataset is %d-dim with %d classes", m.Name(), data.D, data.Classes))
	}
}

// logits writes W·x+b into m.z.
func (m *Softmax) logits(params []float32, x []float32) []float64 {
	if len(m.z) != m.Classes {
		m.z = make([]float64, m.Classes)
	}
	nw := m.Classes * m.Dim
	for k := 0; k < m.Classes; k++ {
		w := params[k*m.Dim : (k+1)*m.Dim]
		var s float32
		for j, xv := range x {
			s += w[j] * xv
		}
		m.z[k] = float64(s) + float64(params[nw+k])
	}
	return m.z
}

// LossGrad implements [Model].
func (m *Softmax) LossGrad(params []float32, data *Dataset, idx []int, grad []float32) float64 {
	m.check(params)
	m.checkData(data)
	if len(grad) != len(params) {
		panic(fmt.Sprintf("model: %s: len(grad)=%d, want %d", m.Name(), len(grad), len(params)))
	}
	clear(grad)
	if len(idx) == 0 {
		return 0
	}
	nw := m.Classes * m.Dim
	inv := 1 / float64(len(idx))
	var loss float64
	for _, i := range idx {
		x := data.Row(i)
		z := m.logits(params, x)
		lse := logSumExp(z)
		y := int(data.Y[i])
		loss += lse - z[y]
		for k := 0; k < m.Classes; k++ {
			d := math.Exp(z[k] - lse)
			if k == y {
				d--
			}
			dk := float32(d * inv)
			g := grad[k*m.Dim : (k+1)*m.Dim]
			for j, xv := range x {
				g[j] += dk * xv
			}
			grad[nw+k] += dk
		}
	}
	loss *= inv
	if m.L2 != 0 {
		var sq float64
		l2 := float32(m.L2)
		for j := 0; j < nw; j++ {
			w := params[j]
			sq += float64(w) * float64(w)
			grad[j] += l2 * w
		}
		loss += 0.5 * m.L2 * sq
	}
	return loss
}

// Evaluate implements [Model]. The loss excludes the L2 term.
func (m *Softmax) Evaluate(params []float32, data *Dataset, idx []int) (loss, acc float64) {
	m.check(params)
	m.checkData(data)
	return evaluate(data, idx, func(x []float32) []float64 { return m.logits(params, x) })
}

// MLP is a one-hidden-layer perceptron: h = relu(W1·x + b1),
// z = W2·h + b2, loss −log softmax(z)_y. Parameters are laid out as W1
// (Hidden×Dim, row-major), b1, W2 (Classes×Hidden), b2.
type MLP struct {
	Dim, Hidden, Classes int

	h, z, dh []float64
}

// NewMLP returns a one-hidden-layer MLP with ReLU activations.
func NewMLP(dim, hidden, classes int) *MLP {
	if dim <= 0 || hidden <= 0 || classes < 2 {
		panic(fmt.Sprintf("model: NewMLP(%d, %d, %d): need positive sizes, classes >= 2", dim, hidden, classes))
	}
	return &MLP{Dim: dim, Hidden: hidden, Classes: classes}
}

// Name implements [Model].
func (m *MLP) Name() string { return fmt.Sprintf("mlp(%dx%dx%d)", m.Dim, m.Hidden, m.Classes) }

// NumParams implements [Model].
func (m *MLP) NumParams() int { return m.Hidden*m.Dim + m.Hidden + m.Classes*m.Hidden + m.Classes }

// Clone implements [Model].
func (m *MLP) Clone() Model { return NewMLP(m.Dim, m.Hidden, m.Classes) }

func (m *MLP) offsets() (b1, w2, b2 int) {
	b1 = m.Hidden * m.Dim
	w2 = b1 + m.Hidden
	b2 = w2 + m.Classes*m.Hidden
	return
}

// Init implements [Model]: He initialisation, W1 ~ N(0, 2/Dim),
// W2 ~ N(0, 2/Hidden), biases 0.
func (m *MLP) Init(params []float32, rng *rand.Rand) {
	m.check(params)
	b1, w2, b2 := m.offsets()
	s1 := math.Sqrt(2 / float64(m.Dim))
	s2 := math.Sqrt(2 / float64(m.Hidden))
	for i := range params {
		switch {
		case i < b1:
			params[i] = float32(s1 * rng.NormFloat64())
		case i >= w2 && i < b2:
			params[i] = float32(s2 * rng.NormFloat64())
		default:
			params[i] = 0
		}
	}
}

func (m *MLP) check(params []float32) {
	if len(params) != m.NumParams() {
		panic(fmt.Sprintf("model: %s: len(params)=%d, want %d", m.Name(), len(params), m.NumParams()))
	}
}

func (m *MLP) checkData(data *Dataset) {
	if data.D != m.Dim || data.Classes > m.Classes {
		panic(fmt.Sprintf("model: %s: dataset is %d-dim with %d classes", m.Name(), data.D, data.Classes))
	}
}

func (m *MLP) forward(params []float32, x []float32) (h, z []float64) {
	if len(m.h) != m.Hidden {
		m.h = make([]float64, m.Hidden)
		m.dh = make([]float64, m.Hidden)
	}
	if len(m.z) != m.Classes {
		m.z = make([]float64, m.Classes)
	}
	b1, w2, b2 := m.offsets()
	for u := 0; u < m.Hidden; u++ {
		w := params[u*m.Dim : (u+1)*m.Dim]
		var s float32
		for j, xv := range x {
			s += w[j] * xv
		}
		a := float64(s) + float64(params[b1+u])
		if a < 0 {
			a = 0
		}
		m.h[u] = a
	}
	for k := 0; k < m.Classes; k++ {
		w := params[w2+k*m.Hidden : w2+(k+1)*m.Hidden]
		s := float64(params[b2+k])
		for u, hv := range m.h {
			s += float64(w[u]) * hv
		}
		m.z[k] = s
	}
	return m.h, m.z
}

// LossGrad implements [Model].
func (m *MLP) LossGrad(params []float32, data *Dataset, idx []int, grad []float32) float64 {
	m.check(params)
	m.checkData(data)
	if len(grad) != len(params) {
		panic(fmt.Sprintf("model: %s: len(grad)=%d, want %d", m.Name(), len(grad), len(params)))
	}
	clear(grad)
	if len(idx) == 0 {
		return 0
	}
	b1, w2, b2 := m.offsets()
	inv := 1 / float64(len(idx))
	var loss float64
	for _, i := range idx {
		x := data.Row(i)
		h, z := m.forward(params, x)
		lse := logSumExp(z)
		y := int(data.Y[i])
		loss += lse - z[y]
		clear(m.dh)
		for k := 0; k < m.Classes; k++ {
			d := math.Exp(z[k] - lse)
			if k == y {
				d--
			}
			d *= inv
			w := params[w2+k*m.Hidden : w2+(k+1)*m.Hidden]
			g := grad[w2+k*m.Hidden : w2+(k+1)*m.Hidden]
			for u, hv := range h {
				g[u] += float32(d * hv)
				m.dh[u] += d * float64(w[u])
			}
			grad[b2+k] += float32(d)
		}
		for u := 0; u < m.Hidden; u++ {
			if h[u] <= 0 {
				continue
			}
			du := float32(m.dh[u])
			g := grad[u*m.Dim : (u+1)*m.Dim]
			for j, xv := range x {
				g[j] += du * xv
			}
			grad[b1+u] += du
		}
	}
	return loss * inv
}

// Evaluate implements [Model].
func (m *MLP) Evaluate(params []float32, data *Dataset, idx []int) (loss, acc float64) {
	m.check(params)
	m.checkData(data)
	return evaluate(data, idx, func(x []float32) []float64 {
		_, z := m.forward(params, x)
		return z
	})
}

// evaluate returns the mean cross-entropy loss −log softmax(z)_y and the
// accuracy of the logits z = logits(x) over the rows idx of data (all rows
// if idx is nil).
func evaluate(data *Dataset, idx []int, logits func(x []float32) []float64) (loss, acc float64) {
	n := len(idx)
	if idx == nil {
		n = data.N
	}
	if n == 0 {
		return 0, 0
	}
	correct := 0
	for r := 0; r < n; r++ {
		i := r
		if idx != nil {
			i = idx[r]
		}
		z := logits(data.Row(i))
		y := int(data.Y[i])
		loss += logSumExp(z) - z[y]
		if argmax(z) == y {
			correct++
		}
	}
	return loss / float64(n), float64(correct) / float64(n)
}

func logSumExp(z []float64) float64 {
	mx := z[0]
	for _, v := range z[1:] {
		if v > mx {
			mx = v
		}
	}
	var s float64
	for _, v := range z {
		s += math.Exp(v - mx)
	}
	return mx + math.Log(s)
}

func argmax(z []float64) int {
	best := 0
	for k, v := range z {
		if v > z[best] {
			best = k
		}
	}
	return best
}
