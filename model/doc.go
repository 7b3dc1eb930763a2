// Package model holds the small classifiers and datasets that Falcon's
// convergence studies train: multinomial logistic (softmax) regression and a
// one-hidden-layer ReLU perceptron, both with their parameters in one flat
// float32 vector, plus a seeded synthetic Gaussian-cluster dataset. The
// MNIST loader lives in the sub-package [github.com/falconml/falcon/model/mnist].
//
// # Overview
//
// A [Model] computes the mean loss and mean gradient over a set of row
// indices of a [Dataset] (the rows a worker was assigned for one clock), and
// evaluates loss and accuracy. Gradients are exact (checked against central
// finite differences in the tests); initialisation is seeded, so the same
// seed gives the same run bit for bit. The models are deliberately plain
// loops over float32 data: they are the "real gradient math" that the
// virtual-time simulator ps/sim drives, and their cost is what a worker's
// compute time stands for.
//
// # Usage
//
//	train, test, _ := model.Synthetic(model.SyntheticConfig{Seed: 1})
//	m := model.NewSoftmax(train.D, train.Classes)
//	w := make([]float32, m.NumParams())
//	m.Init(w, rand.New(rand.NewPCG(1, 2)))
//	g := make([]float32, len(w))
//	for step := 0; step < 100; step++ {
//		idx := []int{ /* a mini-batch of row indices */ }
//		m.LossGrad(w, train, idx, g)
//		for i := range w {
//			w[i] -= 0.1 * g[i]
//		}
//	}
//	_, acc := m.Evaluate(w, test, nil)
package model
