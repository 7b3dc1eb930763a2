package ps_test

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/ps"
)

// FromModel sums where model.Model averages, adds into the caller's
// buffer, and is safe from many goroutines at once (run with -race).
func TestFromModel(t *testing.T) {
	train, _, err := model.Synthetic(model.SyntheticConfig{Train: 200, Test: 10, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	m := model.NewMLP(train.D, 8, train.Classes)
	params := make([]float32, m.NumParams())
	m.Init(params, rand.New(rand.NewPCG(1, 2)))
	a := ps.FromModel(m, train)

	idx := []int{3, 7, 11, 19, 40, 41}
	mean := make([]float32, len(params))
	meanLoss := m.Clone().LossGrad(params, train, idx, mean)

	grad := make([]float32, len(params))
	for i := range grad {
		grad[i] = 1 // Gradient must add, not overwrite
	}
	loss := a.Gradient(params, idx, grad)
	if math.Abs(loss-6*meanLoss) > 1e-9*math.Abs(loss) {
		t.Errorf("loss = %v, want 6 × mean %v", loss, meanLoss)
	}
	for i := range grad {
		if want := 1 + 6*mean[i]; math.Abs(float64(grad[i]-want)) > 1e-5 {
			t.Fatalf("grad[%d] = %v, want 1 + 6·%v", i, grad[i], mean[i])
		}
	}
	if l := a.Gradient(params, nil, grad); l != 0 {
		t.Errorf("empty batch: loss %v", l)
	}

	// Additivity over a split batch, computed concurrently.
	whole := make([]float32, len(params))
	wl := a.Gradient(params, idx, whole)
	parts := make([][]float32, len(idx))
	losses := make([]float64, len(idx))
	var wg sync.WaitGroup
	for i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[i] = make([]float32, len(params))
			for range 20 { // hammer the pool
				clear(parts[i])
				losses[i] = a.Gradient(params, idx[i:i+1], parts[i])
			}
		}()
	}
	wg.Wait()
	var sl float64
	for i := range idx {
		sl += losses[i]
	}
	if math.Abs(sl-wl) > 1e-6*math.Abs(wl) {
		t.Errorf("sum of per-sample losses %v, whole batch %v", sl, wl)
	}
	for j := range whole {
		var s float64
		for i := range idx {
			s += float64(parts[i][j])
		}
		if math.Abs(s-float64(whole[j])) > 1e-4 {
			t.Fatalf("param %d: parts sum %v, whole %v", j, s, whole[j])
		}
	}
}
