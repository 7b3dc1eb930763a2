package coflow

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// SynthConfig parameterises Synthetic.
//
// The shape imitates the FB2010 coflow-benchmark trace (research notes,
// swallow.md §7): most coflows short and narrow, a few long and wide carrying
// almost all bytes. The bin mix and size ranges below are ours, chosen to
// give roughly FB2010's bin counts (SN 59 %, LN 17 %, SW 11 %, LW 13 %) and
// byte shares (LW ≈ 99 %); they are not fitted.
type SynthConfig struct {
	// Ports is the fabric size, ≥ 2.
	Ports int
	// Coflows is the number of coflows, ≥ 1.
	Coflows int
	// MeanInterArrival is the mean of the exponential gap between arrivals
	// (Poisson arrivals, rounded to whole milliseconds). Zero means every
	// coflow arrives at time 0.
	MeanInterArrival time.Duration
	// MaxWidth caps #mappers and #reducers of one coflow. Zero means Ports.
	MaxWidth int
	// Fractions of short-narrow, long-narrow and short-wide coflows; the rest
	// are long-wide. All zero means DefaultSynthConfig's mix.
	ShortNarrow, LongNarrow, ShortWide float64
	// Load, if positive, sets the offered load instead of
	// MeanInterArrival's scale: the arrival times drawn (Poisson, with
	// MeanInterArrival, or 1 s when that is zero) are scaled by one factor
	// so that
	//
	//	Load = total bytes / (Ports · PortBps · span)
	//
	// where span is the last arrival time: the bytes offered per second of
	// the arrival window over the fabric's capacity per second. Each byte
	// crosses one ingress and one egress link, so Load is the mean
	// utilisation of either direction that the trace asks for while its
	// coflows arrive (above 1 the fabric cannot keep up). Zero means no
	// scaling (MeanInterArrival as given).
	Load float64
	// PortBps is the port bandwidth (bytes/s) Load refers to. Required
	// when Load > 0.
	PortBps float64
}

// DefaultSynthConfig returns FB2010's dimensions (150 ports, 526 coflows),
// the FB2010-like bin mix and a 1 s mean inter-arrival. The generated
// traces have about FB2010's bin counts and a total volume of the same order
// (tens of TiB) but arrive about 7× faster than FB2010 (whose mean gap is
// 6.9 s: 3,629 s over 525 gaps), so they load the fabric much more; set
// MeanInterArrival to 6900·time.Millisecond for an FB2010-like load.
func DefaultSynthConfig() SynthConfig {
	return SynthConfig{Ports: 150, Coflows: 526, MeanInterArrival: time.Second,
		ShortNarrow: 0.59, LongNarrow: 0.17, ShortWide: 0.11}
}

// Validate checks the configuration.
func (c *SynthConfig) Validate() error {
	if !(c.Load >= 0) || math.IsInf(c.Load, 0) || c.Load > 0 && !(c.PortBps > 0 && !math.IsInf(c.PortBps, 0)) {
		return fmt.Errorf("%w: synth: load %v needs a finite positive port bandwidth (got %v)", ErrInvalidConfig, c.Load, c.PortBps)
	}
	if c.Ports < 2 {
		return fmt.Errorf("%w: synth: ports %d < 2", ErrInvalidConfig, c.Ports)
	}
	if c.Coflows < 1 {
		return fmt.Errorf("%w: synth: coflows %d < 1", ErrInvalidConfig, c.Coflows)
	}
	if c.MeanInterArrival < 0 || c.MaxWidth < 0 {
		return fmt.Errorf("%w: synth: negative inter-arrival or max width", ErrInvalidConfig)
	}
	for _, f := range []float64{c.ShortNarrow, c.LongNarrow, c.ShortWide} {
		if !(f >= 0) {
			return fmt.Errorf("%w: synth: bin fractions must be non-negative", ErrInvalidConfig)
		}
	}
	if c.ShortNarrow+c.LongNarrow+c.ShortWide > 1 {
		return fmt.Errorf("%w: synth: bin fractions sum above 1", ErrInvalidConfig)
	}
	return nil
}

// Synthetic generates a trace from rng. The same config and seed give the
// same trace. Mapper and reducer ports of one coflow are distinct; sizes are
// whole MiB per reducer, as in the published trace.
//
// Bins (Varys: short = longest flow < 5 MB, narrow = ≤ 50 flows):
//   - short-narrow: 1–4 mappers × 1–4 reducers, < 5 MiB per flow;
//   - long-narrow: ≤ 50 flows, 5–500 MiB per flow (log-uniform);
//   - short-wide: > 50 flows, < 5 MiB per flow;
//   - long-wide: > 50 flows, 5–2000 MiB per flow (log-uniform).
func Synthetic(cfg SynthConfig, rng *rand.Rand) (*Trace, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ShortNarrow == 0 && cfg.LongNarrow == 0 && cfg.ShortWide == 0 {
		d := DefaultSynthConfig()
		cfg.ShortNarrow, cfg.LongNarrow, cfg.ShortWide = d.ShortNarrow, d.LongNarrow, d.ShortWide
	}
	maxW := cfg.MaxWidth
	if maxW == 0 || maxW > cfg.Ports {
		maxW = cfg.Ports
	}
	t := &Trace{Ports: cfg.Ports, Coflows: make([]TraceCoflow, cfg.Coflows)}
	perm := make([]int, cfg.Ports)
	var at float64 // ms
	gap := cfg.MeanInterArrival
	if cfg.Load > 0 && gap == 0 {
		gap = time.Second
	}
	ats := make([]float64, cfg.Coflows)
	for i := range t.Coflows {
		if i > 0 && gap > 0 {
			at += rng.ExpFloat64() * float64(gap) / float64(time.Millisecond)
		}
		ats[i] = at
		u := rng.Float64()
		var nm, nr int
		var lo, hi float64 // MiB per flow
		switch {
		case u < cfg.ShortNarrow:
			nm, nr = 1+rng.IntN(min(4, maxW)), 1+rng.IntN(min(4, maxW))
			lo, hi = 1, 4.99
		case u < cfg.ShortNarrow+cfg.LongNarrow:
			nm, nr = narrow(rng, maxW)
			lo, hi = 5, 500
		case u < cfg.ShortNarrow+cfg.LongNarrow+cfg.ShortWide:
			nm, nr = wide(rng, maxW)
			lo, hi = 1, 4.99
		default:
			nm, nr = wide(rng, maxW)
			lo, hi = 5, 2000
		}
		c := TraceCoflow{ID: i + 1, ArrivalMS: int64(at), Mappers: make([]int, nm), Reducers: make([]TraceReducer, nr)}
		pickPorts(rng, perm, c.Mappers)
		red := make([]int, nr)
		pickPorts(rng, perm, red)
		for r, p := range red {
			perFlow := math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
			mb := math.Max(1, math.Floor(perFlow*float64(nm)))
			c.Reducers[r] = TraceReducer{Port: p, MB: mb}
		}
		t.Coflows[i] = c
	}
	if cfg.Load > 0 && at > 0 {
		var bytes float64
		for _, c := range t.Coflows {
			for _, r := range c.Reducers {
				bytes += r.MB * (1 << 20)
			}
		}
		span := bytes / (cfg.Load * float64(cfg.Ports) * cfg.PortBps) // seconds
		scale := span * 1e3 / at
		for i := range t.Coflows {
			t.Coflows[i].ArrivalMS = int64(ats[i] * scale)
		}
	}
	return t, nil
}

// OfferedLoad returns t's offered load at port bandwidth portBps (bytes/s):
// total bytes / (Ports · portBps · span), span the last arrival time (as
// SynthConfig.Load). It returns +Inf when every coflow arrives at once.
func OfferedLoad(t *Trace, portBps float64) float64 {
	var bytes float64
	var last int64
	for _, c := range t.Coflows {
		last = max(last, c.ArrivalMS)
		for _, r := range c.Reducers {
			bytes += r.MB * (1 << 20)
		}
	}
	if last == 0 {
		return math.Inf(1)
	}
	return bytes / (float64(t.Ports) * portBps * float64(last) / 1e3)
}

// narrow draws mapper and reducer counts with at most 50 flows.
func narrow(rng *rand.Rand, maxW int) (int, int) {
	for {
		nm, nr := 1+rng.IntN(min(10, maxW)), 1+rng.IntN(min(10, maxW))
		if nm*nr <= 50 {
			return nm, nr
		}
	}
}

// wide draws counts with more than 50 flows (log-uniform widths up to maxW);
// on fabrics too small for 51 flows it returns maxW × maxW.
func wide(rng *rand.Rand, maxW int) (int, int) {
	if maxW*maxW <= 50 {
		return maxW, maxW
	}
	for {
		nm := int(math.Exp(rng.Float64() * math.Log(float64(maxW)+0.999)))
		nr := int(math.Exp(rng.Float64() * math.Log(float64(maxW)+0.999)))
		nm, nr = max(1, min(nm, maxW)), max(1, min(nr, maxW))
		if nm*nr > 50 {
			return nm, nr
		}
	}
}

// pickPorts fills dst with distinct ports by a partial Fisher–Yates shuffle
// of perm (which it re-initialises).
func pickPorts(rng *rand.Rand, perm, dst []int) {
	for i := range perm {
		perm[i] = i
	}
	for i := range dst {
		j := i + rng.IntN(len(perm)-i)
		perm[i], perm[j] = perm[j], perm[i]
		dst[i] = perm[i]
	}
}
