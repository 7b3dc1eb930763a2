package predictor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// windowLoss runs the network over xs from state (h0, c0) and returns
// L = ½ Σ_t Σ_k (y_tk − target_tk)² and, in dys, ∂L/∂y.
func windowLoss(tp *Tape, xs, targets []float64, steps int, h0, c0, dys []float64) float64 {
	ys := tp.Forward(xs, steps, h0, c0)
	l := 0.0
	for i, y := range ys {
		d := y - targets[i]
		l += 0.5 * d * d
		if dys != nil {
			dys[i] = d
		}
	}
	return l
}

// TestTape_GradientCheck compares Backward with central finite differences
// for every parameter of small LSTM and GRU networks, from a non-zero
// initial state.
func TestTape_GradientCheck(t *testing.T) {
	// Central differences have truncation error O(eps²·|f'''|) ≈ 1e-12 and
	// rounding error O(1e-16·|L|/eps) ≈ 1e-10 for eps = 1e-6 and L = O(1);
	// gradTol = 1e-6 on the error relative to max(1, |g|) leaves a margin of
	// more than 1000× over both, while a wrong term in a backward formula
	// gives errors of order 1e-2 or more.
	const eps, gradTol = 1e-6, 1e-6
	for _, cell := range []Cell{CellLSTM, CellGRU} {
		t.Run(cell.String(), func(t *testing.T) {
			const in, hid, out, steps = 4, 3, 2, 5
			n := NewNetwork(cell, in, hid, out, rand.NewPCG(7, 11))
			rng := rand.New(rand.NewPCG(3, 5))
			// Perturb biases too so that every parameter has a generic value.
			for i := range n.Params {
				n.Params[i] += 0.3 * rng.NormFloat64()
			}
			xs := make([]float64, steps*in)
			targets := make([]float64, steps*out)
			h0, c0 := make([]float64, hid), make([]float64, hid)
			for _, s := range [][]float64{xs, targets, h0, c0} {
				for i := range s {
					s[i] = rng.NormFloat64()
				}
			}
			if cell == CellGRU {
				clear(c0) // c is not a GRU state
			}
			tp := n.NewTape(steps)
			dys := make([]float64, steps*out)
			windowLoss(tp, xs, targets, steps, h0, c0, dys)
			tp.Backward(dys)
			grad := append([]float64(nil), tp.Grad...)
			worst := 0.0
			for i := range n.Params {
				p := n.Params[i]
				n.Params[i] = p + eps
				lp := windowLoss(tp, xs, targets, steps, h0, c0, nil)
				n.Params[i] = p - eps
				lm := windowLoss(tp, xs, targets, steps, h0, c0, nil)
				n.Params[i] = p
				fd := (lp - lm) / (2 * eps)
				e := math.Abs(fd-grad[i]) / math.Max(1, math.Abs(fd))
				worst = math.Max(worst, e)
				if e > gradTol {
					t.Errorf("param %d: backprop %.10g, finite difference %.10g (err %.3g > %g)", i, grad[i], fd, e, gradTol)
				}
			}
			t.Logf("%s: %d parameters, worst relative error %.3g", cell, len(n.Params), worst)
		})
	}
}

func TestClipGlobalNorm(t *testing.T) {
	g := []float64{3, 4}
	if norm := ClipGlobalNorm(g, 1); norm != 5 || !close(g[0], 0.6, tol) || !close(g[1], 0.8, tol) {
		t.Fatalf("ClipGlobalNorm = %v, g = %v; want 5, [0.6 0.8]", norm, g)
	}
	g = []float64{0.3, 0.4}
	if ClipGlobalNorm(g, 1); g[0] != 0.3 || g[1] != 0.4 {
		t.Fatalf("below the bound g changed to %v", g)
	}
}

func TestAdam_MinimisesQuadratic(t *testing.T) {
	// f(θ) = ½ Σ (θ_i − c_i)²; Adam with lr 0.05 must get within 1e-3 of c
	// in 2000 steps (it oscillates at a scale ~lr near the optimum before
	// the moment estimates settle; 1e-3 is a loose bound for that).
	c := []float64{1, -2, 0.5}
	th := make([]float64, 3)
	g := make([]float64, 3)
	a := NewAdam(3)
	for it := 0; it < 2000; it++ {
		for i := range th {
			g[i] = th[i] - c[i]
		}
		a.Step(th, g, 0.05)
	}
	for i := range th {
		if math.Abs(th[i]-c[i]) > 1e-3 {
			t.Fatalf("θ = %v, want %v", th, c)
		}
	}
}
