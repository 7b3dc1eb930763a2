package coflowtest

import (
	"errors"
	"fmt"
	"math"

	"github.com/falconml/falcon/coflow"
)

// ErrCheck marks an allocation that fails CheckAllocation.
var ErrCheck = errors.New("coflowtest: allocation check failed")

// Check selects optional checks for CheckAllocation.
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

// CheckAllocation validates allocs against s the way coflow.Sim does —
// known unfinished flows, no duplicates, finite non-negative rates and
// cores, valid codecs, port ingress/egress within capacity, cores within
// each port's free cores — plus the optional checks. Errors wrap ErrCheck
// and name the flow or port.
func CheckAllocation(s *coflow.State, allocs []coflow.Allocation, checks ...Check) error {
	n := s.Fabric.NumPorts()
	type key = coflow.FlowRef
	flows := make(map[key]*coflow.FlowState)
	for i := range s.Coflows {
		for j := range s.Coflows[i].Flows {
			f := &s.Coflows[i].Flows[j]
			flows[f.Ref] = f
		}
	}
	in, out, cpu := make([]float64, n), make([]float64, n), make([]float64, n)
	rate := make(map[key]coflow.Allocation, len(allocs))
	for _, a := range allocs {
		f, ok := flows[a.Flow]
		if !ok {
			return fmt.Errorf("%w: flow %v is not an unfinished flow of the state", ErrCheck, a.Flow)
		}
		if _, dup := rate[a.Flow]; dup {
			return fmt.Errorf("%w: flow %v allocated twice", ErrCheck, a.Flow)
		}
		rate[a.Flow] = a
		if !(a.Rate >= 0) || math.IsInf(a.Rate, 0) {
			return fmt.Errorf("%w: flow %v: rate %v", ErrCheck, a.Flow, a.Rate)
		}
		if a.Codec < 0 || a.Codec > len(s.Fabric.Codecs) {
			return fmt.Errorf("%w: flow %v: codec %d", ErrCheck, a.Flow, a.Codec)
		}
		if !(a.SendCores >= 0) || !(a.RecvCores >= 0) || math.IsInf(a.SendCores+a.RecvCores, 0) {
			return fmt.Errorf("%w: flow %v: cores %v/%v", ErrCheck, a.Flow, a.SendCores, a.RecvCores)
		}
		if a.Codec == coflow.Raw && a.SendCores+a.RecvCores != 0 {
			return fmt.Errorf("%w: flow %v: raw flow reserves cores", ErrCheck, a.Flow)
		}
		in[f.Src] += a.Rate
		out[f.Dst] += a.Rate
		cpu[f.Src] += a.SendCores
		cpu[f.Dst] += a.RecvCores
	}
	for p, pt := range s.Fabric.Ports {
		if in[p] > pt.Ingress*(1+Tolerance) {
			return fmt.Errorf("%w: port %d ingress %.6g > capacity %.6g", ErrCheck, p, in[p], pt.Ingress)
		}
		if out[p] > pt.Egress*(1+Tolerance) {
			return fmt.Errorf("%w: port %d egress %.6g > capacity %.6g", ErrCheck, p, out[p], pt.Egress)
		}
		if cpu[p] > pt.FreeCores()*(1+Tolerance)+1e-12 {
			return fmt.Errorf("%w: port %d cores %.6g > free %.6g", ErrCheck, p, cpu[p], pt.FreeCores())
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
