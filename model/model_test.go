package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// gradTol is the relative tolerance of the finite-difference check. The
// models accumulate dot products in float32 (about 7 significant digits);
// with step h = 1e-3 the central difference has rounding error of about
// 1e-7·loss/h ≈ 2e-4, hence the absolute floor 5e-4, while the gradients
// checked are of order 1e-2..1e-1. A larger h (1e-2) crosses ReLU kinks of
// the MLP for some rows and makes the difference quotient meaningless.
const (
	gradTol    = 1e-2
	gradAbsTol = 5e-4
	fdStep     = 1e-3
)

func checkGrad(t *testing.T, m Model, data *Dataset, idx []int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	w := make([]float32, m.NumParams())
	m.Init(w, rng)
	// Move off the initial point so biases and ReLUs are not all zero.
	for i := range w {
		w[i] += float32(0.1 * rng.NormFloat64())
	}
	g := make([]float32, len(w))
	m.LossGrad(w, data, idx, g)
	scratch := make([]float32, len(w))
	// Check a seeded sample of coordinates (all of them for tiny models).
	coords := rng.Perm(len(w))
	if len(coords) > 60 {
		coords = coords[:60]
	}
	for _, c := range coords {
		orig := w[c]
		w[c] = orig + fdStep
		lp := m.LossGrad(w, data, idx, scratch)
		w[c] = orig - fdStep
		lm := m.LossGrad(w, data, idx, scratch)
		w[c] = orig
		fd := (lp - lm) / (2 * fdStep)
		got := float64(g[c])
		if diff := math.Abs(fd - got); diff > gradAbsTol && diff > gradTol*math.Max(math.Abs(fd), math.Abs(got)) {
			t.Errorf("%s: d/dw[%d] analytic %.6g, finite difference %.6g", m.Name(), c, got, fd)
		}
	}
}

func TestModel_GradientFiniteDifference(t *testing.T) {
	train, _, err := Synthetic(SyntheticConfig{Train: 50, Test: 1, Dim: 6, Classes: 4, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	idx := []int{0, 3, 7, 8, 20, 21, 40}
	l2 := NewSoftmax(6, 4)
	l2.L2 = 0.05
	tests := []struct {
		name string
		m    Model
	}{
		{"softmax", NewSoftmax(6, 4)},
		{"softmax-l2", l2},
		{"mlp", NewMLP(6, 5, 4)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkGrad(t, tc.m, train, idx, 11)
		})
	}
}

func TestModel_EmptyBatch(t *testing.T) {
	train, _, _ := Synthetic(SyntheticConfig{Train: 10, Test: 1, Dim: 3, Classes: 3})
	for _, m := range []Model{NewSoftmax(3, 3), NewMLP(3, 4, 3)} {
		w := make([]float32, m.NumParams())
		m.Init(w, rand.New(rand.NewPCG(1, 1)))
		g := make([]float32, len(w))
		for i := range g {
			g[i] = 42
		}
		if l := m.LossGrad(w, train, nil, g); l != 0 {
			t.Errorf("%s: loss over no rows = %v, want 0", m.Name(), l)
		}
		for i, v := range g {
			if v != 0 {
				t.Fatalf("%s: grad[%d] = %v after empty batch, want 0", m.Name(), i, v)
			}
		}
	}
}

// TestModel_Trains checks that plain SGD on the synthetic clusters drives
// the test accuracy well above chance (10%) for both models.
func TestModel_Trains(t *testing.T) {
	train, test, err := Synthetic(SyntheticConfig{Train: 2000, Test: 500, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []Model{NewSoftmax(train.D, train.Classes), NewMLP(train.D, 32, train.Classes)} {
		t.Run(m.Name(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(2, 2))
			w := make([]float32, m.NumParams())
			m.Init(w, rng)
			_, acc0 := m.Evaluate(w, test, nil)
			g := make([]float32, len(w))
			idx := make([]int, 32)
			for step := 0; step < 400; step++ {
				for i := range idx {
					idx[i] = rng.IntN(train.N)
				}
				m.LossGrad(w, train, idx, g)
				for i := range w {
					w[i] -= 0.1 * g[i]
				}
			}
			loss, acc := m.Evaluate(w, test, nil)
			// 0.6 is far above chance (0.1) and below what both models
			// reach on these clusters (about 0.75-0.85).
			if acc < 0.6 || acc <= acc0 {
				t.Errorf("accuracy %.3f (initial %.3f, loss %.3f), want >= 0.6", acc, acc0, loss)
			}
		})
	}
}

func TestModel_InitDeterministic(t *testing.T) {
	for _, m := range []Model{NewSoftmax(5, 3), NewMLP(5, 4, 3)} {
		a := make([]float32, m.NumParams())
		b := make([]float32, m.NumParams())
		m.Init(a, rand.New(rand.NewPCG(9, 9)))
		m.Clone().Init(b, rand.New(rand.NewPCG(9, 9)))
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s: init differs at %d: %v vs %v", m.Name(), i, a[i], b[i])
			}
		}
	}
}

func TestModel_PanicsOnBadShape(t *testing.T) {
	train, _, _ := Synthetic(SyntheticConfig{Train: 10, Test: 1, Dim: 3, Classes: 3})
	tests := []struct {
		name string
		f    func()
	}{
		{"softmax-params", func() { NewSoftmax(3, 3).LossGrad(make([]float32, 2), train, []int{0}, make([]float32, 2)) }},
		{"softmax-dim", func() {
			m := NewSoftmax(4, 3)
			w := make([]float32, m.NumParams())
			m.LossGrad(w, train, []int{0}, make([]float32, len(w)))
		}},
		{"mlp-grad", func() {
			m := NewMLP(3, 2, 3)
			m.LossGrad(make([]float32, m.NumParams()), train, []int{0}, make([]float32, 1))
		}},
		{"new-mlp", func() { NewMLP(0, 1, 2) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic")
				}
			}()
			tc.f()
		})
	}
}
