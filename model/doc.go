// Package model holds the classifiers and datasets that Falcon's
// convergence studies train: multinomial logistic (softmax) regression, a
// one-hidden-layer ReLU perceptron and a LeNet-5-class convolutional
// network ([CNN]), all with their parameters in one flat float32 vector,
// plus a seeded synthetic Gaussian-cluster dataset. The MNIST loader lives
// in the sub-package [github.com/falconml/falcon/model/mnist].
//
// # Overview
//
// A [Model] computes the mean loss and mean gradient over a set of row
// indices of a [Dataset] (the rows a worker was assigned for one clock), and
// evaluates loss and accuracy. Gradients are exact (checked against central
// finite differences in the tests); initialisation is seeded, so the same
// seed gives the same run bit for bit. Softmax and MLP are plain loops
// over float32 data; the CNN is im2col + gonum's gemm in float64, on the
// calling goroutine only. They are the "real gradient math" that the
// virtual-time simulator ps/sim drives, and their cost is what a worker's
// compute time stands for.
//
// Every model lists its parameter tensors ([Tensors], [Layered]): name,
// offset, size and shape of each weight matrix and bias vector, in
// parameter order. A parameter server keeps one key per tensor, and a cost
// model reads the bytes per key from here. [ResNet50Tensors] and
// [VGG16Tensors] list the tensors of two ImageNet networks Falcon does not
// train, computed from their architectures as torchvision builds them
// (25,557,032 and 138,357,544 parameters, torchvision's published counts),
// with their published forward multiply-accumulates per image
// ([ResNet50ForwardMACs], [VGG16ForwardMACs]), for a simulator's cost
// model (ps/sim.CostModel).
//
// # The CNN on MNIST
//
// [DefaultCNNConfig] is LeNet-5 (LeCun et al. 1998) with ReLU and max
// pooling: 28×28 padded to 32×32 → conv 6@5×5 → pool 2 → conv 16@5×5 →
// pool 2 → dense 120 → dense 84 → dense 10 → softmax, 61,706 parameters
// in 10 tensors (conv1.w 150, conv1.b 6, conv2.w 2,400, conv2.b 16, fc1.w
// 48,000, fc1.b 120, fc2.w 10,080, fc2.b 84, fc3.w 840, fc3.b 10), and
// 416,520 multiply-accumulates per sample forward ([CNN.ForwardMACs]).
// Its gradient matches central differences on every parameter of a small
// net and on 10 coordinates of each LeNet-5 tensor to a relative error of
// at most 1e-4 (5.7e-8 and 4.9e-8 measured; TestCNN_GradientFiniteDifference).
//
// Cost on this project's machine (2 cores of an AMD EPYC, shared; CPU time
// of the process, which does not count time spent waiting for a core; Go
// 1.26, amd64):
//
//	forward+backward, batch  1    238 µs/sample
//	forward+backward, batch  8    219 µs/sample
//	forward+backward, batch 32    220 µs/sample
//	forward+backward, batch 128   218 µs/sample
//	forward only (Evaluate)        96 µs/sample
//
// So a call costs about 20 µs (238 − 218: the float32↔float64 conversion
// of the parameters and the gradient) plus 218 µs per sample, and
// allocates nothing (TestCNN_NoAllocPerStep).
// A simulated clock of M workers with batch B costs M·B·0.22 ms of CPU,
// and an evaluation on n test images n·0.1 ms: 8 workers × 32 samples is
// 56 ms, an evaluation on 1,000 images 96 ms. Produced by:
//
//	go test ./model/mnist -run '^$' -bench LeNet5 -benchtime 2s -count 2
//
// Accuracy of plain SGD (no momentum, no decay, batch 32 drawn with
// replacement, He initialisation), on the 10,000 MNIST test images, mean
// [min, max] over seeds 1-3:
//
//	samples   lr 0.01              lr 0.03              lr 0.1
//	  5,024   0.834 [0.801,0.861]  0.900 [0.886,0.910]  0.914 [0.871,0.937]
//	 10,016   0.896 [0.890,0.909]  0.930 [0.915,0.941]  0.950 [0.949,0.952]
//	 20,000   0.929 [0.925,0.936]  0.952 [0.948,0.960]  0.964 [0.962,0.966]
//	 40,000   0.952 [0.947,0.954]  0.970 [0.968,0.972]  0.976 [0.971,0.979]
//	 60,000   0.957 [0.950,0.966]  0.970 [0.956,0.979]  0.978 [0.972,0.983]
//
// and one seed at lr 0.1 for three epochs: 0.983 at 60,000 samples, 0.982
// at 100,000, 0.986 at 140,000, 0.987 at 180,000. Rates above 0.1 were
// not tried. Produced by:
//
//	go test ./model/mnist -run TestLeNet5_SGDCurve -v -timeout 1h \
//	    -lenet.samples 60000 -lenet.seeds 3 -lenet.lr 0.01,0.03,0.1
//	go test ./model/mnist -run TestLeNet5_SGDCurve -v -timeout 1h \
//	    -lenet.samples 180000 -lenet.seeds 1 -lenet.lr 0.1 -lenet.every 20000
//
// For sizing a study: with a single SGD stream at lr 0.1, 0.95 takes
// about 10,000 samples (2.2 s of CPU), 0.97 about 35,000 (7.7 s) and 0.98
// about one epoch (mean 0.978 at 60,000); accuracy is still rising slowly
// at 0.987 after three. A distributed run's updates are staler or
// averaged, so it needs more samples than these.
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
