package epsp

import (
	"fmt"
	"time"
)

// DynSGDConfig configures [NewDynSGD].
type DynSGDConfig struct {
	// Window is the communication window: the number of local mini-batches
	// a worker computes (applying its own updates locally) before it
	// pushes the accumulated delta W_local − W_pulled. 0 means 1 (push
	// every mini-batch); dist-keras uses 5. The runtime reads it through
	// [LocalSteps].
	Window int
	// Staleness is an optional SSP gate s; negative means none (the
	// original is asynchronous). DefaultDynSGDConfig uses -1.
	Staleness int
}

// DefaultDynSGDConfig returns window 1 and no gate.
func DefaultDynSGDConfig() DynSGDConfig { return DynSGDConfig{Window: 1, Staleness: -1} }

// Validate checks Window >= 0.
func (c *DynSGDConfig) Validate() error {
	if c.Window < 0 {
		return fmt.Errorf("%w: DynSGD window %d < 0", ErrBadConfig, c.Window)
	}
	return nil
}

// LocalSteps is an optional policy capability, found by type assertion: a
// policy that implements it wants worker w to compute LocalSteps(w)
// mini-batches locally, applying its own updates, before each push (a
// communication window). Runtimes that do not support local steps push
// every mini-batch.
type LocalSteps interface {
	LocalSteps(w WorkerID) int
}

// DynSGD is the staleness-aware rule of Jiang, Cui, Zhang, Yu,
// "Heterogeneity-aware Distributed Parameter Servers", SIGMOD 2017, in
// the form reimplemented by cerndb/dist-keras (DynSGDParameterServer,
// baselines-params.md §3):
//
//	d = Version() − BaseVersion,   w ← w + Δ/(d+1)
//
// where the version counts applied updates. Every push is applied on
// arrival with Scale 1/(d+1). Options: a communication window (Window,
// default 1; dist-keras 5) and an SSP gate (default none). Whether the
// original keeps per-version records beyond this is not verified.
type DynSGD struct {
	cfg DynSGDConfig
}

var (
	_ Policy     = (*DynSGD)(nil)
	_ LocalSteps = (*DynSGD)(nil)
)

// NewDynSGD validates cfg and returns the policy.
func NewDynSGD(cfg DynSGDConfig) (*DynSGD, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Window == 0 {
		cfg.Window = 1
	}
	return &DynSGD{cfg: cfg}, nil
}

// Name returns e.g. "dynsgd" or "dynsgd(s=2,window=5)".
func (p *DynSGD) Name() string {
	n := "dynsgd"
	if p.cfg.Staleness >= 0 {
		n += fmt.Sprintf("(s=%d", p.cfg.Staleness)
		if p.cfg.Window > 1 {
			n += fmt.Sprintf(",window=%d", p.cfg.Window)
		}
		return n + ")"
	}
	if p.cfg.Window > 1 {
		n += fmt.Sprintf("(window=%d)", p.cfg.Window)
	}
	return n
}

// LocalSteps implements [LocalSteps] with the communication window.
func (p *DynSGD) LocalSteps(WorkerID) int { return p.cfg.Window }

// DynSGDScale is 1/(d+1) for a push d updates behind.
func DynSGDScale(d uint64) float64 { return 1 / (float64(d) + 1) }

// Admit applies the push now with scale 1/(d+1), d = Version − BaseVersion.
func (p *DynSGD) Admit(_ time.Duration, v View, x Push) PushDecision {
	var d uint64
	if now := v.Version(); now > x.BaseVersion {
		d = now - x.BaseVersion
	}
	return PushDecision{Action: ApplyNow, Scale: DynSGDScale(d)}
}

// Step releases by the optional gate (at once without one).
func (p *DynSGD) Step(_ time.Duration, v View, e Event) Output {
	return Output{Release: polGate(v, e, p.cfg.Staleness)}
}
