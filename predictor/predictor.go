package predictor

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

// Sentinel errors. They are wrapped with %w; test with errors.Is.
var (
	// ErrUnknownPredictor is returned by New for a name it does not know.
	ErrUnknownPredictor = errors.New("predictor: unknown predictor name")
	// ErrConfig is returned by (*Config).Validate for an invalid field.
	ErrConfig = errors.New("predictor: invalid config")
	// ErrTooShort is returned when a training series is too short to fit a model.
	ErrTooShort = errors.New("predictor: series too short")
	// ErrBadMagic is returned by Load when the input is not a saved model.
	ErrBadMagic = errors.New("predictor: not a predictor model (bad magic)")
	// ErrVersion is returned by Load for a model file of an unsupported version.
	ErrVersion = errors.New("predictor: unsupported model version")
	// ErrCorrupt is returned by Load for a truncated or inconsistent model file.
	ErrCorrupt = errors.New("predictor: corrupt model")
	// ErrCSV is returned by ReadCSV for malformed input; the message has the line.
	ErrCSV = errors.New("predictor: malformed series CSV")
)

// Measurement is one observation of a codec on a host: how fast one chunk was
// compressed and decompressed, and how well it compressed.
//
// A speed that is not positive and finite, or a ratio that is not in (0, 16],
// counts as "not measured": predictors skip that component and keep their
// previous estimate for it.
type Measurement struct {
	// At is when the measurement finished, as a duration since an arbitrary
	// origin. It is informational (CSV time column); no predictor reads it.
	At time.Duration
	// CompressSpeed is raw (uncompressed) bytes compressed per second on one core.
	CompressSpeed float64
	// DecompressSpeed is raw (uncompressed) bytes produced per second on one core.
	DecompressSpeed float64
	// Ratio is compressed bytes / raw bytes (smaller is better; 1 means no gain).
	Ratio float64
	// Contention is the background CPU load seen while measuring, in busy
	// threads per core (0 = idle machine, 1 = one busy thread per core).
	// Only the RNN predictors read it, as an input feature.
	Contention float64
	// Class is a data-class id (1..Config.RNN.NumClasses); 0 means unknown.
	// Only the RNN predictors read it, as a one-hot input feature.
	Class int
}

// Estimate is a prediction of the next measurement's speeds and ratio.
type Estimate struct {
	CompressSpeed   float64 // raw bytes/s per core
	DecompressSpeed float64 // raw bytes/s per core
	Ratio           float64 // compressed / raw
}

// DefaultEstimate is what every predictor returns before its first
// observation unless Config.Default says otherwise. The figures are ours:
// round numbers of the order of lz4/snappy on one core of a 2020s x86 server
// on mixed data (compare the recorded series in testdata). They are priors,
// not measurements; a scheduler should replace them by observing.
var DefaultEstimate = Estimate{CompressSpeed: 300e6, DecompressSpeed: 1e9, Ratio: 0.6}

// Predictor predicts the next measurement of one codec on one host from the
// measurements observed so far.
//
// Implementations are single-goroutine values: Observe and Predict must not be
// called concurrently (wrap them in a mutex, as Keyed's callers do, if needed).
// Before the first Observe, Predict returns the configured default estimate.
type Predictor interface {
	// Observe feeds the measurement that just completed.
	Observe(m Measurement)
	// Predict returns the estimate for the next measurement. It does not
	// change the predictor's state.
	Predict() Estimate
}

// Trainer is an optional capability of a Predictor: offline fitting on a
// training series (oldest first). Fit resets the predictor's online state
// and then replays the series, so after Fit the predictor is positioned at
// the end of the series. Find it with a type assertion.
type Trainer interface {
	Fit(train []Measurement) error
}

// Resetter is an optional capability: forget all observations (keep any
// fitted parameters).
type Resetter interface {
	Reset()
}

// Config configures the predictors built by New. DefaultConfig gives the
// values used when a field is zero.
type Config struct {
	// Default is returned before the first observation. A zero field means
	// the corresponding field of DefaultEstimate.
	Default Estimate
	// Alpha is the EWMA smoothing factor in (0, 1]: est ← α·x + (1−α)·est.
	// Zero means 0.3 (ours: a time constant of about 3 chunks).
	Alpha float64
	// AROrder is p of the AR(p) model. Zero means 4.
	AROrder int
	// ARHistory is how many recent observations the online AR refit uses.
	// Zero means 256.
	ARHistory int
	// ARRefit is how many observations pass between online AR refits.
	// Zero means 32.
	ARRefit int
	// RNN configures the LSTM and GRU predictors.
	RNN RNNConfig
}

// DefaultConfig returns the configuration with every default filled in.
func DefaultConfig() Config {
	return Config{
		Default:   DefaultEstimate,
		Alpha:     0.3,
		AROrder:   4,
		ARHistory: 256,
		ARRefit:   32,
		RNN:       DefaultRNNConfig(),
	}
}

// withDefaults returns c with every zero field replaced by its default.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Default.CompressSpeed == 0 {
		c.Default.CompressSpeed = d.Default.CompressSpeed
	}
	if c.Default.DecompressSpeed == 0 {
		c.Default.DecompressSpeed = d.Default.DecompressSpeed
	}
	if c.Default.Ratio == 0 {
		c.Default.Ratio = d.Default.Ratio
	}
	if c.Alpha == 0 {
		c.Alpha = d.Alpha
	}
	if c.AROrder == 0 {
		c.AROrder = d.AROrder
	}
	if c.ARHistory == 0 {
		c.ARHistory = d.ARHistory
	}
	if c.ARRefit == 0 {
		c.ARRefit = d.ARRefit
	}
	c.RNN = c.RNN.withDefaults()
	return c
}

// Validate reports the first invalid field. Zero fields are valid (they mean
// the default).
func (c *Config) Validate() error {
	e := c.withDefaults()
	switch {
	case !(e.Default.CompressSpeed > 0) || math.IsInf(e.Default.CompressSpeed, 0):
		return fmt.Errorf("%w: Default.CompressSpeed %v must be positive and finite", ErrConfig, c.Default.CompressSpeed)
	case !(e.Default.DecompressSpeed > 0) || math.IsInf(e.Default.DecompressSpeed, 0):
		return fmt.Errorf("%w: Default.DecompressSpeed %v must be positive and finite", ErrConfig, c.Default.DecompressSpeed)
	case !(e.Default.Ratio > 0) || e.Default.Ratio > maxRatio:
		return fmt.Errorf("%w: Default.Ratio %v must be in (0, %v]", ErrConfig, c.Default.Ratio, maxRatio)
	case !(e.Alpha > 0 && e.Alpha <= 1):
		return fmt.Errorf("%w: Alpha %v must be in (0, 1]", ErrConfig, c.Alpha)
	case e.AROrder < 1 || e.AROrder > 64:
		return fmt.Errorf("%w: AROrder %d must be in [1, 64]", ErrConfig, c.AROrder)
	case e.ARHistory < 4*e.AROrder+4:
		return fmt.Errorf("%w: ARHistory %d must be at least 4·AROrder+4 = %d", ErrConfig, c.ARHistory, 4*e.AROrder+4)
	case e.ARRefit < 1:
		return fmt.Errorf("%w: ARRefit %d must be positive", ErrConfig, c.ARRefit)
	}
	return e.RNN.validate()
}

// maxRatio bounds a plausible compression ratio (compressed/raw). LZ-family
// codecs expand incompressible input by well under 1 %, so anything above
// this is a broken measurement. The bound is ours.
const maxRatio = 16

// valid reports whether x can be used as a speed.
func validSpeed(x float64) bool { return x > 0 && !math.IsInf(x, 0) }

// validRatio reports whether x can be used as a ratio.
func validRatio(x float64) bool { return x > 0 && x <= maxRatio }

// Names of the predictors New knows, in a stable order.
const (
	NameLastValue = "last"
	NameEWMA      = "ewma"
	NameAR        = "ar"
	NameLSTM      = "lstm"
	NameGRU       = "gru"
)

var factories = map[string]func(Config) (Predictor, error){
	NameLastValue: func(c Config) (Predictor, error) { return NewLastValue(c.Default), nil },
	NameEWMA:      func(c Config) (Predictor, error) { return NewEWMA(c.Alpha, c.Default), nil },
	NameAR:        func(c Config) (Predictor, error) { return NewAR(c) },
	NameLSTM:      func(c Config) (Predictor, error) { c.RNN.Cell = CellLSTM; return NewRNN(c) },
	NameGRU:       func(c Config) (Predictor, error) { c.RNN.Cell = CellGRU; return NewRNN(c) },
}

// Names returns the names New accepts, sorted.
func Names() []string {
	out := make([]string, 0, len(factories))
	for n := range factories {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// New builds the predictor called name ("last", "ewma", "ar", "lstm", "gru")
// with cfg (zero fields take their defaults). The RNN predictors start
// untrained: they answer like EWMA until Fit is called or until they have
// fine-tuned online on enough observations (see RNNConfig.WarmUp), or they use
// cfg.RNN.Model when it is set.
func New(name string, cfg Config) (Predictor, error) {
	f, ok := factories[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q (known: %v)", ErrUnknownPredictor, name, Names())
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return f(cfg.withDefaults())
}
