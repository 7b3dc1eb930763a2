package coflowsim

import "math"

// runEvents is the event-jumping form of the quantum loop: rates only change
// at admissions and departures (and, for per-flow schedulers, at flow
// completions), so between two such events every flow follows
// x -= min(b, x) with a constant b, which advance reproduces bit for bit
// without visiting each quantum.
func (s *sim) runEvents() {
	E, Q := s.cfg.EpochMs, s.cfg.QuantumMs
	frac := float64(Q) / float64(s.cfg.SecondMs)
	z := s.cfg.zero
	perFlow := false
	if pf, ok := s.sched.(interface{ perFlow() bool }); ok {
		perFlow = pf.perFlow()
	}
	next := 0
	t, epoch := int64(0), int64(0)
	for next < len(s.jobs) || len(s.active) > 0 {
		if t == epoch {
			added := 0
			for next < len(s.jobs) && s.jobs[next].arrival < epoch+E {
				j := s.jobs[next]
				j.start = epoch
				s.sched.insert(s, j)
				next++
				added++
			}
			if added > 0 {
				s.now = t
				s.sched.allocate(s)
				if dumpHook != nil {
					dumpHook(s)
				}
			}
		}
		// Quanta until the next epoch that admits a coflow.
		kstar := int64(math.MaxInt64)
		if next < len(s.jobs) {
			na := s.jobs[next].arrival / E * E
			if na < epoch+E {
				na = epoch + E
			}
			kstar = (na - t) / Q
		}
		// Quanta until the first departure (or flow completion).
		for _, j := range s.active {
			jobMax := int64(0)
			for _, f := range j.flows {
				if f.done {
					continue
				}
				_, n := advance(f.rem, f.rate/8*frac, z, kstar)
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
		departed, flowDone := false, false
		for _, j := range s.active {
			for _, f := range j.flows {
				if f.done {
					continue
				}
				x, n := advance(f.rem, f.rate/8*frac, z, kstar)
				j.sent += f.rem - x
				f.rem = x
				if n > 0 {
					at := t + n*Q
					f.done = true
					flowDone = true
					j.active--
					j.redActive[f.red]--
					j.redFinish[f.red] = max(j.redFinish[f.red], at)
					if j.active == 0 {
						j.done = true
						j.finish = t + kstar*Q
						departed = true
					}
				}
			}
		}
		t += kstar * Q
		if departed {
			k := 0
			for _, j := range s.active {
				if !j.done {
					s.active[k] = j
					k++
				}
			}
			s.active = s.active[:k]
		}
		if departed || (perFlow && flowDone) {
			s.now = t
			s.sched.allocate(s)
			if dumpHook != nil {
				dumpHook(s)
			}
		}
		epoch = t / E * E
	}
}
