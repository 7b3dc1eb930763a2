// Package predictor predicts the compression speed, decompression speed and
// ratio of a codec on a host from its recent measurements, so that a coflow
// scheduler (package fvdf) can decide online whether compressing a flow
// pays. It is a leaf package: it imports only the standard library and
// gonum.
//
// # Overview
//
// A [Predictor] observes [Measurement] values (speeds in raw bytes per
// second per core, ratio = compressed/raw, plus optional context: the data
// class and the CPU contention level) and predicts the next one as an
// [Estimate]. Before its first observation every predictor answers
// [Config].Default ([DefaultEstimate] unless set). [Keyed] keeps one
// predictor per key, e.g. per [HostCodec]. [New] builds a predictor by name:
//
//   - "last": [LastValue], the persistence forecast;
//   - "ewma": [EWMA], an exponentially weighted moving average (α = 0.3
//     unless set; [TuneAlpha] picks α on a validation split);
//   - "ar": [AR], an AR(p) model of each log component, fitted by least
//     squares (gonum mat, QR) and refitted online;
//   - "lstm", "gru": [RNN], a one-layer recurrent network with a linear
//     head, trained offline with [RNN.Fit] and fine-tuned online.
//
// Optional capabilities are separate interfaces: [Trainer] (Fit on a
// training series) and [Resetter]. [Evaluate] scores one-step-ahead
// predictions (MAPE, RMSE, and MAPE around regime changes); [ReadCSV] and
// [WriteCSVRow] read and write recorded series, which the sub-package
// record measures from real lz4 and snappy runs.
//
// Every predictor is a deterministic single-goroutine value: no goroutines,
// locks, clocks or global randomness; the RNN's initialisation comes from a
// seed ([RNNConfig].Seed → rand.Source).
//
// # The recurrent cell
//
// With input x_t, hidden state h_t, cell state c_t, σ the logistic function
// and ⊙ the elementwise product, the LSTM step is
//
//	i_t = σ(W_i x_t + U_i h_{t−1} + b_i)        input gate
//	f_t = σ(W_f x_t + U_f h_{t−1} + b_f)        forget gate (b_f starts at 1)
//	g_t = tanh(W_g x_t + U_g h_{t−1} + b_g)     candidate
//	o_t = σ(W_o x_t + U_o h_{t−1} + b_o)        output gate
//	c_t = f_t ⊙ c_{t−1} + i_t ⊙ g_t
//	h_t = o_t ⊙ tanh(c_t)
//	y_t = W_y h_t + b_y
//
// and the GRU step is
//
//	z_t = σ(W_z x_t + U_z h_{t−1} + b_z)
//	r_t = σ(W_r x_t + U_r h_{t−1} + b_r)
//	n_t = tanh(W_n x_t + b_n + r_t ⊙ (U_n h_{t−1}))
//	h_t = (1 − z_t) ⊙ n_t + z_t ⊙ h_{t−1}
//
// Training minimises the mean absolute relative error of the predictions,
// L = (1/T) Σ_t Σ_k |exp(σ_k (ŷ_tk − y_tk)) − 1| with ŷ, y z-scored logs
// (or, with [LossMSE], L = (1/2T) Σ_t Σ_k (ŷ_tk − y_tk)²), over windows of T
// steps by truncated backpropagation through time ([Tape.Forward],
// [Tape.Backward]; gradients do not flow into the window's initial state),
// with the global gradient norm clipped ([ClipGlobalNorm]) and [Adam]
// updates. A finite-difference check of every parameter's gradient is in
// the tests.
//
// # Design (ours)
//
// The Swallow paper (Zhou et al.) says only that an RNN predicts
// compression speed online; its inputs, outputs, architecture, window and
// loss are not public. Everything below is our reconstruction, and every
// constant is configurable in [RNNConfig]:
//
//   - Targets are in log space, z-scored with a normalisation fitted on the
//     training series only ([Norm], saved with the model). Speeds span
//     three orders of magnitude across data classes, and errors in log
//     space are relative errors, which is what MAPE and a scheduler's
//     disposal-time estimates care about.
//   - Inputs (7 + NumClasses wide): the z-scored log speeds and
//     ratio of the latest measurement, their EWMA levels, the contention
//     level, and a one-hot of the data class of that measurement. The class
//     and contention are context a host knows (what kind of data it has been
//     sending, how loaded it is); the class of the next chunk is not an
//     input, so the first chunk after a class change is a surprise to every
//     predictor here.
//   - The head is residual: the network predicts a correction to the last
//     value, so an untrained network behaves like [LastValue] and training
//     teaches it when to smooth and when to jump.
//   - Outputs: the next compress speed, decompress speed and ratio, jointly
//     (one network per host and codec, as [Keyed] arranges).
//   - Fit holds out the last ValFrac of the training series to choose the
//     epoch (early stopping); it never sees evaluation data.
//   - Online, the network keeps its recurrent state across observations
//     (one step per Observe) and every OnlineEvery observations takes
//     OnlineSteps Adam steps on the latest Window steps. An RNN that was
//     neither fitted nor loaded answers like EWMA for WarmUp observations
//     while it learns.
//   - Weights are stored input-major so the forward pass is a sum of
//     contiguous axpy updates that skip the zero entries of the one-hot;
//     no allocation happens on the Observe/Predict/FineTune path. At these
//     sizes (hidden 8–32) plain loops beat gonum's BLAS calls, whose
//     per-call overhead dominates; gonum is used for the AR least squares.
//
// Models are saved with [Network.Save] in a versioned little-endian binary
// format with a magic number and a CRC-32; [Load] refuses other versions
// with [ErrVersion]. Floats are stored bit-exactly, so a loaded model
// predicts bit-identically.
//
// # Accuracy
//
// On the committed series (held-out last 40 %, see examples/predictor), the
// LSTM's compress-speed MAPE was about half of EWMA's with the a-priori
// α = 0.3 (0.36 vs 0.70 for lz4, 0.32 vs 0.66 for snappy), but only
// 0.84× (lz4) and 1.01× (snappy) that of EWMA with α tuned on a validation
// split or of LastValue: chunk-to-chunk noise and the unannounced class
// changes bound every predictor, and most of the gain over EWMA(0.3) comes
// from reacting to a regime change within one step.
//
// # Usage
//
// A scheduler that only needs baselines:
//
//	k, err := predictor.NewKeyedByName[predictor.HostCodec]("ewma", predictor.Config{})
//	...
//	k.Observe(predictor.HostCodec{Host: "w3", Codec: "lz4"}, m) // after each measured chunk
//	est := k.Predict(predictor.HostCodec{Host: "w3", Codec: "lz4"})
//
// Training an LSTM on a recorded series and deploying it:
//
//	recs, err := predictor.ReadCSV(f)
//	_, byCodec := predictor.Split(recs)
//	p, err := predictor.NewRNN(predictor.Config{})
//	err = p.Fit(byCodec["lz4"])
//	err = p.Network().SaveFile("lstm.flcn") // atomic: temp file, fsync, rename, fsync of the directory
//	...
//	n, err := predictor.LoadFile("lstm.flcn")
//	q, err := predictor.New("lstm", predictor.Config{RNN: predictor.RNNConfig{Model: n}})
//
// examples/predictor trains and evaluates every predictor on the committed
// series (testdata/series.csv) or on a freshly recorded one.
package predictor
