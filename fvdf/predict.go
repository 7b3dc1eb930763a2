package fvdf

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/predictor"
)

// ContentionConfig describes how the true codec speed drifts over time
// because of CPU contention on the machines (a model of ours: Swallow's
// evaluation setup is not public). Time is cut into steps; in each step
// the machines are in one of Levels (a fraction of the nominal speed),
// switching to a uniformly drawn other level with probability Switch per
// step; every step also gets multiplicative log-normal noise of σ = Noise.
type ContentionConfig struct {
	// Step is the length of one step. Zero means 1 s.
	Step time.Duration
	// Levels are the speed fractions of the regimes. Nil means
	// {1, 0.6, 0.3} (idle, busy, heavily loaded; ours).
	Levels []float64
	// Switch is the per-step regime switch probability. Zero means 0.05.
	Switch float64
	// Noise is σ of the per-step log-normal noise. Zero means 0.1; negative
	// means none.
	Noise float64
}

// DefaultContentionConfig returns the default drift model.
func DefaultContentionConfig() ContentionConfig {
	return ContentionConfig{Step: time.Second, Levels: []float64{1, 0.6, 0.3}, Switch: 0.05, Noise: 0.1}
}

// Validate fills zero fields with defaults and reports invalid ones.
func (c *ContentionConfig) Validate() error {
	d := DefaultContentionConfig()
	if c.Step == 0 {
		c.Step = d.Step
	}
	if c.Levels == nil {
		c.Levels = d.Levels
	}
	if c.Switch == 0 {
		c.Switch = d.Switch
	}
	if c.Noise == 0 {
		c.Noise = d.Noise
	}
	if c.Step < 0 || !(c.Switch >= 0 && c.Switch <= 1) || len(c.Levels) == 0 {
		return fmt.Errorf("%w: contention step %v, switch %v, %d levels", ErrConfig, c.Step, c.Switch, len(c.Levels))
	}
	for _, l := range c.Levels {
		if !(l > 0) || math.IsInf(l, 0) {
			return fmt.Errorf("%w: contention level %v must be positive", ErrConfig, l)
		}
	}
	return nil
}

// Contention is a seeded, lazily extended series of speed factors, one
// per step and codec. The same seed gives the same series regardless of
// the order in which times are queried.
type Contention struct {
	cfg     ContentionConfig
	rng     *rand.Rand
	level   int
	factors []float64 // per step
	// replay, if not nil, is a recorded series replayed from step start,
	// cycling ([NewReplayedContention]).
	replay []float64
	start  int
}

// NewContention returns the drift series drawn from rng (a constant factor
// of 1 when rng is nil).
func NewContention(cfg ContentionConfig, rng *rand.Rand) (*Contention, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Contention{cfg: cfg, rng: rng}, nil
}

// Factor returns the speed factor in force at time t.
func (c *Contention) Factor(t time.Duration) float64 {
	if c == nil || c.rng == nil && c.replay == nil {
		return 1
	}
	i := int(t / c.cfg.Step)
	if t < 0 {
		i = 0
	}
	if c.replay != nil {
		return c.replay[(c.start+i)%len(c.replay)]
	}
	for len(c.factors) <= i {
		if len(c.factors) > 0 && len(c.cfg.Levels) > 1 && c.rng.Float64() < c.cfg.Switch {
			nl := c.rng.IntN(len(c.cfg.Levels) - 1)
			if nl >= c.level {
				nl++
			}
			c.level = nl
		}
		f := c.cfg.Levels[c.level]
		if c.cfg.Noise > 0 {
			f *= math.Exp(c.cfg.Noise * c.rng.NormFloat64())
		}
		c.factors = append(c.factors, f)
	}
	return c.factors[i]
}

// TrueSpeeds is the ground truth the simulator advances with: nominal
// fabric speeds × port SpeedFactor × the contention factor at that time.
// Every sample the simulator draws is also recorded as an observation for a
// [Predicted] estimator (a compression task reports its measured speed).
type TrueSpeeds struct {
	Fabric     *coflow.Fabric
	Contention *Contention
	// Sink, if not nil, receives every sample (time, codec, per-core
	// compression and decompression speed before the port's SpeedFactor).
	Sink func(at time.Duration, codec int, compress, decompress float64)
}

// CodecSpeed matches coflow.Config.CodecSpeed.
func (ts *TrueSpeeds) CodecSpeed(port, codec int, now time.Duration) (float64, float64) {
	c := ts.Fabric.Codec(codec)
	f := ts.Contention.Factor(now)
	cs, ds := c.CompressSpeed*f, c.DecompressSpeed*f
	if ts.Sink != nil {
		ts.Sink(now, codec, cs, ds)
	}
	sf := speedFactor(ts.Fabric.Ports[port])
	return cs * sf, ds * sf
}

// Oracle is the Estimator that knows the true speed at decision time.
type Oracle struct{ Contention *Contention }

// Estimate returns the nominal profile scaled by the true factor at now.
func (o Oracle) Estimate(now time.Duration, f *coflow.Fabric, k int) coflow.CodecProfile {
	c := f.Codec(k)
	x := o.Contention.Factor(now)
	c.CompressSpeed *= x
	c.DecompressSpeed *= x
	return c
}

// Predicted is the Estimator that decides with a predictor per codec, fed
// with measured speeds. Observations are queued by Observe and folded in
// at the next Estimate call at a strictly later time (a measurement is known
// only after the compression it measures), one aggregated observation per
// (time, codec). The ratio is taken from the fabric (the data mix is
// known); speeds are predicted.
//
// It also tracks, per codec, an EWMA (α = 0.3, ours) of the relative error
// |predicted − measured| / measured of its compression-speed predictions,
// reported by Uncertainty.
type Predicted struct {
	preds   map[int]predictor.Predictor
	make    func(def predictor.Estimate) (predictor.Predictor, error)
	pending []obs
	errs    map[int]float64
}

// uncertaintyAlpha is the smoothing of the prediction-error EWMA (ours: the
// predictor package's default EWMA factor).
const uncertaintyAlpha = 0.3

var _ Uncertain = (*Predicted)(nil)

// Uncertainty implements Uncertain: the smoothed relative error of codec
// k's speed predictions so far (0 before any measurement).
func (p *Predicted) Uncertainty(k int) float64 { return p.errs[k] }

type obs struct {
	at       time.Duration
	codec    int
	cs, ds   float64
	nSamples int
}

// NewPredicted returns an estimator using predictor.New(name, cfg) per
// codec, started from the fabric's nominal profile.
func NewPredicted(name string, cfg predictor.Config) (*Predicted, error) {
	if _, err := predictor.New(name, cfg); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnknownPredictor, err)
	}
	return &Predicted{preds: map[int]predictor.Predictor{}, errs: map[int]float64{}, make: func(def predictor.Estimate) (predictor.Predictor, error) {
		c := cfg
		c.Default = def
		return predictor.New(name, c)
	}}, nil
}

// Observe queues a measured per-core speed of codec k at time at.
func (p *Predicted) Observe(at time.Duration, k int, compress, decompress float64) {
	if n := len(p.pending); n > 0 && p.pending[n-1].at == at && p.pending[n-1].codec == k {
		o := &p.pending[n-1]
		o.cs += compress
		o.ds += decompress
		o.nSamples++
		return
	}
	p.pending = append(p.pending, obs{at: at, codec: k, cs: compress, ds: decompress, nSamples: 1})
}

func (p *Predicted) get(f *coflow.Fabric, k int) predictor.Predictor {
	q, ok := p.preds[k]
	if !ok {
		c := f.Codec(k)
		var err error
		q, err = p.make(predictor.Estimate{CompressSpeed: c.CompressSpeed, DecompressSpeed: c.DecompressSpeed, Ratio: c.Ratio})
		if err != nil {
			panic("fvdf: predictor factory failed after validation: " + err.Error())
		}
		p.preds[k] = q
	}
	return q
}

// Estimate folds pending observations older than now and predicts codec k.
func (p *Predicted) Estimate(now time.Duration, f *coflow.Fabric, k int) coflow.CodecProfile {
	if len(p.pending) > 0 {
		// Group by (time, codec) whatever order the samples came in, so the
		// predictors see one averaged measurement per codec and instant.
		sort.SliceStable(p.pending, func(i, j int) bool {
			a, b := p.pending[i], p.pending[j]
			if a.at != b.at {
				return a.at < b.at
			}
			return a.codec < b.codec
		})
		merged := p.pending[:0]
		for _, o := range p.pending {
			if n := len(merged); n > 0 && merged[n-1].at == o.at && merged[n-1].codec == o.codec {
				m := &merged[n-1]
				m.cs += o.cs
				m.ds += o.ds
				m.nSamples += o.nSamples
				continue
			}
			merged = append(merged, o)
		}
		keep := merged[:0]
		for _, o := range merged {
			if o.codec < 1 || o.codec > len(f.Codecs) {
				continue // not a codec of this fabric: drop
			}
			if o.at >= now {
				keep = append(keep, o)
				continue
			}
			n := float64(o.nSamples)
			q := p.get(f, o.codec)
			if meas := o.cs / n; meas > 0 {
				e := math.Abs(q.Predict().CompressSpeed-meas) / meas
				if old, ok := p.errs[o.codec]; ok {
					e = uncertaintyAlpha*e + (1-uncertaintyAlpha)*old
				}
				p.errs[o.codec] = e
			}
			q.Observe(predictor.Measurement{At: o.at, CompressSpeed: o.cs / n, DecompressSpeed: o.ds / n})
		}
		p.pending = keep
	}
	e := p.get(f, k).Predict()
	c := f.Codec(k)
	c.CompressSpeed, c.DecompressSpeed = e.CompressSpeed, e.DecompressSpeed
	return c
}

// Train fits every codec's predictor that supports offline training
// (predictor.Trainer, e.g. the LSTM) on a series of n measurements, one per
// contention step, drawn from train (a drift series with another seed than
// the one the replay runs on) times the fabric's nominal speeds. Predictors
// without Fit are left untouched.
func (p *Predicted) Train(f *coflow.Fabric, train *Contention, n int) error {
	for k := 1; k <= len(f.Codecs); k++ {
		q := p.get(f, k)
		tr, ok := q.(predictor.Trainer)
		if !ok {
			continue
		}
		c := f.Codec(k)
		series := make([]predictor.Measurement, n)
		for i := range series {
			at := time.Duration(i) * train.cfg.Step
			x := train.Factor(at)
			series[i] = predictor.Measurement{At: at, CompressSpeed: c.CompressSpeed * x, DecompressSpeed: c.DecompressSpeed * x}
		}
		if err := tr.Fit(series); err != nil {
			return fmt.Errorf("fvdf: training %s predictor: %w", c.Name, err)
		}
	}
	return nil
}
