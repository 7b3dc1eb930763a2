package coflowsim

import (
	"cmp"
	"math"
	"slices"
)

// The per-flow schedulers (FAIR, PFP) reallocate whenever a flow finishes:
// 706,397 times on FB2010, with thousands of flows active. run's
// event jump advances every active flow and recomputes every rate at each
// of those events; runPerFlow instead keeps each flow's state lazily and
// touches only the flows whose rate changes.
//
// A flow's bytes left are stored as of a quantum t0 (flow.rem at flow.t0)
// together with its bytes per quantum b since then. Because advance
// reproduces the quantum-by-quantum float64 subtractions bit for bit,
// advancing from t0 straight to any later quantum gives the value the
// reference holds there, whatever events happened in between, as long as
// the rate did not change: so a flow is brought up to date only when its
// rate changes, and its finishing quantum (lazyFlow.end), computed once per
// rate, waits in a min-heap. The allocations are the ones allocate
// computes, bit for bit: FAIR's rates depend only on the flow counts at
// a flow's two ports, so only the flows at ports whose counts changed are
// recomputed; PFP's greedy pass is rerun from the lowest receiver at
// which a flow finished (see pfp.reallocate). TestPerFlowEngine checks
// the records against run and the literal quantum loop.

// lazyFlow is a flow's state under runPerFlow: its bytes left (flow.rem)
// hold at quantum t0, it moves b bytes per quantum since then and
// finishes in quantum end (math.MaxInt64: not at this rate) or, if
// !exact, later.
type lazyFlow struct {
	owner  *job
	t0     int64
	b      float64
	end    int64
	exact  bool   // end is exact, else a lower bound (finishBound)
	hi     int    // index in the finish heap, -1: not in it
	si, ri int    // FAIR: index in its sender's and its receiver's list
	gen    uint64 // PFP: the pass that last served it
}

// perFlowPolicy is a per-flow scheduler that runPerFlow can drive.
type perFlowPolicy interface {
	// admit adds j's flows (all unfinished) at quantum tq.
	admit(s *sim, j *job, tq int64)
	// finished tells the policy that f finished.
	finished(s *sim, f *flow)
	// reallocate sets the rates of the unfinished flows at quantum tq,
	// through s.setRate, to what allocate would give them.
	reallocate(s *sim, tq int64)
}

// flowHeap is a min-heap of unfinished flows by end (then by an arbitrary
// but fixed order; the order of flows finishing in the same quantum does
// not matter).
type flowHeap []*flow

func (h *flowHeap) push(f *flow) {
	f.lz.hi = len(*h)
	*h = append(*h, f)
	h.up(f.lz.hi)
}

func (h flowHeap) less(a, b int) bool { return h[a].lz.end < h[b].lz.end }

func (h flowHeap) swap(a, b int) {
	h[a], h[b] = h[b], h[a]
	h[a].lz.hi = a
	h[b].lz.hi = b
}

func (h flowHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h flowHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && h.less(r, l) {
			c = r
		}
		if !h.less(c, i) {
			return
		}
		h.swap(i, c)
		i = c
	}
}

func (h flowHeap) fix(i int) {
	h.up(i)
	h.down(i)
}

func (h *flowHeap) pop() *flow {
	old := *h
	n := len(old) - 1
	old.swap(0, n)
	f := old[n]
	old[n] = nil
	*h = old[:n]
	if n > 0 {
		h.down(0)
	}
	f.lz.hi = -1
	return f
}

// catchUp brings f's bytes left from quantum f.lz.t0 to quantum tq at its
// current rate (f has not finished by then).
func (s *sim) catchUp(f *flow, tq int64) {
	if tq > f.lz.t0 && f.lz.b > 0 {
		f.rem, _ = advance(f.rem, f.lz.b, zeroBytes, tq-f.lz.t0)
	}
	f.lz.t0 = tq
}

// setRate gives the unfinished flow f the rate bit/s from quantum tq on.
func (s *sim) setRate(f *flow, rate float64, tq int64) {
	if rate == f.rate { // unchanged (a new flow left at 0 stays out of the heap)
		return
	}
	s.catchUp(f, tq)
	f.rate = rate
	f.lz.b = s.perQuantum(rate)
	old, wasQueued := f.lz.end, f.lz.hi >= 0
	if n := finishBound(f.rem, f.lz.b); n > 0 {
		f.lz.end, f.lz.exact = tq+n, false
	} else {
		s.exactEnd(f)
	}
	switch {
	case !wasQueued:
		s.heap.push(f)
	case f.lz.end < old:
		s.heap.up(f.lz.hi)
	default:
		// A slower flow: its old key is still a lower bound, and it is
		// worked out when it reaches the head of the heap.
		f.lz.end, f.lz.exact = old, false
	}
}

// exactEnd sets f.lz.end to the quantum in which f finishes at its rate.
func (s *sim) exactEnd(f *flow) {
	f.lz.end, f.lz.exact = math.MaxInt64, true
	if _, n := advance(f.rem, f.lz.b, zeroBytes, math.MaxInt64-f.lz.t0); n > 0 {
		f.lz.end = f.lz.t0 + n
	}
}

// finishBound returns a lower bound n >= 1 on the quantum in which a flow
// with x bytes left that moves b per quantum finishes (advance), or 0 if
// it may finish within a few quanta (or b is 0). Every quantum takes at
// most b + ulp(x)/2 off: fl(x' − b) is within half an ulp of the exact
// difference, and x' <= x. So after i quanta at least x − i·(b + h) is
// left, h = x·2^-51 >= ulp(x); while that exceeds b + zeroBytes no
// quantum can have finished the flow. The exact quantum, which costs an
// advance over every binade down to the end, is only worked out once the
// bound reaches the head of the heap; most rates change before that.
func finishBound(x, b float64) int64 {
	if b <= 0 {
		return 0
	}
	q := math.Floor((x-b-zeroBytes)/(b+x*0x1p-51)) - 2
	if !(q >= 4) || q > 1<<60 {
		return 0
	}
	return int64(q)
}

// runPerFlow is run for a per-flow policy: the same time loop, events in
// the same order, with the lazy flow state described above.
func (s *sim) runPerFlow(p perFlowPolicy) {
	E, Q := s.cfg.EpochMs, s.cfg.QuantumMs
	next, running := 0, 0
	t, epoch := int64(0), int64(0)
	for next < len(s.jobs) || running > 0 {
		if t == epoch {
			added := false
			for next < len(s.jobs) && s.jobs[next].arrival <= epoch+E {
				j := s.jobs[next]
				j.start = epoch
				lz := make([]lazyFlow, len(j.flows))
				for i, f := range j.flows {
					lz[i] = lazyFlow{owner: j, t0: t / Q, end: math.MaxInt64, hi: -1}
					f.lz = &lz[i]
				}
				p.admit(s, j, t/Q)
				next++
				running++
				added = true
			}
			if added {
				s.now = t
				p.reallocate(s, t/Q)
			}
		}
		// The next event: an epoch that admits a coflow, or the first
		// quanta in which flows finish.
		kq := int64(math.MaxInt64)
		if next < len(s.jobs) {
			kq = max(admittingEpoch(s.jobs[next].arrival, E), epoch+E) / Q
		}
		for len(s.heap) > 0 && s.heap[0].lz.end < kq {
			if f := s.heap[0]; !f.lz.exact {
				s.exactEnd(f)
				s.heap.fix(0)
				continue
			}
			kq = s.heap[0].lz.end
		}
		if kq == math.MaxInt64 {
			s.stalled = true
			return
		}
		t = kq * Q
		flowDone := false
		for len(s.heap) > 0 && s.heap[0].lz.end == kq {
			if f := s.heap[0]; !f.lz.exact {
				s.exactEnd(f)
				s.heap.fix(0)
				continue
			}
			f := s.heap.pop()
			f.done = true
			f.rate, f.lz.b = 0, 0
			j := f.lz.owner
			j.active--
			j.redActive[f.red]--
			j.redFinish[f.red] = max(j.redFinish[f.red], t)
			if j.active == 0 {
				j.done = true
				j.finish = t
				running--
			}
			p.finished(s, f)
			flowDone = true
		}
		if flowDone {
			s.now = t
			p.reallocate(s, kq)
		}
		epoch = t / E * E
	}
}

// ---- FAIR ----

// fairState is FAIR's incremental bookkeeping: the unfinished flows at
// every port and the ports whose counts changed since the last
// reallocation.
type fairState struct {
	send, recv         [][]*flow // unfinished flows per sender, per receiver port
	sendDirty, recvDir []bool
	dirty              []int // ports with sendDirty or recvDir set (each once)
	mark               []bool
	// C / n at each sender and receiver port, n its unfinished flows
	// (kept for the ports with n > 0, updated where n changed).
	sendShare, recvShare []float64
}

func (fs *fairState) touch(p int) {
	if !fs.mark[p] {
		fs.mark[p] = true
		fs.dirty = append(fs.dirty, p)
	}
}

func (fair) admit(s *sim, j *job, _ int64) {
	fs := s.fair
	if fs == nil {
		fs = &fairState{send: make([][]*flow, s.ports), recv: make([][]*flow, s.ports),
			sendDirty: make([]bool, s.ports), recvDir: make([]bool, s.ports), mark: make([]bool, s.ports),
			sendShare: make([]float64, s.ports), recvShare: make([]float64, s.ports)}
		s.fair = fs
	}
	for _, f := range j.flows {
		f.lz.si = len(fs.send[f.src])
		fs.send[f.src] = append(fs.send[f.src], f)
		f.lz.ri = len(fs.recv[f.dst])
		fs.recv[f.dst] = append(fs.recv[f.dst], f)
		fs.sendDirty[f.src], fs.recvDir[f.dst] = true, true
		fs.touch(f.src)
		fs.touch(f.dst)
	}
}

// removeAt deletes l[i] by moving the last element there; idx gives the
// index field of a flow in l.
func removeAt(l []*flow, i int, idx func(*flow) *int) []*flow {
	last := len(l) - 1
	if i != last {
		l[i] = l[last]
		*idx(l[i]) = i
	}
	l[last] = nil
	return l[:last]
}

func (fair) finished(s *sim, f *flow) {
	fs := s.fair
	fs.send[f.src] = removeAt(fs.send[f.src], f.lz.si, func(g *flow) *int { return &g.lz.si })
	fs.recv[f.dst] = removeAt(fs.recv[f.dst], f.lz.ri, func(g *flow) *int { return &g.lz.ri })
	fs.sendDirty[f.src], fs.recvDir[f.dst] = true, true
	fs.touch(f.src)
	fs.touch(f.dst)
}

// reallocate recomputes min(C / n_src, C / n_dst) for the flows at the
// ports whose counts changed; every other flow's rate is as before.
func (fair) reallocate(s *sim, tq int64) {
	fs := s.fair
	C := s.cfg.PortBps
	for _, p := range fs.dirty { // the shares C / n at the ports whose n changed
		if n := len(fs.send[p]); n > 0 {
			fs.sendShare[p] = C / float64(n)
		}
		if n := len(fs.recv[p]); n > 0 {
			fs.recvShare[p] = C / float64(n)
		}
	}
	rate := func(f *flow) float64 { return math.Min(fs.sendShare[f.src], fs.recvShare[f.dst]) }
	for _, p := range fs.dirty {
		if fs.sendDirty[p] {
			for _, f := range fs.send[p] {
				s.setRate(f, rate(f), tq)
			}
		}
		if fs.recvDir[p] {
			for _, f := range fs.recv[p] {
				s.setRate(f, rate(f), tq)
			}
		}
		fs.sendDirty[p], fs.recvDir[p], fs.mark[p] = false, false, false
	}
	fs.dirty = fs.dirty[:0]
}

// ---- PFP ----

func (p *pfp) admit(s *sim, j *job, tq int64) {
	if p.queues == nil {
		p.queues = make([][]*flow, s.ports)
		p.served = make([][]*flow, s.ports)
		p.from = s.ports
	}
	for port, q := range p.queues {
		p.queues[port] = slices.DeleteFunc(q, func(g *flow) bool { return g.done })
	}
	fresh := slices.Clone(j.byPort())
	slices.SortStableFunc(fresh, func(a, b *flow) int { return cmp.Compare(a.size, b.size) })
	for _, f := range fresh {
		q := p.queues[f.dst]
		pos := slices.IndexFunc(q, func(g *flow) bool {
			s.catchUp(g, tq) // queued before: bring it up to date
			return g.rem > f.size
		})
		if pos < 0 {
			pos = len(q)
		}
		p.queues[f.dst] = slices.Insert(q, pos, f)
		p.from = min(p.from, f.dst)
	}
}

func (p *pfp) finished(_ *sim, f *flow) { p.from = min(p.from, f.dst) }

// reallocate reruns allocate's greedy pass from receiver p.from, the
// lowest one whose queue changed since the last pass: the receivers
// before it see the same queues and the same free capacities, so their
// flows keep their rates, and what they take off the senders is
// replayed from their served lists (the flows given a positive rate, in
// order) with the same float64 subtractions. At each receiver the pass
// stops once its free capacity is exactly 0 (every later flow there gets
// min(send free, 0) = 0) and skips flows whose sender has nothing left;
// flows served before that no longer are get 0.
func (p *pfp) reallocate(s *sim, tq int64) {
	if p.from >= s.ports {
		return
	}
	for i := range s.sendFree {
		s.sendFree[i] = s.cfg.PortBps
	}
	for r := 0; r < p.from; r++ {
		for _, f := range p.served[r] {
			s.sendFree[f.src] -= f.rate
		}
	}
	for r := p.from; r < s.ports; r++ {
		old := p.served[r]
		p.gen++
		served := p.spare[:0]
		free := s.cfg.PortBps
		q := p.queues[r]
		for _, f := range q {
			if free == 0 {
				break
			}
			if f.done || s.sendFree[f.src] == 0 {
				continue
			}
			x := math.Min(s.sendFree[f.src], free)
			s.setRate(f, x, tq)
			s.sendFree[f.src] -= x
			free -= x
			if x > 0 {
				f.lz.gen = p.gen
				served = append(served, f)
			}
		}
		for _, f := range old {
			if !f.done && f.lz.gen != p.gen {
				s.setRate(f, 0, tq)
			}
		}
		p.spare = old[:0]
		p.served[r] = served
	}
	p.from = s.ports
}
