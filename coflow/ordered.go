package coflow

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// OrderedConfig configures the coflow-ordering schedulers (FIFO, SCF, NCF,
// LCF, SEBF).
type OrderedConfig struct {
	// OnFlowCompletion makes the scheduler recompute rates whenever any
	// flow completes. False (the default) is Varys' rule: recompute only on
	// coflow arrival and completion (the scheduler is EventDriven).
	OnFlowCompletion bool
	// NoBackfill disables work-conserving backfilling (Varys' STEP 2A):
	// leftover capacity after the MADD pass stays idle. False (default)
	// backfills greedily in priority order.
	NoBackfill bool
	// StarvationPeriod T and StarvationWindow δ (T ≫ δ) enable Varys'
	// starvation guard: during [k·T, k·T+δ) every flow of every active
	// coflow shares the fabric max-min fairly, so no coflow waits more than
	// T. Zero T disables the guard; δ must then be zero too.
	StarvationPeriod, StarvationWindow time.Duration
}

// DefaultOrderedConfig returns Varys' defaults: event-driven, backfilling,
// no starvation guard.
func DefaultOrderedConfig() OrderedConfig { return OrderedConfig{} }

// Validate checks the starvation parameters.
func (c *OrderedConfig) Validate() error {
	if c.StarvationPeriod < 0 || c.StarvationWindow < 0 {
		return fmt.Errorf("%w: negative starvation period or window", ErrInvalidConfig)
	}
	if (c.StarvationPeriod == 0) != (c.StarvationWindow == 0) || c.StarvationWindow >= c.StarvationPeriod && c.StarvationPeriod > 0 {
		return fmt.Errorf("%w: starvation guard needs 0 < window (%v) < period (%v), or both zero", ErrInvalidConfig, c.StarvationWindow, c.StarvationPeriod)
	}
	return nil
}

// Ordered is a coflow-ordering scheduler: at each call it sorts the active
// coflows by a key (ties: arrival, then index), gives each coflow in that
// order MADD rates on the capacity its predecessors left (every flow gets
// remaining/Γ, Γ = the coflow's bottleneck time on the free capacity, so its
// flows finish together; a coflow that needs a full port gets nothing), then
// backfills leftover capacity greedily in the same order.
//
// This allocation is Varys' (SIGCOMM'14, §5: MADD + work conservation);
// coflowsim applies the same one to FIFO, SCF, NCF and LCF, differing only
// in the order. Coflowsim backfills in arrival/deadline order; we backfill in
// priority order, as the Varys paper does.
//
// Cost of one Schedule call, with A active coflows, P_c ports touched by
// coflow c and F_c its unfinished flows: O(A·log A + Σ_c P_c) for the keys
// (computed from the State's per-port aggregates Send/Recv) and the checks
// that skip coflows whose ports are full, plus O(F_c) for each coflow that
// gets capacity in the MADD pass, plus, in the backfill pass, O(flows to
// open destinations) per coflow (a cached grouping of the coflow's flows by
// destination is rebuilt in O(F_c) when its flow list changed). SCF's key
// adds O(F_c) per coflow.
type Ordered struct {
	name  string
	cfg   OrderedConfig
	key   func(b *rateBook, c *CoflowState) float64
	alloc Allocator
	idx   []int
	keys  []float64
	fair  Fair
	now   time.Duration
}

var (
	_ Scheduler   = (*Ordered)(nil)
	_ EventDriven = (*Ordered)(nil)
	_ Timer       = (*Ordered)(nil)
)

func newOrdered(name string, cfg OrderedConfig, key func(*rateBook, *CoflowState) float64) (*Ordered, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Ordered{name: name, cfg: cfg, key: key}, nil
}

// NewFIFO orders coflows by arrival (first in, first out).
// Source: Varys' and coflowsim's FIFO baseline (Orchestra-style).
func NewFIFO(cfg OrderedConfig) (*Ordered, error) {
	return newOrdered("fifo", cfg, func(_ *rateBook, c *CoflowState) float64 { return 0 })
}

// NewSCF orders by coflow length, the raw size of its longest unfinished
// flow, shortest first (Smallest-Coflow-First; Varys §5.1 and coflowsim's
// SCF, which uses the static maxShuffleBytes/numMappers).
func NewSCF(cfg OrderedConfig) (*Ordered, error) {
	return newOrdered("scf", cfg, func(_ *rateBook, c *CoflowState) float64 {
		var m float64
		for i := range c.Flows {
			m = math.Max(m, c.Flows[i].Bytes)
		}
		return m
	})
}

// NewNCF orders by width, min(#distinct source ports, #distinct destination
// ports) of the unfinished flows, narrowest first (Narrowest-Coflow-First;
// Varys §5.1 and coflowsim's NCF, which uses min(#mappers, #reducers)).
func NewNCF(cfg OrderedConfig) (*Ordered, error) {
	return newOrdered("ncf", cfg, func(b *rateBook, c *CoflowState) float64 {
		send, recv := b.loads(c)
		ns, nd := 0, 0
		for _, pl := range send {
			if pl.Flows > 0 {
				ns++
			}
		}
		for _, pl := range recv {
			if pl.Flows > 0 {
				nd++
			}
		}
		return float64(min(ns, nd))
	})
}

// NewLCF orders by total remaining raw bytes, least first
// (Smallest-Total-Size-First; coflowsim's LCF).
func NewLCF(cfg OrderedConfig) (*Ordered, error) {
	return newOrdered("lcf", cfg, func(_ *rateBook, c *CoflowState) float64 {
		return c.Remaining()
	})
}

// NewSEBF is Varys' Smallest-Effective-Bottleneck-First with MADD and
// backfilling (Chowdhury, Zhong, Stoica, SIGCOMM'14, §5.1–5.3): coflows are
// re-sorted at every call by
//
//	Γ_C = max( max_i Σ_j d_ij / B_i^in, max_j Σ_i d_ij / B_j^out )
//
// over the remaining bytes d_ij and the ports' full capacities B (Varys'
// code uses bytes alone since its NICs are equal); then MADD gives each flow
// d_ij/Γ' with Γ' computed on the capacity left by earlier coflows, and
// leftover capacity is backfilled in the same order.
func NewSEBF(cfg OrderedConfig) (*Ordered, error) {
	return newOrdered("sebf", cfg, func(b *rateBook, c *CoflowState) float64 {
		g, _ := b.bottleneck(c, false)
		return g
	})
}

// Name returns the scheduler's short name.
func (o *Ordered) Name() string { return o.name }

// OnlyOnArrivalsAndCompletions reports !OnFlowCompletion.
func (o *Ordered) OnlyOnArrivalsAndCompletions() bool { return !o.cfg.OnFlowCompletion }

// NextWakeup returns the next starvation-window boundary, if the guard is on.
func (o *Ordered) NextWakeup(now time.Duration) (time.Duration, bool) {
	return NextSliceBoundary(now, o.cfg.StarvationPeriod, o.cfg.StarvationWindow)
}

// Schedule implements Scheduler.
func (o *Ordered) Schedule(now time.Duration, s *State) []Allocation {
	o.now = now
	if T := o.cfg.StarvationPeriod; T > 0 && now%T < o.cfg.StarvationWindow {
		return o.fair.Schedule(now, s)
	}
	a := &o.alloc
	a.Reset(s)
	b := &a.b
	o.idx = o.idx[:0]
	o.keys = o.keys[:0]
	for i := range s.Coflows {
		o.idx = append(o.idx, i)
		o.keys = append(o.keys, o.key(b, &s.Coflows[i]))
	}
	sortByKey(o.idx, o.keys, s)
	for _, i := range o.idx {
		a.MADD(i)
	}
	if !o.cfg.NoBackfill {
		for _, i := range o.idx {
			a.Backfill(i)
		}
	}
	return a.Allocations()
}

// sortByKey sorts coflow positions by key, then arrival, then index.
func sortByKey(idx []int, keys []float64, s *State) {
	sort.Slice(idx, func(a, b int) bool {
		i, j := idx[a], idx[b]
		if keys[i] != keys[j] {
			return keys[i] < keys[j]
		}
		ci, cj := &s.Coflows[i], &s.Coflows[j]
		if ci.Arrival != cj.Arrival {
			return ci.Arrival < cj.Arrival
		}
		return ci.Index < cj.Index
	})
}
