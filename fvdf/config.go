package fvdf

import (
	"fmt"
	"time"
)

// Config configures a [Scheduler]. Zero fields take the defaults of
// [DefaultConfig].
type Config struct {
	// DisableCompression turns FVDF into SEBF: every flow is sent raw and
	// the schedule is Varys' SEBF + MADD + backfilling. Zero (false) means
	// compression is considered.
	DisableCompression bool
	// OrderBySEBF replaces steps 1–2's order (ascending Γ', the bottleneck
	// with compression) by SEBF's (ascending Γ of the raw bytes on the
	// full capacities, ties by arrival then index: package coflow's SEBF
	// order, bit for bit); steps 3–5, FVDF's per-flow compression, core
	// allocation, backfilling and guard, are unchanged. The baseline
	// "sebf-order+fvdf" of the study: FVDF's CCT over this one's is what
	// FVDF's ordering earns. Zero (false) means FVDF's order.
	OrderBySEBF bool
	// CPUFraction is the fraction (0, 1] of each machine's free cores
	// (Port.Cores − Port.Background) that FVDF may reserve for codecs (the
	// CPU budget). Zero means 1.
	CPUFraction float64
	// StarvationPeriod is Varys' T: every T, starting at time 0, all active
	// coflows share the fabric fairly for StarvationSlice, so no coflow
	// waits longer than T for service. Zero means 10 s (ours: the paper's
	// value is not public); negative disables the guard.
	StarvationPeriod time.Duration
	// StarvationSlice is δ, the length of the fair-share slice (T ≫ δ). Zero
	// means StarvationPeriod/50 (ours: 2 % of the time is spent fair).
	StarvationSlice time.Duration
	// MinGain is the relative disposal-time gain a compression choice must
	// bring to be taken: compressing a flow must cut the bottleneck time by
	// more than MinGain·t (resource conservation: never spend CPU that buys
	// no time). Zero means 1e-9 (strictly shorter up to rounding).
	MinGain float64
	// SequentialStages tells the scheduler that compressed flows run their
	// compress, transmit and decompress stages one after the other (the
	// simulator's non-pipelined mode), so a flow disposes at
	// 1/(1/(k_s·s) + ρ/r + 1/(k_r·u)). The scheduler then reserves every
	// stage at three times the planned disposal rate d (wire 3ρd, cores
	// 3d/s and 3d/u: equal stage times, so the three add up to 1/d), and
	// compresses only where that still shortens the bottleneck. Zero (false)
	// means pipelined stages, D = min(k_s·s, r/ρ, k_r·u).
	SequentialStages bool
	// NoDerate makes the scheduler plan with the predicted codec speeds as
	// they are, even when the Estimator reports its recent error (see
	// Uncertain). Zero (false) means speeds are divided by 1 + error.
	NoDerate bool
	// NoCoreHeadroom turns off the last backfill step: cores still free on a
	// machine after all allocations are handed to its compressed flows in
	// proportion to their reservations, so their codec stages keep up with
	// the wire when the true codec speed falls below the prediction (they
	// compress the same bytes, so no extra CPU-seconds are spent). Zero
	// (false) means headroom is given. Ignored with WholeCores.
	NoCoreHeadroom bool
	// WholeCores reserves whole cores per compressed flow, ⌈d/s⌉ at the
	// sender and ⌈d/u⌉ at the receiver for a disposal rate d = r/ρ; a flow
	// that cannot get them is sent raw. Zero (false) means fractional
	// reservations d/s and d/u: cores are time-shared between the flows of
	// a machine (ours: with hundreds of flows per port in the FB trace, whole
	// cores would cap the compressed flows of a machine at its core count).
	// The greedy plan uses the fluid CPU model in both cases.
	WholeCores bool
	// EveryFlowEvent asks the driver to call Schedule on every flow
	// completion too. Zero (false) means Varys' rule: Schedule is called only
	// on coflow arrivals and completions (and starvation-guard timers), and
	// capacity freed by a flow that finishes early stays idle until then.
	EveryFlowEvent bool
	// ReplanPeriod trades exactness for decision cost (an approximation,
	// off by default). Zero or 1 means the exact planner: a coflow's Γ'
	// (steps 1–2) is re-planned whenever its flows moved. N > 1 means a
	// coflow keeps, for up to N−1 Schedule calls after its last plan, the
	// Γ' of that plan scaled by how much its raw bottleneck
	// max_p max(W_p/In_p, W'_p/Out_p) (driver per-port loads, full
	// capacities) changed since: Γ'·raw_now/raw_then, exact when all its
	// flows advanced in proportion (MADD) and none finished. It is planned
	// again when it gains flows, when the fabric view or the predicted
	// codec profiles change (not after a fair slice of the guard), or
	// after N calls. Only the order can differ: step 3 still plans every
	// coflow that gets capacity on what is left. Its effect on CCT is in
	// STUDY.md §7. Negative is invalid.
	ReplanPeriod int
}

// DefaultConfig returns the default configuration.
func DefaultConfig() Config {
	return Config{CPUFraction: 1, StarvationPeriod: 10 * time.Second, StarvationSlice: 200 * time.Millisecond, MinGain: 1e-9}
}

// Validate fills zero fields with defaults and reports invalid ones.
func (c *Config) Validate() error {
	d := DefaultConfig()
	if c.CPUFraction == 0 {
		c.CPUFraction = d.CPUFraction
	}
	if !(c.CPUFraction > 0 && c.CPUFraction <= 1) {
		return fmt.Errorf("%w: CPUFraction %v must be in (0, 1]", ErrConfig, c.CPUFraction)
	}
	if c.StarvationPeriod == 0 {
		c.StarvationPeriod = d.StarvationPeriod
	}
	if c.StarvationPeriod > 0 {
		if c.StarvationSlice == 0 {
			c.StarvationSlice = c.StarvationPeriod / 50
		}
		if c.StarvationSlice <= 0 || c.StarvationSlice >= c.StarvationPeriod {
			return fmt.Errorf("%w: StarvationSlice %v must be in (0, StarvationPeriod=%v)", ErrConfig, c.StarvationSlice, c.StarvationPeriod)
		}
	}
	if c.ReplanPeriod < 0 {
		return fmt.Errorf("%w: ReplanPeriod %d must be ≥ 0", ErrConfig, c.ReplanPeriod)
	}
	if c.MinGain == 0 {
		c.MinGain = d.MinGain
	}
	if !(c.MinGain > 0 && c.MinGain < 1) {
		return fmt.Errorf("%w: MinGain %v must be in (0, 1)", ErrConfig, c.MinGain)
	}
	return nil
}
