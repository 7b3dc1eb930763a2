package predictor

import "fmt"

// Cell selects the recurrent cell of an RNN predictor.
type Cell uint8

const (
	// CellLSTM is a long short-term memory cell (the default).
	CellLSTM Cell = 1
	// CellGRU is a gated recurrent unit.
	CellGRU Cell = 2
)

func (c Cell) String() string {
	switch c {
	case CellLSTM:
		return NameLSTM
	case CellGRU:
		return NameGRU
	}
	return fmt.Sprintf("Cell(%d)", uint8(c))
}

// Loss selects the training loss of an RNN predictor.
type Loss uint8

const (
	// LossMSE is the mean squared error of the z-scored log values.
	LossMSE Loss = 1
	// LossMAPE is the mean absolute relative error of the predicted values
	// (the default).
	LossMAPE Loss = 2
)

// RNNConfig configures an RNN predictor (network shape, training and online
// fine-tuning). Every constant default is ours: the Swallow paper does not
// publish its RNN's design (see the package doc).
type RNNConfig struct {
	// Cell is the recurrent cell. Zero means CellLSTM.
	Cell Cell
	// Loss is the training loss (offline and online). Zero means LossMAPE:
	// the metric the predictors are judged by, and the relative error a
	// scheduler's disposal-time estimates inherit. (On a validation split
	// inside the training part of the committed series it gave lower MAPE
	// than LossMSE for both codecs.)
	Loss Loss
	// Hidden is the hidden-state size. Zero means 16.
	Hidden int
	// NumClasses is the width of the data-class one-hot input; a
	// Measurement.Class outside 1..NumClasses is encoded as all zeros.
	// Zero means 8.
	NumClasses int
	// Window is the truncated-BPTT length: gradients flow back at most Window
	// steps. Zero means 16.
	Window int
	// Epochs is the maximum number of passes over the training part in Fit.
	// Zero means 60.
	Epochs int
	// ValFrac is the fraction at the end of Fit's series held out to choose
	// the epoch (early stopping). Zero means 0.2.
	ValFrac float64
	// LearningRate is Adam's step size in Fit. Zero means 0.005.
	LearningRate float64
	// ClipNorm is the global gradient-norm bound: if ‖g‖₂ > ClipNorm the
	// whole gradient is scaled by ClipNorm/‖g‖₂. Zero means 1.
	ClipNorm float64
	// OnlineSteps is how many Adam steps one online update takes on the
	// latest window. Zero means 1; negative disables online fine-tuning.
	OnlineSteps int
	// OnlineEvery is how many observations pass between online updates.
	// Zero means 1 (an update after every observation).
	OnlineEvery int
	// OnlineRate is Adam's step size for online fine-tuning. Zero means 0.001.
	OnlineRate float64
	// WarmUp is how many observations an untrained predictor (no Fit, no
	// Model) needs before it trusts the network; until then it answers like
	// EWMA while fine-tuning online. Zero means 64.
	WarmUp int
	// Seed seeds the weight initialisation (a rand.Source built from it).
	// Zero is a valid seed.
	Seed uint64
	// Model, if not nil, is a trained network (from Fit or Load) the
	// predictor starts from (it is cloned; the shape fields above are then
	// ignored).
	Model *Network
}

// DefaultRNNConfig returns the RNN configuration with every default filled in.
func DefaultRNNConfig() RNNConfig {
	return RNNConfig{
		Cell:         CellLSTM,
		Loss:         LossMAPE,
		Hidden:       16,
		NumClasses:   8,
		Window:       16,
		Epochs:       60,
		ValFrac:      0.2,
		LearningRate: 0.005,
		ClipNorm:     1,
		OnlineSteps:  1,
		OnlineEvery:  1,
		OnlineRate:   0.001,
		WarmUp:       64,
	}
}

func (c RNNConfig) withDefaults() RNNConfig {
	d := DefaultRNNConfig()
	if c.Cell == 0 {
		c.Cell = d.Cell
	}
	if c.Loss == 0 {
		c.Loss = d.Loss
	}
	if c.Hidden == 0 {
		c.Hidden = d.Hidden
	}
	if c.NumClasses == 0 {
		c.NumClasses = d.NumClasses
	}
	if c.Window == 0 {
		c.Window = d.Window
	}
	if c.Epochs == 0 {
		c.Epochs = d.Epochs
	}
	if c.ValFrac == 0 {
		c.ValFrac = d.ValFrac
	}
	if c.LearningRate == 0 {
		c.LearningRate = d.LearningRate
	}
	if c.ClipNorm == 0 {
		c.ClipNorm = d.ClipNorm
	}
	if c.OnlineSteps == 0 {
		c.OnlineSteps = d.OnlineSteps
	}
	if c.OnlineEvery == 0 {
		c.OnlineEvery = d.OnlineEvery
	}
	if c.OnlineRate == 0 {
		c.OnlineRate = d.OnlineRate
	}
	if c.WarmUp == 0 {
		c.WarmUp = d.WarmUp
	}
	return c
}

func (c RNNConfig) validate() error {
	e := c.withDefaults()
	switch {
	case e.Cell != CellLSTM && e.Cell != CellGRU:
		return fmt.Errorf("%w: RNN.Cell %v", ErrConfig, c.Cell)
	case e.Loss != LossMSE && e.Loss != LossMAPE:
		return fmt.Errorf("%w: RNN.Loss %d", ErrConfig, c.Loss)
	case e.Hidden < 1 || e.Hidden > 1024:
		return fmt.Errorf("%w: RNN.Hidden %d must be in [1, 1024]", ErrConfig, c.Hidden)
	case e.NumClasses < 0 || e.NumClasses > 256:
		return fmt.Errorf("%w: RNN.NumClasses %d must be in [0, 256]", ErrConfig, c.NumClasses)
	case e.Window < 1 || e.Window > 4096:
		return fmt.Errorf("%w: RNN.Window %d must be in [1, 4096]", ErrConfig, c.Window)
	case e.Epochs < 1:
		return fmt.Errorf("%w: RNN.Epochs %d must be positive", ErrConfig, c.Epochs)
	case !(e.ValFrac > 0 && e.ValFrac < 0.9):
		return fmt.Errorf("%w: RNN.ValFrac %v must be in (0, 0.9)", ErrConfig, c.ValFrac)
	case !(e.LearningRate > 0 && e.LearningRate < 1):
		return fmt.Errorf("%w: RNN.LearningRate %v must be in (0, 1)", ErrConfig, c.LearningRate)
	case !(e.ClipNorm > 0):
		return fmt.Errorf("%w: RNN.ClipNorm %v must be positive", ErrConfig, c.ClipNorm)
	case e.OnlineEvery < 1:
		return fmt.Errorf("%w: RNN.OnlineEvery %d must be positive", ErrConfig, c.OnlineEvery)
	case !(e.OnlineRate > 0 && e.OnlineRate < 1):
		return fmt.Errorf("%w: RNN.OnlineRate %v must be in (0, 1)", ErrConfig, c.OnlineRate)
	case e.WarmUp < 0:
		return fmt.Errorf("%w: RNN.WarmUp %d must not be negative", ErrConfig, c.WarmUp)
	}
	return nil
}
