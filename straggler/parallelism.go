package straggler

import (
	"fmt"
	"math"
	"slices"
)

// ParallelismConfig configures a [Controller].
type ParallelismConfig struct {
	// PMin and PMax bound every worker's parallelism. 0 means 1 and
	// (for PMax) the host's core count.
	PMin, PMax int
	// DeadBand θ: a worker counts as slow (and gains cores) only if its
	// projected clock time exceeds (1+θ)·T*, T* the median. 0 means 0.1 (ours).
	DeadBand float64
	// Curve gives worker w's speed-up curve. nil means Amdahl{DefaultSerial}.
	Curve func(w int) Speedup
}

// DefaultParallelismConfig returns PMin 1, PMax = host cores, dead-band 0.1.
func DefaultParallelismConfig() ParallelismConfig {
	return ParallelismConfig{PMin: 1, DeadBand: 0.1}
}

// Validate checks the bounds and dead-band.
func (c *ParallelismConfig) Validate() error {
	if c.PMin < 0 || c.PMax < 0 || (c.PMax > 0 && c.PMin > c.PMax) {
		return fmt.Errorf("%w: PMin %d / PMax %d", ErrConfig, c.PMin, c.PMax)
	}
	if !(c.DeadBand >= 0 && c.DeadBand < 10) {
		return fmt.Errorf("%w: DeadBand %v", ErrConfig, c.DeadBand)
	}
	return nil
}

// WorkerLoad is the controller's input for one worker.
type WorkerLoad struct {
	Host  int     // host index into the cores slice given to Plan
	P     int     // current parallelism (goroutines)
	Speed float64 // measured samples/s at parallelism P; <= 0 means unknown (left alone)
	Batch int     // samples per clock
}

// Controller is the elastic parallelism controller [RECONSTRUCTION of
// Falcon's elastic training-parallelism control, whose law is not public;
// falcon.md §2]. Each worker's projected clock time at parallelism p is
//
//	T_i(p) = B_i / (u_i·S_i(p)),   u_i = v_i / S_i(P_i)
//
// with S_i its speed-up curve. With T* the median of T_i(P_i) over workers
// with known speed, cores move one at a time within a host's budget to the
// slow worker (T_i > (1+θ)·T*) whose T_i is largest, taken first from the
// host's free cores, else from the worker on the host that would stay
// fastest after giving one (T_d(P_d-1) smallest). A move is made only if
// it lowers the receiver's T_i and, for a donor, only if
// max(T_r(P_r+1), T_d(P_d-1)) < T_r(P_r): the host's longest clock
// strictly shortens, so no core can move back and forth. A receiver stops
// once it is within (1+θ)·T*. Hosts whose workers hold more goroutines than cores are
// first brought back within budget by taking cores from the fastest.
// With all workers equal nothing is slow, so nothing changes; with a
// worker inside the dead-band nothing changes either, which keeps the
// controller from oscillating. Plans are deterministic (ties by worker id).
type Controller struct {
	cfg ParallelismConfig
}

// NewController validates cfg.
func NewController(cfg ParallelismConfig) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.PMin == 0 {
		cfg.PMin = 1
	}
	if cfg.DeadBand == 0 {
		cfg.DeadBand = 0.1
	}
	if cfg.Curve == nil {
		cfg.Curve = func(int) Speedup { return Amdahl{DefaultSerial} }
	}
	return &Controller{cfg: cfg}, nil
}

// Config returns the controller's configuration with defaults filled in.
func (c *Controller) Config() ParallelismConfig { return c.cfg }

// Plan returns the new parallelism of every worker (a fresh slice the
// length of ws). cores[h] is the core budget of host h. It panics if a
// worker's Host is outside cores (programmer error).
func (c *Controller) Plan(ws []WorkerLoad, cores []int) []int {
	out := make([]int, len(ws))
	unit := make([]float64, len(ws))
	var ts []float64
	for i, w := range ws {
		out[i] = max(w.P, 1)
		if w.Speed > 0 && w.Batch > 0 {
			unit[i] = w.Speed / c.s(i, out[i])
			ts = append(ts, c.t(ws, unit, i, out[i]))
		}
	}
	tstar := median(ts)
	hosts := map[int][]int{}
	for i, w := range ws {
		if w.Host < 0 || w.Host >= len(cores) {
			panic(fmt.Sprintf("straggler: Plan: worker %d on host %d, only %d hosts", i, w.Host, len(cores)))
		}
		hosts[w.Host] = append(hosts[w.Host], i)
	}
	hs := make([]int, 0, len(hosts))
	for h := range hosts {
		hs = append(hs, h)
	}
	slices.Sort(hs)
	for _, h := range hs {
		c.planHost(ws, unit, out, hosts[h], cores[h], tstar)
	}
	return out
}

func (c *Controller) s(i, p int) float64 { return c.cfg.Curve(i).Speedup(float64(p)) }

// t is T_i(p) in seconds; +Inf for unknown speed.
func (c *Controller) t(ws []WorkerLoad, unit []float64, i, p int) float64 {
	if unit[i] <= 0 {
		return math.Inf(1)
	}
	return float64(ws[i].Batch) / (unit[i] * c.s(i, p))
}

func (c *Controller) pmax(cores int) int {
	if c.cfg.PMax > 0 {
		return min(c.cfg.PMax, max(cores, c.cfg.PMin))
	}
	return max(cores, c.cfg.PMin)
}

func (c *Controller) planHost(ws []WorkerLoad, unit []float64, out, members []int, cores int, tstar float64) {
	pmin, pmax := c.cfg.PMin, c.pmax(cores)
	used := 0
	for _, i := range members {
		out[i] = min(max(out[i], pmin), pmax)
		used += out[i]
	}
	// Over budget: take cores from the worker that stays fastest.
	for used > cores {
		best, bestT := -1, math.Inf(1)
		for _, i := range members {
			if out[i] > pmin {
				if t := c.t(ws, unit, i, out[i]-1); best < 0 || t < bestT {
					best, bestT = i, t
				}
			}
		}
		if best < 0 {
			break
		}
		out[best]--
		used--
	}
	if tstar <= 0 || math.IsInf(tstar, 1) {
		return
	}
	hi := (1 + c.cfg.DeadBand) * tstar
	for range cores * len(members) { // each iteration moves one core; bounded
		recv, recvT := -1, 0.0
		for _, i := range members {
			if unit[i] <= 0 || out[i] >= pmax {
				continue
			}
			if t := c.t(ws, unit, i, out[i]); t > hi && t > recvT && c.t(ws, unit, i, out[i]+1) < t {
				recv, recvT = i, t
			}
		}
		if recv < 0 {
			return
		}
		if used < cores {
			out[recv]++
			used++
			continue
		}
		donor, donorT := -1, math.Inf(1)
		for _, i := range members {
			if i == recv || unit[i] <= 0 || out[i] <= pmin {
				continue
			}
			if t := c.t(ws, unit, i, out[i]-1); t < donorT {
				donor, donorT = i, t
			}
		}
		// The move must strictly shorten the pair's longer clock, so a
		// core can never move back and forth.
		if donor < 0 || donorT >= recvT {
			return
		}
		out[donor]--
		out[recv]++
	}
}
