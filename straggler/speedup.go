package straggler

import "fmt"

// Speedup is a parallel speed-up curve: how many times faster one worker
// computes a mini-batch with p goroutines than with one. S(1) must be 1 and
// S must be non-decreasing. p is fractional so that a host whose cores are
// oversubscribed can be modelled (see [Hetero.RateAll]).
type Speedup interface {
	Speedup(p float64) float64
}

// Amdahl is Amdahl's law with serial fraction Serial:
//
//	S(p) = 1 / (Serial + (1-Serial)/p)
//
// Serial = 0 is linear speed-up; Serial = 1 means extra goroutines do not
// help. For 0 < p < 1 (a share of one core) the same formula gives S < 1.
type Amdahl struct {
	Serial float64
}

// Speedup implements [Speedup]. It panics on p <= 0 (programmer error).
func (a Amdahl) Speedup(p float64) float64 {
	if p <= 0 {
		panic(fmt.Sprintf("straggler: Amdahl.Speedup(%v): p must be > 0", p))
	}
	return 1 / (a.Serial + (1-a.Serial)/p)
}

// Validate checks 0 <= Serial <= 1.
func (a Amdahl) Validate() error {
	if !(a.Serial >= 0 && a.Serial <= 1) {
		return fmt.Errorf("%w: Amdahl serial fraction %v not in [0,1]", ErrConfig, a.Serial)
	}
	return nil
}

// DefaultSerial is the serial fraction the SDK assumes when a caller gives
// no speed-up curve. 0.1 is ours (a typical share of non-parallel work in a
// data-parallel mini-batch step: data loading, the optimizer hand-off); it
// is not taken from the Falcon paper, whose curve is not public.
const DefaultSerial = 0.1
