package coflow

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// DCLASConfig configures D-CLAS.
type DCLASConfig struct {
	// Queues is K, the number of priority queues. Zero means 10.
	Queues int
	// FirstThreshold is the upper bound of queue 0 in raw bytes sent. Zero
	// means 10 MiB.
	FirstThreshold float64
	// Multiplier E spaces the thresholds exponentially: queue q holds
	// coflows with FirstThreshold·E^(q-1) ≤ sent < FirstThreshold·E^q.
	// Zero means 10.
	Multiplier float64
	// Weighted selects weighted sharing across queues (queue q gets weight
	// K−q, flows share max-min with their queue's weight) instead of strict
	// priority (the default, as coflowsim's DARK).
	Weighted bool
	// OnFlowCompletion makes the scheduler recompute rates whenever any
	// flow completes; false (default) recomputes on coflow arrivals and
	// completions and when a coflow crosses a queue threshold.
	OnFlowCompletion bool
}

// DefaultDCLASConfig returns Aalo's parameters: K = 10, 10 MiB, ×10, strict
// priority.
func DefaultDCLASConfig() DCLASConfig {
	return DCLASConfig{Queues: 10, FirstThreshold: 10 * MiB, Multiplier: 10}
}

// Validate checks the parameters (zeros mean defaults).
func (c *DCLASConfig) Validate() error {
	if c.Queues < 0 || !(c.FirstThreshold >= 0) || math.IsInf(c.FirstThreshold, 0) || !(c.Multiplier == 0 || c.Multiplier > 1) || math.IsInf(c.Multiplier, 0) {
		return fmt.Errorf("%w: dclas: queues %d, first threshold %v, multiplier %v (want ≥ 0, ≥ 0, > 1)", ErrInvalidConfig, c.Queues, c.FirstThreshold, c.Multiplier)
	}
	return nil
}

// DCLAS is Aalo's Discretized Coflow-Aware Least-Attained Service
// (Chowdhury, Stoica, SIGCOMM'15, §4): non-clairvoyant, it puts each coflow
// in one of K queues by the raw bytes it has already sent (thresholds
// FirstThreshold·E^q), serves queues in strict priority (or weighted), and
// coflows FIFO within a queue. Each coflow's flows share, max-min fairly, the
// capacity its predecessors left (coflowsim's DARK splits per port equally;
// max-min is Aalo's intra-coflow rule). It asks for a timer at the next
// time a running coflow will cross its queue's upper threshold.
//
// Cost of one Schedule call: O(A·log A + Σ_c P_c) for the queues and the
// checks that skip blocked coflows, plus, in strict mode, for each coflow
// that is not blocked, an O(F_c) scan with two comparisons per flow and one
// progressive filling over only its flows with both ports open (and the
// first flow at each of its ports, which keeps the order of the result):
// O(G_c + T_c + I_c·T_c) for G_c such flows on T_c ports, I_c ≤ 2·T_c
// rounds; weighted, one filling over all such flows, O(F + G + I·P). The
// rates and their order are those of filling over every flow. A call
// whose coflows, queues, unfinished flows and port capacities are those
// of the previous call (a threshold timer that fired before the coflow
// crossed, as when compressed flows dispose slower than their wire rate
// suggests) returns the previous allocation after an O(P + A + F)
// comparison, since the rates never depend on bytes; only the timer is
// recomputed.
type DCLAS struct {
	cfg           DCLASConfig
	book          rateBook
	idx           []int
	q             []int
	sel, src, dst []int32
	w             []float64
	rate          []float64
	wake          time.Duration
	hasWake       bool
	stamp         []uint32 // per port: d.gen when collect last met it
	gen           uint32
	memo          dclasMemo
	memoHits      int // calls answered from memo (tests)
}

// dclasMemo is the previous call's input as far as its rates depend on it,
// and its output. D-CLAS's rates depend on the coflows' order (queue, then
// position), on each coflow's unfinished flows (their ports, in order) and
// on the ports' capacities, never on remaining or sent bytes; so when all
// of those are as at the previous call, the previous allocation is the
// answer, to the bit. Only the timer, which depends on Sent, is recomputed.
type dclasMemo struct {
	valid  bool
	fabric *Fabric
	capIn  []float64
	capOut []float64
	index  []int   // per position: Index
	q      []int   // per position: queue
	nflows []int32 // per position: len(Flows)
	flows  []int32 // per flow, flattened: Ref.Flow, Src, Dst
	out    []Allocation
	rate   []float64 // per position: total rate given
}

// same reports whether s, with queues d.q, is the memo's input.
// Cost O(P + A + F).
func (m *dclasMemo) same(s *State, q []int) bool {
	if !m.valid || m.fabric != s.Fabric || len(m.index) != len(s.Coflows) || len(m.capIn) != len(s.Fabric.Ports) {
		return false
	}
	for p := range s.Fabric.Ports {
		if m.capIn[p] != s.Fabric.Ports[p].Ingress || m.capOut[p] != s.Fabric.Ports[p].Egress {
			return false
		}
	}
	k := 0
	for i := range s.Coflows {
		c := &s.Coflows[i]
		if m.index[i] != c.Index || m.q[i] != q[i] || int(m.nflows[i]) != len(c.Flows) {
			return false
		}
		fl := m.flows[k : k+3*len(c.Flows)]
		for j := range c.Flows {
			f := &c.Flows[j]
			if fl[3*j] != int32(f.Ref.Flow) || fl[3*j+1] != int32(f.Src) || fl[3*j+2] != int32(f.Dst) {
				return false
			}
		}
		k += 3 * len(c.Flows)
	}
	return true
}

// store records s, q and the call's output.
func (m *dclasMemo) store(s *State, q []int, out []Allocation, rate []float64) {
	m.valid, m.fabric = true, s.Fabric
	m.capIn, m.capOut = m.capIn[:0], m.capOut[:0]
	for _, p := range s.Fabric.Ports {
		m.capIn = append(m.capIn, p.Ingress)
		m.capOut = append(m.capOut, p.Egress)
	}
	m.index, m.q, m.nflows, m.flows = m.index[:0], append(m.q[:0], q...), m.nflows[:0], m.flows[:0]
	for i := range s.Coflows {
		c := &s.Coflows[i]
		m.index = append(m.index, c.Index)
		m.nflows = append(m.nflows, int32(len(c.Flows)))
		for j := range c.Flows {
			f := &c.Flows[j]
			m.flows = append(m.flows, int32(f.Ref.Flow), int32(f.Src), int32(f.Dst))
		}
	}
	m.out = append(m.out[:0], out...)
	m.rate = append(m.rate[:0], rate...)
}

// nextGen starts a new pass of collect (every port unmet).
func (d *DCLAS) nextGen() {
	d.gen++
	if d.gen == 0 {
		clear(d.stamp)
		d.gen = 1
	}
}

var (
	_ Scheduler   = (*DCLAS)(nil)
	_ EventDriven = (*DCLAS)(nil)
	_ Timer       = (*DCLAS)(nil)
)

// NewDCLAS validates cfg and returns a D-CLAS scheduler.
func NewDCLAS(cfg DCLASConfig) (*DCLAS, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := DefaultDCLASConfig()
	if cfg.Queues == 0 {
		cfg.Queues = d.Queues
	}
	if cfg.FirstThreshold == 0 {
		cfg.FirstThreshold = d.FirstThreshold
	}
	if cfg.Multiplier == 0 {
		cfg.Multiplier = d.Multiplier
	}
	return &DCLAS{cfg: cfg}, nil
}

// Name returns "dclas".
func (d *DCLAS) Name() string { return "dclas" }

// OnlyOnArrivalsAndCompletions reports !OnFlowCompletion.
func (d *DCLAS) OnlyOnArrivalsAndCompletions() bool { return !d.cfg.OnFlowCompletion }

// NextWakeup returns when the next running coflow crosses a threshold.
func (d *DCLAS) NextWakeup(now time.Duration) (time.Duration, bool) { return d.wake, d.hasWake }

// Queue returns the queue index of a coflow that has sent sent raw bytes.
func (d *DCLAS) Queue(sent float64) int {
	q := 0
	for th := d.cfg.FirstThreshold; sent >= th && q < d.cfg.Queues-1; th *= d.cfg.Multiplier {
		q++
	}
	return q
}

// upper returns the upper threshold of queue q (+Inf for the last).
func (d *DCLAS) upper(q int) float64 {
	if q >= d.cfg.Queues-1 {
		return math.Inf(1)
	}
	return d.cfg.FirstThreshold * math.Pow(d.cfg.Multiplier, float64(q))
}

// Schedule implements Scheduler.
func (d *DCLAS) Schedule(now time.Duration, s *State) []Allocation {
	b := &d.book
	b.reset(s)
	d.idx, d.q = d.idx[:0], d.q[:0]
	for i := range s.Coflows {
		d.idx = append(d.idx, i)
		d.q = append(d.q, d.Queue(s.Coflows[i].Sent))
	}
	if d.memo.same(s, d.q) {
		// Nothing the rates depend on changed: the previous allocation.
		d.memoHits++
		d.rate = append(d.rate[:0], d.memo.rate...)
		d.timer(now, s)
		b.out = append(b.out[:0], d.memo.out...)
		return b.out
	}
	// State order is arrival order, so a stable sort by queue is FIFO
	// within each queue.
	sort.SliceStable(d.idx, func(a, c int) bool { return d.q[d.idx[a]] < d.q[d.idx[c]] })
	if n := s.Fabric.NumPorts(); len(d.stamp) != n {
		d.stamp, d.gen = make([]uint32, n), 0
	}
	if d.cfg.Weighted {
		d.sel, d.src, d.dst, d.w = d.sel[:0], d.src[:0], d.dst[:0], d.w[:0]
		d.nextGen()
		for _, i := range d.idx {
			d.collect(s, i, float64(d.cfg.Queues-d.q[i]))
		}
		b.waterFill(d.sel, d.src, d.dst, d.w)
	} else {
		for _, i := range d.idx {
			if b.blocked(&s.Coflows[i]) {
				continue // every flow already has a full port: nothing to give
			}
			d.sel, d.src, d.dst, d.w = d.sel[:0], d.src[:0], d.dst[:0], d.w[:0]
			d.nextGen()
			d.collect(s, i, 1)
			b.waterFill(d.sel, d.src, d.dst, d.w)
		}
	}
	d.rate = d.rate[:0]
	for range s.Coflows {
		d.rate = append(d.rate, 0)
	}
	for x, k := range b.given {
		d.rate[b.givenCo[x]] += b.rates[k]
	}
	d.timer(now, s)
	out := b.emit(s)
	d.memo.store(s, d.q, out, d.rate)
	return out
}

// timer sets the wakeup: the earliest threshold crossing among coflows
// with a positive rate (d.rate, per position).
func (d *DCLAS) timer(now time.Duration, s *State) {
	d.hasWake = false
	best := math.Inf(1)
	for i := range s.Coflows {
		c := &s.Coflows[i]
		rate := d.rate[i]
		up := d.upper(d.q[i])
		if rate > 0 && !math.IsInf(up, 1) {
			best = math.Min(best, (up-c.Sent)/rate)
		}
	}
	if !math.IsInf(best, 1) {
		// Round up to the next nanosecond so the coflow has crossed.
		d.wake, d.hasWake = now+time.Duration(math.Ceil(best*1e9))+1, true
	}
}

// collect appends to the fill lists the flows of coflow i that waterFill
// needs to reproduce the full list's result: those whose source ingress
// and destination egress are both open, and the flow at which each port
// first appears in the list (since the last d.gen++).
//
// A flow with a full port is frozen at rate 0 by waterFill's first sweep,
// before any capacity is shared, and adds nothing; its only trace is the
// order in which waterFill first meets each port, which decides ties
// between ports and the order rates are emitted in. Keeping the first
// appearances keeps that order (a subsequence that contains every first
// appearance meets the ports in the same order), and the weight sums it
// forms are sums of small integers, exact in any order. So the rates and
// their order are those of the full list (TestDCLAS_IncrementalSameAsReference),
// for O(F_c) cheap checks instead of waterFill's O(F_c) bookkeeping.
func (d *DCLAS) collect(s *State, i int, w float64) {
	b := &d.book
	c := &s.Coflows[i]
	for j := range c.Flows {
		f := &c.Flows[j]
		first := false
		if d.stamp[f.Src] != d.gen {
			d.stamp[f.Src], first = d.gen, true
		}
		if d.stamp[f.Dst] != d.gen {
			d.stamp[f.Dst], first = d.gen, true
		}
		if !first && b.spare(f.Src, f.Dst) <= 0 {
			continue
		}
		d.sel = append(d.sel, int32(b.off[i]+j))
		d.src = append(d.src, int32(f.Src))
		d.dst = append(d.dst, int32(f.Dst))
		d.w = append(d.w, w)
	}
}
