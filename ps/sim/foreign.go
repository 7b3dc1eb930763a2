package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/falconml/falcon/straggler"
)

// ForeignConfig describes a foreign job: a CPU-bound process of another
// tenant that comes and goes on some hosts, competing with the training
// workers for the host's cores. On host h it runs Threads busy threads
// during the first On of every cycle of length On+Off, shifted by a phase
// drawn uniformly from [0, On+Off) per host from Seed. The model and its
// values are ours (no published straggler study gives one).
//
// While it runs, the host's cores are shared in proportion to threads, as a
// fair-share scheduler does: a worker with p goroutines on a host with c
// cores, whose workers run P goroutines in all, computes with the effective
// parallelism
//
//	p_eff = p · c / (P + Threads)   if P + Threads > c,   else p,
//
// which is [straggler.Hetero.RateAll]'s contention rule with the foreign
// threads added to the load.
type ForeignConfig struct {
	// Hosts lists the hosts the foreign job runs on; empty disables it.
	Hosts []int
	// Threads is the number of busy threads the job runs on each host (> 0).
	Threads int
	// On and Off are the running and absent parts of a cycle (> 0).
	On, Off time.Duration
	// Seed seeds the per-host phases.
	Seed uint64
}

// Enabled tells whether the configuration describes a foreign job.
func (c ForeignConfig) Enabled() bool { return len(c.Hosts) > 0 }

// Validate checks the configuration against a cluster of nhosts hosts.
func (c ForeignConfig) Validate(nhosts int) error {
	if !c.Enabled() {
		return nil
	}
	if c.Threads <= 0 || c.On <= 0 || c.Off <= 0 {
		return fmt.Errorf("%w: foreign job needs Threads, On and Off > 0 (have %d, %v, %v)", ErrConfig, c.Threads, c.On, c.Off)
	}
	for _, h := range c.Hosts {
		if h < 0 || h >= nhosts {
			return fmt.Errorf("%w: foreign job on host %d of %d", ErrConfig, h, nhosts)
		}
	}
	return nil
}

// Foreign is a heterogeneity model with a foreign job on top of a
// [straggler.Hetero]. It implements [straggler.Model] and the core
// contention of RateAll that the simulator uses. It is immutable and safe
// for concurrent use.
type Foreign struct {
	base    *straggler.Hetero
	cfg     ForeignConfig
	threads []int           // per host: foreign threads while running (0 = never)
	phase   []time.Duration // per host
}

var (
	_ straggler.Model = (*Foreign)(nil)
	_ rateAller       = (*Foreign)(nil)
)

// NewForeign adds the foreign job cfg to base.
func NewForeign(base *straggler.Hetero, cfg ForeignConfig) (*Foreign, error) {
	if base == nil {
		return nil, fmt.Errorf("%w: nil base model", ErrConfig)
	}
	nh := base.NumHosts()
	if err := cfg.Validate(nh); err != nil {
		return nil, err
	}
	f := &Foreign{base: base, cfg: cfg, threads: make([]int, nh), phase: make([]time.Duration, nh)}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xf0e1))
	cycle := cfg.On + cfg.Off
	for _, h := range cfg.Hosts {
		f.threads[h] = cfg.Threads
		f.phase[h] = time.Duration(rng.Float64() * float64(cycle))
	}
	return f, nil
}

// NumWorkers implements [straggler.Model].
func (f *Foreign) NumWorkers() int { return f.base.NumWorkers() }

// Host implements [straggler.Model].
func (f *Foreign) Host(w int) int { return f.base.Host(w) }

// NumHosts implements [straggler.Model].
func (f *Foreign) NumHosts() int { return f.base.NumHosts() }

// Cores implements [straggler.Model]: the host's physical cores (the
// foreign job does not remove cores, it competes for them).
func (f *Foreign) Cores(h int) int { return f.base.Cores(h) }

// Running reports whether the foreign job runs on host h at now.
func (f *Foreign) Running(h int, now time.Duration) bool {
	if f.threads[h] == 0 || now < 0 {
		return false
	}
	cycle := f.cfg.On + f.cfg.Off
	return (now+f.phase[h])%cycle < f.cfg.On
}

// load is the foreign threads on host h at now.
func (f *Foreign) load(h int, now time.Duration) int {
	if f.Running(h, now) {
		return f.threads[h]
	}
	return 0
}

// rateAt is worker w's rate with the (fractional) effective parallelism
// pe: the base model's one-goroutine rate times the worker's speed-up
// S(pe)/S(1).
func (f *Foreign) rateAt(w int, pe float64, now time.Duration) float64 {
	c := f.base.Curve(w)
	return f.base.Rate(w, 1, now) * c.Speedup(pe) / c.Speedup(1)
}

// Rate implements [straggler.Model]: worker w alone on its host with p
// goroutines (clamped to [1, cores]) and the foreign threads.
func (f *Foreign) Rate(w, p int, now time.Duration) float64 {
	h := f.base.Host(w)
	c := f.base.Cores(h)
	pp := min(max(p, 1), c)
	pe := float64(pp)
	if load := pp + f.load(h, now); load > c {
		pe = pe * float64(c) / float64(load)
	}
	return f.rateAt(w, pe, now)
}

// RateAll writes the rate of every worker when worker w computes with
// ps[w] goroutines, with the contention rule of [ForeignConfig]. It panics
// if len(ps) != NumWorkers().
func (f *Foreign) RateAll(ps []int, now time.Duration, dst []float64) []float64 {
	if len(ps) != f.base.NumWorkers() {
		panic("sim: Foreign.RateAll: len(ps) != NumWorkers")
	}
	load := make([]int, f.base.NumHosts())
	for h := range load {
		load[h] = f.load(h, now)
	}
	for w, p := range ps {
		load[f.base.Host(w)] += max(p, 1)
	}
	dst = append(dst[:0], make([]float64, len(ps))...)
	for w, p := range ps {
		h := f.base.Host(w)
		c := f.base.Cores(h)
		pe := float64(max(p, 1))
		if load[h] > c {
			pe = pe * float64(c) / float64(load[h])
		}
		dst[w] = f.rateAt(w, pe, now)
	}
	return dst
}

// NextChange implements [straggler.Model]: the earlier of the base model's
// next change and the foreign job's next start or stop on w's host.
func (f *Foreign) NextChange(w int, now time.Duration) time.Duration {
	next := f.base.NextChange(w, now)
	h := f.base.Host(w)
	if f.threads[h] == 0 {
		return next
	}
	if now < 0 {
		return min(next, 0)
	}
	cycle := f.cfg.On + f.cfg.Off
	pos := (now + f.phase[h]) % cycle
	var d time.Duration
	if pos < f.cfg.On {
		d = f.cfg.On - pos
	} else {
		d = cycle - pos
	}
	if now > math.MaxInt64-d {
		return next
	}
	return min(next, now+d)
}
