package epsp

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/falconml/falcon/straggler"
)

// LBBSPConfig configures [NewLBBSP].
type LBBSPConfig struct {
	// TotalBatch is B, the fixed total batch Σ b_i. 0 means the sum of
	// the workers' batches at the first barrier.
	TotalBatch int
	// Alpha is the speed EWMA weight. 0 means 0.5 (ours: LB-BSP predicts
	// speed with a NARX network; the EWMA replaces it, baselines-params.md §4).
	Alpha float64
}

// DefaultLBBSPConfig returns TotalBatch 0 (keep the initial total) and α 0.5.
func DefaultLBBSPConfig() LBBSPConfig { return LBBSPConfig{Alpha: 0.5} }

// Validate checks the fields.
func (c *LBBSPConfig) Validate() error {
	if c.TotalBatch < 0 || !(c.Alpha >= 0 && c.Alpha <= 1) {
		return fmt.Errorf("%w: LB-BSP total batch %d / alpha %v", ErrBadConfig, c.TotalBatch, c.Alpha)
	}
	return nil
}

// LBBSP is load-balanced BSP (Chen, Weng, Wang, Li, Li, "Semi-dynamic load
// balancing: efficient distributed learning in non-dedicated
// environments", SoCC 2020; baselines-params.md §4): a BSP barrier each
// clock, and at every barrier each worker's batch is re-sized in
// proportion to its speed,
//
//	b_i = round(B · v̂_i / Σ_j v̂_j),  b_i ≥ 1,  Σ b_i = B
//
// (largest-remainder rounding), with v̂_i an EWMA (α = 0.5) of the
// worker's samples per second over its clocks (batch / time from release
// to EventClock). Pushes accumulate and a flush applies Σ b_i·g_i / B,
// the batch-weighted average. The EWMA standing in for LB-BSP's NARX
// predictor is ours; the CPU-cluster proportional rule is the paper's.
type LBBSP struct {
	cfg     LBBSPConfig
	flushed int
	tracker *straggler.Tracker
	start   []time.Duration
	total   int
}

var _ Policy = (*LBBSP)(nil)

// NewLBBSP validates cfg and returns the policy.
func NewLBBSP(cfg LBBSPConfig) (*LBBSP, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Alpha == 0 {
		cfg.Alpha = 0.5
	}
	return &LBBSP{cfg: cfg}, nil
}

// Name returns "lb-bsp".
func (*LBBSP) Name() string { return "lb-bsp" }

// Speed returns worker w's speed estimate (0 before its first clock).
func (p *LBBSP) Speed(w WorkerID) float64 {
	if p.tracker == nil {
		return 0
	}
	return p.tracker.Speed(int(w))
}

// Admit accumulates every push into its clock's buffer.
func (*LBBSP) Admit(_ time.Duration, _ View, x Push) PushDecision {
	return PushDecision{Action: Accumulate, Clock: x.Clock}
}

// Step implements the barrier and the batch re-sizing.
func (p *LBBSP) Step(now time.Duration, v View, e Event) Output {
	n := v.NumWorkers()
	if p.tracker == nil {
		p.tracker, _ = straggler.NewTracker(n, straggler.TrackerConfig{Alpha: p.cfg.Alpha})
		p.start = make([]time.Duration, n)
	}
	if e.Kind == EventClock {
		if d := now - p.start[e.Worker]; d > 0 {
			p.tracker.ObserveRate(int(e.Worker), float64(v.Batch(e.Worker))/d.Seconds(), 0)
		}
	}
	out := Barrier(v, &p.flushed, 1)
	if len(out.Flush) > 0 {
		if p.total == 0 {
			p.total = p.cfg.TotalBatch
			if p.total == 0 {
				for w := range n {
					p.total += v.Batch(WorkerID(w))
				}
			}
		}
		speeds := p.tracker.Speeds(nil)
		if !slices.Contains(speeds, 0) {
			for w, b := range ProportionalSplit(p.total, speeds) {
				if b != v.Batch(WorkerID(w)) {
					out.SetBatch = append(out.SetBatch, BatchOrder{Worker: WorkerID(w), Size: b})
				}
			}
		}
	}
	for _, w := range out.Release {
		p.start[w] = now
	}
	return out
}

// ProportionalSplit splits total into len(weights) integers, each >= 1,
// summing to total (if total >= len(weights)), proportional to the
// weights by the largest-remainder method; ties go to the lower index.
// It panics if a weight is negative or all are zero.
func ProportionalSplit(total int, weights []float64) []int {
	n := len(weights)
	sum := 0.0
	for _, w := range weights {
		if w < 0 || math.IsNaN(w) {
			panic("epsp: ProportionalSplit: negative weight")
		}
		sum += w
	}
	if sum == 0 {
		panic("epsp: ProportionalSplit: zero weights")
	}
	out := make([]int, n)
	frac := make([]float64, n)
	used := 0
	for i, w := range weights {
		x := float64(total) * w / sum
		out[i] = int(math.Floor(x))
		frac[i] = x - float64(out[i])
		if out[i] < 1 {
			out[i], frac[i] = 1, -1
		}
		used += out[i]
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case frac[a] > frac[b]:
			return -1
		case frac[a] < frac[b]:
			return 1
		}
		return 0
	})
	for k := 0; used < total; k = (k + 1) % n {
		out[idx[k]]++
		used++
	}
	for used > total { // the minimum of 1 overshot: take from the largest
		j := 0
		for i := range out {
			if out[i] > out[j] {
				j = i
			}
		}
		if out[j] <= 1 {
			break
		}
		out[j]--
		used--
	}
	return out
}
