package coflowsim

import (
	"cmp"
	"math"
	"slices"
)

// sim is one replay.
type sim struct {
	cfg      Config
	ports    int
	jobs     []*job // trace order
	active   []*job // admitted, unfinished; order owned by the policy
	sendFree []float64
	recvFree []float64
	policy   policy
	now      int64 // ms, time of the current allocation
	stalled  bool
	seq      int64      // DARK queue-entry counter
	moved    bool       // keep job.sent, coflowsim's per-quantum count of bytes sent (DARK)
	redLeft  bool       // keep job.redLeft, coflowsim's per-quantum count of a reducer's bytes left (MADD)
	bs       []float64  // scratch for drainMoves
	moves    []flowMove // scratch for flowMoves
	fin      []int      // scratch for accumulateMoves
	gone     []bool     // scratch for accumulateMoves
	heap     flowHeap   // runPerFlow: unfinished flows by finishing quantum
	fair     *fairState // runPerFlow under FAIR
}

// policy is a coflowsim scheduler: where an admitted job goes in the active
// list, and how rates are set.
type policy interface {
	insert(s *sim, j *job)
	allocate(s *sim)
	// perFlow reports whether rates are recomputed whenever a single flow
	// finishes (coflowsim's per-flow simulator) rather than only when a
	// coflow is admitted or departs.
	perFlow() bool
}

func (s *sim) resetFree() {
	for i := range s.sendFree {
		s.sendFree[i] = s.cfg.PortBps
		s.recvFree[i] = s.cfg.PortBps
	}
}

// perQuantum is the number of bytes a flow at rate bit/s moves in a quantum.
func (s *sim) perQuantum(rate float64) float64 {
	return rate / 8 * (float64(s.cfg.QuantumMs) / float64(s.cfg.SecondMs))
}

// run is coflowsim's time loop:
//
//	for each epoch of EpochMs:
//	    admit every coflow arriving by the next epoch's start (start = epoch)
//	    if any was admitted: allocate
//	    for each quantum of QuantumMs:
//	        every unfinished flow: rem -= min(rate·quantum, rem); done if rem <= 1e-3
//	        if a coflow finished: it departs at the quantum's end; allocate
//
// Rates only change at admissions and departures (and flow completions for
// per-flow policies), so instead of visiting every quantum run jumps from
// event to event; advance reproduces the per-quantum float64 arithmetic of
// each flow exactly, and the test suite checks the jump against a literal
// quantum loop.
func (s *sim) run() {
	E, Q := s.cfg.EpochMs, s.cfg.QuantumMs
	perFlow := s.policy.perFlow()
	next := 0
	t, epoch := int64(0), int64(0)
	for next < len(s.jobs) || len(s.active) > 0 {
		if t == epoch {
			added := false
			for next < len(s.jobs) && s.jobs[next].arrival <= epoch+E {
				j := s.jobs[next]
				j.start = epoch
				s.policy.insert(s, j)
				next++
				added = true
			}
			if added {
				s.now = t
				s.policy.allocate(s)
			}
		}
		// Quanta until the next epoch that admits a coflow ...
		kstar := int64(math.MaxInt64)
		if next < len(s.jobs) {
			na := max(admittingEpoch(s.jobs[next].arrival, E), epoch+E)
			kstar = (na - t) / Q
		}
		// ... or until the first departure (or flow completion).
		for _, j := range s.active {
			if s.redLeft {
				if end := s.jobEnd(j, kstar); end > 0 && end < kstar {
					kstar = end
				}
				continue
			}
			jobMax := int64(0)
			for _, f := range j.flows {
				if f.done {
					continue
				}
				_, n := advance(f.rem, s.perQuantum(f.rate), zeroBytes, kstar)
				if n == 0 {
					jobMax = -1
					if !perFlow {
						break
					}
					continue
				}
				if perFlow && n < kstar {
					kstar = n
				}
				if jobMax >= 0 && n > jobMax {
					jobMax = n
				}
			}
			if jobMax > 0 && jobMax < kstar {
				kstar = jobMax
			}
		}
		if kstar == math.MaxInt64 {
			s.stalled = true
			return
		}
		departed, flowDone := s.step(t, kstar)
		t += kstar * Q
		if departed || (perFlow && flowDone) {
			s.now = t
			s.policy.allocate(s)
		}
		epoch = t / E * E
	}
}

// step advances every active flow by k quanta from time t, records flow,
// reducer and job completions, removes finished jobs and reports whether a
// job departed and whether a flow finished.
func (s *sim) step(t, k int64) (departed, flowDone bool) {
	for _, j := range s.active {
		if s.redLeft {
			for ri := range j.redLeft {
				if j.redActive[ri] > 0 && s.stepReducer(j, ri, t, k) {
					flowDone = true
				}
			}
		} else if s.moved {
			moves := s.flowMoves(j.flows, k)
			j.sent = s.accumulateMoves(j.sent, moves, k)
			for _, m := range moves {
				if s.settle(j, m.f, m.x, m.n, t) {
					flowDone = true
				}
			}
		} else {
			for _, f := range j.flows {
				if f.done {
					continue
				}
				x, n := advance(f.rem, s.perQuantum(f.rate), zeroBytes, k)
				if s.settle(j, f, x, n, t) {
					flowDone = true
				}
			}
		}
		if j.active == 0 {
			j.done = true
			j.finish = t + k*s.cfg.QuantumMs
			departed = true
		}
	}
	if departed {
		kept := s.active[:0]
		for _, j := range s.active {
			if !j.done {
				kept = append(kept, j)
			}
		}
		clear(s.active[len(kept):])
		s.active = kept
	}
	return departed, flowDone
}

// settle sets f's bytes left to x after a step from time t and, if it
// finished in quantum n (0: it did not), records its completion; it
// reports whether f finished.
func (s *sim) settle(j *job, f *flow, x float64, n, t int64) bool {
	f.rem = x
	if n == 0 {
		return false
	}
	f.done = true
	j.active--
	j.redActive[f.red]--
	j.redFinish[f.red] = max(j.redFinish[f.red], t+n*s.cfg.QuantumMs)
	return true
}

// stepReducer advances the flows of j's reducer ri and its count of bytes
// left (job.redLeft) by k quanta from time t; if the reducer ends within
// them (reducerEnd) before some of its flows, those end with it. It
// reports whether a flow finished.
func (s *sim) stepReducer(j *job, ri int, t, k int64) bool {
	moves := s.flowMoves(j.reducer(ri), k)
	left := j.redLeft[ri]
	e := s.reducerEnd(left, moves, k)
	j.redLeft[ri] = s.drainMoves(left, moves, k)
	done := false
	for _, m := range moves {
		x, n := m.x, m.n
		if e > 0 && (n == 0 || n > e) {
			x, _ = advance(m.f.rem, m.b, zeroBytes, e)
			n = e
		}
		if s.settle(j, m.f, x, n, t) {
			done = true
		}
	}
	return done
}

// jobEnd returns the quantum (1..k) in which the last reducer of j
// finishes (reducerEnd), or 0 if some reducer does not finish within k.
func (s *sim) jobEnd(j *job, k int64) int64 {
	end := int64(0)
	for ri, left := range j.redLeft {
		if j.redActive[ri] == 0 {
			continue
		}
		e := s.reducerEnd(left, s.flowMoves(j.reducer(ri), k), k)
		if e == 0 {
			return 0
		}
		end = max(end, e)
	}
	return end
}

// flowMove is what an unfinished flow does over the k quanta of a step.
type flowMove struct {
	f       *flow
	b, last float64 // bytes per quantum, bytes in its last quantum
	x       float64 // bytes left after the step
	n       int64   // quantum in which it finishes, 0: not within k
}

// flowMoves returns the moves over k quanta of the unfinished flows of
// fl, in order, in a scratch slice that the next call reuses.
func (s *sim) flowMoves(fl []*flow, k int64) []flowMove {
	moves := s.moves[:0]
	for _, f := range fl {
		if f.done {
			continue
		}
		b := s.perQuantum(f.rate)
		x, n := advance(f.rem, b, zeroBytes, k)
		last := b
		if n > 0 {
			before, _ := advance(f.rem, b, zeroBytes, n-1)
			last = math.Min(b, before)
		}
		moves = append(moves, flowMove{f, b, last, x, n})
	}
	s.moves = moves
	return moves
}

// reducerEnd returns the quantum (1..k) in which a reducer whose flows
// make moves (over k quanta) and whose count of bytes left is left
// finishes, or 0 if it does not within k. A reducer finishes when its last
// flow does, or earlier when its count (job.redLeft), which drifts from
// the flows' own bytes left, drops to zeroBytes or below.
func (s *sim) reducerEnd(left float64, moves []flowMove, k int64) int64 {
	n := int64(0) // the quantum its last flow finishes
	for _, m := range moves {
		if m.n == 0 {
			n = 0
			break
		}
		n = max(n, m.n)
	}
	h := k
	if n > 0 {
		h = n - 1
	}
	if h == 0 || s.drainMoves(left, moves, h) > zeroBytes {
		return n
	}
	// The count never grows: find the first quantum that takes it to
	// zeroBytes or below.
	lo, hi := int64(0), h
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if s.drainMoves(left, moves, mid) <= zeroBytes {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// drainMoves returns acc after k quanta (k no more than the moves were
// made for) of coflowsim's bookkeeping in which every unfinished flow, in
// order, takes the bytes it moves, min(b, rem), off acc. A flow moves b per
// quantum until its last quantum, where it moves what it had left; so the k
// quanta split into runs in which the set of flows and their b are fixed
// (drain) and the single quanta in which some flow finishes.
func (s *sim) drainMoves(acc float64, moves []flowMove, k int64) float64 {
	for q := int64(0); q < k && len(moves) > 0; {
		next := k + 1 // the next quantum in which a flow finishes
		s.bs = s.bs[:0]
		for _, m := range moves {
			if m.n == 0 || m.n > q {
				s.bs = append(s.bs, m.b)
				if m.n > 0 {
					next = min(next, m.n)
				}
			}
		}
		run := min(next-1, k) - q
		acc = drain(acc, s.bs, run)
		q += run
		if q == k {
			break
		}
		q++ // quantum next: the finishing flows move their last bytes
		for _, m := range moves {
			switch {
			case m.n == q:
				acc -= m.last
			case m.n == 0 || m.n > q:
				acc -= m.b
			}
		}
	}
	return acc
}

// accumulateMoves returns acc after k quanta (k no more than the moves
// were made for) of coflowsim's bookkeeping of a coflow's bytes sent, in
// which every unfinished flow, in order, adds the bytes it moves,
// min(b, rem), to acc.
//
// A coflow can have thousands of flows finishing at as many different
// quanta, so the sum is kept incrementally: while acc stays in one binade
// with ulp u, adding b is adding b rounded to a multiple of u, in any
// order, so a quantum adds D = Σ round(b/u) over the flows still moving;
// D is recomputed when acc enters another binade and otherwise updated as
// flows finish. A quantum in which flows finish adds D with their
// last bytes in place of b. Quanta that may leave the binade, hold a tie
// (b/u half-way, rounded to even by acc's last bit) or start from 0 are
// added flow by flow, in order, as the reference does.
func (s *sim) accumulateMoves(acc float64, moves []flowMove, k int64) float64 {
	if len(moves) == 0 || k <= 0 {
		return acc
	}
	fin := s.fin[:0] // the finishing moves, by quantum
	for i, m := range moves {
		if m.n > 0 {
			fin = append(fin, i)
		}
	}
	slices.SortStableFunc(fin, func(a, b int) int { return cmp.Compare(moves[a].n, moves[b].n) })
	s.fin = fin
	gone := slices.Grow(s.gone[:0], len(moves))[:len(moves)]
	clear(gone)
	s.gone = gone
	u, D, ties := -1.0, 0.0, 0 // D and ties are for the binade of ulp u
	binade := func() bool {
		if !(acc >= 0x1p-1022) {
			return false
		}
		_, e := math.Frexp(acc)
		if nu := math.Ldexp(1, e-53); nu != u {
			u, D, ties = nu, 0, 0
			for i, m := range moves {
				if !gone[i] {
					c, tie := roundUlp(m.b, u)
					D += c
					if tie {
						ties++
					}
				}
			}
		}
		return true
	}
	// add applies quantum q's additions to acc, D' units of u at once if
	// they keep acc in its binade, else flow by flow.
	add := func(q int64, Dq float64, exact bool) {
		if exact && Dq < 1<<53 {
			if X := int64(acc / u); X+int64(Dq) <= 1<<53-1 {
				acc = float64(X+int64(Dq)) * u
				return
			}
		}
		for i, m := range moves {
			switch {
			case gone[i]:
			case m.n == q:
				acc += m.last
			default:
				acc += m.b
			}
		}
	}
	q, p := int64(0), 0
	for q < k {
		end := k // the run of quanta q+1 .. end moves the same flows
		if p < len(fin) {
			end = moves[fin[p]].n - 1
		}
		for q < end {
			if !binade() {
				add(q+1, 0, false)
				q++
				continue
			}
			if D == 0 && ties == 0 {
				q = end // every b is below half an ulp: acc does not change
				break
			}
			if ties == 0 && D < 1<<53 {
				X := int64(acc / u)
				if m := min((1<<53-1-X)/int64(D), end-q); m > 0 { // the last result stays in the binade
					acc = float64(X+m*int64(D)) * u
					q += m
					continue
				}
			}
			add(q+1, 0, false)
			q++
		}
		if q == k {
			break
		}
		q++ // quantum q: some flows move their last bytes
		p2 := p
		for p2 < len(fin) && moves[fin[p2]].n == q {
			p2++
		}
		if binade() {
			Dq, exact := D, ties == 0
			for _, i := range fin[p:p2] {
				c, _ := roundUlp(moves[i].b, u)
				l, tie := roundUlp(moves[i].last, u)
				Dq += l - c
				exact = exact && !tie
			}
			add(q, Dq, exact)
		} else {
			add(q, 0, false)
		}
		for _, i := range fin[p:p2] {
			gone[i] = true
			if u > 0 {
				c, tie := roundUlp(moves[i].b, u)
				D -= c
				if tie {
					ties--
				}
			}
		}
		p = p2
	}
	return acc
}

// roundUlp returns b/u rounded to the nearest integer, and whether b/u
// lies exactly half-way (u a power of two, so b/u is exact).
func roundUlp(b, u float64) (float64, bool) {
	q := b / u
	qr := math.Floor(q)
	switch frac := q - qr; {
	case frac < 0.5:
		return qr, false
	case frac > 0.5:
		return qr + 1, false
	}
	return qr, true
}

// admittingEpoch is the start of the epoch that admits a coflow arriving at
// ms: the first epoch e with ms <= e + E. An arrival exactly on an epoch
// boundary is admitted one epoch early, as coflowsim does.
func admittingEpoch(ms, E int64) int64 {
	return max((ms+E-1)/E*E-E, 0)
}
