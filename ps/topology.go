package ps

import (
	"log/slog"
	"runtime"

	"github.com/falconml/falcon/epsp"
)

// OneHost is the epsp.Topology of workers that all run on one host with
// N cores (an in-process cluster).
type OneHost struct{ N int }

var _ epsp.Topology = OneHost{}

// NumHosts implements epsp.Topology.
func (OneHost) NumHosts() int { return 1 }

// Host implements epsp.Topology.
func (OneHost) Host(int) int { return 0 }

// Cores implements epsp.Topology.
func (t OneHost) Cores(int) int { return t.N }

// inferTopology gives elastic EPSP the topology it cannot work without.
// epsp.DefaultEPSPConfig turns elastic parallelism on, but with neither a
// Topology nor Parallelism.PMax every worker's host has only the cores it
// already uses and no parallelism can ever change. When every worker runs
// in this process the topology is known — one host with runtime.NumCPU()
// cores — and the policy is rebuilt with it; otherwise a warning says
// that elastic control is idle.
func inferTopology(pol epsp.Policy, allLocal bool, log *slog.Logger) epsp.Policy {
	e, ok := pol.(*epsp.EPSP)
	if !ok {
		return pol
	}
	c := e.Config()
	if !c.Elastic || c.Topology != nil || c.Parallelism.PMax != 0 {
		return pol
	}
	if !allLocal {
		log.Warn("ps: elastic EPSP without Topology or Parallelism.PMax cannot change any worker's parallelism; set one of them", "policy", e.Name())
		return pol
	}
	c.Topology = OneHost{N: runtime.NumCPU()}
	ne, err := epsp.NewEPSP(c)
	if err != nil {
		return pol
	}
	return ne
}
