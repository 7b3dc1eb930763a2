package predictor

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Input features of the RNN predictor at step t (our design; the Swallow
// paper does not publish its RNN's inputs):
//
//	x[0..2]  z-scores of log compress speed, log decompress speed and log
//	         ratio of measurement t (the EWMA level below when not measured);
//	x[3..5]  z-scores of the EWMA levels (in log space, smoothing
//	         Config.Alpha) of the same three values;
//	x[6]     z-score of the contention level;
//	x[7..]   one-hot of the data class (NumClasses wide; all zero if unknown).
//
// The head is residual: the network's outputs y[0..2] are corrections to
// the last value, so the predicted z-score of measurement t+1's component k
// is x[k] + y[k]. An untrained head (y ≈ 0) thus starts as LastValue, which
// reacts to a regime change after one observation; training teaches it
// when and how much to smooth instead (for example in a steady regime, or
// after a transient dip). The residual form is our design choice.
const (
	numComp   = 3 // predicted components
	featFixed = 7 // input features before the one-hot
)

// RNN is a Predictor backed by a Network (LSTM or GRU). It keeps the
// recurrent state across observations (one network step per Observe), and
// fine-tunes online: every RNNConfig.OnlineEvery observations it takes
// RNNConfig.OnlineSteps Adam steps on the latest RNNConfig.Window steps,
// starting from the state saved before that window (truncated BPTT). All
// buffers are allocated up front; Observe and Predict do not allocate.
type RNN struct {
	cfg      RNNConfig
	alpha    float64
	net      *Network
	trained  bool
	fallback EWMA

	// recurrent state
	h, c, hN, cN, act, y, x []float64
	lvl                     [numComp]float64
	lvlSeen                 [numComp]bool
	count                   int

	// online fine-tuning
	tape       *Tape
	adam       *Adam
	ringX      []float64 // [(W+1) × In] input of step s at slot s%(W+1)
	ringT      []float64 // [(W+1) × Out] target of step s (from measurement s+1)
	ringM      []float64 // [(W+1) × Out] 1 where the target is valid
	ringH      []float64 // [(W+1) × H] state before step s
	ringC      []float64
	winX, dys  []float64
	winT, winM []float64
	tmpH, tmpC []float64
}

var (
	_ Predictor = (*RNN)(nil)
	_ Trainer   = (*RNN)(nil)
	_ Resetter  = (*RNN)(nil)
)

// NewRNN returns an RNN predictor. With cfg.RNN.Model set it starts from a
// clone of that network; otherwise the network is initialised from
// cfg.RNN.Seed and answers like EWMA until Fit is called or until it has
// fine-tuned online on cfg.RNN.WarmUp observations (with the training
// learning rate, starting from normalisation centred on cfg.Default).
func NewRNN(cfg Config) (*RNN, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	p := &RNN{cfg: c.RNN, alpha: c.Alpha, fallback: *NewEWMA(c.Alpha, c.Default)}
	if c.RNN.Model != nil {
		if err := c.RNN.Model.check(); err != nil {
			return nil, err
		}
		if c.RNN.Model.Out != numComp || c.RNN.Model.In != featFixed+c.RNN.Model.Norm.NumClasses {
			return nil, fmt.Errorf("%w: model shape in=%d out=%d does not match the RNN predictor's features", ErrConfig, c.RNN.Model.In, c.RNN.Model.Out)
		}
		p.net = c.RNN.Model.Clone()
		p.trained = true
	} else {
		p.net = NewNetwork(c.RNN.Cell, featFixed+c.RNN.NumClasses, c.RNN.Hidden, numComp, rand.NewPCG(c.RNN.Seed, 0x15f3))
		p.net.Norm = Norm{NumClasses: c.RNN.NumClasses, Alpha: c.Alpha,
			Mean: [4]float64{math.Log(c.Default.CompressSpeed), math.Log(c.Default.DecompressSpeed), math.Log(c.Default.Ratio), 0},
			Std:  [4]float64{1, 1, 1, 1}}
	}
	p.alloc()
	return p, nil
}

func (p *RNN) alloc() {
	n := p.net
	H, I, O, W, G := n.Hidden, n.In, n.Out, p.cfg.Window, n.gates()
	p.h, p.c, p.hN, p.cN = make([]float64, H), make([]float64, H), make([]float64, H), make([]float64, H)
	p.act, p.y, p.x = make([]float64, G*H), make([]float64, O), make([]float64, I)
	p.tape = n.NewTape(W)
	p.adam = NewAdam(len(n.Params))
	R := W + 1 // ring slots: a full window plus the latest step
	p.ringX, p.ringT, p.ringM = make([]float64, R*I), make([]float64, R*O), make([]float64, R*O)
	p.ringH, p.ringC = make([]float64, R*H), make([]float64, R*H)
	p.winX, p.winT, p.winM, p.dys = make([]float64, W*I), make([]float64, W*O), make([]float64, W*O), make([]float64, W*O)
	p.tmpH, p.tmpC = make([]float64, H), make([]float64, H)
}

// Network returns the predictor's current network (not a copy: it changes
// with online fine-tuning; Clone it to keep a snapshot, or Save it).
func (p *RNN) Network() *Network { return p.net }

// Trained reports whether the network was fitted or loaded (as opposed to
// learning from scratch online).
func (p *RNN) Trained() bool { return p.trained }

// Reset forgets all observations and the online optimiser state, keeping
// the weights.
func (p *RNN) Reset() {
	p.fallback.Reset()
	clear(p.h)
	clear(p.c)
	clear(p.y)
	p.lvl, p.lvlSeen, p.count = [numComp]float64{}, [numComp]bool{}, 0
	p.adam = NewAdam(len(p.net.Params))
}

// zs returns the z-scores of m's components and which are valid.
func (nm *Norm) zs(m Measurement) (z [numComp]float64, ok [numComp]bool) {
	for k := 0; k < numComp; k++ {
		if v, valid := component(m, k); valid {
			z[k], ok[k] = (math.Log(v)-nm.Mean[k])/nm.Std[k], true
		}
	}
	return
}

// features writes x for measurement m, updating the EWMA levels.
func (p *RNN) features(m Measurement, x []float64) {
	nm := &p.net.Norm
	z, ok := nm.zs(m)
	for k := 0; k < numComp; k++ {
		if ok[k] {
			if !p.lvlSeen[k] {
				p.lvl[k], p.lvlSeen[k] = z[k], true
			} else {
				p.lvl[k] = nm.Alpha*z[k] + (1-nm.Alpha)*p.lvl[k]
			}
		}
		x[k] = z[k]
		if !ok[k] {
			x[k] = p.lvl[k]
		}
		x[numComp+k] = p.lvl[k]
	}
	x[6] = (m.Contention - nm.Mean[3]) / nm.Std[3]
	oh := x[featFixed:]
	clear(oh)
	if m.Class >= 1 && m.Class <= len(oh) {
		oh[m.Class-1] = 1
	}
}

// Observe feeds m: it records m as the target of the previous step, runs an
// online update when one is due, then advances the network one step.
func (p *RNN) Observe(m Measurement) { p.observe(m, p.cfg.OnlineSteps > 0) }

func (p *RNN) observe(m Measurement, online bool) {
	p.fallback.Observe(m)
	n := p.net
	H, I, O, W := n.Hidden, n.In, n.Out, p.cfg.Window
	R := W + 1
	if p.count > 0 {
		s := (p.count - 1) % R
		z, ok := n.Norm.zs(m)
		for k := 0; k < O; k++ {
			p.ringT[s*O+k], p.ringM[s*O+k] = z[k]-p.ringX[s*I+k], 0
			if ok[k] {
				p.ringM[s*O+k] = 1
			}
		}
		if online && p.count >= W && p.count%p.cfg.OnlineEvery == 0 {
			p.update(p.count, p.cfg.OnlineSteps)
		}
	}
	s := p.count % R
	p.features(m, p.x)
	copy(p.ringX[s*I:(s+1)*I], p.x)
	copy(p.ringH[s*H:(s+1)*H], p.h)
	copy(p.ringC[s*H:(s+1)*H], p.c)
	n.Step(p.x, p.h, p.c, p.hN, p.cN, p.act, p.y, nil)
	p.h, p.hN = p.hN, p.h
	p.c, p.cN = p.cN, p.c
	p.count++
}

// FineTune runs one online update now: max(1, RNNConfig.OnlineSteps) Adam
// steps on the latest Window steps whose targets are known. It reports
// whether enough observations (Window+1) were there. Observe calls the same
// update on its own schedule; FineTune is for callers that schedule updates
// themselves (with OnlineSteps negative) and for benchmarks. It does not
// allocate.
func (p *RNN) FineTune() bool {
	if p.count < p.cfg.Window+1 {
		return false
	}
	p.update(p.count-1, max(1, p.cfg.OnlineSteps))
	return true
}

// update takes steps Adam steps on the window of steps end−W … end−1 (all
// of which have targets), starting from the state saved before step end−W
// (truncated BPTT). The running state is not recomputed with the new
// weights: like the saved states inside the window, it stays as computed
// with the weights of its time, the usual approximation of online truncated
// BPTT (with small online learning rates the difference is small, and
// recomputing would cost another forward pass over the window).
func (p *RNN) update(end, steps int) {
	n := p.net
	H, I, O, W := n.Hidden, n.In, n.Out, p.cfg.Window
	R := W + 1
	first := end - W
	for j := 0; j < W; j++ {
		s := (first + j) % R
		copy(p.winX[j*I:(j+1)*I], p.ringX[s*I:(s+1)*I])
		copy(p.winT[j*O:(j+1)*O], p.ringT[s*O:(s+1)*O])
		copy(p.winM[j*O:(j+1)*O], p.ringM[s*O:(s+1)*O])
	}
	s0 := first % R
	copy(p.tmpH, p.ringH[s0*H:(s0+1)*H])
	copy(p.tmpC, p.ringC[s0*H:(s0+1)*H])
	lr := p.cfg.OnlineRate
	if !p.trained {
		lr = p.cfg.LearningRate
	}
	for it := 0; it < steps; it++ {
		ys := p.tape.Forward(p.winX, W, p.tmpH, p.tmpC)
		p.lossGrad(ys, p.winT, p.winM, p.dys, W)
		p.tape.Backward(p.dys)
		ClipGlobalNorm(p.tape.Grad, p.cfg.ClipNorm)
		p.adam.Step(n.Params, p.tape.Grad, lr)
	}
}

// lossGrad writes ∂L/∂y into dys and returns L, for d = y − target (the
// error in z-score units; targets are residuals, so y − target is the
// error of the predicted z-score) and the configured loss:
//
//	LossMSE:  L = (1/(2·steps)) Σ_t Σ_k mask·d²
//	LossMAPE: L = (1/steps) Σ_t Σ_k mask·|exp(σ_k·d) − 1|
//
// where σ_k is the component's standard deviation in log space, so
// exp(σ_k·d) − 1 is the relative error of the predicted value.
func (p *RNN) lossGrad(ys, targets, mask, dys []float64, steps int) float64 {
	inv := 1 / float64(steps)
	l := 0.0
	O := p.net.Out
	mape := p.cfg.Loss == LossMAPE
	for i, y := range ys {
		d := (y - targets[i]) * mask[i]
		if !mape {
			l += 0.5 * d * d * inv
			dys[i] = d * inv
			continue
		}
		sd := p.net.Norm.Std[i%O]
		e := math.Exp(sd * d)
		switch {
		case e > 1:
			l += (e - 1) * inv
			dys[i] = sd * e * inv
		case e < 1:
			l += (1 - e) * inv
			dys[i] = -sd * e * inv
		default:
			dys[i] = 0
		}
	}
	return l
}

// Predict returns the network's estimate, or EWMA's before the network is
// usable (untrained and fewer than WarmUp observations) and the default
// before any observation.
func (p *RNN) Predict() Estimate {
	if p.count == 0 || (!p.trained && p.count < p.cfg.WarmUp) {
		return p.fallback.Predict()
	}
	nm := &p.net.Norm
	var e Estimate
	e.CompressSpeed = math.Exp(nm.Mean[0] + nm.Std[0]*(p.x[0]+p.y[0]))
	e.DecompressSpeed = math.Exp(nm.Mean[1] + nm.Std[1]*(p.x[1]+p.y[1]))
	e.Ratio = math.Min(maxRatio, math.Exp(nm.Mean[2]+nm.Std[2]*(p.x[2]+p.y[2])))
	return e
}

// Fit trains the network on train (oldest first) and positions the
// predictor at its end.
//
// The normalisation (mean and standard deviation of each log component and
// of contention) is fitted on train. The last ValFrac of train is held out
// for early stopping: each epoch makes one sequential pass of truncated BPTT
// over the first part in windows of Window steps (state carried between
// windows, gradients clipped to ClipNorm, Adam with LearningRate), then the
// compress-speed MAPE on the held-out part is measured by running the
// network statefully over the whole series; the weights of the best epoch
// are kept, and training stops after 10 epochs without improvement (patience
// constant ours). The network is re-initialised from Seed first, so Fit is
// deterministic.
func (p *RNN) Fit(train []Measurement) error {
	const patience = 10
	N := len(train)
	nVal := int(float64(N-1) * p.cfg.ValFrac)
	nTr := N - 1 - nVal
	if nVal < 1 || nTr < p.cfg.Window {
		return fmt.Errorf("%w: RNN Fit needs more than %d measurements for window %d and validation fraction %v, got %d",
			ErrTooShort, p.cfg.Window, p.cfg.Window, p.cfg.ValFrac, N)
	}
	nm := fitNorm(train, p.cfg.NumClasses, p.alpha)
	p.net = NewNetwork(p.cfg.Cell, featFixed+p.cfg.NumClasses, p.cfg.Hidden, numComp, rand.NewPCG(p.cfg.Seed, 0x15f3))
	p.net.Norm = nm
	p.alloc()
	p.trained = true
	n := p.net
	I, O, W := n.In, n.Out, p.cfg.Window

	// Inputs and targets of every step.
	p.Reset()
	X := make([]float64, N*I)
	T := make([]float64, N*O)
	M := make([]float64, N*O)
	for t, m := range train {
		p.features(m, X[t*I:(t+1)*I])
		if t > 0 {
			z, ok := nm.zs(m)
			for k := 0; k < O; k++ {
				T[(t-1)*O+k] = z[k] - X[(t-1)*I+k]
				if ok[k] {
					M[(t-1)*O+k] = 1
				}
			}
		}
	}
	adam := NewAdam(len(n.Params))
	h0, c0 := make([]float64, n.Hidden), make([]float64, n.Hidden)
	best, bestLoss, since := append([]float64(nil), n.Params...), math.Inf(1), 0
	for ep := 0; ep < p.cfg.Epochs && since < patience; ep++ {
		clear(h0)
		clear(c0)
		for start := 0; start < nTr; start += W {
			steps := min(W, nTr-start)
			ys := p.tape.Forward(X[start*I:], steps, h0, c0)
			p.lossGrad(ys, T[start*O:(start+steps)*O], M[start*O:(start+steps)*O], p.dys, steps)
			p.tape.Backward(p.dys[:steps*O])
			ClipGlobalNorm(p.tape.Grad, p.cfg.ClipNorm)
			h, c := p.tape.FinalState()
			copy(h0, h)
			copy(c0, c)
			adam.Step(n.Params, p.tape.Grad, p.cfg.LearningRate)
		}
		v := p.valMAPE(X, train, nTr)
		if v < bestLoss {
			bestLoss, since = v, 0
			copy(best, n.Params)
		} else {
			since++
		}
	}
	copy(n.Params, best)
	p.Reset()
	for _, m := range train {
		p.observe(m, false)
	}
	return nil
}

// valMAPE runs the network over all inputs from a zero state and returns
// the compress-speed MAPE of the predictions of measurements nTr+1 … N−1.
func (p *RNN) valMAPE(X []float64, train []Measurement, nTr int) float64 {
	n := p.net
	I := n.In
	clear(p.tmpH)
	clear(p.tmpC)
	h, c, hN, cN := p.tmpH, p.tmpC, p.hN, p.cN
	clear(c)
	sum, cnt := 0.0, 0
	for t := 0; t < len(train)-1; t++ {
		n.Step(X[t*I:(t+1)*I], h, c, hN, cN, p.act, p.y, nil)
		h, hN = hN, h
		c, cN = cN, c
		if t >= nTr {
			if a := train[t+1].CompressSpeed; validSpeed(a) {
				pred := math.Exp(n.Norm.Mean[0] + n.Norm.Std[0]*(X[t*I]+p.y[0]))
				sum += math.Abs(pred-a) / a
				cnt++
			}
		}
	}
	clear(p.y)
	if cnt == 0 {
		return math.Inf(1)
	}
	return sum / float64(cnt)
}

// fitNorm computes the normalisation of train's log components and
// contention. A standard deviation below 1e-6 (a constant feature) is
// replaced by 1 so that z-scores stay finite.
func fitNorm(train []Measurement, numClasses int, alpha float64) Norm {
	nm := Norm{NumClasses: numClasses, Alpha: alpha}
	for k := 0; k < 4; k++ {
		var s, s2, cnt float64
		for _, m := range train {
			var v float64
			if k < numComp {
				x, ok := component(m, k)
				if !ok {
					continue
				}
				v = math.Log(x)
			} else {
				v = m.Contention
			}
			s += v
			s2 += v * v
			cnt++
		}
		if cnt == 0 {
			nm.Std[k] = 1
			continue
		}
		mean := s / cnt
		sd := math.Sqrt(math.Max(0, s2/cnt-mean*mean))
		if sd < 1e-6 {
			sd = 1
		}
		nm.Mean[k], nm.Std[k] = mean, sd
	}
	return nm
}
