package fvdf

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/fvdf/codecprof"
	"github.com/falconml/falcon/predictor"
	"github.com/falconml/falcon/transport"
)

// PredictorOracle names the estimator that knows the true codec speed.
const PredictorOracle = "oracle"

// ReplayConfig describes one replay: the fabric built around a trace, the
// codecs, the truth the simulator advances with and what the scheduler
// predicts with.
type ReplayConfig struct {
	// Bandwidth is every port's capacity each way, bytes/s. Zero means
	// 125e6 (1 Gbit/s).
	Bandwidth float64
	// Cores is every machine's cores for codecs. Zero means 4; negative
	// means none (compression impossible).
	Cores float64
	// Mix is the data every flow carries. Nil means codecprof.ShuffleMix().
	Mix codecprof.Mix
	// Profiles are the codec measurements. A zero value means
	// codecprof.Defaults().
	Profiles codecprof.Profiles
	// Codecs offered to the scheduler. Nil means lz4 and snappy.
	Codecs []transport.Codec
	// Predictor is "oracle" or a predictor.New name ("last", "ewma", "ar",
	// "lstm", "gru"). Empty means "oracle".
	Predictor string
	// PredictorConfig configures the predictor.
	PredictorConfig predictor.Config
	// TrainSamples is the length of the offline training series for
	// predictors that can be fitted (LSTM, GRU, AR): one measurement per
	// contention step from a drift series seeded differently from the
	// replay's. Zero means 2000; negative means no offline training.
	TrainSamples int
	// Contention is the true speed drift. Zero value means
	// DefaultContentionConfig(); set Static for constant speeds.
	Contention ContentionConfig
	// Static makes true speeds constant (the nominal profiles).
	Static bool
	// Seed seeds the drift.
	Seed uint64
	// Sim configures the simulator. Nil means coflow.DefaultConfig()
	// (pipelined, 64 KiB chunks). Its CodecSpeed is replaced by the truth.
	Sim *coflow.Config
	// FVDF configures the FVDF scheduler.
	FVDF Config
	// Jobs configures the job model for JCT.
	Jobs JobConfig
	// Rescheduling is the rescheduling rule (ReschedVarys, ReschedTimers,
	// ReschedEvery; see NewBaseline) every scheduler runs under; its T/δ
	// guard is FVDF's (FVDF.StarvationPeriod, StarvationSlice; zero: 10 s,
	// 200 ms). With ReschedEvery, Sim.CoalesceFlowEvents coalesces the
	// calls. Empty means each name's own rule: "fvdf" Varys' rule with its
	// guard, "sebf" Varys' rule, "sebf-guard" with the guard, and Varys'
	// rule for the other baselines.
	Rescheduling string
}

// Metrics summarises one scheduler's run.
type Metrics struct {
	Sched   string
	Coflows int
	// AvgCCT and P95CCT are the mean and 95th percentile (nearest rank) CCT.
	AvgCCT, P95CCT time.Duration
	// AvgJCT is the mean job completion time under the job model.
	AvgJCT time.Duration
	// WireBytes and RawBytes are bytes on the wire and raw bytes delivered.
	WireBytes, RawBytes float64
	// CPUSeconds is core-time spent on codecs.
	CPUSeconds float64
	// MaxWait is the longest time any active coflow had no flow with a
	// positive rate.
	MaxWait time.Duration
	// Calls is the number of Schedule calls.
	Calls int
	// CCT is the per-coflow CCT in input order.
	CCT []time.Duration
}

// TrafficReduction returns 1 − WireBytes/RawBytes.
func (m Metrics) TrafficReduction() float64 {
	if m.RawBytes == 0 {
		return 0
	}
	return 1 - m.WireBytes/m.RawBytes
}

// Fabric builds the replay fabric for a trace of ports ports.
func (c *ReplayConfig) Fabric(ports int) (*coflow.Fabric, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	f := coflow.NewFabric(ports, c.Bandwidth)
	if c.Cores > 0 {
		f.SetCores(c.Cores)
	}
	for _, cd := range c.Codecs {
		p, err := c.Profiles.ForMix(cd, c.Mix)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		// coflow requires ρ ≤ 1: codecs that expand are modelled as not
		// shrinking (FVDF never picks them anyway).
		f.Codecs = append(f.Codecs, coflow.CodecProfile{Name: cd.String(), CompressSpeed: p.CompressBps,
			DecompressSpeed: p.DecompressBps, Ratio: math.Min(1, p.Ratio)})
	}
	return f, nil
}

func (c *ReplayConfig) validate() error {
	if c.Bandwidth == 0 {
		c.Bandwidth = coflow.GigabitBytesPerSec
	}
	if !(c.Bandwidth > 0) {
		return fmt.Errorf("%w: bandwidth %v", ErrConfig, c.Bandwidth)
	}
	if c.Cores == 0 {
		c.Cores = 4
	}
	if c.Mix == nil {
		c.Mix = codecprof.ShuffleMix()
	}
	if c.Profiles.Entries == nil {
		c.Profiles = codecprof.Defaults()
	}
	if c.Codecs == nil {
		c.Codecs = []transport.Codec{transport.CodecLZ4, transport.CodecSnappy}
	}
	if c.Predictor == "" {
		c.Predictor = PredictorOracle
	}
	if c.Sim == nil {
		d := coflow.DefaultConfig()
		c.Sim = &d
	}
	return nil
}

// SchedulerNames lists the names Run accepts: the baselines of
// ParseBaseline (BaselineNames) and "sebf-guard", "fvdf-raw".
func SchedulerNames() []string {
	out := []string{"fvdf", "sebf", "sebf-guard", "fvdf-raw"}
	for _, n := range BaselineNames() {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// Run replays coflows on a fabric of ports ports under the scheduler
// called name and returns its metrics: "fvdf"; "sebf", package coflow's
// Varys SEBF with its defaults; "sebf-guard", the same with FVDF's T/δ
// guard; "fvdf-raw", FVDF with compression disabled, which equals
// sebf-guard; or any baseline of ParseBaseline ("sebf+lz4",
// "dclas+snappy", "sebf+write-lz4", "sebf-order+fvdf", "sebf-rho", ...,
// built by NewBaseline under cfg.Rescheduling; FVDF and the compressing
// wrappers plan with the same estimator, cfg.Predictor). A compress-at-write
// baseline replays the one-stage jobs of cfg.Jobs (PlanJobs) through
// JobPlan.CompressAtWrite: its CCTs are those of the compressed
// shuffles (each arriving when its slower map ends), its JCT includes the
// codec time of the map and reduce stages, RawBytes are the raw bytes and
// CPUSeconds include the codec's. Runs are deterministic for a config.
func Run(name string, cfs []coflow.Coflow, ports int, cfg ReplayConfig) (Metrics, error) {
	fab, err := cfg.Fabric(ports)
	if err != nil {
		return Metrics{}, err
	}
	var rng *rand.Rand
	if !cfg.Static {
		rng = rand.New(rand.NewPCG(cfg.Seed, 0x636f6e74))
	}
	cont, err := NewContention(cfg.Contention, rng)
	if err != nil {
		return Metrics{}, err
	}
	truth := &TrueSpeeds{Fabric: fab, Contention: cont}
	estimator := func() (Estimator, error) {
		if cfg.Predictor == PredictorOracle {
			return Oracle{Contention: cont}, nil
		}
		p, err := NewPredicted(cfg.Predictor, cfg.PredictorConfig)
		if err != nil {
			return nil, err
		}
		if n := cfg.TrainSamples; n >= 0 {
			if n == 0 {
				n = 2000
			}
			tc, err := NewContention(cfg.Contention, rand.New(rand.NewPCG(cfg.Seed^0x747261696e, 0x636f6e74)))
			if err != nil {
				return nil, err
			}
			if err := p.Train(fab, tc, n); err != nil {
				return nil, err
			}
		}
		truth.Sink = p.Observe
		return p, nil
	}
	var sched coflow.Scheduler
	var plan *JobPlan // compress at write
	legacy := name == "sebf-guard" || name == "fvdf-raw" || cfg.Rescheduling == "" && (name == "fvdf" || name == "sebf")
	switch {
	case legacy && cfg.Rescheduling != "":
		return Metrics{}, fmt.Errorf("%w: %q has its own rescheduling rule; use sebf or fvdf with a rule", ErrBadInput, name)
	case name == "fvdf" && legacy, name == "fvdf-raw":
		fc := cfg.FVDF
		fc.DisableCompression = fc.DisableCompression || name == "fvdf-raw"
		fc.SequentialStages = fc.SequentialStages || !cfg.Sim.Pipelining
		est, err := estimator()
		if err != nil {
			return Metrics{}, err
		}
		s, err := New(fc, est)
		if err != nil {
			return Metrics{}, err
		}
		sched = s
	case name == "sebf" && legacy, name == "sebf-guard":
		oc := coflow.DefaultOrderedConfig()
		if name == "sebf-guard" {
			fc := cfg.FVDF
			if err := fc.Validate(); err != nil {
				return Metrics{}, err
			}
			if fc.StarvationPeriod > 0 {
				oc.StarvationPeriod, oc.StarvationWindow = fc.StarvationPeriod, fc.StarvationSlice
			}
		}
		if sched, err = coflow.NewSEBF(oc); err != nil {
			return Metrics{}, err
		}
	default:
		b, err := ParseBaseline(name)
		if err != nil {
			return Metrics{}, fmt.Errorf("%w (or sebf-guard, fvdf-raw)", err)
		}
		fc := cfg.FVDF
		fc.SequentialStages = fc.SequentialStages || !cfg.Sim.Pipelining
		guard := fc
		if err := guard.Validate(); err != nil {
			return Metrics{}, err
		}
		bc := BaselineConfig{Rescheduling: cfg.Rescheduling, Codecs: cfg.Codecs, PolicyOverhead: DefaultPolicyConfig().Overhead, FVDF: fc}
		if guard.StarvationPeriod > 0 {
			bc.GuardPeriod, bc.GuardSlice = guard.StarvationPeriod, guard.StarvationSlice
		}
		if b.Comp != "none" && b.WriteCodec() == "" {
			// FVDF and the compressing wrappers plan with the same
			// knowledge of the drifting codec speeds.
			if bc.Estimator, err = estimator(); err != nil {
				return Metrics{}, err
			}
		}
		if sched, err = NewBaseline(b, bc); err != nil {
			return Metrics{}, err
		}
		if w := b.WriteCodec(); w != "" {
			if plan, err = PlanJobs(cfs, DAGConfig{Jobs: cfg.Jobs}); err != nil {
				return Metrics{}, err
			}
			if plan, err = plan.CompressAtWrite(fab, bc.CodecIndex(w)); err != nil {
				return Metrics{}, err
			}
		}
	}
	wt := &WaitTracker{Inner: sched}
	sc := *cfg.Sim
	sc.CodecSpeed = truth.CodecSpeed
	sim, err := coflow.NewSim(sc, fab, wt)
	if err != nil {
		return Metrics{}, err
	}
	in := cfs
	if plan != nil {
		in = plan.Coflows
	}
	res, err := sim.Run(in)
	if err != nil {
		return Metrics{}, fmt.Errorf("fvdf: replay %s: %w", name, err)
	}
	m := Metrics{Sched: name, Coflows: len(cfs), WireBytes: res.WireBytes, RawBytes: res.RawBytes,
		CPUSeconds: res.CPUSeconds, MaxWait: wt.MaxWait(), Calls: res.Calls}
	m.CCT = make([]time.Duration, len(res.Coflows))
	var sumC, sumJ float64
	if plan != nil {
		m.RawBytes, m.CPUSeconds = plan.RawBytes(), m.CPUSeconds+plan.CodecCPUSeconds
		for i, j := range plan.JCTs(res) {
			m.CCT[i] = res.Coflows[i].CCT
			sumC += float64(m.CCT[i])
			sumJ += float64(j)
		}
	} else {
		jobs, err := Jobs(cfs, cfg.Jobs)
		if err != nil {
			return Metrics{}, err
		}
		for i, c := range res.Coflows {
			m.CCT[i] = c.CCT
			sumC += float64(c.CCT)
			sumJ += float64(jobs[i].MapDuration + c.CCT + jobs[i].ReduceDuration)
		}
	}
	if n := len(cfs); n > 0 {
		m.AvgCCT = time.Duration(sumC / float64(n))
		m.AvgJCT = time.Duration(sumJ / float64(n))
		s := append([]time.Duration(nil), m.CCT...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		m.P95CCT = s[int(math.Ceil(0.95*float64(n)))-1]
	}
	return m, nil
}

// WaitTracker wraps a scheduler and records, for every active coflow, how
// long it went without any flow at a positive rate, from its arrival or
// from the end of its last service (allocations hold until the next call,
// so gaps are exact at call boundaries). It forwards the optional Timer and
// EventDriven capabilities.
type WaitTracker struct {
	Inner coflow.Scheduler
	// Per coflow index: its state (wtUnseen, wtWaiting since start[i], or
	// wtServed at the last call) and the call number at which it was last
	// served.
	state   []uint8
	start   []time.Duration
	served  []uint32
	calls   uint32
	maxWait time.Duration
}

const (
	wtUnseen uint8 = iota
	wtWaiting
	wtServed
)

var (
	_ coflow.Scheduler   = (*WaitTracker)(nil)
	_ coflow.Timer       = (*WaitTracker)(nil)
	_ coflow.EventDriven = (*WaitTracker)(nil)
)

// Name returns the inner scheduler's name.
func (w *WaitTracker) Name() string { return w.Inner.Name() }

// OnlyOnArrivalsAndCompletions forwards coflow.EventDriven.
func (w *WaitTracker) OnlyOnArrivalsAndCompletions() bool {
	e, ok := w.Inner.(coflow.EventDriven)
	return ok && e.OnlyOnArrivalsAndCompletions()
}

// NextWakeup forwards coflow.Timer.
func (w *WaitTracker) NextWakeup(now time.Duration) (time.Duration, bool) {
	if t, ok := w.Inner.(coflow.Timer); ok {
		return t.NextWakeup(now)
	}
	return 0, false
}

// MaxWait returns the longest completed wait seen so far.
func (w *WaitTracker) MaxWait() time.Duration { return w.maxWait }

// Schedule calls the inner scheduler and updates the waits. Cost O(A +
// len(allocation)) on slices indexed by coflow index.
func (w *WaitTracker) Schedule(now time.Duration, s *coflow.State) []coflow.Allocation {
	al := w.Inner.Schedule(now, s)
	w.calls++
	if w.calls == 0 { // wrapped: forget old call numbers
		clear(w.served)
		w.calls = 1
	}
	for _, a := range al {
		if a.Rate > 0 {
			i := a.Flow.Coflow
			w.grow(i)
			w.served[i] = w.calls
		}
	}
	for i := range s.Coflows {
		c := &s.Coflows[i]
		x := c.Index
		w.grow(x)
		if w.state[x] == wtUnseen {
			w.state[x], w.start[x] = wtWaiting, c.Arrival
		}
		served := w.served[x] == w.calls
		switch {
		case served && w.state[x] == wtWaiting:
			w.maxWait = max(w.maxWait, now-w.start[x])
			w.state[x] = wtServed
		case !served && w.state[x] == wtServed:
			w.state[x], w.start[x] = wtWaiting, now
		}
	}
	return al
}

// grow makes room for coflow index i.
func (w *WaitTracker) grow(i int) {
	for len(w.state) <= i {
		w.state = append(w.state, wtUnseen)
		w.start = append(w.start, 0)
		w.served = append(w.served, 0)
	}
}

// Replay runs every scheduler in names on the same workload and
// configuration (see Run) and returns their metrics in order.
func Replay(names []string, cfs []coflow.Coflow, ports int, cfg ReplayConfig) ([]Metrics, error) {
	out := make([]Metrics, 0, len(names))
	for _, n := range names {
		m, err := Run(n, cfs, ports, cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
