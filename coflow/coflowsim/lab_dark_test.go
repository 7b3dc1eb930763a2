package coflowsim

// A third research harness, for DARK's re-evaluation timing (skipped unless
// FALCON_LAB6 is set): a literal quantum loop that, besides admissions and
// departures, can reallocate whenever a coflow's bytes sent cross a queue
// threshold ("x") or every quantum ("q"), around any darkLab variant:
//
//	FALCON_LAB6=x,q,x:fixu,none/acc:gt-fixu
//	    <trigger>[/<sent>][:<darkLab variant>], <sent> the bytes-sent
//	    bookkeeping: srem (default: Σ size − rem), acc (per quantum, per
//	    coflow), fsum (per quantum per flow, then summed), trem (total −
//	    Σ rem); sched.go's dark is fsum with darkLab mv-gt-movqdesc-fixu.
//	    LAB6_ALL=1 lists every coflow, LAB6_CMP=1 the coflows whose finish
//	    differs from the event engine's, LAB6_NEAR=1 the coflows whose
//	    bytes sent come within a byte of a limit; LAB6_CMPLOG=1 runs
//	    TestLab6Cmp.

import (
	"fmt"
	"github.com/falconml/falcon/coflow/coflowtest"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// labQuantumRun replays trace under pol quantum by quantum; realloc says,
// after each quantum, whether the rates are recomputed although no coflow
// was admitted or departed.
func labQuantumRun(t *testing.T, trace, refSched string, pol policy, withRandom bool, realloc func(s *sim) bool, sentMode string, moveEach func(s *sim)) (match, total int, first string) {
	labFlowSent = map[*flow]float64{}
	labJobAcc = map[*job]float64{}
	s, tr, ref := labNewSim(t, trace, refSched, pol, withRandom)
	E, Q := s.cfg.EpochMs, s.cfg.QuantumMs
	tb := t
	next := 0
	for t := int64(0); next < len(s.jobs) || len(s.active) > 0; t += Q {
		if t%E == 0 {
			added := false
			for next < len(s.jobs) && s.jobs[next].arrival < t+E {
				s.jobs[next].start = t
				pol.insert(s, s.jobs[next])
				next++
				added = true
			}
			if added {
				s.now = t
				pol.allocate(s)
			}
		}
		dep, flowDone := false, false
		for _, j := range s.active {
			for _, f := range j.flows {
				if f.done {
					continue
				}
				b := math.Min(s.perQuantum(f.rate), f.rem)
				f.rem -= b
				f.moved += b
				labFlowSent[f] += b
				labJobAcc[j] += b
				if f.rem <= zeroBytes {
					f.done, flowDone = true, true
					j.active--
					j.redActive[f.red]--
					j.redFinish[f.red] = max(j.redFinish[f.red], t+Q)
				}
			}
			if j.active == 0 {
				j.done, dep = true, true
				j.finish = t + Q
			}
		}
		if dep {
			kept := s.active[:0]
			for _, j := range s.active {
				if !j.done {
					kept = append(kept, j)
				}
			}
			s.active = kept
		}
		for _, j := range s.active {
			switch sentMode {
			case "acc":
				j.sent = labJobAcc[j]
			case "fsum":
				j.sent = 0
				for _, f := range j.flows {
					j.sent += labFlowSent[f]
				}
			case "srem", "":
				j.sent = 0
				for _, f := range j.flows {
					j.sent += f.size - f.rem
				}
			case "trem":
				r := 0.0
				for _, f := range j.flows {
					r += f.rem
				}
				j.sent = j.totalBytes - r
			}
		}
		if moveEach != nil {
			moveEach(s)
		}
		if labGetenv("LAB6_NEAR") != "" {
			for _, j := range s.active {
				for lim := darkFirstLimit; lim < 1e15; lim *= darkLimitMult {
					if d := j.sent - lim; d > -1 && d < 1 {
						tb.Logf("  %s t=%d JOB-%d sent-limit %g", trace, t+Q, j.id, d)
					}
				}
			}
		}
		if dep || (pol.perFlow() && flowDone) || realloc(s) {
			s.now = t + Q
			pol.allocate(s)
		}
		if t > 1e7 {
			return 0, len(s.jobs), "STALLED"
		}
	}
	if labGetenv("LAB6_CMP") != "" {
		res, _ := Run(tr, "DARK", s.cfg)
		for i, j := range s.jobs {
			if res.Records[i].FinishMs != j.finish {
				t.Logf("  %s engine vs quantum loop: JOB-%d %d %d", trace, j.id, res.Records[i].FinishMs, j.finish)
			}
		}
	}
	for _, j := range s.jobs {
		total++
		r := ref[j.id]
		if labGetenv("LAB6_ALL") != "" {
			t.Logf("  %s JOB-%d finish %d ref %v", trace, j.id, j.finish, r.finish)
		}
		if r.start == float64(j.start) && r.finish == float64(j.finish) {
			match++
		} else if first == "" {
			first = fmt.Sprintf("JOB-%d finish %d ref %v", j.id, j.finish, r.finish)
		}
	}
	return
}

var (
	labFlowSent map[*flow]float64
	labJobAcc   map[*job]float64
)

func TestLab6(t *testing.T) {
	if labGetenv("FALCON_LAB6") == "" {
		t.Skip("set FALCON_LAB6")
	}
	for _, v := range strings.Split(labGetenv("FALCON_LAB6"), ",") {
		trig, variant, _ := strings.Cut(v, ":")
		trig, sentMode, _ := strings.Cut(trig, "/")
		var realloc func(s *sim) bool
		var moveEach func(s *sim)
		switch trig {
		case "m", "mgt", "mid", "mgtid": // queues follow the bytes sent every quantum; rates only at events
			gt := strings.Contains(trig, "gt")
			byID := strings.Contains(trig, "id")
			realloc = func(*sim) bool { return false }
			moveEach = func(s *sim) {
				order := slices.Clone(s.active)
				slices.SortStableFunc(order, cmpQueue)
				if byID {
					slices.SortStableFunc(order, func(a, b *job) int { return a.id - b.id })
				}
				for _, j := range order {
					q := darkLab{}.queueOf(j.sent)
					if gt {
						q = darkLab{"gt"}.queueOf(j.sent)
					}
					if q != j.queue {
						s.seq++
						j.queue, j.queueSeq = q, s.seq
					}
				}
			}
		case "x": // a coflow crossed a threshold
			realloc = func(s *sim) bool {
				for _, j := range s.active {
					if darkQueue(j.sent) != j.queue {
						return true
					}
				}
				return false
			}
		case "q":
			realloc = func(*sim) bool { return true }
		default:
			realloc = func(*sim) bool { return false }
		}
		for _, tr := range []string{"synth-a", "synth-b"} {
			var pol policy = dark{}
			if variant != "" {
				pol = darkLab{variant}
			}
			if d := labGetenv("LAB2_DUMP"); d != "" && tr == labGetenv("LAB2_T") {
				startLabDump(d)
				pol = dumpPol{pol}
			}
			m, n, first := labQuantumRun(t, tr, "DARK", pol, false, realloc, sentMode, moveEach)
			if labDump != nil {
				t.Log(labDump.String())
				labDump = nil
			}
			t.Logf("%-12s %s: %d/%d first: %s", v, tr, m, n, first)
		}
	}
}

// recPol records every allocation's time and a digest of the rates.
type recPol struct {
	inner policy
	log   *[]string
}

func (r recPol) perFlow() bool         { return r.inner.perFlow() }
func (r recPol) insert(s *sim, j *job) { r.inner.insert(s, j) }
func (r recPol) allocate(s *sim) {
	r.inner.allocate(s)
	d := ""
	for _, j := range s.active {
		sum := 0.0
		for _, f := range j.flows {
			sum += f.rate
		}
		d += fmt.Sprintf(" J%d:q%d:%.6g:%.17g", j.id, j.queue, sum, movedBytes(j))
	}
	*r.log = append(*r.log, fmt.Sprintf("t=%d%s", s.now, d))
}

// TestLab6Cmp logs the first allocation at which the event jump and the
// quantum loop disagree on DARK's queues, rates or bytes sent (synth-b).
func TestLab6Cmp(t *testing.T) {
	if labGetenv("LAB6_CMPLOG") == "" {
		t.Skip("set LAB6_CMPLOG")
	}
	dir := coflowtest.SharedDir(t, "coflowsim-fixtures")
	tr := coflowtest.ReadTraceFile(t, filepath.Join(dir, "synth-b.txt"))
	var la, lb []string
	cfg := DefaultConfig()
	s := newSim(tr, cfg, "DARK", recPol{dark{}, &la})
	s.run()
	s = newSim(tr, cfg, "DARK", recPol{dark{}, &lb})
	s.runQuanta()
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			t.Logf("first difference at allocation %d:\nengine %s\nquanta %s", i, la[i], lb[i])
			return
		}
	}
}
