package model

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// CNN gradient check. The CNN computes in float64, so the central
// difference (L(w+h) − L(w−h)) / (2h) has truncation error O(h²·L”') and
// rounding error about 1e-16·L/h, both far below 1e-6 for h = 1e-4; the
// perturbed float32 parameter is not exactly w ± h, so the quotient uses
// the step actually taken. What remains is the analytic gradient's
// float32 rounding (relative 6e-8) and the rare kink of a ReLU or a
// max-pool choice inside ±h, which the bound would expose as an error
// of order 1. Bound: |analytic − numeric| ≤ cnnGradTol·max(|analytic|,
// |numeric|) + cnnGradAbs.
const (
	cnnGradTol  = 1e-4
	cnnGradAbs  = 1e-7
	cnnGradStep = 1e-4
)

// smallCNN is a net whose every parameter the gradient check visits:
// 2×12×12 input padded to 16×16 → conv 3@5×5 (12×12) → pool (6×6) → conv
// 4@5×5 (2×2) → pool (1×1) → dense 5 → dense 4 → 3 classes.
func smallCNN(t testing.TB) *CNN {
	m, err := NewCNN(CNNConfig{Height: 12, Width: 12, Channels: 2, Classes: 3, Conv1: 3, Conv2: 4, Pad: 2, Hidden: []int{5, 4}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// cnnData returns n random images of m's shape with labels.
func cnnData(t testing.TB, m *CNN, n int, seed uint64) *Dataset {
	c := m.Config()
	rng := rand.New(rand.NewPCG(seed, 3))
	d := c.Channels * c.Height * c.Width
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.Float64())
	}
	y := make([]uint8, n)
	for i := range y {
		y[i] = uint8(rng.IntN(c.Classes))
	}
	ds, err := NewDataset(x, y, d, c.Classes)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// checkCNNGrad compares LossGrad with central differences on the
// coordinates coords (all if nil) and returns the largest relative error.
func checkCNNGrad(t *testing.T, m *CNN, data *Dataset, idx []int, coords []int, rng *rand.Rand) float64 {
	t.Helper()
	w := make([]float32, m.NumParams())
	m.Init(w, rng)
	// Biases off zero so no unit sits on a ReLU kink at the start.
	for _, tn := range m.Tensors() {
		if len(tn.Shape) == 1 {
			for j := range tn.Size {
				w[tn.Offset+j] = float32(0.1 * rng.NormFloat64())
			}
		}
	}
	g := make([]float32, len(w))
	m.LossGrad(w, data, idx, g)
	scratch := make([]float32, len(w))
	if coords == nil {
		coords = make([]int, len(w))
		for i := range coords {
			coords[i] = i
		}
	}
	var worst float64
	for _, c := range coords {
		orig := w[c]
		w[c] = orig + cnnGradStep
		up := float64(w[c]) - float64(orig)
		lp := m.LossGrad(w, data, idx, scratch)
		w[c] = orig - cnnGradStep
		down := float64(orig) - float64(w[c])
		lm := m.LossGrad(w, data, idx, scratch)
		w[c] = orig
		fd := (lp - lm) / (up + down)
		got := float64(g[c])
		diff := math.Abs(fd - got)
		scale := math.Max(math.Abs(fd), math.Abs(got))
		if diff > cnnGradTol*scale+cnnGradAbs {
			t.Errorf("%s: d/dw[%d] analytic %.9g, central difference %.9g", m.Name(), c, got, fd)
		}
		if scale > 0 {
			worst = math.Max(worst, diff/scale)
		}
	}
	return worst
}

func TestCNN_GradientFiniteDifference(t *testing.T) {
	t.Run("small-every-param", func(t *testing.T) {
		m := smallCNN(t)
		data := cnnData(t, m, 6, 1)
		worst := checkCNNGrad(t, m, data, []int{0, 1, 2, 3, 4, 5}, nil, rand.New(rand.NewPCG(4, 4)))
		t.Logf("%s: %d params, largest relative error %.2g", m.Name(), m.NumParams(), worst)
	})
	t.Run("lenet5-sampled", func(t *testing.T) {
		m, err := NewCNN(DefaultCNNConfig())
		if err != nil {
			t.Fatal(err)
		}
		data := cnnData(t, m, 3, 2)
		rng := rand.New(rand.NewPCG(5, 5))
		// 10 coordinates of every tensor.
		var coords []int
		for _, tn := range m.Tensors() {
			for range 10 {
				coords = append(coords, tn.Offset+rng.IntN(tn.Size))
			}
		}
		worst := checkCNNGrad(t, m, data, []int{0, 1, 2}, coords, rng)
		t.Logf("%s: %d coordinates, largest relative error %.2g", m.Name(), len(coords), worst)
	})
}

// TestCNN_LeNet5Shape pins the default network's tensors to LeNet-5's
// (61,706 parameters with C5 as a 400→120 dense layer).
func TestCNN_LeNet5Shape(t *testing.T) {
	var zero CNNConfig
	m, err := NewCNN(zero)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name string
		size int
	}{
		{"conv1.w", 150}, {"conv1.b", 6}, {"conv2.w", 2400}, {"conv2.b", 16},
		{"fc1.w", 48000}, {"fc1.b", 120}, {"fc2.w", 10080}, {"fc2.b", 84}, {"fc3.w", 840}, {"fc3.b", 10},
	}
	ts := m.Tensors()
	if len(ts) != len(want) {
		t.Fatalf("%d tensors, want %d: %+v", len(ts), len(want), ts)
	}
	off := 0
	for i, w := range want {
		if ts[i].Name != w.name || ts[i].Size != w.size || ts[i].Offset != off {
			t.Errorf("tensor %d = %+v, want %s size %d at %d", i, ts[i], w.name, w.size, off)
		}
		off += w.size
	}
	if m.NumParams() != 61706 || off != 61706 {
		t.Errorf("NumParams %d, sum %d, want 61706", m.NumParams(), off)
	}
	// 6·28·28·25 + 16·10·10·150 + 400·120 + 120·84 + 84·10.
	if got := m.ForwardMACs(); got != 117600+240000+48000+10080+840 {
		t.Errorf("ForwardMACs = %d, want 416520", got)
	}
	if got := m.Name(); got != "cnn(1x28x28,conv6,conv16,fc120,fc84,fc10)" {
		t.Errorf("Name %q", got)
	}
	// The fallback of Tensors for a model without Layered.
	if ts := Tensors(struct{ Model }{m}); len(ts) != 1 || ts[0].Size != 61706 {
		t.Errorf("fallback tensors %+v", ts)
	}
}

func TestTensors_Contiguous(t *testing.T) {
	for _, m := range []Model{NewSoftmax(7, 3), NewMLP(7, 5, 3), smallCNN(t)} {
		off := 0
		for _, tn := range Tensors(m) {
			size := 1
			for _, s := range tn.Shape {
				size *= s
			}
			if tn.Offset != off || tn.Size != size {
				t.Errorf("%s: %+v: offset want %d, size want %d", m.Name(), tn, off, size)
			}
			off += tn.Size
		}
		if off != m.NumParams() {
			t.Errorf("%s: tensors cover %d of %d", m.Name(), off, m.NumParams())
		}
	}
}

// TestCNN_Deterministic: the same seed gives the same parameters, and the
// same parameters and batch give the same loss and gradient bit for bit,
// on a clone as on the original.
func TestCNN_Deterministic(t *testing.T) {
	m, err := NewCNN(DefaultCNNConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := m.Clone()
	a, b := make([]float32, m.NumParams()), make([]float32, m.NumParams())
	m.Init(a, rand.New(rand.NewPCG(7, 7)))
	c.Init(b, rand.New(rand.NewPCG(7, 7)))
	if !slices.Equal(a, b) {
		t.Fatal("Init differs for the same seed")
	}
	data := cnnData(t, m, 20, 3)
	idx := []int{3, 1, 4, 1, 5, 9, 2, 6}
	ga, gb := make([]float32, len(a)), make([]float32, len(a))
	la := m.LossGrad(a, data, idx, ga)
	m.LossGrad(a, data, []int{0, 7}, gb) // leave other values in the scratch
	lb := c.LossGrad(a, data, idx, gb)
	if la != lb || !slices.Equal(ga, gb) {
		t.Fatalf("loss %v vs %v or gradients differ", la, lb)
	}
	lc := m.LossGrad(a, data, idx, gb)
	if la != lc || !slices.Equal(ga, gb) {
		t.Fatalf("second call: loss %v vs %v or gradients differ", la, lc)
	}
}

// TestCNN_NoAllocPerStep: after the first call, LossGrad and Evaluate
// allocate nothing, so memory does not grow with the number of steps.
func TestCNN_NoAllocPerStep(t *testing.T) {
	m, err := NewCNN(DefaultCNNConfig())
	if err != nil {
		t.Fatal(err)
	}
	data := cnnData(t, m, 16, 4)
	w, g := make([]float32, m.NumParams()), make([]float32, m.NumParams())
	m.Init(w, rand.New(rand.NewPCG(1, 1)))
	idx := []int{0, 1, 2, 3, 4, 5, 6, 7}
	if n := testing.AllocsPerRun(5, func() { m.LossGrad(w, data, idx, g) }); n != 0 {
		t.Errorf("LossGrad: %v allocations per call, want 0", n)
	}
	if n := testing.AllocsPerRun(5, func() { m.Evaluate(w, data, nil) }); n != 0 {
		t.Errorf("Evaluate: %v allocations per call, want 0", n)
	}
}

// TestCNN_Trains: plain SGD on a separable toy task (the class is which
// quadrant of the image is bright) drives the training loss down and the
// accuracy well above chance.
func TestCNN_Trains(t *testing.T) {
	m, err := NewCNN(CNNConfig{Height: 12, Width: 12, Classes: 4, Conv1: 4, Conv2: 6, Hidden: []int{16}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 8))
	const n = 200
	x := make([]float32, n*144)
	y := make([]uint8, n)
	for i := range n {
		q := rng.IntN(4)
		y[i] = uint8(q)
		for p := range 144 {
			r, c := p/12, p%12
			v := 0.2 * rng.Float64()
			if (r/6)*2+c/6 == q {
				v += 0.8
			}
			x[i*144+p] = float32(v)
		}
	}
	data, err := NewDataset(x, y, 144, 4)
	if err != nil {
		t.Fatal(err)
	}
	w, g := make([]float32, m.NumParams()), make([]float32, m.NumParams())
	m.Init(w, rng)
	loss0, _ := m.Evaluate(w, data, nil)
	batch := make([]int, 10)
	for range 100 {
		for i := range batch {
			batch[i] = rng.IntN(n)
		}
		m.LossGrad(w, data, batch, g)
		for i := range w {
			w[i] -= 0.05 * g[i]
		}
	}
	loss, acc := m.Evaluate(w, data, nil)
	if !(loss < loss0/2) || acc < 0.9 {
		t.Errorf("after 1000 samples: loss %.3f (initial %.3f), accuracy %.3f; want loss halved, accuracy >= 0.9", loss, loss0, acc)
	}
}

func TestCNNConfig_Validate(t *testing.T) {
	bad := []CNNConfig{
		{Height: -1},
		{Classes: 1},
		{Classes: 300},
		{Hidden: []int{10, 0}},
		{Height: 27},           // 27+4−4 = 27: odd
		{Height: 12, Pad: -1},  // 8 → 4 → 0
		{Width: 16, Conv1: -2}, // negative filters
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: Validate = %v, want ErrConfig", c, err)
		}
		if _, err := NewCNN(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: NewCNN = %v, want ErrConfig", c, err)
		}
	}
	// No padding: 28 → 24 → 12 → 8 → 4, F = 16·4·4.
	m, err := NewCNN(CNNConfig{Pad: -1})
	if err != nil {
		t.Fatal(err)
	}
	if ts := m.Tensors(); ts[4].Shape[1] != 256 {
		t.Errorf("no padding: fc1 input %d, want 256", ts[4].Shape[1])
	}
	if c := m.Clone().(*CNN); c.NumParams() != m.NumParams() {
		t.Errorf("clone of an unpadded net has %d params, want %d", c.NumParams(), m.NumParams())
	}
}

func TestCNN_EmptyBatchAndPanics(t *testing.T) {
	m := smallCNN(t)
	data := cnnData(t, m, 4, 1)
	w := make([]float32, m.NumParams())
	g := make([]float32, len(w))
	for i := range g {
		g[i] = 1
	}
	if l := m.LossGrad(w, data, nil, g); l != 0 || slices.ContainsFunc(g, func(v float32) bool { return v != 0 }) {
		t.Errorf("empty batch: loss %v, gradient not cleared", l)
	}
	other, _, _ := Synthetic(SyntheticConfig{Train: 4, Test: 1, Dim: 10, Classes: 3})
	for name, f := range map[string]func(){
		"params":  func() { m.LossGrad(w[1:], data, []int{0}, g[1:]) },
		"grad":    func() { m.LossGrad(w, data, []int{0}, g[1:]) },
		"dataset": func() { m.Evaluate(w, other, nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
