package coflow

import (
	"math"
	"slices"
	"sort"
	"time"
)

// rateBook is the scratch space the built-in schedulers share: free
// capacity per port, a rate per flow of the State (flattened in State
// order), the flows given a rate, and per-port byte sums. It is reused
// across calls.
type rateBook struct {
	freeIn, freeOut []float64
	capIn, capOut   []float64
	thrIn, thrOut   []float64 // capacity·zeroCap: at or below, a port is full
	off             []int     // off[i] = flat index of coflow i's first flow
	rates           []float64
	given           []int32 // flat indices with a positive rate
	givenCo         []int32 // coflow position of each given entry
	csr             map[int]*dstGroups
	gen             uint32
	cand            []int32
	fill            fillScratch
	out             []Allocation
	sendTmp         []PortLoad
	recvTmp         []PortLoad
	mark            []int32
}

// zeroCap is the relative capacity below which a port counts as full.
const zeroCap = 1e-12

func (b *rateBook) reset(s *State) {
	n := s.Fabric.NumPorts()
	if len(b.freeIn) != n {
		b.freeIn, b.freeOut = make([]float64, n), make([]float64, n)
		b.capIn, b.capOut = make([]float64, n), make([]float64, n)
		b.thrIn, b.thrOut = make([]float64, n), make([]float64, n)
		b.mark = make([]int32, n)
		for p := range b.mark {
			b.mark[p] = -1
		}
	}
	for p, pt := range s.Fabric.Ports {
		b.freeIn[p], b.freeOut[p] = pt.Ingress, pt.Egress
		b.capIn[p], b.capOut[p] = pt.Ingress, pt.Egress
		b.thrIn[p], b.thrOut[p] = pt.Ingress*zeroCap, pt.Egress*zeroCap
	}
	b.off = b.off[:0]
	k := 0
	for i := range s.Coflows {
		b.off = append(b.off, k)
		k += len(s.Coflows[i].Flows)
	}
	b.off = append(b.off, k)
	if cap(b.rates) < k {
		b.rates = make([]float64, k)
	} else {
		for _, g := range b.given {
			if int(g) < len(b.rates) {
				b.rates[g] = 0
			}
		}
		b.rates = b.rates[:k]
	}
	b.given = b.given[:0]
	b.givenCo = b.givenCo[:0]
	b.gen++
	if b.gen%64 == 0 {
		// Drop cached groupings of coflows that have left.
		for k, g := range b.csr {
			if b.gen-g.used > 64 {
				delete(b.csr, k)
			}
		}
	}
}

// loads returns the coflow's per-port remaining bytes, computing them into
// scratch space when the driver left Send and Recv nil.
func (b *rateBook) loads(c *CoflowState) (send, recv []PortLoad) {
	if c.Send != nil || c.Recv != nil || len(c.Flows) == 0 {
		return c.Send, c.Recv
	}
	b.sendTmp = b.sumPorts(b.sendTmp[:0], c, func(f *FlowState) int { return f.Src })
	b.recvTmp = b.sumPorts(b.recvTmp[:0], c, func(f *FlowState) int { return f.Dst })
	return b.sendTmp, b.recvTmp
}

// sumPorts appends to dst one PortLoad per port(f) of c's flows, in order of
// first appearance, with their remaining bytes and flow counts. It uses and
// then clears b.mark, which is -1 for every port between calls.
func (b *rateBook) sumPorts(dst []PortLoad, c *CoflowState, port func(*FlowState) int) []PortLoad {
	for i := range c.Flows {
		f := &c.Flows[i]
		p := port(f)
		if b.mark[p] < 0 {
			b.mark[p] = int32(len(dst))
			dst = append(dst, PortLoad{Port: p})
		}
		pl := &dst[b.mark[p]]
		pl.Bytes += f.Remaining
		pl.Flows++
	}
	for _, pl := range dst {
		b.mark[pl.Port] = -1
	}
	return dst
}

func (b *rateBook) full(p int, in bool) bool {
	if in {
		return b.freeIn[p] <= b.thrIn[p]
	}
	return b.freeOut[p] <= b.thrOut[p]
}

// spare returns min(free ingress at src, free egress at dst), 0 if either
// is full.
func (b *rateBook) spare(src, dst int) float64 {
	fi, fo := b.freeIn[src], b.freeOut[dst]
	if fi <= b.thrIn[src] || fo <= b.thrOut[dst] {
		return 0
	}
	return min(fi, fo)
}

// add gives flat flow k of coflow position i (ports src, dst) r more
// bytes/s.
func (b *rateBook) add(i, k, src, dst int, r float64) {
	if b.rates[k] == 0 {
		b.given = append(b.given, int32(k))
		b.givenCo = append(b.givenCo, int32(i))
	}
	b.rates[k] += r
	b.freeIn[src] = max(0, b.freeIn[src]-r)
	b.freeOut[dst] = max(0, b.freeOut[dst]-r)
}

// credit records rate r for flat flow k without touching capacities.
func (b *rateBook) credit(k int, r float64) {
	if r <= 0 {
		return
	}
	if b.rates[k] == 0 {
		b.given = append(b.given, int32(k))
		b.givenCo = append(b.givenCo, int32(b.coflowAt(k)))
	}
	b.rates[k] += r
}

// bottleneck returns Γ = max over the coflow's ports of its remaining bytes
// there divided by the port's full capacity (useFree false) or its free
// capacity (useFree true). ok is false when Γ is 0 or, with useFree, when a
// port the coflow needs has no free capacity. Cost O(ports of the coflow).
func (b *rateBook) bottleneck(c *CoflowState, useFree bool) (gamma float64, ok bool) {
	send, recv := b.loads(c)
	for _, pl := range send {
		if pl.Flows == 0 || pl.Bytes <= 0 {
			continue
		}
		if useFree {
			if b.full(pl.Port, true) {
				return 0, false
			}
			gamma = max(gamma, pl.Bytes/b.freeIn[pl.Port])
		} else {
			gamma = max(gamma, pl.Bytes/b.capIn[pl.Port])
		}
	}
	for _, pl := range recv {
		if pl.Flows == 0 || pl.Bytes <= 0 {
			continue
		}
		if useFree {
			if b.full(pl.Port, false) {
				return 0, false
			}
			gamma = max(gamma, pl.Bytes/b.freeOut[pl.Port])
		} else {
			gamma = max(gamma, pl.Bytes/b.capOut[pl.Port])
		}
	}
	return gamma, gamma > 0
}

// blocked reports whether every source port or every destination port of
// the coflow is full, so no flow of it can get capacity. Cost O(ports).
func (b *rateBook) blocked(c *CoflowState) bool {
	send, recv := b.loads(c)
	open := false
	for _, pl := range send {
		if pl.Flows > 0 && !b.full(pl.Port, true) {
			open = true
			break
		}
	}
	if !open {
		return true
	}
	for _, pl := range recv {
		if pl.Flows > 0 && !b.full(pl.Port, false) {
			return false
		}
	}
	return true
}

// madd gives each flow of coflow i the rate remaining/Γ, Γ computed on free
// capacity, so all its flows finish together (Varys' MADD). It returns false
// (allocating nothing) when a port the coflow needs is full.
func (b *rateBook) madd(s *State, i int) bool {
	c := &s.Coflows[i]
	gamma, ok := b.bottleneck(c, true)
	if !ok {
		return false
	}
	for j := range c.Flows {
		f := &c.Flows[j]
		r := min(f.Remaining/gamma, min(b.freeIn[f.Src], b.freeOut[f.Dst]))
		if r > 0 {
			b.add(i, b.off[i]+j, f.Src, f.Dst, r)
		}
	}
	return true
}

// greedy gives each flow of coflow i, in flow order, all the spare
// capacity on its path (backfilling / greedy priority allocation).
//
// Ports only fill up during an allocation pass, so a flow whose source or
// destination is full when the pass reaches its coflow gets nothing. When
// few of the coflow's destinations are open, greedy therefore visits only
// the flows to open destinations (found through a cached grouping of the
// coflow's flows by destination), in flow order; the result is identical to
// the plain loop.
func (b *rateBook) greedy(s *State, i int) {
	c := &s.Coflows[i]
	if b.blocked(c) {
		return
	}
	if len(c.Flows) >= 256 && c.Recv != nil {
		open := 0
		for _, pl := range c.Recv {
			if pl.Flows > 0 && !b.full(pl.Port, false) {
				open += pl.Flows
			}
		}
		if g := b.groups(c); g != nil && open*4 < len(c.Flows) {
			b.cand = b.cand[:0]
			for _, pl := range c.Recv {
				if pl.Flows > 0 && !b.full(pl.Port, false) {
					b.cand = append(b.cand, g.ids[g.port[pl.Port]]...)
				}
			}
			slices.Sort(b.cand)
			j := 0
			for _, id := range b.cand {
				// Flows are sorted by Ref.Flow (checked when the grouping
				// was built); finished flows are simply not found.
				j = seekFlow(c.Flows, j, int(id))
				if j == len(c.Flows) {
					break
				}
				if c.Flows[j].Ref.Flow != int(id) {
					continue
				}
				f := &c.Flows[j]
				if r := b.spare(f.Src, f.Dst); r > 0 {
					b.add(i, b.off[i]+j, f.Src, f.Dst, r)
				}
			}
			return
		}
	}
	for j := range c.Flows {
		f := &c.Flows[j]
		if r := b.spare(f.Src, f.Dst); r > 0 {
			b.add(i, b.off[i]+j, f.Src, f.Dst, r)
		}
	}
}

// seekFlow returns the first position ≥ from whose Ref.Flow ≥ id in flows
// sorted by Ref.Flow, by galloping then binary search: O(log gap).
func seekFlow(flows []FlowState, from, id int) int {
	n := len(flows)
	if from >= n || flows[from].Ref.Flow >= id {
		return from
	}
	step := 1
	lo, hi := from, from+1 // invariant: flows[lo].Ref.Flow < id
	for hi < n && flows[hi].Ref.Flow < id {
		lo = hi
		step *= 2
		hi = lo + step
	}
	hi = min(hi, n)
	for lo+1 < hi { // flows[lo] < id, flows[hi] ≥ id or hi == n
		m := int(uint(lo+hi) >> 1)
		if flows[m].Ref.Flow < id {
			lo = m
		} else {
			hi = m
		}
	}
	return hi
}

// dstGroups lists a coflow's flow IDs (FlowRef.Flow) by destination port.
// It stays valid while the coflow's flow list only loses flows in place
// (the driver compacts it, keeping order), and is rebuilt when the list is
// a different slice or more than half of the listed flows are gone.
type dstGroups struct {
	built int
	first *FlowState
	id    int // coflow ID, width and arrival guard against a reused address
	width int
	arr   time.Duration
	port  map[int]int // destination port -> index in ids
	ids   [][]int32
	used  uint32
}

// groups returns the cached grouping of c's flows by destination, or nil
// when c's flows are not sorted by FlowRef.Flow (hand-built states).
func (b *rateBook) groups(c *CoflowState) *dstGroups {
	if b.csr == nil {
		b.csr = make(map[int]*dstGroups)
	}
	g := b.csr[c.Index]
	if g != nil && g.first == &c.Flows[0] && len(c.Flows)*2 >= g.built &&
		g.id == c.ID && g.width == c.Width && g.arr == c.Arrival {
		g.used = b.gen
		if g.port == nil {
			return nil
		}
		return g
	}
	if g == nil {
		g = &dstGroups{}
		b.csr[c.Index] = g
	}
	g.built, g.first, g.used = len(c.Flows), &c.Flows[0], b.gen
	g.id, g.width, g.arr = c.ID, c.Width, c.Arrival
	g.port, g.ids = nil, g.ids[:0]
	for j := 1; j < len(c.Flows); j++ {
		if c.Flows[j].Ref.Flow <= c.Flows[j-1].Ref.Flow {
			return nil
		}
	}
	g.port = make(map[int]int, len(c.Recv))
	for j := range c.Flows {
		f := &c.Flows[j]
		k, ok := g.port[f.Dst]
		if !ok {
			k = len(g.ids)
			g.port[f.Dst] = k
			g.ids = append(g.ids, nil)
		}
		g.ids[k] = append(g.ids[k], int32(f.Ref.Flow))
	}
	return g
}

// coflowAt returns the coflow position holding flat flow k.
func (b *rateBook) coflowAt(k int) int {
	return sort.Search(len(b.off)-1, func(i int) bool { return b.off[i+1] > k })
}

// emit returns raw allocations for every flow given a positive rate, in
// the order rates were first given.
func (b *rateBook) emit(s *State) []Allocation {
	b.out = b.out[:0]
	for x, k := range b.given {
		i := int(b.givenCo[x])
		if r := b.rates[k]; r > 0 {
			b.out = append(b.out, Allocation{Flow: s.Coflows[i].Flows[int(k)-b.off[i]].Ref, Rate: r})
		}
	}
	return b.out
}

// fillScratch is waterFill's reusable state, indexed by port.
type fillScratch struct {
	wIn, wOut     []float64
	cIn, cOut     []int32
	inStart       []int32 // CSR of selected flows by source port (per touched port)
	outStart      []int32
	inIdx, outIdx []int32
	touched       []int32
	pos           []int32 // port -> position in touched, -1 if untouched
	frozen        []bool
}

// waterFill runs weighted max-min fair sharing (progressive filling) over
// the flows sel (indices into the flattened flow list) with ports src[x],
// dst[x] and weights w[x] > 0, on the currently free capacity, and adds the
// result to b.rates. Every selected flow ends bottlenecked at a full port.
//
// Cost: O(F + I·T) for F flows and T ports touched by them, with I ≤ 2T
// filling rounds; no allocation once the scratch space has grown.
func (b *rateBook) waterFill(sel, src, dst []int32, w []float64) {
	if len(sel) == 0 {
		return
	}
	n := len(b.freeIn)
	fs := &b.fill
	if len(fs.pos) != n {
		fs.wIn, fs.wOut = make([]float64, n), make([]float64, n)
		fs.cIn, fs.cOut = make([]int32, n), make([]int32, n)
		fs.pos = make([]int32, n)
		for p := range fs.pos {
			fs.pos[p] = -1
		}
	}
	fs.touched = fs.touched[:0]
	touch := func(p int32) {
		if fs.pos[p] < 0 {
			fs.pos[p] = int32(len(fs.touched))
			fs.touched = append(fs.touched, p)
		}
	}
	for x := range sel {
		touch(src[x])
		touch(dst[x])
		fs.wIn[src[x]] += w[x]
		fs.wOut[dst[x]] += w[x]
		fs.cIn[src[x]]++
		fs.cOut[dst[x]]++
	}
	T := len(fs.touched)
	// CSR by touched position.
	fs.inStart = append(fs.inStart[:0], make([]int32, T+1)...)
	fs.outStart = append(fs.outStart[:0], make([]int32, T+1)...)
	for k, p := range fs.touched {
		fs.inStart[k+1] = fs.inStart[k] + fs.cIn[p]
		fs.outStart[k+1] = fs.outStart[k] + fs.cOut[p]
	}
	fs.inIdx = append(fs.inIdx[:0], make([]int32, len(sel))...)
	fs.outIdx = append(fs.outIdx[:0], make([]int32, len(sel))...)
	{
		fi := append([]int32(nil), fs.inStart[:T]...)
		fo := append([]int32(nil), fs.outStart[:T]...)
		for x := range sel {
			k := fs.pos[src[x]]
			fs.inIdx[fi[k]] = int32(x)
			fi[k]++
			k = fs.pos[dst[x]]
			fs.outIdx[fo[k]] = int32(x)
			fo[k]++
		}
	}
	fs.frozen = append(fs.frozen[:0], make([]bool, len(sel))...)
	level := 0.0
	left := len(sel)
	freeze := func(x int32) {
		if fs.frozen[x] {
			return
		}
		fs.frozen[x] = true
		left--
		s, d := src[x], dst[x]
		if fs.cIn[s]--; fs.cIn[s] == 0 {
			fs.wIn[s] = 0
		} else {
			fs.wIn[s] -= w[x]
		}
		if fs.cOut[d]--; fs.cOut[d] == 0 {
			fs.wOut[d] = 0
		} else {
			fs.wOut[d] -= w[x]
		}
		b.credit(int(sel[x]), level*w[x])
	}
	saturate := func(k int, in bool) {
		p := fs.touched[k]
		if in {
			b.freeIn[p] = 0
			for _, x := range fs.inIdx[fs.inStart[k]:fs.inStart[k+1]] {
				freeze(x)
			}
		} else {
			b.freeOut[p] = 0
			for _, x := range fs.outIdx[fs.outStart[k]:fs.outStart[k+1]] {
				freeze(x)
			}
		}
	}
	sweep := func() {
		for k, p := range fs.touched {
			if fs.cIn[p] > 0 && b.full(int(p), true) {
				saturate(k, true)
			}
			if fs.cOut[p] > 0 && b.full(int(p), false) {
				saturate(k, false)
			}
		}
	}
	sweep()
	for left > 0 {
		inc, arg, argIn := math.Inf(1), -1, false
		for k, p := range fs.touched {
			if fs.cIn[p] > 0 {
				if v := b.freeIn[p] / fs.wIn[p]; v < inc {
					inc, arg, argIn = v, k, true
				}
			}
			if fs.cOut[p] > 0 {
				if v := b.freeOut[p] / fs.wOut[p]; v < inc {
					inc, arg, argIn = v, k, false
				}
			}
		}
		if arg < 0 {
			break
		}
		level += inc
		for _, p := range fs.touched {
			if fs.cIn[p] > 0 {
				b.freeIn[p] = max(0, b.freeIn[p]-inc*fs.wIn[p])
			}
			if fs.cOut[p] > 0 {
				b.freeOut[p] = max(0, b.freeOut[p]-inc*fs.wOut[p])
			}
		}
		saturate(arg, argIn)
		sweep()
	}
	for _, p := range fs.touched {
		fs.pos[p] = -1
		fs.wIn[p], fs.wOut[p], fs.cIn[p], fs.cOut[p] = 0, 0, 0, 0
	}
}

// Allocator is the rate book a scheduler fills during one Schedule call:
// it tracks each port's free ingress and egress capacity and the wire rate
// given to each unfinished flow of a State, and offers the two allocation
// rules the coflow literature builds on, MADD and max-min fair sharing,
// plus greedy backfilling. The built-in Fair, the ordering schedulers
// (FIFO, SCF, NCF, LCF, SEBF) and Sincronia are written with it, so a user
// scheduler built on it allocates exactly as they do:
//
//	a.Reset(s)                      // all capacity free, no rates
//	for _, i := range order {       // coflow positions in s.Coflows
//		a.MADD(i)                   // Varys' MADD on the capacity left
//	}
//	for _, i := range order {
//		a.Backfill(i)               // work conservation
//	}
//	return a.Allocations()
//
// Coflows are named by their position i in s.Coflows and flows by their
// position j in s.Coflows[i].Flows. Rates only ever grow and capacity only
// shrinks between Resets, so each call allocates on what earlier calls
// left. Every rate respects the ports' capacities (up to floating-point
// rounding, far below the simulator's tolerance). Allocations are raw
// (Codec Raw, no cores).
//
// Reset binds the Allocator to s until the next Reset; s must not change
// meanwhile, and Reset comes before any other method. The zero value is
// ready to use; reusing one Allocator across
// calls avoids allocation once its scratch space has grown. Not safe for
// concurrent use.
type Allocator struct {
	b             rateBook
	s             *State
	sel, src, dst []int32
	w             []float64
	seen          []bool
}

// Reset binds a to s with every port's full capacity free and no rate
// given. Cost O(ports + flows).
func (a *Allocator) Reset(s *State) {
	a.s = s
	a.b.reset(s)
}

// Free returns the capacity of port p not yet given away, in bytes/s, on
// its ingress (send) and egress (receive) side.
func (a *Allocator) Free(p int) (ingress, egress float64) {
	return a.b.freeIn[p], a.b.freeOut[p]
}

// Rate returns the wire rate given so far to flow j of coflow i.
func (a *Allocator) Rate(i, j int) float64 { return a.b.rates[a.b.off[i]+j] }

// Bottleneck returns coflow i's effective bottleneck Γ on the ports' full
// capacities (Varys, Chowdhury, Zhong, Stoica, SIGCOMM 2014, §5.1):
//
//	Γ = max( max_p Send_p / B_p^in, max_p Recv_p / B_p^out )
//
// where Send_p and Recv_p are the coflow's remaining raw bytes leaving and
// entering port p: the coflow's completion time were it alone on the
// fabric. It is SEBF's key. Zero means no bytes remain. Cost O(ports of the
// coflow) when the State carries per-port loads (Send, Recv), O(its flows)
// otherwise.
func (a *Allocator) Bottleneck(i int) float64 {
	g, _ := a.b.bottleneck(&a.s.Coflows[i], false)
	return g
}

// MADD gives every unfinished flow of coflow i the rate
//
//	r_j = Remaining_j / Γ',   Γ' = max( max_p Send_p / F_p^in, max_p Recv_p / F_p^out )
//
// where F is the capacity still free (Minimum Allocation for Desired
// Duration; Varys, SIGCOMM 2014, §5.2, Pseudocode 1). Every flow of the
// coflow then finishes at the same time Γ', the earliest the free capacity
// allows for the coflow as a whole, and the coflow's most loaded port side
// is used to capacity; capacity a faster flow could have used stays free
// for others (or for Backfill). It reports false, giving nothing, when a
// port the coflow needs has no free capacity. Cost as Bottleneck plus
// O(flows of the coflow).
func (a *Allocator) MADD(i int) bool { return a.b.madd(a.s, i) }

// Backfill gives each unfinished flow of coflow i, in flow order, all the
// capacity still free on its path, min(F_src^in, F_dst^out) (greedy
// work-conserving backfilling, Varys §5.3 step 2A; with coflows visited in
// priority order it is also per-flow strict priority). After Backfill of
// every coflow, every flow has a full port on its path.
func (a *Allocator) Backfill(i int) { a.b.greedy(a.s, i) }

// MaxMin shares the free capacity weighted max-min fairly among the
// unfinished flows of the coflows at positions coflows (every coflow of the
// State when coflows is nil), by progressive filling (Bertsekas and
// Gallager, Data Networks, 2nd ed., §6.5.2): all rates rise together, flow
// (i, j) at speed weight(i, j), until a port side saturates; the flows
// through it freeze; repeat until every flow is frozen. The result is the
// weighted max-min fair allocation: no flow's rate can grow without
// shrinking the rate of a flow whose rate/weight is not larger, and every
// flow has a saturated port side on its path at which its rate/weight is
// the largest (its bottleneck).
//
// weight nil means weight 1 for every flow (per-flow fairness, as Fair). A
// flow whose weight is not a positive finite number gets nothing. A coflow
// listed twice has its flows shared once. Cost O(F + I·T) for F flows
// touching T ports, I ≤ 2T filling rounds; no allocation once the scratch
// space has grown.
func (a *Allocator) MaxMin(coflows []int, weight func(i, j int) float64) {
	a.sel, a.src, a.dst, a.w = a.sel[:0], a.src[:0], a.dst[:0], a.w[:0]
	add := func(i int) {
		c := &a.s.Coflows[i]
		for j := range c.Flows {
			w := 1.0
			if weight != nil {
				if w = weight(i, j); !(w > 0) || math.IsInf(w, 1) {
					continue
				}
			}
			a.sel = append(a.sel, int32(a.b.off[i]+j))
			a.src = append(a.src, int32(c.Flows[j].Src))
			a.dst = append(a.dst, int32(c.Flows[j].Dst))
			a.w = append(a.w, w)
		}
	}
	if coflows == nil {
		for i := range a.s.Coflows {
			add(i)
		}
	} else {
		// A coflow listed twice would enter progressive filling twice.
		if len(a.seen) < len(a.s.Coflows) {
			a.seen = make([]bool, len(a.s.Coflows))
		}
		for _, i := range coflows {
			if !a.seen[i] {
				a.seen[i] = true
				add(i)
			}
		}
		for _, i := range coflows {
			a.seen[i] = false
		}
	}
	a.b.waterFill(a.sel, a.src, a.dst, a.w)
}

// Allocations returns one raw Allocation per flow given a positive rate, in
// the order rates were first given. The slice is reused by the next Reset.
func (a *Allocator) Allocations() []Allocation { return a.b.emit(a.s) }
