package coflow

import (
	"fmt"
	"math"
	"time"
)

// CheckFunc is the one shape of every allocation check: Config.Check (the
// simulator's hook), Config.CheckAllocation, coflowtest.CheckAllocation and
// the checks coflowtest.Checker builds. It sees the time, the State the
// scheduler saw and the scheduler's allocation, and returns a non-nil error
// to reject it.
type CheckFunc func(now time.Duration, s *State, allocs []Allocation) error

// DefaultTolerance is the relative slack of capacity and core comparisons
// when Config.Tolerance is zero.
const DefaultTolerance = 1e-9

// CheckAllocation validates allocs against s by the rules Sim applies to
// every decision, with the configuration's Tolerance τ (zero means
// DefaultTolerance):
//
//   - every allocation names an unfinished flow of s, at most once;
//   - rates and cores are finite and non-negative, codecs in
//     [0, len(Fabric.Codecs)];
//   - a raw flow reserves no cores and a compressed flow with a positive
//     rate reserves cores at both ends;
//   - per port p, Σ rates out of p ≤ Ingress_p·(1+τ), Σ rates into p ≤
//     Egress_p·(1+τ) and Σ cores at p ≤ FreeCores_p·(1+τ) + 1e-12.
//
// It is a CheckFunc (use the method value cfg.CheckAllocation), for
// drivers other than Sim (a live system) and for tests; Sim applies the
// same rules on its own records. Errors wrap ErrBadAllocation and name the
// flow or port. Cost O(flows of s + len(allocs) + ports); it allocates.
func (c *Config) CheckAllocation(now time.Duration, s *State, allocs []Allocation) error {
	tol := c.Tolerance
	if tol == 0 {
		tol = DefaultTolerance
	}
	flows := make(map[FlowRef]*FlowState, s.NumFlows())
	for i := range s.Coflows {
		for j := range s.Coflows[i].Flows {
			f := &s.Coflows[i].Flows[j]
			flows[f.Ref] = f
		}
	}
	n := s.Fabric.NumPorts()
	in, out, cpu := make([]float64, n), make([]float64, n), make([]float64, n)
	seen := make(map[FlowRef]bool, len(allocs))
	nc := len(s.Fabric.Codecs)
	for k := range allocs {
		a := &allocs[k]
		f, ok := flows[a.Flow]
		if !ok {
			return fmt.Errorf("%w: flow %v is not an unfinished flow of the state", ErrBadAllocation, a.Flow)
		}
		if seen[a.Flow] {
			return fmt.Errorf("%w: flow %v allocated twice", ErrBadAllocation, a.Flow)
		}
		seen[a.Flow] = true
		if err := checkAllocationFields(a, nc); err != nil {
			return err
		}
		in[f.Src] += a.Rate
		out[f.Dst] += a.Rate
		cpu[f.Src] += a.SendCores
		cpu[f.Dst] += a.RecvCores
	}
	for p := range s.Fabric.Ports {
		pt := &s.Fabric.Ports[p]
		if in[p] > pt.Ingress*(1+tol) {
			return fmt.Errorf("%w: port %d ingress %.6g B/s over capacity %.6g B/s", ErrBadAllocation, p, in[p], pt.Ingress)
		}
		if out[p] > pt.Egress*(1+tol) {
			return fmt.Errorf("%w: port %d egress %.6g B/s over capacity %.6g B/s", ErrBadAllocation, p, out[p], pt.Egress)
		}
		if cpu[p] > pt.FreeCores()*(1+tol)+1e-12 {
			return fmt.Errorf("%w: port %d uses %.6g cores, %.6g free", ErrBadAllocation, p, cpu[p], pt.FreeCores())
		}
	}
	return nil
}

// checkAllocationFields checks one allocation's own fields: a finite,
// non-negative rate, a codec of the configuration (0..nc), finite,
// non-negative cores, none for a raw flow and some at both ends for a
// compressed flow that moves.
func checkAllocationFields(a *Allocation, nc int) error {
	if !(a.Rate >= 0) || math.IsInf(a.Rate, 0) {
		return fmt.Errorf("%w: flow %v: rate %v must be finite and non-negative", ErrBadAllocation, a.Flow, a.Rate)
	}
	if a.Codec < 0 || a.Codec > nc {
		return fmt.Errorf("%w: flow %v: codec %d not in [0,%d]", ErrBadAllocation, a.Flow, a.Codec, nc)
	}
	if !(a.SendCores >= 0) || !(a.RecvCores >= 0) || math.IsInf(a.SendCores, 0) || math.IsInf(a.RecvCores, 0) {
		return fmt.Errorf("%w: flow %v: cores %v/%v must be finite and non-negative", ErrBadAllocation, a.Flow, a.SendCores, a.RecvCores)
	}
	if a.Codec == Raw && (a.SendCores != 0 || a.RecvCores != 0) {
		return fmt.Errorf("%w: flow %v: raw flow reserves cores %v/%v", ErrBadAllocation, a.Flow, a.SendCores, a.RecvCores)
	}
	if a.Codec != Raw && a.Rate > 0 && (a.SendCores == 0 || a.RecvCores == 0) {
		return fmt.Errorf("%w: flow %v: compressed flow needs cores at both ends (got %v/%v)", ErrBadAllocation, a.Flow, a.SendCores, a.RecvCores)
	}
	return nil
}
