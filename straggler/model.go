package straggler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Model answers "how many samples per second does worker w compute at
// virtual time now with p goroutines". It is a pure function of its
// arguments: asking in any order, any number of times, gives the same
// answers, so a virtual-time simulator and a live runtime that injects
// slowdowns can share one Model.
//
// Rate is piecewise constant in now; NextChange tells a simulator when it
// may change, so that work can be integrated exactly.
type Model interface {
	// NumWorkers is the number of workers the model describes.
	NumWorkers() int
	// Host is the host (machine) worker w runs on: 0 .. NumHosts()-1.
	Host(w int) int
	// NumHosts is the number of hosts.
	NumHosts() int
	// Cores is the number of cores of host h, shared by the workers on it.
	Cores(h int) int
	// Rate is worker w's throughput in samples/s at time now when it
	// computes with p goroutines and its host is not oversubscribed.
	Rate(w, p int, now time.Duration) float64
	// NextChange is the earliest time after now at which Rate(w, ·, t)
	// may differ from Rate(w, ·, now). It is always > now.
	NextChange(w int, now time.Duration) time.Duration
}

// TransientConfig describes random transient slowdowns, the kind of
// injected straggler pattern FlexRR evaluates (Harlap et al., SoCC'16).
// FlexRR's own probabilities and durations were not found (see
// baselines-params.md §1), so every value here is ours and must be stated
// as such in any result.
//
// Time is cut into slots of length Period. In each slot, independently per
// worker, a slowdown starts with probability Prob at a uniformly random
// offset inside the slot and lasts Duration; while at least one slowdown
// is active the worker's rate is multiplied by Factor.
type TransientConfig struct {
	Prob     float64       // per worker per slot; 0 disables transient slowdowns
	Period   time.Duration // slot length; must be > 0 when Prob > 0
	Duration time.Duration // length of one slowdown; must be > 0 when Prob > 0
	Factor   float64       // rate multiplier while slowed, in (0,1]; e.g. 0.25 = 4x slower
}

// HeteroConfig configures [NewHetero]. Every random choice derives from Seed.
type HeteroConfig struct {
	// NumWorkers is the number of workers (> 0).
	NumWorkers int
	// BaseRate is the samples/s of one goroutine on a worker with speed
	// factor 1 and no slowdown. 0 means 1000.
	BaseRate float64
	// Speed holds static per-worker speed factors (> 0). nil means 1 for
	// every worker (before SpeedJitter).
	Speed []float64
	// SpeedJitter, in [0,1), draws each worker's factor multiplier
	// uniformly from [1-SpeedJitter, 1] using Seed. 0 means none.
	SpeedJitter float64
	// Hosts maps worker -> host. nil means worker w runs alone on host w.
	Hosts []int
	// Cores gives the cores of each host. nil means DefaultCores for
	// every host; a 0 entry also means DefaultCores.
	Cores []int
	// DefaultCores is used where Cores gives nothing. 0 means 4.
	DefaultCores int
	// Serial gives each worker's Amdahl serial fraction. nil means
	// DefaultSerial for every worker.
	Serial []float64
	// Persistent lists persistent stragglers: worker -> rate multiplier in
	// (0,1] applied at all times (e.g. 0.5 = a worker twice as slow).
	Persistent map[int]float64
	// Transient configures random transient slowdowns.
	Transient TransientConfig
	// Seed seeds every random choice.
	Seed uint64
}

// DefaultHeteroConfig returns a homogeneous cluster of n workers, one per
// host, 4 cores per host, 1000 samples/s per goroutine, serial fraction
// DefaultSerial, no slowdowns.
func DefaultHeteroConfig(n int) HeteroConfig {
	return HeteroConfig{NumWorkers: n, BaseRate: 1000, DefaultCores: 4}
}

// Validate checks the configuration.
func (c *HeteroConfig) Validate() error {
	if c.NumWorkers <= 0 {
		return fmt.Errorf("%w: NumWorkers %d must be > 0", ErrConfig, c.NumWorkers)
	}
	if c.BaseRate < 0 || math.IsNaN(c.BaseRate) || math.IsInf(c.BaseRate, 0) {
		return fmt.Errorf("%w: BaseRate %v", ErrConfig, c.BaseRate)
	}
	if c.Speed != nil && len(c.Speed) != c.NumWorkers {
		return fmt.Errorf("%w: len(Speed)=%d, want %d", ErrConfig, len(c.Speed), c.NumWorkers)
	}
	for w, s := range c.Speed {
		if !(s > 0) || math.IsInf(s, 0) {
			return fmt.Errorf("%w: Speed[%d]=%v must be > 0", ErrConfig, w, s)
		}
	}
	if !(c.SpeedJitter >= 0 && c.SpeedJitter < 1) {
		return fmt.Errorf("%w: SpeedJitter %v not in [0,1)", ErrConfig, c.SpeedJitter)
	}
	if c.Hosts != nil && len(c.Hosts) != c.NumWorkers {
		return fmt.Errorf("%w: len(Hosts)=%d, want %d", ErrConfig, len(c.Hosts), c.NumWorkers)
	}
	nh := c.NumWorkers
	if c.Hosts != nil {
		nh = 0
		for w, h := range c.Hosts {
			if h < 0 {
				return fmt.Errorf("%w: Hosts[%d]=%d < 0", ErrConfig, w, h)
			}
			nh = max(nh, h+1)
		}
	}
	if c.Cores != nil && len(c.Cores) < nh {
		return fmt.Errorf("%w: len(Cores)=%d, want >= %d hosts", ErrConfig, len(c.Cores), nh)
	}
	for h, k := range c.Cores {
		if k < 0 {
			return fmt.Errorf("%w: Cores[%d]=%d < 0", ErrConfig, h, k)
		}
	}
	if c.DefaultCores < 0 {
		return fmt.Errorf("%w: DefaultCores %d < 0", ErrConfig, c.DefaultCores)
	}
	if c.Serial != nil && len(c.Serial) != c.NumWorkers {
		return fmt.Errorf("%w: len(Serial)=%d, want %d", ErrConfig, len(c.Serial), c.NumWorkers)
	}
	for w, f := range c.Serial {
		if err := (Amdahl{f}).Validate(); err != nil {
			return fmt.Errorf("worker %d: %w", w, err)
		}
	}
	for w, f := range c.Persistent {
		if w < 0 || w >= c.NumWorkers {
			return fmt.Errorf("%w: Persistent worker %d", ErrWorker, w)
		}
		if !(f > 0 && f <= 1) {
			return fmt.Errorf("%w: Persistent[%d]=%v not in (0,1]", ErrConfig, w, f)
		}
	}
	t := c.Transient
	if !(t.Prob >= 0 && t.Prob <= 1) {
		return fmt.Errorf("%w: Transient.Prob %v not in [0,1]", ErrConfig, t.Prob)
	}
	if t.Prob > 0 {
		if t.Period <= 0 || t.Duration <= 0 {
			return fmt.Errorf("%w: Transient.Period and Duration must be > 0", ErrConfig)
		}
		if !(t.Factor > 0 && t.Factor <= 1) {
			return fmt.Errorf("%w: Transient.Factor %v not in (0,1]", ErrConfig, t.Factor)
		}
	}
	return nil
}

// Hetero is the SDK's heterogeneity [Model]: static speed factors, per-host
// core budgets, persistent stragglers, seeded transient slowdowns and an
// Amdahl speed-up curve per worker. Its rate is
//
//	Rate(w,p,t) = BaseRate · speed_w · persistent_w · transient_w(t) · S_w(min(p, cores(host_w)))
//
// with S_w the worker's [Amdahl] curve. A Hetero is immutable after
// construction and safe for concurrent use.
type Hetero struct {
	cfg    HeteroConfig
	factor []float64 // static factor incl. jitter and persistent slowdown
	host   []int
	cores  []int
	curve  []Amdahl
}

var _ Model = (*Hetero)(nil)

// NewHetero validates cfg and builds the model.
func NewHetero(cfg HeteroConfig) (*Hetero, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BaseRate == 0 {
		cfg.BaseRate = 1000
	}
	if cfg.DefaultCores == 0 {
		cfg.DefaultCores = 4
	}
	n := cfg.NumWorkers
	m := &Hetero{cfg: cfg, factor: make([]float64, n), host: make([]int, n), curve: make([]Amdahl, n)}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	nh := 0
	for w := range n {
		f := 1.0
		if cfg.Speed != nil {
			f = cfg.Speed[w]
		}
		if cfg.SpeedJitter > 0 {
			f *= 1 - cfg.SpeedJitter*rng.Float64()
		}
		if pf, ok := cfg.Persistent[w]; ok {
			f *= pf
		}
		m.factor[w] = f
		m.host[w] = w
		if cfg.Hosts != nil {
			m.host[w] = cfg.Hosts[w]
		}
		nh = max(nh, m.host[w]+1)
		m.curve[w] = Amdahl{DefaultSerial}
		if cfg.Serial != nil {
			m.curve[w] = Amdahl{cfg.Serial[w]}
		}
	}
	m.cores = make([]int, nh)
	for h := range nh {
		m.cores[h] = cfg.DefaultCores
		if h < len(cfg.Cores) && cfg.Cores[h] > 0 {
			m.cores[h] = cfg.Cores[h]
		}
	}
	return m, nil
}

// NumWorkers implements [Model].
func (m *Hetero) NumWorkers() int { return len(m.factor) }

// NumHosts implements [Model].
func (m *Hetero) NumHosts() int { return len(m.cores) }

// Host implements [Model].
func (m *Hetero) Host(w int) int { return m.host[w] }

// Cores implements [Model].
func (m *Hetero) Cores(h int) int { return m.cores[h] }

// Curve returns worker w's speed-up curve.
func (m *Hetero) Curve(w int) Amdahl { return m.curve[w] }

// Factor returns worker w's static rate factor (speed factor, jitter and
// persistent slowdown multiplied).
func (m *Hetero) Factor(w int) float64 { return m.factor[w] }

// Rate implements [Model]. p is clamped to [1, Cores(Host(w))]. It panics
// if w is out of range.
func (m *Hetero) Rate(w, p int, now time.Duration) float64 {
	pp := float64(min(max(p, 1), m.cores[m.host[w]]))
	return m.rate(w, pp, now)
}

func (m *Hetero) rate(w int, p float64, now time.Duration) float64 {
	r := m.cfg.BaseRate * m.factor[w] * m.curve[w].Speedup(p)
	if m.Slowed(w, now) {
		r *= m.cfg.Transient.Factor
	}
	return r
}

// RateAll writes into dst (grown if needed) the rate of every worker when
// worker w computes with ps[w] goroutines, modelling core contention: if
// the goroutines on host h add up to more than Cores(h), each worker on it
// gets the fractional parallelism ps[w]·Cores(h)/Σps. It panics if
// len(ps) != NumWorkers().
func (m *Hetero) RateAll(ps []int, now time.Duration, dst []float64) []float64 {
	if len(ps) != len(m.factor) {
		panic("straggler: RateAll: len(ps) != NumWorkers")
	}
	load := make([]int, len(m.cores))
	for w, p := range ps {
		load[m.host[w]] += max(p, 1)
	}
	dst = append(dst[:0], make([]float64, len(ps))...)
	for w, p := range ps {
		h := m.host[w]
		pe := float64(max(p, 1))
		if load[h] > m.cores[h] {
			pe = pe * float64(m.cores[h]) / float64(load[h])
		}
		dst[w] = m.rate(w, pe, now)
	}
	return dst
}

// slowdownStart returns whether a transient slowdown starts in slot k for
// worker w, and when. It is a pure function of (Seed, w, k).
func (m *Hetero) slowdownStart(w int, k int64) (time.Duration, bool) {
	t := m.cfg.Transient
	r := rand.New(rand.NewPCG(m.cfg.Seed^0x9e3779b97f4a7c15, uint64(w)<<40^uint64(k)))
	if r.Float64() >= t.Prob {
		return 0, false
	}
	return time.Duration(k)*t.Period + time.Duration(r.Float64()*float64(t.Period)), true
}

// slots returns the first and last slot whose slowdown may cover now.
func (m *Hetero) slots(now time.Duration) (lo, hi int64) {
	t := m.cfg.Transient
	hi = int64(now / t.Period)
	lo = int64((now - t.Duration) / t.Period)
	if now < t.Duration {
		lo = 0
	}
	return max(lo-1, 0), hi
}

// Slowed reports whether worker w is inside a transient slowdown at now.
func (m *Hetero) Slowed(w int, now time.Duration) bool {
	t := m.cfg.Transient
	if t.Prob == 0 || now < 0 {
		return false
	}
	lo, hi := m.slots(now)
	for k := lo; k <= hi; k++ {
		if s, ok := m.slowdownStart(w, k); ok && s <= now && now < s+t.Duration {
			return true
		}
	}
	return false
}

// NextChange implements [Model].
func (m *Hetero) NextChange(w int, now time.Duration) time.Duration {
	t := m.cfg.Transient
	if t.Prob == 0 {
		return math.MaxInt64
	}
	if now < 0 {
		return 0
	}
	lo, hi := m.slots(now)
	next := time.Duration(hi+1) * t.Period // a slowdown can start no earlier than the next slot
	for k := lo; k <= hi+1; k++ {
		if s, ok := m.slowdownStart(w, k); ok {
			if s > now && s < next {
				next = s
			}
			if e := s + t.Duration; e > now && e < next {
				next = e
			}
		}
	}
	return next
}
