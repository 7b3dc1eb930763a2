package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/straggler"
)

// Sentinel errors.
var (
	ErrConfig    = errors.New("sim: invalid config")
	ErrStalled   = errors.New("sim: training stalled")
	ErrInvariant = errors.New("sim: invariant violated")
)

// Network is a simple network model without contention: a message of b
// bytes takes Latency + b/Bandwidth.
type Network struct {
	// Latency is the one-way delay of every message; zero means none.
	Latency time.Duration
	// Bandwidth is in bytes per second; zero means infinite.
	Bandwidth float64
}

// Delay is the transfer time of a message of b bytes.
func (n Network) Delay(b int) time.Duration {
	d := n.Latency
	if n.Bandwidth > 0 {
		d += time.Duration(float64(b) / n.Bandwidth * float64(time.Second))
	}
	return d
}

// Config configures a simulated training run. The same Config with the same
// seeds gives the same Result, bit for bit.
type Config struct {
	// Workers is the number of workers (> 0); it must match the speed
	// model's NumWorkers.
	Workers int
	// Batch is each worker's initial batch size in samples (> 0).
	Batch int
	// Parallelism is each worker's initial number of compute goroutines;
	// zero means 1.
	Parallelism int
	// LR is the server-side SGD learning rate (> 0) used when Optimizer is
	// nil.
	LR float32
	// Optimizer, when not nil, replaces SGD{LR}.
	Optimizer store.Optimizer
	// TickPeriod is the period of EventTick; zero means 100 ms.
	TickPeriod time.Duration
	// Chunk is how many samples each of a worker's compute goroutines
	// claims at a time, as ps.WorkerConfig.Chunk in the live runtime: a
	// worker with parallelism p computes its batch in rounds of p·Chunk
	// samples (see roundWork) and reports progress after each round, and
	// a transfer can only take samples no round has claimed. Zero means
	// max(1, Batch/(8·Parallelism)).
	Chunk int
	// EvalEvery is the virtual-time interval between evaluations of the
	// server's model on the test set; zero means 1 s.
	EvalEvery time.Duration
	// EvalSamples limits the test rows used for evaluation (the first
	// EvalSamples); zero means all.
	EvalSamples int
	// Duration is the virtual time simulated (> 0).
	Duration time.Duration
	// Target is the test accuracy whose first crossing defines the time to
	// target; zero means none.
	Target float64
	// TargetWindow smooths the target test: the time to target is the
	// first evaluation at which the mean accuracy of the last TargetWindow
	// evaluations (this one included) reaches Target, so that one lucky
	// evaluation of a noisy run does not count as convergence. Zero means
	// 1: the first raw crossing. Result.FirstCrossing always records the
	// raw crossing.
	TargetWindow int
	// StopAtTarget ends the run when the target is reached.
	StopAtTarget bool
	// ComputeNoise is the coefficient of variation of a round's compute
	// time: each round (p·Chunk claimed samples, or a transferred range)
	// takes its modelled time multiplied by an independent lognormal factor
	// of mean 1 and this CV, drawn from a per-worker stream seeded by Seed.
	// It stands for what a live runtime adds to the heterogeneity model
	// (scheduler wake-ups, cache and memory effects), which keeps workers
	// of equal speed from finishing in lockstep. Zero means none: equal
	// workers then finish every clock at the same instant.
	ComputeNoise float64
	// Network models pulls, pushes and control messages.
	Network Network
	// KeyLen is the number of parameters per parameter-server key; zero
	// means 1024. The parameter vector is cut into ceil(n/KeyLen) keys.
	KeyLen int
	// StallTimeout ends the run with ErrStalled when no worker has made
	// progress for this long; zero means 60 s of virtual time.
	StallTimeout time.Duration
	// Seed seeds the model initialisation and the data order.
	Seed uint64
	// SampleBytes is what moving one sample to another worker costs on the
	// network (a transferred range's rows travel with its task; the rows of
	// a release-time assignment are fetched while the taker computes its
	// own batch and delay it only if they arrive later). Zero means the
	// training set's float32 rows (4·D bytes); negative means free.
	SampleBytes int
	// Cost is the cost model of pulls, pushes, server applies and compute
	// per sample ([CostModel]); its zero value keeps Network for pulls
	// and pushes and the speed model's rate per sample.
	Cost CostModel
}

// DefaultConfig returns a config for 8 workers, batch 32, SGD with
// learning rate 0.1, a 100 ms tick, evaluation every second, 60 s of
// virtual time and a 1 Gbit/s network with 100 µs latency.
func DefaultConfig() Config {
	return Config{
		Workers: 8, Batch: 32, Parallelism: 1, LR: 0.1,
		TickPeriod: 100 * time.Millisecond, EvalEvery: time.Second,
		Duration: 60 * time.Second,
		Network:  Network{Latency: 100 * time.Microsecond, Bandwidth: 125e6},
		Seed:     1,
	}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	switch {
	case c.Workers <= 0:
		return fmt.Errorf("%w: Workers = %d", ErrConfig, c.Workers)
	case c.Batch <= 0:
		return fmt.Errorf("%w: Batch = %d", ErrConfig, c.Batch)
	case c.Parallelism < 0:
		return fmt.Errorf("%w: Parallelism = %d", ErrConfig, c.Parallelism)
	case c.Optimizer == nil && !(c.LR > 0):
		return fmt.Errorf("%w: LR = %v", ErrConfig, c.LR)
	case c.TickPeriod < 0 || c.EvalEvery < 0 || c.StallTimeout < 0:
		return fmt.Errorf("%w: negative period", ErrConfig)
	case c.Chunk < 0 || c.EvalSamples < 0 || c.KeyLen < 0 || c.TargetWindow < 0:
		return fmt.Errorf("%w: negative size", ErrConfig)
	case c.Duration <= 0:
		return fmt.Errorf("%w: Duration = %v", ErrConfig, c.Duration)
	case !(c.ComputeNoise >= 0 && c.ComputeNoise <= 10):
		return fmt.Errorf("%w: ComputeNoise = %v, want a CV in [0, 10]", ErrConfig, c.ComputeNoise)
	case c.Target < 0 || c.Target > 1:
		return fmt.Errorf("%w: Target = %v", ErrConfig, c.Target)
	case c.SampleBytes < -1:
		return fmt.Errorf("%w: SampleBytes = %d", ErrConfig, c.SampleBytes)
	case c.Network.Latency < 0 || c.Network.Bandwidth < 0:
		return fmt.Errorf("%w: negative network parameter", ErrConfig)
	}
	return c.Cost.Validate(c.Workers)
}

func (c *Config) fill() {
	if c.Parallelism == 0 {
		c.Parallelism = 1
	}
	if c.TickPeriod == 0 {
		c.TickPeriod = 100 * time.Millisecond
	}
	if c.Chunk == 0 {
		c.Chunk = max(1, c.Batch/(8*c.Parallelism))
	}
	if c.EvalEvery == 0 {
		c.EvalEvery = time.Second
	}
	if c.KeyLen == 0 {
		c.KeyLen = 1024
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = 60 * time.Second
	}
	if c.TargetWindow == 0 {
		c.TargetWindow = 1
	}
}

// Job is what is trained: a model, its data, the heterogeneity of the
// cluster and the synchronization policy.
type Job struct {
	Model model.Model
	Train *model.Dataset
	Test  *model.Dataset
	// Speed gives each worker's compute rate; its NumWorkers must equal
	// Config.Workers.
	Speed straggler.Model
	// Policy is the synchronization policy. A policy value carries state:
	// give each run a fresh one.
	Policy epsp.Policy
	// OnEval, if not nil, is called after every evaluation (from the
	// simulation loop; it must not block long). Use it to show progress.
	OnEval func(EvalPoint)
}

// worker states
type wstate uint8

const (
	wPulling   wstate = iota // waiting for the pull response
	wComputing               // computing its own batch
	wPushing                 // own push in flight
	wWaiting                 // clocked, waiting for release
)

type span struct{ lo, hi int } // positions in the owner's batch

// job is a piece of computation: the owner's batch positions in ranges.
type task struct {
	transfer bool
	id       uint64 // transfer ID
	owner    int
	clock    int
	batch    int // owner's batch size
	idx      []int
	lo, hi   int
}

type worker struct {
	id    int
	p     int
	state wstate

	params      []float32
	baseVersion uint64

	clock      int
	batch      int
	batchIdx   []int  // dataset rows of the current batch, by position
	todo       []span // positions not yet started
	owned      int    // it still owns positions [0, owned) (the rest is given away)
	doneIdx    []int  // rows processed so far this clock
	clockStart time.Duration
	busyStart  time.Duration // w.busy at the clock's start (Push.Busy)

	// release-time assignments of the current clock
	ownEnd     int             // batchIdx[:ownEnd] are its own rows, the rest assigned
	parts      []epsp.PushPart // the owners of the assigned rows, in order
	extraReady time.Duration   // when the assigned rows have arrived

	// current compute segment (own chunk or transfer task)
	computing  bool
	segTask    *task // nil: own chunk [segLo,segHi)
	segLo      int
	segHi      int
	segStart   time.Duration
	segWork    float64 // samples left at segStart
	segGen     uint64
	queue      []*task // accepted transfers to compute
	releaseDue bool    // released while busy with transfers

	// data order
	shard  []int
	cursor int
	rng    *rand.Rand
	noise  *rand.Rand // round-time noise (Config.ComputeNoise)

	// accounting
	busy, blocked, network time.Duration
	stateSince             time.Duration
	clocks                 int
	samples                int
	given, taken           int
}

// Sim is one simulated run. Use [Run] unless you need to step it.
type Sim struct {
	cfg   Config
	job   Job
	q     Queue
	coord *epsp.Coordinator
	store *store.Store
	keys  []uint64
	lens  []int
	w     []*worker
	nparm int

	grad      []float32
	evalParam []float32
	evalIdx   []int
	pbytes    int

	pvec  []int     // parallelism of every worker
	rates []float64 // scratch for RateAll

	cost *costState // nil: Network for pulls and pushes

	lastActivity time.Duration
	counted      map[[2]int]int // (owner, clock) -> samples pushed
	res          *Result
	err          error
	done         bool
}

// New prepares a run.
func New(cfg Config, job Job) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fill()
	switch {
	case job.Model == nil || job.Train == nil || job.Test == nil || job.Speed == nil || job.Policy == nil:
		return nil, fmt.Errorf("%w: Job needs Model, Train, Test, Speed and Policy", ErrConfig)
	case job.Speed.NumWorkers() != cfg.Workers:
		return nil, fmt.Errorf("%w: speed model has %d workers, config %d", ErrConfig, job.Speed.NumWorkers(), cfg.Workers)
	case job.Train.N < cfg.Workers:
		return nil, fmt.Errorf("%w: %d training rows for %d workers", ErrConfig, job.Train.N, cfg.Workers)
	case job.Test.N == 0:
		return nil, fmt.Errorf("%w: empty test set", ErrConfig)
	}
	coord, err := epsp.NewCoordinator(epsp.Config{
		NumWorkers: cfg.Workers, Batch: cfg.Batch, Parallelism: cfg.Parallelism, TickPeriod: cfg.TickPeriod,
	}, job.Policy)
	if err != nil {
		return nil, err
	}
	opt := cfg.Optimizer
	if opt == nil {
		opt = store.SGD{LR: cfg.LR}
	}
	store, err := store.New(store.Config{Optimizer: opt})
	if err != nil {
		return nil, err
	}
	m := job.Model
	n := m.NumParams()
	s := &Sim{cfg: cfg, job: job, coord: coord, store: store, nparm: n, counted: make(map[[2]int]int)}
	for off, k := 0, uint64(0); off < n; off, k = off+cfg.KeyLen, k+1 {
		s.keys = append(s.keys, k)
		s.lens = append(s.lens, min(cfg.KeyLen, n-off))
	}
	init := make([]float32, n)
	m.Init(init, rand.New(rand.NewPCG(cfg.Seed, 0x1417)))
	if err := store.InitValues(s.keys, s.lens, init); err != nil {
		return nil, err
	}
	if cfg.Cost.Enabled() {
		tensors := cfg.Cost.Tensors
		if tensors == nil {
			tensors = model.Tensors(m)
		}
		s.cost = newCostState(&s.q, cfg.Cost, cfg.Network.Latency, cfg.Workers, tensors)
	}
	s.grad = make([]float32, n)
	s.evalParam = make([]float32, n)
	s.pbytes = 4 * n
	ne := job.Test.N
	if cfg.EvalSamples > 0 && cfg.EvalSamples < ne {
		ne = cfg.EvalSamples
	}
	s.evalIdx = make([]int, ne)
	for i := range s.evalIdx {
		s.evalIdx[i] = i
	}
	// Data: a seeded permutation of the training rows, cut into one
	// contiguous shard per worker; each worker walks its shard in a fresh
	// seeded order every epoch.
	perm := rand.New(rand.NewPCG(cfg.Seed, 0xda7a)).Perm(job.Train.N)
	per := job.Train.N / cfg.Workers
	for i := range cfg.Workers {
		wk := &worker{
			id: i, p: cfg.Parallelism, params: make([]float32, n),
			shard: slices.Clone(perm[i*per : (i+1)*per]),
			rng:   rand.New(rand.NewPCG(cfg.Seed, 0x3000+uint64(i))),
			noise: rand.New(rand.NewPCG(cfg.Seed, 0x5000+uint64(i))),
		}
		wk.rng.Shuffle(len(wk.shard), func(a, b int) { wk.shard[a], wk.shard[b] = wk.shard[b], wk.shard[a] })
		s.w = append(s.w, wk)
		s.pvec = append(s.pvec, cfg.Parallelism)
	}
	s.res = &Result{
		Policy:  job.Policy.Name(),
		Model:   m.Name(),
		Workers: make([]WorkerStats, cfg.Workers),
		Target:  cfg.Target,
	}
	return s, nil
}

// Run simulates cfg with job and returns the result.
func Run(cfg Config, job Job) (*Result, error) {
	s, err := New(cfg, job)
	if err != nil {
		return nil, err
	}
	return s.Run()
}

// Run runs the simulation to its end.
func (s *Sim) Run() (*Result, error) {
	for _, w := range s.w {
		s.release(w)
		s.res.Parallelism = append(s.res.Parallelism, ParallelismPoint{Time: 0, Worker: w.id, P: w.p})
	}
	s.q.Schedule(0, s.evaluate)
	if s.cfg.TickPeriod > 0 {
		s.q.Schedule(s.cfg.TickPeriod, s.tick)
	}
	s.q.RunUntil(s.cfg.Duration, func() bool { return s.done || s.err != nil })
	if s.err != nil {
		return nil, s.err
	}
	if !s.done {
		s.evaluate()
	}
	s.finish()
	return s.res, nil
}

func (s *Sim) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// setState switches a worker's state and charges the time spent in the old
// one to busy, blocked or network.
func (s *Sim) setState(w *worker, st wstate) {
	s.charge(w)
	w.state = st
}

func (s *Sim) charge(w *worker) {
	now := s.q.Now()
	d := now - w.stateSince
	w.stateSince = now
	switch {
	case w.computing:
		w.busy += d
	case w.state == wWaiting:
		w.blocked += d
	default:
		w.network += d
	}
}

// ---- data ----

func (s *Sim) drawBatch(w *worker, n int) []int {
	idx := make([]int, n)
	for i := range idx {
		if w.cursor == len(w.shard) {
			w.cursor = 0
			w.rng.Shuffle(len(w.shard), func(a, b int) { w.shard[a], w.shard[b] = w.shard[b], w.shard[a] })
		}
		idx[i] = w.shard[w.cursor]
		w.cursor++
	}
	return idx
}

// ---- worker life cycle ----

// release starts worker w's next clock: the server reads the parameters now
// and the pull response arrives after the network delay.
func (s *Sim) release(w *worker) {
	if w.computing || len(w.queue) > 0 {
		w.releaseDue = true
		return
	}
	w.releaseDue = false
	s.setState(w, wPulling)
	w.clock = s.coord.View().Clock(epsp.WorkerID(w.id))
	w.batch = s.coord.View().Batch(epsp.WorkerID(w.id))
	w.batchIdx = s.drawBatch(w, w.batch)
	w.todo = append(w.todo[:0], span{0, w.batch})
	w.owned = w.batch
	w.ownEnd = w.batch
	w.parts = w.parts[:0]
	w.extraReady = 0
	w.doneIdx = w.doneIdx[:0]
	w.clockStart = s.q.Now()
	s.charge(w)
	w.busyStart = w.busy
	if err := s.store.Pull(s.keys, s.lens, w.params); err != nil {
		s.fail(err)
		return
	}
	w.baseVersion = s.coord.View().Version()
	clock := w.clock
	s.sendPull(w.id, func() {
		if w.state != wPulling || w.clock != clock {
			return
		}
		s.setState(w, wComputing)
		s.nextChunk(w)
	})
}

// nextChunk starts the next chunk of w's own batch, or pushes if the batch
// is done.
func (s *Sim) nextChunk(w *worker) {
	if len(w.todo) == 0 {
		s.pushOwn(w)
		return
	}
	sp := &w.todo[0]
	if sp.lo >= w.ownEnd && s.q.Now() < w.extraReady {
		// the assigned rows are still on the way
		clock := w.clock
		s.q.Schedule(w.extraReady, func() {
			if w.clock == clock && w.state == wComputing && !w.computing {
				s.nextChunk(w)
			}
		})
		return
	}
	hi := min(sp.hi, sp.lo+w.p*s.cfg.Chunk)
	w.segTask = nil
	w.segLo, w.segHi = sp.lo, hi
	sp.lo = hi
	if sp.lo == sp.hi {
		w.todo = w.todo[1:]
	}
	s.startSegment(w, s.noisy(w, s.work(w.segHi-w.segLo, w.p)))
}

// roundWork is the compute time, in samples at the worker's rate R(p), of
// n samples computed by p goroutines that each claim chunk samples at a
// time and compute at R(p)/p (the live runtime's ps job): the n samples
// make full rounds of p·chunk samples, each lasting chunk·p/R, and a last
// partial round of r samples whose longest claim, min(chunk, r), takes
// min(chunk, r)·p/R while the other goroutines idle. So
//
//	roundWork(n) = ⌊n/(p·c)⌋·p·c + min(c, n mod p·c)·p
//
// which is n when n is a multiple of p·c and more otherwise: a tail of
// claimed chunks cannot use the whole worker.
func roundWork(n, p, chunk int) float64 {
	full := n / (p * chunk) * p * chunk
	work := full
	if r := n - full; r > 0 {
		work += min(chunk, r) * p
	}
	return float64(work)
}

// work is the speed model's samples of n trained samples computed by p
// goroutines: roundWork times Cost.ComputeScale.
func (s *Sim) work(n, p int) float64 {
	w := roundWork(n, p, s.cfg.Chunk)
	if c := s.cfg.Cost.ComputeScale; c > 0 {
		w *= c
	}
	return w
}

// sendPull delivers worker w's pull response: after Network.Delay of the
// parameters' bytes, or through the cost model's links.
func (s *Sim) sendPull(w int, done func()) {
	if s.cost != nil {
		s.cost.pull(w, done)
		return
	}
	s.q.After(s.cfg.Network.Delay(s.pbytes), done)
}

// sendPush delivers worker w's push to the server (and, with the cost
// model, through its apply): after Network.Delay of the parameters'
// bytes, or through the cost model's links and apply queues.
func (s *Sim) sendPush(w int, done func()) {
	if s.cost != nil {
		s.cost.push(w, done)
		return
	}
	s.q.After(s.cfg.Network.Delay(s.pbytes), done)
}

// noisy multiplies a round's work by w's next lognormal factor of mean 1
// and CV c = Config.ComputeNoise: exp(σZ − σ²/2) with σ² = ln(1 + c²) and
// Z standard normal. With c = 0 it returns work and draws nothing.
func (s *Sim) noisy(w *worker, work float64) float64 {
	c := s.cfg.ComputeNoise
	if c == 0 {
		return work
	}
	sigma := math.Sqrt(math.Log1p(c * c))
	return work * math.Exp(sigma*w.noise.NormFloat64()-sigma*sigma/2)
}

func (s *Sim) startSegment(w *worker, work float64) {
	s.charge(w)
	w.computing = true
	w.segStart = s.q.Now()
	w.segWork = work
	w.segGen++
	gen := w.segGen
	end := s.finishTime(w.id, w.segStart, work)
	if end > s.cfg.Duration+time.Hour {
		return // never finishes within the run
	}
	s.q.Schedule(end, func() {
		if w.segGen != gen {
			return
		}
		s.segmentDone(w)
	})
}

// rateAller is the optional capability of a heterogeneity model to
// account for core contention among the workers of a host
// ([straggler.Hetero] has it).
type rateAller interface {
	RateAll(ps []int, now time.Duration, dst []float64) []float64
}

var _ rateAller = (*straggler.Hetero)(nil)

// rate is worker w's samples/s at t given every worker's parallelism
// (s.pvec): with core contention when the model can tell, else
// Speed.Rate(w, p_w, t).
func (s *Sim) rate(w int, t time.Duration) float64 {
	if ra, ok := s.job.Speed.(rateAller); ok {
		s.rates = ra.RateAll(s.pvec, t, s.rates)
		return s.rates[w]
	}
	return s.job.Speed.Rate(w, s.pvec[w], t)
}

// finishTime integrates the piecewise-constant rate of w (with the
// current parallelism of every worker) from t0 until work samples are
// done.
func (s *Sim) finishTime(w int, t0 time.Duration, work float64) time.Duration {
	t := t0
	for i := 0; ; i++ {
		r := s.rate(w, t)
		nc := s.job.Speed.NextChange(w, t)
		if r > 0 {
			need := work / r * float64(time.Second)
			if nc <= t || float64(t)+need <= float64(nc) {
				return t + time.Duration(math.Ceil(need))
			}
			work -= r * (nc - t).Seconds()
		} else if nc <= t {
			return math.MaxInt64
		}
		t = nc
		if t > s.cfg.Duration+time.Hour || i > 1_000_000 {
			return math.MaxInt64
		}
	}
}

// workDone integrates w's rate over [t0, t1) with the current parallelism.
func (s *Sim) workDone(w int, t0, t1 time.Duration) float64 {
	var work float64
	t := t0
	for t < t1 {
		r := s.rate(w, t)
		nc := s.job.Speed.NextChange(w, t)
		if nc <= t || nc > t1 {
			nc = t1
		}
		work += r * (nc - t).Seconds()
		t = nc
	}
	return work
}

func (s *Sim) segmentDone(w *worker) {
	s.charge(w)
	w.computing = false
	s.lastActivity = s.q.Now()
	if t := w.segTask; t != nil {
		s.pushTransfer(w, t)
		return
	}
	w.doneIdx = append(w.doneIdx, w.batchIdx[w.segLo:w.segHi]...)
	w.samples += w.segHi - w.segLo
	last := len(w.todo) == 0
	s.nextChunk(w) // claims the next round, or pushes after the last
	if !last {
		// As in the live runtime, the report counts the round just
		// claimed as claimed, not done.
		s.step(epsp.Event{Kind: epsp.EventProgress, Progress: s.progress(w)})
	}
}

func (s *Sim) progress(w *worker) epsp.ProgressReport {
	done := len(w.doneIdx)
	claimed := done
	if w.computing && w.segTask == nil {
		claimed += w.segHi - w.segLo
	}
	assigned := claimed
	for _, sp := range w.todo {
		assigned += sp.hi - sp.lo
	}
	r := epsp.ProgressReport{
		Worker: epsp.WorkerID(w.id), Clock: w.clock, Done: done, Claimed: claimed, Assigned: assigned,
		Parallelism: w.p, Elapsed: s.q.Now() - w.clockStart,
	}
	if extra := len(w.batchIdx) - w.ownEnd; extra > 0 {
		// own rows come first: what is past ownEnd is assigned work
		r.Extra = extra
		r.ExtraDone = max(done-w.ownEnd, 0)
		r.Done = min(done, w.ownEnd)
		r.Claimed = min(claimed, w.ownEnd)
		r.Assigned = w.ownEnd
	}
	return r
}

// pushOwn computes the gradient of w's processed rows at its pulled
// parameters and sends it.
func (s *Sim) pushOwn(w *worker) {
	s.setState(w, wPushing)
	n := len(w.doneIdx)
	clock := w.clock
	if n == 0 { // everything was given away: only the clock event
		s.q.After(s.cfg.Network.Delay(0), func() { s.clocked(w, clock) })
		s.runQueue(w)
		return
	}
	grad := make([]float32, s.nparm)
	s.job.Model.LossGrad(w.params, s.job.Train, w.doneIdx, grad)
	s.charge(w)
	push := epsp.Push{
		Worker: epsp.WorkerID(w.id), Owner: epsp.WorkerID(w.id), Clock: clock,
		BaseVersion: w.baseVersion, Samples: n, BatchSamples: w.batch, Busy: w.busy - w.busyStart,
	}
	if len(w.parts) > 0 {
		push.Parts = append([]epsp.PushPart{{Owner: push.Owner, Clock: clock, Samples: n - (len(w.batchIdx) - w.ownEnd)}}, w.parts...)
		push.BatchSamples += len(w.batchIdx) - w.ownEnd
		if push.Parts[0].Samples == 0 {
			push.Parts = push.Parts[1:]
		}
	}
	s.sendPush(w.id, func() {
		s.apply(push, grad)
		if s.err == nil {
			s.clocked(w, clock)
		}
	})
	s.runQueue(w) // transfers accepted while computing run now
}

func (s *Sim) clocked(w *worker, clock int) {
	s.setState(w, wWaiting)
	w.clocks++
	s.res.ClockTime.Add(s.q.Now() - w.clockStart)
	s.lastActivity = s.q.Now()
	s.step(epsp.Event{Kind: epsp.EventClock, Worker: epsp.WorkerID(w.id), Clock: clock})
	if s.err == nil && w.state == wWaiting && !w.computing {
		s.runQueue(w)
	}
}

// apply admits a push and carries out the decision on the store.
func (s *Sim) apply(p epsp.Push, grad []float32) {
	parts := p.Parts
	if len(parts) == 0 {
		parts = []epsp.PushPart{{Owner: p.Owner, Clock: p.Clock, Samples: p.Samples}}
	}
	for _, x := range parts {
		batch := p.BatchSamples
		if len(p.Parts) > 0 {
			batch = s.w[x.Owner].batch // assignments are within one clock: the owner's batch now
		}
		key := [2]int{int(x.Owner), x.Clock}
		s.counted[key] += x.Samples
		if c := s.counted[key]; c > batch {
			s.fail(fmt.Errorf("%w: %d samples pushed for worker %d clock %d, batch %d", ErrInvariant, c, x.Owner, x.Clock, batch))
			return
		} else if c == batch {
			delete(s.counted, key)
		}
	}
	d, err := s.coord.Admit(s.q.Now(), p)
	if err != nil {
		s.fail(err)
		return
	}
	switch d.Action {
	case epsp.ApplyNow:
		scale := d.EffectiveScale() * float64(p.Samples) / float64(p.BatchSamples)
		err = s.store.Apply(s.keys, s.lens, grad, float32(scale))
	case epsp.Accumulate:
		err = s.store.Accumulate(d.Clock, s.keys, s.lens, grad, float64(p.Samples))
	case epsp.Drop:
		s.res.Dropped++
	}
	if err != nil {
		s.fail(err)
	}
}

// step feeds an event to the coordinator and carries out its orders.
func (s *Sim) step(e epsp.Event) {
	out, err := s.coord.Step(s.q.Now(), e)
	if err != nil {
		s.fail(err)
		return
	}
	s.carryOut(out)
}

func (s *Sim) carryOut(out epsp.Output) {
	now := s.q.Now()
	for _, f := range out.Flush {
		scale := f.Scale
		if scale == 0 {
			scale = 1
		}
		if _, err := s.store.Flush(f.Clock, float32(scale)); err != nil {
			s.fail(err) // a refused flush (a non-finite step) ends the run, as a refused push does
			return
		}
	}
	for _, o := range out.SetParallelism {
		s.setParallelism(s.w[o.Worker], o.P)
	}
	// SetBatch is read from the coordinator's view at the next release.
	for _, t := range out.Transfers {
		t := t
		s.res.Transfers = append(s.res.Transfers, TransferRecord{Ordered: now, ID: t.ID, From: int(t.From), To: int(t.To), Clock: t.Clock, Lo: t.Lo, Hi: t.Hi})
		s.q.After(s.cfg.Network.Latency, func() { s.offer(t) })
	}
	for _, id := range out.Release {
		w := s.w[id]
		s.release(w)
	}
	s.assign(out.Assign)
}

// sampleBytes is what one moved sample costs on the network.
func (s *Sim) sampleBytes() int {
	switch {
	case s.cfg.SampleBytes < 0:
		return 0
	case s.cfg.SampleBytes > 0:
		return s.cfg.SampleBytes
	}
	return 4 * s.job.Train.D
}

// assign carries out release-time assignments on workers just released
// (their pulls are in flight, nothing is claimed): a giver's batch ends at
// the first assigned position, a taker's batch grows by the assigned rows,
// which arrive over the network while it computes its own.
func (s *Sim) assign(as []epsp.Assignment) {
	now := s.q.Now()
	for _, a := range as {
		g, t := s.w[a.From], s.w[a.To]
		if g.state != wPulling || t.state != wPulling || g.clock != a.Clock || t.clock != a.Clock {
			s.fail(fmt.Errorf("%w: assignment %+v to workers not just released", ErrInvariant, a))
			return
		}
		n := a.Hi - a.Lo
		g.todo[0].hi = min(g.todo[0].hi, a.Lo)
		g.owned = min(g.owned, a.Lo)
		g.ownEnd = g.owned
		g.given += n
		lo := len(t.batchIdx)
		t.batchIdx = append(t.batchIdx, g.batchIdx[a.Lo:a.Hi]...)
		t.todo = append(t.todo, span{lo, lo + n})
		t.parts = append(t.parts, epsp.PushPart{Owner: a.From, Clock: a.Clock, Samples: n})
		t.taken += n
		if due := now + s.cfg.Network.Delay(n*s.sampleBytes()); due > t.extraReady {
			t.extraReady = due
		}
	}
	for _, a := range as {
		if g := s.w[a.From]; len(g.todo) > 0 && g.todo[0].lo >= g.todo[0].hi {
			g.todo = g.todo[1:]
		}
	}
}

// setParallelism changes w's goroutines. Every segment in progress on w's
// host is re-planned: its work done so far is integrated with the old
// parallelism, the rest with the new one (co-located workers share the
// host's cores, so their rates may change too).
func (s *Sim) setParallelism(w *worker, p int) {
	if p == w.p {
		return
	}
	now := s.q.Now()
	host := s.job.Speed.Host(w.id)
	var replan []*worker
	var left []float64
	for _, o := range s.w {
		if o.computing && s.job.Speed.Host(o.id) == host {
			replan = append(replan, o)
			left = append(left, max(o.segWork-s.workDone(o.id, o.segStart, now), 0))
		}
	}
	w.p = p
	s.pvec[w.id] = p
	for i, o := range replan {
		s.startSegment(o, left[i])
	}
	s.res.Parallelism = append(s.res.Parallelism, ParallelismPoint{Time: now, Worker: w.id, P: p})
}

// offer delivers a transfer order to its giver, who accepts the part of
// [Lo, Hi) it has not started, but only if the order is the tail of what
// it still owns (Hi == owned): a multi-taker split is ordered tail-first,
// so its pieces arrive in that order, and a piece below one that was
// refused or trimmed is refused too. The giver's own part thus stays one
// prefix [0, owned).
func (s *Sim) offer(o epsp.TransferOrder) {
	g := s.w[o.From]
	res := epsp.TransferResult{ID: o.ID}
	if g.clock == o.Clock && (g.state == wPulling || g.state == wComputing) && o.Hi == g.owned {
		// Not-started positions in [Lo, Hi): take the last contiguous piece.
		for i := len(g.todo) - 1; i >= 0; i-- {
			lo, hi := max(g.todo[i].lo, o.Lo), min(g.todo[i].hi, o.Hi)
			if lo < hi {
				res.Accepted, res.Lo, res.Hi = true, lo, hi
				break
			}
		}
	}
	var tk *task
	if res.Accepted {
		var todo []span
		for _, sp := range g.todo {
			if sp.lo < res.Lo {
				todo = append(todo, span{sp.lo, min(sp.hi, res.Lo)})
			}
			if sp.hi > res.Hi {
				todo = append(todo, span{max(sp.lo, res.Hi), sp.hi})
			}
		}
		g.todo = todo
		g.owned = res.Lo
		g.given += res.Hi - res.Lo
		tk = &task{transfer: true, id: o.ID, owner: g.id, clock: o.Clock, batch: g.batch,
			idx: slices.Clone(g.batchIdx[res.Lo:res.Hi]), lo: res.Lo, hi: res.Hi}
	}
	s.q.After(s.cfg.Network.Latency, func() {
		// looked up now: orders placed meanwhile may have moved the slice
		if rec := s.transferRecord(o.ID); rec != nil {
			rec.Answered, rec.Accepted, rec.Lo, rec.Hi = s.q.Now(), res.Accepted, res.Lo, res.Hi
		}
		s.step(epsp.Event{Kind: epsp.EventTransferResult, Transfer: res})
		if s.err != nil || tk == nil {
			return
		}
		taker := s.w[o.To]
		s.q.After(s.cfg.Network.Delay(len(tk.idx)*s.sampleBytes()), func() {
			taker.queue = append(taker.queue, tk)
			s.runQueue(taker)
		})
	})
	// If the giver has nothing left now, its batch completes when its
	// current chunk does (nextChunk pushes on an empty todo).
}

func (s *Sim) transferRecord(id uint64) *TransferRecord {
	for i := len(s.res.Transfers) - 1; i >= 0; i-- {
		if s.res.Transfers[i].ID == id {
			return &s.res.Transfers[i]
		}
	}
	return nil
}

// runQueue starts the next accepted transfer if w is not computing its own
// batch; when the queue is empty it carries out a release that came while
// w was busy.
func (s *Sim) runQueue(w *worker) {
	if w.computing || w.state == wComputing || w.state == wPulling {
		return
	}
	if len(w.queue) == 0 {
		if w.releaseDue {
			s.release(w)
		}
		return
	}
	t := w.queue[0]
	w.queue = w.queue[1:]
	w.segTask = t
	s.startSegment(w, s.noisy(w, s.work(len(t.idx), w.p)))
}

// pushTransfer pushes the gradient of a transferred range, computed with
// the taker's cached parameters, tagged with the owner's clock.
func (s *Sim) pushTransfer(w *worker, t *task) {
	w.segTask = nil
	w.taken += len(t.idx)
	w.samples += len(t.idx)
	grad := make([]float32, s.nparm)
	s.job.Model.LossGrad(w.params, s.job.Train, t.idx, grad)
	push := epsp.Push{
		Worker: epsp.WorkerID(w.id), Owner: epsp.WorkerID(t.owner), Clock: t.clock,
		BaseVersion: w.baseVersion, Samples: len(t.idx), BatchSamples: t.batch,
	}
	s.sendPush(w.id, func() {
		s.apply(push, grad)
		if s.err != nil {
			return
		}
		if rec := s.transferRecord(t.id); rec != nil {
			rec.Done = s.q.Now()
		}
		s.step(epsp.Event{Kind: epsp.EventTransferDone, Transfer: epsp.TransferResult{ID: t.id, Accepted: true, Lo: t.lo, Hi: t.hi}})
	})
	// The taker goes on with its queue (or its pending release) at once.
	s.runQueue(w)
}

// tick sends the periodic control tick.
func (s *Sim) tick() {
	s.step(epsp.Event{Kind: epsp.EventTick})
	if s.q.Now()-s.lastActivity > s.cfg.StallTimeout {
		s.fail(fmt.Errorf("%w: no worker progress since %v under %s", ErrStalled, s.lastActivity, s.job.Policy.Name()))
		return
	}
	s.q.After(s.cfg.TickPeriod, s.tick)
}

// evaluate records loss and accuracy of the server's current model.
func (s *Sim) evaluate() {
	now := s.q.Now()
	if err := s.store.Pull(s.keys, s.lens, s.evalParam); err != nil {
		s.fail(err)
		return
	}
	loss, acc := s.job.Model.Evaluate(s.evalParam, s.job.Test, s.evalIdx)
	v := s.coord.View()
	s.res.Evals = append(s.res.Evals, EvalPoint{Time: now, Loss: loss, Accuracy: acc, Version: v.Version(), MinClock: v.MinClock(), MaxClock: v.MaxClock()})
	if s.job.OnEval != nil {
		s.job.OnEval(s.res.Evals[len(s.res.Evals)-1])
	}
	if s.cfg.Target > 0 && !s.res.Crossed && acc >= s.cfg.Target {
		s.res.Crossed = true
		s.res.FirstCrossing = now
	}
	if s.cfg.Target > 0 && !s.res.Reached && len(s.res.Evals) >= s.cfg.TargetWindow {
		var sum float64
		for _, e := range s.res.Evals[len(s.res.Evals)-s.cfg.TargetWindow:] {
			sum += e.Accuracy
		}
		if sum/float64(s.cfg.TargetWindow) >= s.cfg.Target {
			s.res.Reached = true
			s.res.TimeToTarget = now
			if s.cfg.StopAtTarget {
				s.done = true
				return
			}
		}
	}
	if next := now + s.cfg.EvalEvery; next <= s.cfg.Duration {
		s.q.Schedule(next, s.evaluate)
	}
}

func (s *Sim) finish() {
	r := s.res
	r.End = s.q.Now()
	for i, w := range s.w {
		s.charge(w)
		r.Workers[i] = WorkerStats{
			Worker: i, Busy: w.busy, Blocked: w.blocked, Network: w.network,
			Clocks: w.clocks, Samples: w.samples, Given: w.given, Taken: w.taken, FinalP: w.p,
		}
	}
	r.Stats = s.coord.Stats()
	if n := len(r.Evals); n > 0 {
		r.FinalAccuracy = r.Evals[n-1].Accuracy
		r.FinalLoss = r.Evals[n-1].Loss
	}
}
