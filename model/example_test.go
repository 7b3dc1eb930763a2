package model_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/falconml/falcon/model"
)

// Example trains softmax regression on seeded synthetic clusters with
// plain mini-batch SGD.
func Example() {
	train, test, err := model.Synthetic(model.SyntheticConfig{Train: 1000, Test: 500, Seed: 1})
	if err != nil {
		panic(err)
	}
	m := model.NewSoftmax(train.D, train.Classes)
	rng := rand.New(rand.NewPCG(1, 2))
	w := make([]float32, m.NumParams())
	m.Init(w, rng)
	g := make([]float32, len(w))
	batch := make([]int, 32)
	for step := 0; step < 300; step++ {
		for i := range batch {
			batch[i] = rng.IntN(train.N)
		}
		m.LossGrad(w, train, batch, g)
		for i := range w {
			w[i] -= 0.1 * g[i]
		}
	}
	_, acc := m.Evaluate(w, test, nil)
	fmt.Println(m.Name(), "params:", m.NumParams())
	fmt.Println("better than chance:", acc > 0.5)
	// Output:
	// softmax(20x10) params: 210
	// better than chance: true
}

// ExampleNewCNN builds LeNet-5 for MNIST, lists the parameter tensors a
// parameter server would keep under one key each, and takes SGD steps on
// a toy image task: the class is the quadrant of a 28×28 image that is
// bright.
func ExampleNewCNN() {
	m, err := model.NewCNN(model.DefaultCNNConfig())
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Name(), "params:", m.NumParams())
	for _, t := range m.Tensors() {
		fmt.Printf("%-8s %v\n", t.Name, t.Shape)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	const n, side = 200, 28
	x := make([]float32, n*side*side)
	y := make([]uint8, n)
	for i := range n {
		q := rng.IntN(4)
		y[i] = uint8(q)
		for p := range side * side {
			if r, c := p/side, p%side; (r/14)*2+c/14 == q {
				x[i*side*side+p] = 1
			}
		}
	}
	data, err := model.NewDataset(x, y, side*side, 10)
	if err != nil {
		panic(err)
	}
	w := make([]float32, m.NumParams())
	m.Init(w, rng)
	g := make([]float32, len(w))
	batch := make([]int, 8)
	for step := 0; step < 30; step++ {
		for i := range batch {
			batch[i] = rng.IntN(n)
		}
		m.LossGrad(w, data, batch, g)
		for i := range w {
			w[i] -= 0.05 * g[i]
		}
	}
	_, acc := m.Evaluate(w, data, nil)
	fmt.Println("learned the quadrants:", acc > 0.9)
	// Output:
	// cnn(1x28x28,conv6,conv16,fc120,fc84,fc10) params: 61706
	// conv1.w  [6 1 5 5]
	// conv1.b  [6]
	// conv2.w  [16 6 5 5]
	// conv2.b  [16]
	// fc1.w    [120 400]
	// fc1.b    [120]
	// fc2.w    [84 120]
	// fc2.b    [84]
	// fc3.w    [10 84]
	// fc3.b    [10]
	// learned the quadrants: true
}
