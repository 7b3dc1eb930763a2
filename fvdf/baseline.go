package fvdf

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/transport"
)

// Rescheduling rules of the study: when a scheduler is called.
const (
	// ReschedVarys calls on coflow arrivals and completions only (Varys'
	// rule; capacity a flow frees by finishing early idles until then).
	ReschedVarys = "varys"
	// ReschedTimers is Varys' rule plus the T/δ starvation guard, whose
	// slice boundaries are extra calls (coflow.Guard; FVDF's own guard).
	ReschedTimers = "timers"
	// ReschedEvery calls on every flow completion too (the driver may
	// coalesce them: coflow.Config.CoalesceFlowEvents).
	ReschedEvery = "every"
)

// ReschedulingRules lists the rules in the study's order.
func ReschedulingRules() []string { return []string{ReschedVarys, ReschedTimers, ReschedEvery} }

// Baseline names one scheduler of the study as an order and a compression
// mode. Its String is the name cmd/falcon-coflow -sched takes:
//
//	sebf, dclas, sincronia                 raw (Comp "none")
//	<order>+lz4, <order>+snappy            always compress with that codec,
//	                                       work-conserving (Compressor)
//	<order>+policy                         per-flow Policy rule (Compressor)
//	<order>+write-lz4, +write-snappy       compress at write (JobPlan.CompressAtWrite),
//	                                       the order's raw scheduler on the
//	                                       compressed bytes
//	sebf-rho (= sebf-rho+lz4), sebf-rho+snappy
//	                                       SEBF keyed by ρΓ (SEBFRho), always
//	                                       compressing with that codec
//	sebf-order+fvdf                        FVDF with SEBF's order (Config.OrderBySEBF)
//	fvdf                                   FVDF
//
// with <order> one of sebf, dclas, sincronia. The matrix
// (internal/coflowmatrix) keys cells by Sched/Comp.
type Baseline struct {
	// Sched is the order: "sebf", "dclas", "sincronia", "sebf-rho",
	// "sebf-order" or "fvdf".
	Sched string
	// Comp is the compression mode: "none", a codec name ("lz4",
	// "snappy"), "policy", "write-" + a codec name, or "fvdf" (with
	// Sched "sebf-order" or "fvdf").
	Comp string
}

// String returns the baseline's name (see Baseline).
func (b Baseline) String() string {
	switch {
	case b.Comp == "none":
		return b.Sched
	case b.Sched == "fvdf" && b.Comp == "fvdf":
		return "fvdf"
	case b.Sched == "sebf-rho" && b.Comp == "lz4":
		return "sebf-rho"
	}
	return b.Sched + "+" + b.Comp
}

// WriteCodec returns the codec name of a compress-at-write baseline
// ("lz4" for "sebf+write-lz4"), or "" for the others. Its workload must
// be transformed with JobPlan.CompressAtWrite; its scheduler is raw.
func (b Baseline) WriteCodec() string {
	c, _ := strings.CutPrefix(b.Comp, "write-")
	if c == b.Comp {
		return ""
	}
	return c
}

// BaselineNames lists examples of every form ParseBaseline accepts.
func BaselineNames() []string {
	var out []string
	for _, o := range []string{"sebf", "dclas", "sincronia"} {
		out = append(out, o, o+"+lz4", o+"+snappy", o+"+policy", o+"+write-lz4", o+"+write-snappy")
	}
	return append(out, "sebf-rho", "sebf-rho+snappy", "sebf-order+fvdf", "fvdf")
}

var codecNames = []string{"lz4", "snappy"}

// ParseBaseline parses a baseline name (see Baseline).
func ParseBaseline(name string) (Baseline, error) {
	o, c, plus := strings.Cut(name, "+")
	if !plus {
		c = "none"
	}
	bad := fmt.Errorf("%w: unknown baseline %q (known: %s)", ErrBadInput, name, strings.Join(BaselineNames(), ", "))
	switch o {
	case "sebf", "dclas", "sincronia":
		w, _ := strings.CutPrefix(c, "write-")
		if c == "none" && !plus || c == "policy" || slices.Contains(codecNames, w) {
			return Baseline{o, c}, nil
		}
	case "sebf-rho":
		if !plus {
			c = "lz4"
		}
		if slices.Contains(codecNames, c) {
			return Baseline{o, c}, nil
		}
	case "sebf-order":
		if c == "fvdf" {
			return Baseline{o, c}, nil
		}
	case "fvdf":
		if !plus {
			return Baseline{"fvdf", "fvdf"}, nil
		}
	}
	return Baseline{}, bad
}

// BaselineConfig is what NewBaseline needs besides the name.
type BaselineConfig struct {
	// Rescheduling is ReschedVarys, ReschedTimers or ReschedEvery. Empty
	// means ReschedVarys.
	Rescheduling string
	// GuardPeriod and GuardSlice are the T/δ guard of ReschedTimers. Zero
	// means 10 s and 200 ms (FVDF's defaults).
	GuardPeriod, GuardSlice time.Duration
	// Codecs are the transport codecs of the fabric's codecs, in fabric
	// order: a codec name resolves to its fabric index here. Nil means lz4
	// and snappy (ReplayConfig's default).
	Codecs []transport.Codec
	// PolicyOverhead is the Policy rule's per-decision overhead. Zero
	// means none.
	PolicyOverhead time.Duration
	// FVDF configures "fvdf" and "sebf-order+fvdf"; its EveryFlowEvent,
	// StarvationPeriod and StarvationSlice are set from the rule, and
	// OrderBySEBF from the name.
	FVDF Config
	// Estimator is what FVDF and the Compressor decide with. Nil means
	// Nominal for FVDF and the fabric's fixed profiles for the Compressor.
	Estimator Estimator
	// WholeCores runs every compressed flow on whole codec workers
	// (PROTOCOL-v3 §7): it sets FVDF's Config.WholeCores and the
	// Compressor's CompressorConfig.WholeCores. Compress-at-write is not
	// affected (its codec runs in the map and reduce tasks). Zero (false)
	// means FVDF.WholeCores as given and fractional cores in the
	// Compressor.
	WholeCores bool
}

// CodecIndex returns the fabric index (≥ 1) of the codec called name in
// cfg.Codecs, or 0.
func (cfg *BaselineConfig) CodecIndex(name string) int {
	cs := cfg.Codecs
	if cs == nil {
		cs = []transport.Codec{transport.CodecLZ4, transport.CodecSnappy}
	}
	for i, c := range cs {
		if c.String() == name {
			return i + 1
		}
	}
	return 0
}

// NewBaseline builds b's scheduler under cfg's rescheduling rule:
//
//   - varys: the order's scheduler event-driven (coflow.OrderedConfig,
//     DCLASConfig, SincroniaConfig with OnFlowCompletion false; FVDF with
//     EveryFlowEvent false and no guard);
//   - timers: the same inside coflow.Guard (FVDF: its own guard);
//   - every: OnFlowCompletion (FVDF: EveryFlowEvent), no guard;
//
// then, for a compressing mode, inside a Compressor (the guard's fair
// slices are compressed too). D-CLAS takes coflow.DefaultDCLASConfig,
// Sincronia its zero config. A compress-at-write baseline returns the raw
// scheduler: its workload must go through JobPlan.CompressAtWrite (Run and
// the matrix do it).
func NewBaseline(b Baseline, cfg BaselineConfig) (coflow.Scheduler, error) {
	rule := cfg.Rescheduling
	if rule == "" {
		rule = ReschedVarys
	}
	if !slices.Contains(ReschedulingRules(), rule) {
		return nil, fmt.Errorf("%w: rescheduling rule %q (known: %s)", ErrConfig, rule, strings.Join(ReschedulingRules(), ", "))
	}
	T, d := cfg.GuardPeriod, cfg.GuardSlice
	if T == 0 {
		T = 10 * time.Second
	}
	if d == 0 {
		d = 200 * time.Millisecond
	}
	every := rule == ReschedEvery
	if b.Comp == "fvdf" {
		fc := cfg.FVDF
		fc.EveryFlowEvent = every
		fc.OrderBySEBF = b.Sched == "sebf-order"
		fc.WholeCores = fc.WholeCores || cfg.WholeCores
		fc.StarvationPeriod, fc.StarvationSlice = -1, 0
		if rule == ReschedTimers {
			fc.StarvationPeriod, fc.StarvationSlice = T, d
		}
		return New(fc, cfg.Estimator)
	}
	var s coflow.Scheduler
	var err error
	codec := cfg.CodecIndex(b.Comp)
	switch b.Sched {
	case "sebf":
		s, err = coflow.NewSEBF(coflow.OrderedConfig{OnFlowCompletion: every})
	case "dclas":
		dc := coflow.DefaultDCLASConfig()
		dc.OnFlowCompletion = every
		s, err = coflow.NewDCLAS(dc)
	case "sincronia":
		s, err = coflow.NewSincronia(coflow.SincroniaConfig{OnFlowCompletion: every})
	case "sebf-rho":
		if codec == 0 {
			return nil, fmt.Errorf("%w: %s: no codec %q among the fabric's", ErrConfig, b, b.Comp)
		}
		s, err = NewSEBFRho(coflow.OrderedConfig{OnFlowCompletion: every}, codec)
	default:
		return nil, fmt.Errorf("%w: baseline %v", ErrBadInput, b)
	}
	if err != nil {
		return nil, err
	}
	if rule == ReschedTimers {
		if s, err = coflow.NewGuard(s, T, d); err != nil {
			return nil, err
		}
	}
	var cc CompressorConfig
	switch {
	case b.Comp == "none" || b.WriteCodec() != "":
		if w := b.WriteCodec(); w != "" && cfg.CodecIndex(w) == 0 {
			return nil, fmt.Errorf("%w: %s: no codec %q among the fabric's", ErrConfig, b, w)
		}
		return s, nil
	case b.Comp == "policy":
		cc.Codecs, cc.Overhead = cfg.Codecs, cfg.PolicyOverhead
		if cc.Codecs == nil {
			cc.Codecs = []transport.Codec{transport.CodecLZ4, transport.CodecSnappy}
		}
	case codec > 0:
		cc.Codec = codec
	default:
		return nil, fmt.Errorf("%w: %s: no codec %q among the fabric's", ErrConfig, b, b.Comp)
	}
	cc.Estimator, cc.WholeCores = cfg.Estimator, cfg.WholeCores
	return NewCompressor(s, cc)
}
