package fvdf

import (
	"fmt"
	"sync"
	"time"

	"github.com/falconml/falcon/fvdf/codecprof"
	"github.com/falconml/falcon/predictor"
	"github.com/falconml/falcon/transport"
)

// PolicyConfig configures a live [Policy].
type PolicyConfig struct {
	// Bandwidth is the link bandwidth B in bytes/s assumed for every
	// destination without an entry in Bandwidths. Zero means 125e6
	// (1 Gbit/s).
	Bandwidth float64
	// Bandwidths overrides Bandwidth per destination.
	Bandwidths map[transport.NodeID]float64
	// Codecs are the candidate codecs. Nil means lz4 and snappy.
	Codecs []transport.Codec
	// Overhead is the fixed per-message cost of compressing (codec call,
	// buffer handling, header), added to the compressed disposal time. Zero
	// means 20 µs (ours: of the order of one lz4 call on a small message plus
	// an allocation; not from the paper).
	Overhead time.Duration
	// MinSize: messages shorter than this are always sent raw. Zero means
	// 512 bytes (ours).
	MinSize int
	// ProbeEvery: after this many consecutive raw decisions for a
	// destination, the next message large enough is compressed with the
	// predicted-best codec anyway, so estimates stay fresh when the data
	// changes. Zero means 64; negative disables probing.
	ProbeEvery int
	// Predictor names the predictor (predictor.New) that learns each
	// (destination, codec) pair's speed and ratio. Empty means "ewma".
	Predictor string
	// PredictorConfig configures it; its Default is replaced by the prior.
	PredictorConfig predictor.Config
	// Priors are the profiles the estimates start from. A zero value means
	// codecprof.Defaults().
	Priors codecprof.Profiles
	// Mix is the data mix the priors are evaluated on. Nil means
	// codecprof.ShuffleMix().
	Mix codecprof.Mix
}

// DefaultPolicyConfig returns the default configuration.
func DefaultPolicyConfig() PolicyConfig {
	return PolicyConfig{
		Bandwidth:  125e6,
		Codecs:     []transport.Codec{transport.CodecLZ4, transport.CodecSnappy},
		Overhead:   20 * time.Microsecond,
		MinSize:    512,
		ProbeEvery: 64,
		Predictor:  predictor.NameEWMA,
		Priors:     codecprof.Defaults(),
		Mix:        codecprof.ShuffleMix(),
	}
}

// Validate fills zero fields with defaults and reports invalid ones.
func (c *PolicyConfig) Validate() error {
	d := DefaultPolicyConfig()
	if c.Bandwidth == 0 {
		c.Bandwidth = d.Bandwidth
	}
	if !(c.Bandwidth > 0) {
		return fmt.Errorf("%w: bandwidth %v", ErrConfig, c.Bandwidth)
	}
	for to, b := range c.Bandwidths {
		if !(b > 0) {
			return fmt.Errorf("%w: bandwidth %v for %s", ErrConfig, b, to)
		}
	}
	if c.Codecs == nil {
		c.Codecs = d.Codecs
	}
	for _, cd := range c.Codecs {
		if cd == transport.CodecNone || !cd.Valid() {
			return fmt.Errorf("%w: candidate codec %v", ErrConfig, cd)
		}
	}
	if c.Overhead == 0 {
		c.Overhead = d.Overhead
	}
	if c.Overhead < 0 || c.MinSize < 0 {
		return fmt.Errorf("%w: negative overhead or min size", ErrConfig)
	}
	if c.MinSize == 0 {
		c.MinSize = d.MinSize
	}
	if c.ProbeEvery == 0 {
		c.ProbeEvery = d.ProbeEvery
	}
	if c.Predictor == "" {
		c.Predictor = d.Predictor
	}
	if c.Priors.Entries == nil {
		c.Priors = d.Priors
	}
	if c.Mix == nil {
		c.Mix = d.Mix
	}
	for _, cd := range c.Codecs {
		if _, err := c.Priors.ForMix(cd, c.Mix); err != nil {
			return fmt.Errorf("%w: prior for %v: %w", ErrConfig, cd, err)
		}
	}
	pc := c.PredictorConfig
	if _, err := predictor.New(c.Predictor, pc); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// Policy is a transport.CompressionPolicy that applies FVDF's compression
// rule to each message: for a message of V bytes to a destination with
// bandwidth B it compresses with codec c when
//
//	max(V/s_c, ρ_c·V/B, V/u_c) + overhead  <  V/B
//
// (pipelined disposal on one core each side, strictly faster than raw) and
// picks the codec with the smallest such time. s, u and ρ are predicted per
// (destination, codec) by a predictor fed with the outcomes the transport
// reports through transport.CompressionObserver. It is safe for concurrent
// use.
type Policy struct {
	cfg   PolicyConfig
	prior map[transport.Codec]predictor.Estimate

	mu    sync.Mutex
	preds map[policyKey]predictor.Predictor
	raw   map[transport.NodeID]int // consecutive raw decisions per destination
}

type policyKey struct {
	to    transport.NodeID
	codec transport.Codec
}

var (
	_ transport.CompressionPolicy   = (*Policy)(nil)
	_ transport.CompressionObserver = (*Policy)(nil)
)

// NewPolicy returns a Policy with cfg (zero fields take their defaults).
func NewPolicy(cfg PolicyConfig) (*Policy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Policy{cfg: cfg, prior: map[transport.Codec]predictor.Estimate{},
		preds: map[policyKey]predictor.Predictor{}, raw: map[transport.NodeID]int{}}
	for _, cd := range cfg.Codecs {
		pr, _ := cfg.Priors.ForMix(cd, cfg.Mix) // checked in Validate
		p.prior[cd] = predictor.Estimate{CompressSpeed: pr.CompressBps, DecompressSpeed: pr.DecompressBps, Ratio: pr.Ratio}
	}
	return p, nil
}

func (p *Policy) bandwidth(to transport.NodeID) float64 {
	if b, ok := p.cfg.Bandwidths[to]; ok {
		return b
	}
	return p.cfg.Bandwidth
}

// estimate returns the predicted profile of codec c towards to; p.mu held.
func (p *Policy) estimate(to transport.NodeID, c transport.Codec) predictor.Estimate {
	if q, ok := p.preds[policyKey{to, c}]; ok {
		return q.Predict()
	}
	return p.prior[c]
}

// Decide returns the codec the rule picks for a message of n bytes to a
// destination with bandwidth bw, given estimates est (one per candidate, in
// the order of codecs), and the predicted time of that choice in seconds.
// It is the pure core of Policy.Choose.
func Decide(n int, bw float64, overhead time.Duration, codecs []transport.Codec, est []predictor.Estimate) (transport.Codec, float64) {
	v := float64(n)
	best, bestT := transport.CodecNone, v/bw
	for i, c := range codecs {
		e := est[i]
		t := PipelinedTime(v, e.CompressSpeed, e.DecompressSpeed, e.Ratio, bw, 1, 1) + overhead.Seconds()
		if t < bestT {
			best, bestT = c, t
		}
	}
	return best, bestT
}

// Choose implements transport.CompressionPolicy.
func (p *Policy) Choose(to transport.NodeID, msg []byte) transport.Codec {
	if len(msg) < p.cfg.MinSize {
		return transport.CodecNone
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	est := make([]predictor.Estimate, len(p.cfg.Codecs))
	for i, c := range p.cfg.Codecs {
		est[i] = p.estimate(to, c)
	}
	c, _ := Decide(len(msg), p.bandwidth(to), p.cfg.Overhead, p.cfg.Codecs, est)
	if c != transport.CodecNone {
		p.raw[to] = 0
		return c
	}
	p.raw[to]++
	if p.cfg.ProbeEvery > 0 && p.raw[to] > p.cfg.ProbeEvery {
		p.raw[to] = 0
		// Probe with the codec predicted to dispose fastest.
		best, bestT := p.cfg.Codecs[0], 0.0
		for i, cd := range p.cfg.Codecs {
			e := est[i]
			t := PipelinedTime(float64(len(msg)), e.CompressSpeed, e.DecompressSpeed, e.Ratio, p.bandwidth(to), 1, 1)
			if i == 0 || t < bestT {
				best, bestT = cd, t
			}
		}
		return best
	}
	return transport.CodecNone
}

// Observe implements transport.CompressionObserver: it feeds the measured
// compression speed raw/elapsed and ratio wire/raw to the (to, c) predictor.
// Decompression speed is not observed by the sender; its prior is kept.
func (p *Policy) Observe(to transport.NodeID, c transport.Codec, raw, wire int, elapsed time.Duration) {
	if raw <= 0 || c == transport.CodecNone {
		return
	}
	m := predictor.Measurement{Ratio: float64(wire) / float64(raw)}
	if elapsed > 0 {
		m.CompressSpeed = float64(raw) / elapsed.Seconds()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := policyKey{to, c}
	q, ok := p.preds[k]
	if !ok {
		pr, known := p.prior[c]
		if !known {
			return // a codec we never choose
		}
		cfg := p.cfg.PredictorConfig
		cfg.Default = pr
		var err error
		if q, err = predictor.New(p.cfg.Predictor, cfg); err != nil {
			return // validated in NewPolicy; cannot happen
		}
		p.preds[k] = q
	}
	q.Observe(m)
}

// Estimate returns the current predicted profile of codec c towards to.
func (p *Policy) Estimate(to transport.NodeID, c transport.Codec) predictor.Estimate {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.estimate(to, c)
}
