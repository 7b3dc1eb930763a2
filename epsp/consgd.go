package epsp

import (
	"fmt"
	"math"
	"time"
)

// ConSGDConfig configures [NewConSGD].
type ConSGDConfig struct {
	// Lambda is the constant scale λ applied to every update. 0 means
	// 1/M with M the number of workers. The value of λ in Jiang et al. is
	// NOT verified (baselines-params.md §3): 1/M is ours.
	Lambda float64
	// Staleness is an optional SSP gate s: a worker more than s clocks
	// ahead of the slowest waits. Negative means none (asynchronous), as
	// for DynSGD; the zero value is a gate of 0. DefaultConSGDConfig uses
	// -1. The gate is ours: Jiang et al.'s rule for one, if they had one,
	// was not found (baselines-params.md §3); earlier versions of this
	// package ran ConSGD under s = 3 by default while DynSGD, from the same
	// paper, ran without, which handicapped ConSGD alone (issue 27).
	Staleness int
}

// DefaultConSGDConfig returns λ = 1/M (ours) and no gate (as DynSGD).
func DefaultConSGDConfig() ConSGDConfig { return ConSGDConfig{Staleness: -1} }

// Validate checks λ.
func (c *ConSGDConfig) Validate() error {
	if !(c.Lambda >= 0) || math.IsInf(c.Lambda, 0) {
		return fmt.Errorf("%w: ConSGD lambda %v", ErrBadConfig, c.Lambda)
	}
	return nil
}

// ConSGD is the constant-rate heterogeneity-aware rule of Jiang, Cui,
// Zhang, Yu, "Heterogeneity-aware Distributed Parameter Servers", SIGMOD
// 2017: "a constant learning rate schedule for updates before adding them
// to the global parameter". Every push is applied on arrival scaled by
// λ, w ← w − η·λ·g (the update Δ = −η·g), and the worker is released at
// once (asynchronous), as DynSGD runs. Defaults: λ = 1/M (ours, the
// paper's λ was not found) and no gate; an SSP gate s is an option
// (ours).
type ConSGD struct {
	cfg ConSGDConfig
}

var _ Policy = (*ConSGD)(nil)

// NewConSGD validates cfg and returns the policy.
func NewConSGD(cfg ConSGDConfig) (*ConSGD, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &ConSGD{cfg: cfg}, nil
}

// Name returns e.g. "consgd(s=3)".
func (p *ConSGD) Name() string {
	if p.cfg.Staleness < 0 {
		return "consgd(async)"
	}
	return fmt.Sprintf("consgd(s=%d)", p.cfg.Staleness)
}

// Lambda returns λ for a cluster of m workers.
func (p *ConSGD) Lambda(m int) float64 {
	if p.cfg.Lambda > 0 {
		return p.cfg.Lambda
	}
	return 1 / float64(max(m, 1))
}

// Admit applies the push now, scaled by λ.
func (p *ConSGD) Admit(_ time.Duration, v View, _ Push) PushDecision {
	return PushDecision{Action: ApplyNow, Scale: p.Lambda(v.NumWorkers())}
}

// Step releases the workers the staleness gate lets through.
func (p *ConSGD) Step(_ time.Duration, v View, e Event) Output {
	return Output{Release: polGate(v, e, p.cfg.Staleness)}
}

// polGate releases by the SSP gate, or (s < 0) releases the clocking
// worker at once.
func polGate(v View, e Event, s int) []WorkerID {
	if s < 0 {
		if e.Kind == EventClock && v.Waiting(e.Worker) {
			return []WorkerID{e.Worker}
		}
		return nil
	}
	return GateRelease(v, s)
}
