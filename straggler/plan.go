package straggler

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// ClockLoad is one worker's input to [PlanClock].
type ClockLoad struct {
	Batch int     // samples of its own batch this clock
	Speed float64 // samples per busy compute second; <= 0 means unknown (left out)
}

// PlanConfig configures [PlanClock].
type PlanConfig struct {
	// Margin: a worker gives work only if its projected clock time B/r
	// exceeds (1+Margin)·T*. 0 means 0.05 (ours: about the compute noise
	// of one clock, so equal workers never trade samples).
	Margin float64
	// MinPiece is the smallest piece worth assigning, in samples. 0 means 1.
	MinPiece int
}

// Validate checks the configuration.
func (c *PlanConfig) Validate() error {
	if !(c.Margin >= 0 && c.Margin < 10) || c.MinPiece < 0 {
		return fmt.Errorf("%w: plan margin %v, min piece %d", ErrConfig, c.Margin, c.MinPiece)
	}
	return nil
}

// Piece assigns samples [Lo, Hi) of worker From's batch to worker To.
type Piece struct {
	From, To int
	Lo, Hi   int
}

// PlanClock is clock-start planning [ours; a reconstruction of Falcon's
// "straggler projection" driving task transfer, whose rule is not public,
// falcon.md §1, §3]. Over the workers with known speed r_i and batch B_i,
// the balanced clock time is
//
//	T* = Σ B_i / Σ r_i
//
// (every worker busy until T*). A worker whose projected time B_i/r_i
// exceeds (1+Margin)·T* keeps k_i = round(r_i·T*) samples; the rest of
// its batch, its tail [k_i, B_i), goes to workers with room
// m_j = r_j·T* − B_j > 0: givers in order of projected time (longest
// first), each giver's tail cut from its end (tail first) into pieces of
// at most ⌈m_j⌉ for the takers with the most room left, never below
// MinPiece (rounding up lets the takers absorb the whole excess; a taker
// ends at most one sample past T*). Givers never
// take and takers never give. With all workers equally fast nothing
// exceeds the margin and nothing moves. The result is deterministic (ties
// by worker index).
func PlanClock(ws []ClockLoad, cfg PlanConfig) []Piece {
	margin := cfg.Margin
	if margin == 0 {
		margin = 0.05
	}
	minPiece := max(cfg.MinPiece, 1)
	var sumB, sumR float64
	for _, w := range ws {
		if w.Speed > 0 && w.Batch > 0 {
			sumB += float64(w.Batch)
			sumR += w.Speed
		}
	}
	if sumR <= 0 {
		return nil
	}
	tstar := sumB / sumR
	type giver struct {
		w, excess int
		t         float64
	}
	type taker struct {
		w    int
		room float64
	}
	var gs []giver
	var ts []taker
	for i, w := range ws {
		if w.Speed <= 0 || w.Batch <= 0 {
			continue
		}
		t := float64(w.Batch) / w.Speed
		switch {
		case t > (1+margin)*tstar:
			keep := min(int(math.Round(w.Speed*tstar)), w.Batch)
			if ex := w.Batch - keep; ex >= minPiece {
				gs = append(gs, giver{i, ex, t})
			}
		case t < tstar:
			ts = append(ts, taker{i, w.Speed*tstar - float64(w.Batch)})
		}
	}
	slices.SortStableFunc(gs, func(a, b giver) int { return cmp.Compare(b.t, a.t) })
	var out []Piece
	for _, g := range gs {
		hi := ws[g.w].Batch
		for g.excess >= minPiece {
			// the taker with the most room left; ties by index
			best := -1
			for j, t := range ts {
				if math.Ceil(t.room) >= float64(minPiece) && (best < 0 || t.room > ts[best].room) {
					best = j
				}
			}
			if best < 0 {
				break
			}
			n := min(int(math.Ceil(ts[best].room)), g.excess)
			if n < minPiece {
				break
			}
			out = append(out, Piece{From: g.w, To: ts[best].w, Lo: hi - n, Hi: hi})
			hi -= n
			g.excess -= n
			ts[best].room -= float64(n)
		}
	}
	return out
}

// ThroughputConfig configures a [ThroughputController].
type ThroughputConfig struct {
	// PMin and PMax bound every worker's parallelism; 0 means 1 and the
	// host's core count.
	PMin, PMax int
	// Curve gives worker w's speed-up curve; nil means Amdahl{DefaultSerial}.
	Curve func(w int) Speedup
	// MinGain: a host's plan changes only if it raises the host's
	// projected throughput by at least this fraction. 0 means 0.05.
	MinGain float64
	// Agree is how many consecutive rounds must propose the same plan for
	// a host before it is adopted. 0 means 3.
	Agree int
}

// Validate checks the configuration.
func (c *ThroughputConfig) Validate() error {
	if c.PMin < 0 || c.PMax < 0 || (c.PMax > 0 && c.PMin > c.PMax) {
		return fmt.Errorf("%w: PMin %d / PMax %d", ErrConfig, c.PMin, c.PMax)
	}
	if !(c.MinGain >= 0 && c.MinGain < 10) || c.Agree < 0 {
		return fmt.Errorf("%w: MinGain %v, Agree %d", ErrConfig, c.MinGain, c.Agree)
	}
	return nil
}

// ThroughputController spends each host's cores where they add the most
// samples per second [ours; a reconstruction of Falcon's elastic
// training-parallelism control, falcon.md §2]. When clock-start planning
// balances every clock, the clock takes ΣB / Σr, so the cluster is fastest
// when each host's Σ r_i is largest. With u_i = v_i / S_i(p_eff,i) the
// per-core base speed (p_eff = P_i, or P_i·cores/ΣP on an oversubscribed
// host, where goroutines share cores), a host's plan gives every worker
// PMin cores and then each remaining core, one at a time, to the worker
// with the largest marginal gain u_i·(S_i(p+1) − S_i(p)), up to PMax: for
// concave curves (Amdahl) this maximises Σ u_i·S_i(p_i), and it fills idle
// cores. Hysteresis: a host's plan is adopted only when it raises the
// host's projected throughput by MinGain and the same plan was proposed in
// Agree consecutive rounds; a caller that sees a transient slowdown calls
// Hold to restart the count. It is stateful (the agreement counts) and
// deterministic.
type ThroughputController struct {
	cfg      ThroughputConfig
	proposal map[int][]int // host -> last proposed plan of its members
	agreed   map[int]int   // host -> consecutive rounds with that proposal
}

// NewThroughputController validates cfg.
func NewThroughputController(cfg ThroughputConfig) (*ThroughputController, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.PMin == 0 {
		cfg.PMin = 1
	}
	if cfg.MinGain == 0 {
		cfg.MinGain = 0.05
	}
	if cfg.Agree == 0 {
		cfg.Agree = 3
	}
	if cfg.Curve == nil {
		cfg.Curve = func(int) Speedup { return Amdahl{DefaultSerial} }
	}
	return &ThroughputController{cfg: cfg, proposal: map[int][]int{}, agreed: map[int]int{}}, nil
}

// Config returns the configuration with defaults filled in.
func (c *ThroughputController) Config() ThroughputConfig { return c.cfg }

// Hold restarts every host's agreement count (call it while a transient
// slowdown distorts the speed estimates).
func (c *ThroughputController) Hold() { clear(c.proposal); clear(c.agreed) }

// Plan returns the new parallelism of every worker (a fresh slice). A host
// with a worker of unknown speed is left alone. It panics if a worker's
// Host is outside cores (programmer error).
func (c *ThroughputController) Plan(ws []WorkerLoad, cores []int) []int {
	out := make([]int, len(ws))
	hosts := map[int][]int{}
	for i, w := range ws {
		if w.Host < 0 || w.Host >= len(cores) {
			panic(fmt.Sprintf("straggler: Plan: worker %d on host %d, only %d hosts", i, w.Host, len(cores)))
		}
		out[i] = max(w.P, 1)
		hosts[w.Host] = append(hosts[w.Host], i)
	}
	hs := make([]int, 0, len(hosts))
	for h := range hosts {
		hs = append(hs, h)
	}
	slices.Sort(hs)
	for _, h := range hs {
		members := hosts[h]
		plan, ok := c.planHost(ws, members, cores[h])
		if !ok {
			delete(c.proposal, h)
			delete(c.agreed, h)
			continue
		}
		if slices.Equal(plan, c.proposal[h]) {
			c.agreed[h]++
		} else {
			c.proposal[h] = plan
			c.agreed[h] = 1
		}
		if c.agreed[h] >= c.cfg.Agree {
			for k, i := range members {
				out[i] = plan[k]
			}
			delete(c.proposal, h)
			delete(c.agreed, h)
		}
	}
	return out
}

func (c *ThroughputController) s(i int, p float64) float64 { return c.cfg.Curve(i).Speedup(p) }

// planHost returns the host's best plan if it beats the current one by
// MinGain (ok false otherwise, or if a speed is unknown).
func (c *ThroughputController) planHost(ws []WorkerLoad, members []int, cores int) ([]int, bool) {
	pmax := max(cores, c.cfg.PMin)
	if c.cfg.PMax > 0 {
		pmax = min(c.cfg.PMax, pmax)
	}
	sumP := 0
	for _, i := range members {
		if ws[i].Speed <= 0 {
			return nil, false
		}
		sumP += max(ws[i].P, 1)
	}
	share := 1.0
	if sumP > cores && cores > 0 {
		share = float64(cores) / float64(sumP)
	}
	unit := make([]float64, len(members))
	var cur float64
	for k, i := range members {
		peff := float64(max(ws[i].P, 1)) * share
		unit[k] = ws[i].Speed / c.s(i, peff)
		cur += ws[i].Speed
	}
	plan := make([]int, len(members))
	left := cores
	for k := range plan {
		plan[k] = c.cfg.PMin
		left -= c.cfg.PMin
	}
	for left > 0 {
		best, gain := -1, 0.0
		for k, i := range members {
			if plan[k] >= pmax {
				continue
			}
			g := unit[k] * (c.s(i, float64(plan[k]+1)) - c.s(i, float64(plan[k])))
			if g > gain {
				best, gain = k, g
			}
		}
		if best < 0 {
			break
		}
		plan[best]++
		left--
	}
	// projected throughput of the plan (oversubscribed if PMin·n > cores)
	sum := 0
	for _, p := range plan {
		sum += p
	}
	ps := 1.0
	if sum > cores && cores > 0 {
		ps = float64(cores) / float64(sum)
	}
	var next float64
	same := true
	for k, i := range members {
		next += unit[k] * c.s(i, float64(plan[k])*ps)
		same = same && plan[k] == max(ws[i].P, 1)
	}
	if same || next < (1+c.cfg.MinGain)*cur {
		return nil, false
	}
	return plan, true
}
