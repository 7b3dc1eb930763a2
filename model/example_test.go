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
