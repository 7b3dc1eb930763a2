package ps

import (
	"sync"

	"github.com/falconml/falcon/model"
)

// FromModel adapts m, a model.Model over data, to Model. The two differ
// in three ways, and the adapter bridges each:
//
//   - model.Model.LossGrad returns the mean loss and writes the mean
//     gradient over the rows; Model.Gradient returns the summed loss and
//     adds the summed gradient: for n samples the adapter returns n·loss
//     and adds n·g to grad.
//   - LossGrad overwrites its gradient buffer; the adapter computes into a
//     buffer of its own and adds it into the runtime's.
//   - a model.Model must not be used from two goroutines at once, while
//     the Worker runtime calls Gradient from p goroutines: the adapter
//     keeps a pool of m.Clone() copies, so each goroutine computing at a
//     time has its own (at most as many copies as concurrent calls).
//
// Sample ids are row indices of data. m itself is never called; it only
// serves as the template of the clones.
func FromModel(m model.Model, data *model.Dataset) Model {
	a := &modelAdapter{data: data}
	n := m.NumParams()
	a.pool.New = func() any { return &modelCopy{m: m.Clone(), g: make([]float32, n)} }
	return a
}

type modelAdapter struct {
	data *model.Dataset
	pool sync.Pool // of *modelCopy
}

type modelCopy struct {
	m model.Model
	g []float32
}

// Gradient implements Model.
func (a *modelAdapter) Gradient(params []float32, samples []int, grad []float32) float64 {
	n := len(samples)
	if n == 0 {
		return 0
	}
	mc := a.pool.Get().(*modelCopy)
	defer a.pool.Put(mc)
	loss := mc.m.LossGrad(params, a.data, samples, mc.g)
	fn := float32(n)
	for i, g := range mc.g {
		grad[i] += g * fn
	}
	return loss * float64(n)
}
