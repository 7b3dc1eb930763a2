package coflowtest

import (
	"errors"
	"fmt"
	"time"

	"github.com/falconml/falcon/coflow"
)

// ErrCheck marks an allocation that fails CheckAllocation or a Checker.
var ErrCheck = errors.New("coflowtest: allocation check failed")

// Check selects an optional check for Checker (and Driver.Checks).
type Check int

const (
	// WorkConserving additionally requires that every unfinished raw flow
	// has a full port on its path: its source's ingress or its
	// destination's egress is used to capacity (within Tolerance). Flows
	// sent compressed are exempt (CPU may be their bottleneck).
	WorkConserving Check = iota + 1
)

// Tolerance is the relative slack of every capacity comparison.
const Tolerance = 1e-6

// CheckAllocation is a coflow.CheckFunc: it validates allocs against s by
// the rules coflow.Sim applies to every decision (coflow.Config's
// CheckAllocation, with relative slack Tolerance): known unfinished flows,
// no duplicates, finite non-negative rates and cores, valid codecs, raw
// flows without cores and compressed ones with cores at both ends, port
// ingress/egress within capacity, cores within each port's free cores.
// Errors wrap both ErrCheck and coflow.ErrBadAllocation and name the flow
// or port. It can be set as coflow.Config.Check directly; Checker adds the
// optional checks.
func CheckAllocation(now time.Duration, s *coflow.State, allocs []coflow.Allocation) error {
	cfg := coflow.Config{Tolerance: Tolerance}
	if err := cfg.CheckAllocation(now, s, allocs); err != nil {
		return fmt.Errorf("%w: %w", ErrCheck, err)
	}
	return nil
}

// Checker returns the coflow.CheckFunc that applies CheckAllocation and
// then the optional checks, in order. An unknown Check fails every call.
func Checker(checks ...Check) coflow.CheckFunc {
	checks = append([]Check(nil), checks...)
	return func(now time.Duration, s *coflow.State, allocs []coflow.Allocation) error {
		if err := CheckAllocation(now, s, allocs); err != nil {
			return err
		}
		return optional(s, allocs, checks)
	}
}

// optional applies the optional checks to an allocation that passed
// CheckAllocation.
func optional(s *coflow.State, allocs []coflow.Allocation, checks []Check) error {
	if len(checks) == 0 {
		return nil
	}
	n := s.Fabric.NumPorts()
	in, out := make([]float64, n), make([]float64, n)
	rate := make(map[coflow.FlowRef]coflow.Allocation, len(allocs))
	for _, a := range allocs {
		rate[a.Flow] = a
	}
	for i := range s.Coflows {
		for j := range s.Coflows[i].Flows {
			f := &s.Coflows[i].Flows[j]
			if a, ok := rate[f.Ref]; ok {
				in[f.Src] += a.Rate
				out[f.Dst] += a.Rate
			}
		}
	}
	for _, c := range checks {
		switch c {
		case WorkConserving:
			for i := range s.Coflows {
				for j := range s.Coflows[i].Flows {
					f := &s.Coflows[i].Flows[j]
					if a, ok := rate[f.Ref]; ok && a.Codec != coflow.Raw {
						continue
					}
					pi, po := s.Fabric.Ports[f.Src].Ingress, s.Fabric.Ports[f.Dst].Egress
					if in[f.Src] < pi*(1-Tolerance) && out[f.Dst] < po*(1-Tolerance) {
						return fmt.Errorf("%w: not work-conserving: flow %v (%d->%d) has rate %.6g while port %d ingress has %.6g and port %d egress %.6g B/s spare",
							ErrCheck, f.Ref, f.Src, f.Dst, rate[f.Ref].Rate, f.Src, pi-in[f.Src], f.Dst, po-out[f.Dst])
					}
				}
			}
		default:
			return fmt.Errorf("%w: unknown check %d", ErrCheck, c)
		}
	}
	return nil
}
