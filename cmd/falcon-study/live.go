package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/internal/study"
	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/sim"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/straggler"
)

// liveKeyLen cuts the parameter vector into keys as the simulator does.
const liveKeyLen = 1024

// runLive runs each scenario twice per policy and seed: in the simulator
// and live, with real goroutines (ps's coordinator, servers and workers
// over the in-process transport) whose compute is slowed on the wall clock
// to the rate the scenario's heterogeneity model gives. It prints both
// results, the two rankings of the median times over the seeds, their
// Spearman correlation and the pairs the two order oppositely.
func runLive(o options, specs []policySpec) error {
	type pair struct {
		sim  []*sim.Result   // one per seed
		live [][]*sim.Result // per repeat, one per seed
	}
	var names []string
	rows := map[string][]pair{} // scenario -> per policy
	for i := range o.seeds {
		so, train, test, _, m, err := forSeed(o, i)
		if err != nil {
			return err
		}
		if i == 0 {
			fmt.Fprintf(o.stdout, "live mode: %s on %d rows, %s workers, batch %d/worker, lr %g, target %.3f (mean of %d evaluations every %v), %v per run, time scale %gx, seeds %d..%d\n",
				m.Name(), train.N, liveWorkers(o, so.seed), o.batch, o.lr, o.target, o.window, o.evalEvery, o.duration, o.liveScale, o.seed, o.seed+uint64(o.seeds)-1)
			fmt.Fprintf(o.stdout, "command: %s\n\n", commandLine())
		}
		scenarios, err := scenariosFor(o.scenario, so.seed)
		if err != nil {
			return err
		}
		for _, sc := range scenarios {
			if i == 0 {
				names = append(names, sc.Name)
				rows[sc.Name] = make([]pair, len(specs))
			}
			for k, spec := range specs {
				sr, err := runOne(so, sc, spec, m, train, test, k+1, len(specs))
				if err != nil {
					return fmt.Errorf("sim %s/%s seed %d: %w", sc.Name, spec.Name, so.seed, err)
				}
				sr.Policy = spec.Name
				r := &rows[sc.Name][k]
				r.sim = append(r.sim, sr)
				if r.live == nil {
					r.live = make([][]*sim.Result, o.repeats)
				}
				for rep := range o.repeats {
					start := time.Now()
					lr, err := liveOne(so, sc, spec, m, train, test)
					if err != nil {
						return fmt.Errorf("live %s/%s seed %d: %w", sc.Name, spec.Name, so.seed, err)
					}
					tag := ""
					if o.repeats > 1 {
						tag = fmt.Sprintf(" repeat=%d", rep+1)
					}
					if !o.quiet {
						fmt.Fprintf(os.Stderr, "[%d/%d] %-11s %-14s seed %d%s live time_to_target=%ss final_acc=%.3f (%.1fs wall)\n",
							k+1, len(specs), sc.Name, spec.Name, so.seed, tag, fmtT(lr.TimeToTargetSeconds()), lr.FinalAccuracy, time.Since(start).Seconds())
					}
					fmt.Fprintf(o.stdout, "policy=%s scenario=%s mode=live seed=%d%s time_to_target_s=%s final_acc=%.4f blocked_frac=%.4f transfers=%d\n",
						spec.Name, sc.Name, so.seed, tag, fmtT(lr.TimeToTargetSeconds()), lr.FinalAccuracy, lr.BlockedFraction(), lr.AcceptedTransfers())
					r.live[rep] = append(r.live[rep], lr)
				}
			}
		}
	}
	for _, name := range names {
		fmt.Fprintln(o.stdout)
		tw := tabwriter.NewWriter(o.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "scenario\tpolicy\tsim_t2t_s\tlive_t2t_s\tsim_rank\tlive_rank\tsim_acc\tlive_acc\tsim_blocked\tlive_blocked\tsim_transfers\tlive_transfers\tsim_clocks\tlive_clocks\tsim_clock_ms\tlive_clock_ms\tsim_clock_cv\tlive_clock_cv\t")
		pr := rows[name]
		simT := make([]float64, len(pr))
		liveT := make([]float64, len(pr))
		allLive := make([][]*sim.Result, len(pr)) // every live run of a policy
		for i, r := range pr {
			allLive[i] = slices.Concat(r.live...)
			simT[i], liveT[i] = medianOf(r.sim, (*sim.Result).TimeToTargetSeconds), median(times(allLive[i]))
		}
		sRank, lRank := ranks(simT), ranks(liveT)
		for i, r := range pr {
			lv := allLive[i]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%g\t%g\t%.4f\t%.4f\t%.3f\t%.3f\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t%.3f\t%.3f\t\n", name, specs[i].Name,
				fmtT(simT[i]), fmtT(liveT[i]), sRank[i], lRank[i],
				meanOf(r.sim, func(x *sim.Result) float64 { return x.FinalAccuracy }), meanOf(lv, func(x *sim.Result) float64 { return x.FinalAccuracy }),
				meanOf(r.sim, (*sim.Result).BlockedFraction), meanOf(lv, (*sim.Result).BlockedFraction),
				meanOf(r.sim, func(x *sim.Result) float64 { return float64(x.AcceptedTransfers()) }), meanOf(lv, func(x *sim.Result) float64 { return float64(x.AcceptedTransfers()) }),
				meanOf(r.sim, func(x *sim.Result) float64 { return float64(totalClocks(x)) }), meanOf(lv, func(x *sim.Result) float64 { return float64(totalClocks(x)) }),
				meanOf(r.sim, clockMs), meanOf(lv, clockMs), meanOf(r.sim, clockCV), meanOf(lv, clockCV))
		}
		tw.Flush()
		if o.seeds > 1 || o.repeats > 1 {
			fmt.Fprintf(o.stdout, "(times are medians over %d seeds, live over all %d runs; accuracy, blocked, transfers and clocks are means)\n", o.seeds, o.seeds*o.repeats)
		}
		for i, r := range pr {
			if err := printStepsRatio(o.stdout, name, specs[i].Name, r.sim, r.live); err != nil {
				return err
			}
		}
		inv, sep := inversions(simT, liveT, rankTolerance)
		fmt.Fprintf(o.stdout, "Spearman rank correlation sim vs live (%s): %.3f\n", name, spearman(sRank, lRank))
		fmt.Fprintf(o.stdout, "pairs ordered oppositely by more than %.2fs in both (%s): %d of %d the simulator separates", rankTolerance, name, len(inv), sep)
		printPairs(o.stdout, specs, inv)
		if o.repeats > 1 {
			reps := make([][]float64, len(pr)) // per policy, the median of each repeat
			for i, r := range pr {
				for _, runs := range r.live {
					reps[i] = append(reps[i], median(times(runs)))
				}
			}
			inv, sep := inversions(column(reps, 0), column(reps, 1), rankTolerance)
			fmt.Fprintf(o.stdout, "live repeat 1 vs repeat 2, pairs ordered oppositely by more than %.2fs (%s): %d of %d", rankTolerance, name, len(inv), sep)
			printPairs(o.stdout, specs, inv)
			a := agreement(simT, liveT, reps, rankTolerance)
			var rep []string
			for _, i := range a.reproducible {
				rep = append(rep, specs[i].Name)
			}
			verdict := "agree"
			if len(a.opposite) > 0 {
				verdict = "disagree"
			}
			fmt.Fprintf(o.stdout, "reproducible live (%s): %s\nagreement (%s): %s, %d of %d pairs among them ordered oppositely", name, strings.Join(rep, ","), name, verdict, len(a.opposite), a.separated)
			printPairs(o.stdout, specs, a.opposite)
		}
	}
	return nil
}

// stepsPerSecond is a run's clocks completed by all workers per second of
// (virtual) time.
func stepsPerSecond(r *sim.Result) float64 { return float64(totalClocks(r)) / r.End.Seconds() }

// printStepsRatio prints, for one scenario and policy, the ratio of live
// to simulated steps/s per seed (each live repeat paired with its seed's
// simulation), their median and its percentile-bootstrap 95 % interval
// (PROTOCOL.md §9 and amendment 3: within 10 % when the interval lies in
// [0.9, 1.1]).
func printStepsRatio(w io.Writer, scenario, policy string, simRuns []*sim.Result, live [][]*sim.Result) error {
	var ratios []float64
	for _, runs := range live {
		for i, lr := range runs {
			ratios = append(ratios, stepsPerSecond(lr)/stepsPerSecond(simRuns[i]))
		}
	}
	iv, err := study.BootstrapMedian(ratios, study.DefaultBootstrapConfig())
	if err != nil {
		return fmt.Errorf("steps/s ratio %s/%s: %w", scenario, policy, err)
	}
	fmt.Fprintf(w, "steps/s live/sim (%s, %s): median %.3f [%.3f, %.3f] over %d runs, per run", scenario, policy, iv.Median, iv.Lo, iv.Hi, len(ratios))
	for _, x := range ratios {
		fmt.Fprintf(w, " %.3f", x)
	}
	verdict := "within 10 %"
	if iv.Lo < 0.9 || iv.Hi > 1.1 {
		verdict = "not within 10 %"
	}
	if len(simRuns) < 5 {
		verdict += fmt.Sprintf(" (%d seeds: fewer than the protocol's 5)", len(simRuns))
	}
	fmt.Fprintf(w, "; %s\n", verdict)
	return nil
}

// rankTolerance is the margin under which two times to target count as a
// tie when the simulator's and the live ranking are compared: two
// evaluation periods of the study (50 ms each, the resolution of a time to
// target). It was fixed before the multi-seed live comparison was run.
const rankTolerance = 0.1

// inversions returns the pairs (i, j) that the two series order
// oppositely, each by more than tol (+Inf counts as larger than any time),
// and how many pairs a separates by more than tol.
func inversions(a, b []float64, tol float64) (inv [][2]int, separated int) {
	for i := range a {
		for j := i + 1; j < len(a); j++ {
			da, db := timeGap(a[i], a[j]), timeGap(b[i], b[j])
			if within(da, tol) {
				continue
			}
			separated++
			if !within(db, tol) && (da > 0) != (db > 0) {
				inv = append(inv, [2]int{i, j})
			}
		}
	}
	return inv, separated
}

// printPairs ends a line with the names of the pairs.
func printPairs(w io.Writer, specs []policySpec, pairs [][2]int) {
	for _, p := range pairs {
		fmt.Fprintf(w, "; %s/%s", specs[p[0]].Name, specs[p[1]].Name)
	}
	fmt.Fprintln(w)
}

// reproTolerance is how far apart (in seconds) the live repeats' median
// times to target of one policy may be for its live time to count as
// reproducible: two rankTolerances, since a pair's gap carries the error
// of both its policies. Fixed, with the rule of [agreement], before the
// second live run of the study.
const reproTolerance = 2 * rankTolerance

// agreementResult is the outcome of [agreement].
type agreementResult struct {
	reproducible []int    // policies whose live repeats agree
	separated    int      // pairs of them the simulator separates by more than tol
	opposite     [][2]int // ... that sim and live order oppositely, each by more than tol
}

// agreement compares the simulator's ranking with the live one on the
// policies whose live time to target is reproducible. simT and liveT are
// each policy's time in the two modes (live: the median of all its live
// runs) and reps[i] the median of each live repeat of policy i. A policy
// is reproducible when its repeats' medians lie within reproTolerance of
// each other (+Inf only with +Inf); the modes agree when no pair of
// reproducible policies is ordered oppositely by more than tol in both.
//
// Why: at the study's learning rate the policies that apply stale
// gradients oscillate, and a second live run of the same seeds orders
// them differently from the first (cmd/falcon-study README); a ranking
// that live training does not reproduce cannot be asked of a simulator.
// Which policies count is decided by live runs alone.
func agreement(simT, liveT []float64, reps [][]float64, tol float64) agreementResult {
	var a agreementResult
	for i, r := range reps {
		if len(r) == 0 {
			continue
		}
		lo, hi := slices.Min(r), slices.Max(r)
		if lo == hi || within(timeGap(hi, lo), reproTolerance) {
			a.reproducible = append(a.reproducible, i)
		}
	}
	s, l := make([]float64, len(a.reproducible)), make([]float64, len(a.reproducible))
	for k, i := range a.reproducible {
		s[k], l[k] = simT[i], liveT[i]
	}
	inv, sep := inversions(s, l, tol)
	a.separated = sep
	for _, p := range inv {
		a.opposite = append(a.opposite, [2]int{a.reproducible[p[0]], a.reproducible[p[1]]})
	}
	return a
}

// times are the runs' times to target in seconds (+Inf: never).
func times(rs []*sim.Result) []float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = r.TimeToTargetSeconds()
	}
	return xs
}

// column is xs[i][k] for every i.
func column(xs [][]float64, k int) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x[k]
	}
	return out
}

// within reports |gap| <= tol, with a margin for float rounding: times
// are multiples of the evaluation period, and a gap of exactly tol (say
// 1.75 - 1.65) must count as within it.
func within(gap, tol float64) bool { return math.Abs(gap) <= tol+1e-9 }

// timeGap is x - y for times to target, +Inf counting as larger than any
// time and two +Inf as equal.
func timeGap(x, y float64) float64 {
	switch {
	case math.IsInf(x, 1) && math.IsInf(y, 1):
		return 0
	case math.IsInf(x, 1):
		return math.Inf(1)
	case math.IsInf(y, 1):
		return math.Inf(-1)
	}
	return x - y
}

// medianOf is the median of f over rs (as median: +Inf sorts last).
func medianOf(rs []*sim.Result, f func(*sim.Result) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return median(xs)
}

// meanOf is the mean of f over rs.
func meanOf(rs []*sim.Result, f func(*sim.Result) float64) float64 {
	var s float64
	for _, r := range rs {
		s += f(r)
	}
	return s / float64(len(rs))
}

// ranks returns 1-based ranks of xs (smaller is better), ties sharing the
// mean rank; +Inf ranks last.
func ranks(xs []float64) []float64 {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return xs[idx[a]] < xs[idx[b]] })
	r := make([]float64, len(xs))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && xs[idx[j+1]] == xs[idx[i]] {
			j++
		}
		for k := i; k <= j; k++ {
			r[idx[k]] = float64(i+j)/2 + 1
		}
		i = j + 1
	}
	return r
}

// spearman is the Pearson correlation of two rank vectors.
func spearman(a, b []float64) float64 {
	n := float64(len(a))
	if n < 2 {
		return math.NaN()
	}
	var ma, mb float64
	for i := range a {
		ma += a[i]
		mb += b[i]
	}
	ma /= n
	mb /= n
	var cov, va, vb float64
	for i := range a {
		cov += (a[i] - ma) * (b[i] - mb)
		va += (a[i] - ma) * (a[i] - ma)
		vb += (b[i] - mb) * (b[i] - mb)
	}
	if va == 0 || vb == 0 {
		return math.NaN()
	}
	return cov / math.Sqrt(va*vb)
}

// liveSampler gives worker w the same kind of data as the simulator: a
// seeded permutation of the training rows cut into one shard per worker,
// walked in order (batch of clock c = the next size rows from position
// c·size, wrapping). It is a pure function, as ps.Sampler requires.
type liveSampler struct{ shards [][]int }

func newLiveSampler(n, workers int, seed uint64) liveSampler {
	perm := rand.New(rand.NewPCG(seed, 0xda7a)).Perm(n)
	per := n / workers
	s := liveSampler{shards: make([][]int, workers)}
	for w := range workers {
		s.shards[w] = perm[w*per : (w+1)*per]
	}
	return s
}

func (s liveSampler) Batch(owner epsp.WorkerID, clock, size int) []int {
	sh := s.shards[owner]
	ids := make([]int, size)
	for i := range ids {
		ids[i] = sh[(clock*size+i)%len(sh)]
	}
	return ids
}

// rateModel is a scenario's speed model with core contention: what the
// simulator uses (straggler.Hetero, and sim.Foreign for a foreign job).
type rateModel interface {
	straggler.Model
	RateAll(ps []int, now time.Duration, dst []float64) []float64
}

// liveWorkers names the worker counts of o's scenarios, e.g. "12" or
// "12 or 36".
func liveWorkers(o options, seed uint64) string {
	scs, err := scenariosFor(o.scenario, seed)
	if err != nil {
		return "?"
	}
	var ns []string
	for _, sc := range scs {
		if n := fmt.Sprint(sc.NumWorkers()); !slices.Contains(ns, n) {
			ns = append(ns, n)
		}
	}
	return strings.Join(ns, " or ")
}

// slowModel adapts a model.Model to ps.Model and injects the scenario's
// compute time on the wall clock: a call over n samples by one of the p
// goroutines of worker w takes n·p/Rate(w) seconds (times the time scale),
// Rate from the heterogeneity model at the current parallelism of every
// worker, including core contention on the host.
type slowModel struct {
	w     int
	grad  ps.Model // ps.FromModel: one model copy per computing goroutine
	speed rateModel
	par   []atomic.Int32 // current parallelism of every worker
	start time.Time
	scale float64
	pacer *pacer
}

func (s *slowModel) Gradient(params []float32, samples []int, grad []float32) float64 {
	n := len(samples)
	if n == 0 {
		return 0
	}
	s.pacer.acquire(func() int { return int(s.par[s.w].Load()) })
	defer s.pacer.release()
	t0 := time.Now()
	loss := s.grad.Gradient(params, samples, grad)
	p := make([]int, len(s.par))
	for i := range p {
		p[i] = int(s.par[i].Load())
	}
	now := time.Duration(float64(t0.Sub(s.start)) / s.scale)
	r := s.speed.RateAll(p, now, nil)
	want := time.Duration(float64(n) * float64(max(p[s.w], 1)) / r[s.w] * s.scale * float64(time.Second))
	s.pacer.pace(t0, want)
	return loss
}

// pacer holds a worker's compute to the model's rate R(p):
//
//   - at most p calls compute at once, each at R(p)/p, so a taker that
//     computes a transferred range while its own batch is still running
//     shares its p slots rather than doubling its speed (the simulator
//     runs the two one after the other);
//   - a call that started at t0 lasts want in all. A sleep wakes up late,
//     and the real gradient can take longer than want on a loaded
//     machine; the excess is kept as the worker's debt and taken off its
//     next calls (from any of its goroutines, which claim chunks from one
//     queue), so that over a run the worker computes at the model's rate
//     rather than losing the scheduler's wake-up latency on every chunk.
//     The debt is dropped when the worker starts a clock ([pacer.newClock]):
//     a clock that overslept (a loaded machine) must not be repaid by the
//     next one running faster than the model, which the policy would
//     read as a burst of speed (19 samples in 235 µs, live, then a plan
//     that gave that worker 541 samples of the others).
type pacer struct {
	mu     sync.Mutex
	free   *sync.Cond
	active int
	debt   time.Duration
}

func newPacer() *pacer {
	p := &pacer{}
	p.free = sync.NewCond(&p.mu)
	return p
}

// acquire waits for one of the worker's par() compute slots.
func (p *pacer) acquire(par func() int) {
	p.mu.Lock()
	for p.active >= max(par(), 1) {
		p.free.Wait()
	}
	p.active++
	p.mu.Unlock()
}

func (p *pacer) release() {
	p.mu.Lock()
	p.active--
	p.mu.Unlock()
	p.free.Broadcast()
}

// newClock drops the debt: the worker starts a clock.
func (p *pacer) newClock() {
	p.mu.Lock()
	p.debt = 0
	p.mu.Unlock()
}

func (p *pacer) pace(t0 time.Time, want time.Duration) {
	owe := want - time.Since(t0)
	p.mu.Lock()
	take := min(p.debt, max(owe, 0))
	p.debt -= take
	p.mu.Unlock()
	owe -= take
	if owe > 0 {
		ts := time.Now()
		time.Sleep(owe)
		owe -= time.Since(ts)
	}
	if owe < 0 {
		p.mu.Lock()
		p.debt -= owe
		p.mu.Unlock()
	}
}

// liveObserver tracks parallelism, blocked time and transfers. Blocked
// time of worker w for clock c is the time from its EvClockDone of c to
// its EvRelease into c+1 (the two come from different goroutines and may
// be observed in either order, hence the pairing by clock).
type liveObserver struct {
	start  time.Time
	par    []atomic.Int32
	pacers []*pacer // each worker's, told of its clock starts

	mu        sync.Mutex
	doneAt    map[[2]int]time.Duration // (worker, clock) -> clock done
	releaseAt map[[2]int]time.Duration // (worker, clock) -> released into clock
	transfers int
	clocks    []int // clocks completed per worker
}

func (l *liveObserver) Observe(e event.Event) {
	now := time.Since(l.start)
	switch e.Kind {
	case event.ClockStart:
		if int(e.Worker) < len(l.pacers) {
			l.pacers[e.Worker].newClock()
		}
	case event.Parallelism:
		if int(e.Worker) < len(l.par) && e.P > 0 {
			l.par[e.Worker].Store(int32(e.P))
		}
	case event.ClockDone:
		l.mu.Lock()
		l.doneAt[[2]int{int(e.Worker), e.Clock}] = now
		if int(e.Worker) < len(l.clocks) {
			l.clocks[e.Worker]++
		}
		l.mu.Unlock()
	case event.Release:
		l.mu.Lock()
		l.releaseAt[[2]int{int(e.Worker), e.Clock}] = now
		l.mu.Unlock()
	case event.TransferResult:
		if e.Result.Accepted {
			l.mu.Lock()
			l.transfers++
			l.mu.Unlock()
		}
	}
}

// blocked sums, per worker, the time between finishing each clock and
// being released into the next; a clock still waiting at end counts up to
// end.
func (l *liveObserver) blocked(nw int, end time.Duration) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := make([]time.Duration, nw)
	for k, done := range l.doneAt {
		rel, ok := l.releaseAt[[2]int{k[0], k[1] + 1}]
		if !ok {
			rel = end
		}
		if rel > done {
			b[k[0]] += rel - done
		}
	}
	return b
}

// clockTiming is the time from each worker's release into a clock to its
// EvClockDone of that clock, as the simulator's Result.ClockTime (wall
// times divided by scale).
func (l *liveObserver) clockTiming(scale float64) sim.Timing {
	l.mu.Lock()
	defer l.mu.Unlock()
	var t sim.Timing
	for k, rel := range l.releaseAt {
		if done, ok := l.doneAt[k]; ok && done > rel {
			t.Add(time.Duration(float64(done-rel) / scale))
		}
	}
	return t
}

// liveInit initialises the servers with the model's seeded initial
// parameters (the same as the simulator's).
type liveInit []float32

func (v liveInit) Init(key uint64, off int, vals []float32) {
	copy(vals, v[int(key)*liveKeyLen+off:])
}

// liveOne trains one policy live for o.duration·o.liveScale of wall time.
func liveOne(o options, sc sim.Scenario, spec policySpec, m model.Model, train, test *model.Dataset) (*sim.Result, error) {
	m0, err := sc.Model()
	if err != nil {
		return nil, err
	}
	speed, ok := m0.(rateModel)
	if !ok {
		return nil, fmt.Errorf("scenario %s: its speed model %T cannot price core contention (RateAll)", sc.Name, m0)
	}
	nw := sc.NumWorkers()
	pol, err := spec.New(speed, nw)
	if err != nil {
		return nil, err
	}
	n := m.NumParams()
	var keys []uint64
	var lens []int
	for off, k := 0, uint64(0); off < n; off, k = off+liveKeyLen, k+1 {
		keys = append(keys, k)
		lens = append(lens, min(liveKeyLen, n-off))
	}
	init := make(liveInit, n)
	m.Init(init, rand.New(rand.NewPCG(o.seed, 0x1417)))

	obs := &liveObserver{par: make([]atomic.Int32, nw), clocks: make([]int, nw), doneAt: map[[2]int]time.Duration{}, releaseAt: map[[2]int]time.Duration{}}
	for w := range nw {
		obs.par[w].Store(int32(sc.Parallelism))
		obs.pacers = append(obs.pacers, newPacer())
	}
	tick := time.Duration(float64(sim.DefaultConfig().TickPeriod) * o.liveScale)
	ctx := context.Background()
	cluster, err := ps.NewCluster(ctx, ps.ClusterConfig{
		Servers: 2, Workers: nw, Policy: pol, Observer: obs,
		EPSP:  epsp.Config{Batch: o.batch, Parallelism: sc.Parallelism, TickPeriod: tick},
		Store: store.Config{Optimizer: store.SGD{LR: float32(o.lr)}},
		Chunk: liveChunk(o, sc), ProgressEvery: sc.Parallelism, StartTimeout: 10 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	co, eval := cluster.Coordinator(), cluster.Client()
	// The initial values go in before anyone trains (every worker's Init
	// keeps existing keys).
	if err := eval.InitWith(ctx, keys, lens, init); err != nil {
		return nil, err
	}

	sampler := newLiveSampler(train.N, nw, o.seed)
	grad := ps.FromModel(m, train)
	start := time.Now()
	obs.start = start
	wall := time.Duration(float64(o.duration) * o.liveScale)
	runCtx, cancel := context.WithTimeout(ctx, wall)
	defer cancel()

	res := &sim.Result{Policy: spec.Name, Model: m.Name(), Target: o.target, Workers: make([]sim.WorkerStats, nw)}
	evalDone := make(chan error, 1)
	go func() { // the evaluator: pull and score every EvalEvery (scaled)
		params := make([]float32, n)
		em := m.Clone()
		period := time.Duration(float64(o.evalEvery) * o.liveScale)
		next := start
		for {
			at := time.Since(start)
			if err := eval.Pull(ctx, keys, params, lens); err != nil {
				evalDone <- err
				return
			}
			loss, acc := em.Evaluate(params, test, nil)
			res.Evals = append(res.Evals, sim.EvalPoint{Time: time.Duration(float64(at) / o.liveScale), Loss: loss, Accuracy: acc})
			next = next.Add(period)
			select {
			case <-runCtx.Done():
				evalDone <- nil
				return
			case <-time.After(time.Until(next)):
			}
		}
	}()
	models := make([]ps.Model, nw)
	for w := range nw {
		models[w] = &slowModel{w: w, grad: grad, speed: speed, par: obs.par, start: start, scale: o.liveScale, pacer: obs.pacers[w]}
	}
	// Clocks only bounds the run (the deadline ends it); Train
	// preallocates per clock, so it must not be huge.
	_, terr := cluster.TrainWith(runCtx, func(w int) ps.Model { return models[w] }, sampler, ps.TrainConfig{Keys: keys, Lens: lens, Clocks: 1 << 16})
	if errors.Is(terr, context.DeadlineExceeded) || errors.Is(terr, context.Canceled) {
		terr = nil
	}
	if err := <-evalDone; err != nil {
		return nil, fmt.Errorf("evaluator: %w", err)
	}
	if terr != nil {
		return nil, terr
	}
	if err := co.Err(); err != nil {
		return nil, err
	}
	end := time.Duration(float64(time.Since(start)) / o.liveScale)
	res.End = end
	res.TimeToTarget, res.Reached = sim.TargetTime(res.Evals, o.target, o.window)
	res.FirstCrossing, res.Crossed = sim.TargetTime(res.Evals, o.target, 1)
	if k := len(res.Evals); k > 0 {
		res.FinalAccuracy, res.FinalLoss = res.Evals[k-1].Accuracy, res.Evals[k-1].Loss
	}
	wallEnd := time.Since(start)
	blocked := obs.blocked(nw, wallEnd)
	obs.mu.Lock()
	for w := range nw {
		b := time.Duration(float64(blocked[w]) / o.liveScale)
		res.Workers[w] = sim.WorkerStats{Worker: w, Blocked: b, Busy: max(end-b, 0), Clocks: obs.clocks[w], FinalP: int(obs.par[w].Load())}
	}
	accepted := obs.transfers
	obs.mu.Unlock()
	res.Stats = co.Stats()
	for range accepted {
		res.Transfers = append(res.Transfers, sim.TransferRecord{Accepted: true})
	}
	res.Dropped = res.Stats.Dropped
	res.ClockTime = obs.clockTiming(o.liveScale)
	return res, nil
}

// clockMs and clockCV read Result.ClockTime: the mean time from release to
// clock done, in ms, and its coefficient of variation.
func clockMs(r *sim.Result) float64 { return r.ClockTime.Mean.Seconds() * 1e3 }
func clockCV(r *sim.Result) float64 { return r.ClockTime.CV() }

// totalClocks is the number of clocks all workers completed in a run.
func totalClocks(r *sim.Result) int {
	n := 0
	for _, w := range r.Workers {
		n += w.Clocks
	}
	return n
}

// liveChunk is the runtime's claim size: -chunk, or the simulator's
// default max(1, batch/(8·initial parallelism)).
func liveChunk(o options, sc sim.Scenario) int {
	if o.chunk > 0 {
		return o.chunk
	}
	return max(1, o.batch/(8*sc.Parallelism))
}
