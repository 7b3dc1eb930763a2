package coflow

import (
	"math"
	"time"
)

// SincroniaConfig configures Sincronia.
type SincroniaConfig struct {
	// Greedy selects per-flow greedy priority allocation (every flow, in
	// coflow order, takes all spare capacity on its path — Sincronia's
	// prototype realises this with switch priority queues). False (the
	// default) gives each coflow, in order, MADD rates on the capacity left
	// by its predecessors and then backfills in the same order, as Varys
	// does; the head coflow still finishes at its bottleneck time, and
	// flows of a coflow finish together, so event-driven rescheduling
	// wastes less capacity. Greedy allocation should be combined with
	// OnFlowCompletion.
	Greedy bool
	// OnFlowCompletion makes the scheduler recompute rates on every flow
	// completion. False (default): only on coflow arrivals and completions.
	OnFlowCompletion bool
}

// DefaultSincroniaConfig returns MADD allocation, event-driven.
func DefaultSincroniaConfig() SincroniaConfig { return SincroniaConfig{} }

// Sincronia orders coflows with Bottleneck-Select-Scale-Iterate (BSSI;
// Agarwal et al., SIGCOMM'18, Algorithm 1) on their remaining bytes, then
// allocates rates in that order (see SincroniaConfig.Greedy). Sincronia
// proves that any work-conserving allocation that follows the BSSI order
// strictly is within 4× of the optimal average weighted CCT; the MADD
// variant is our choice of a rate allocation that keeps the order for the
// head coflow's completion time.
//
// BSSI, for k = n down to 1 over the unordered coflows S:
//  1. b = the port (ingress or egress side) with the largest Σ_{j∈S} d_{j,b};
//  2. σ = argmin_{j∈S, d_{j,b}>0} w_j / d_{j,b}; σ is placed k-th (last);
//  3. w_j ← w_j − (w_σ / d_{σ,b})·d_{j,b} for j ∈ S \ {σ}.
//
// Loads are in bytes (ports of unequal capacity would need d/B; we divide by
// capacity, which reduces to the paper's form on equal ports).
//
// Cost of one Schedule call: O(F + A·(A + P)) time and O(A·P) memory.
type Sincronia struct {
	cfg   SincroniaConfig
	alloc Allocator
	load  []float64 // A × 2P
	tot   []float64
	w     []float64
	used  []bool
	order []int
}

var (
	_ Scheduler   = (*Sincronia)(nil)
	_ EventDriven = (*Sincronia)(nil)
)

// Validate checks the configuration (every combination is valid; the
// method exists so all scheduler configs share one shape).
func (c *SincroniaConfig) Validate() error { return nil }

// NewSincronia returns a BSSI scheduler.
func NewSincronia(cfg SincroniaConfig) (*Sincronia, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Sincronia{cfg: cfg}, nil
}

// Name returns "sincronia".
func (x *Sincronia) Name() string { return "sincronia" }

// OnlyOnArrivalsAndCompletions reports !OnFlowCompletion.
func (x *Sincronia) OnlyOnArrivalsAndCompletions() bool { return !x.cfg.OnFlowCompletion }

// Order returns the BSSI order of s's coflows as positions in s.Coflows.
func (x *Sincronia) Order(s *State) []int {
	n := len(s.Coflows)
	P := s.Fabric.NumPorts()
	if len(x.alloc.b.mark) != P {
		x.alloc.b.reset(s)
	}
	W := 2 * P
	if cap(x.load) < n*W {
		x.load = make([]float64, n*W)
	}
	x.load = x.load[:n*W]
	clear(x.load)
	x.tot = append(x.tot[:0], make([]float64, W)...)
	x.w, x.used = x.w[:0], x.used[:0]
	for i := range s.Coflows {
		c := &s.Coflows[i]
		row := x.load[i*W : (i+1)*W]
		send, recv := x.alloc.b.loads(c)
		for _, pl := range send {
			if pl.Flows > 0 {
				row[pl.Port] += pl.Bytes / s.Fabric.Ports[pl.Port].Ingress
			}
		}
		for _, pl := range recv {
			if pl.Flows > 0 {
				row[P+pl.Port] += pl.Bytes / s.Fabric.Ports[pl.Port].Egress
			}
		}
		for p, v := range row {
			x.tot[p] += v
		}
		x.w = append(x.w, c.Weight)
		x.used = append(x.used, false)
	}
	if cap(x.order) < n {
		x.order = make([]int, n)
	}
	x.order = x.order[:n]
	for k := n - 1; k >= 0; k-- {
		b := 0
		for p := 1; p < W; p++ {
			if x.tot[p] > x.tot[b] {
				b = p
			}
		}
		sigma, best := -1, math.Inf(1)
		for i := range n {
			if x.used[i] {
				continue
			}
			d := x.load[i*W+b]
			if d <= 0 {
				continue
			}
			// Ties: later arrival (larger position) goes last.
			if r := x.w[i] / d; r < best || (r == best && i > sigma) {
				sigma, best = i, r
			}
		}
		if sigma < 0 { // remaining coflows have no load (cannot happen with Remaining > 0)
			for i := n - 1; i >= 0; i-- {
				if !x.used[i] {
					sigma = i
					break
				}
			}
			best = 0
		}
		x.used[sigma] = true
		x.order[k] = sigma
		for i := range n {
			if !x.used[i] {
				x.w[i] = math.Max(0, x.w[i]-best*x.load[i*W+b])
			}
		}
		row := x.load[sigma*W : (sigma+1)*W]
		for p, v := range row {
			x.tot[p] -= v
		}
	}
	return x.order
}

// Schedule implements Scheduler.
func (x *Sincronia) Schedule(now time.Duration, s *State) []Allocation {
	a := &x.alloc
	a.Reset(s)
	order := x.Order(s)
	if !x.cfg.Greedy {
		for _, i := range order {
			a.MADD(i)
		}
	}
	for _, i := range order {
		a.Backfill(i)
	}
	return a.Allocations()
}
