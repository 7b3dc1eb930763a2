package epsp

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Errors returned by the Coordinator. Check them with errors.Is.
var (
	ErrBadConfig    = errors.New("epsp: bad config")
	ErrBadEvent     = errors.New("epsp: bad event")
	ErrBadPush      = errors.New("epsp: bad push")
	ErrPolicyOutput = errors.New("epsp: invalid policy output")
	// ErrNotOrdered: a push of another worker's samples that no order
	// covers — no accepted transfer or hand-over of that owner's clock to
	// the pusher with room for them, or no assignment that still owes
	// them (returned wrapped together with ErrBadPush).
	ErrNotOrdered = errors.New("epsp: push of another worker's samples not ordered")
	// ErrStalled: the policy leaves every worker that still trains
	// waiting for a release no event can bring (returned wrapped together
	// with ErrPolicyOutput, naming the policy).
	ErrStalled = errors.New("epsp: policy stalled every worker")
	// ErrJoinRefused: an EventJoin the coordinator cannot admit (the
	// policy does not accept joins, the worker is a member already, or it
	// still owes transferred work); the message says which.
	ErrJoinRefused = errors.New("epsp: join refused")
	// ErrRejoinTooSoon: a worker that left mid-run asked to join again
	// before Config.RejoinAfter had passed; the message says how long is left.
	ErrRejoinTooSoon = errors.New("epsp: rejoin before the cooldown")
)

// Config describes the cluster a Coordinator tracks.
type Config struct {
	// NumWorkers is the number of workers (> 0).
	NumWorkers int
	// Batch is each worker's initial batch size in samples (> 0).
	Batch int
	// Parallelism is each worker's initial number of compute goroutines;
	// zero means 1.
	Parallelism int
	// TickPeriod is how often the runtime sends EventTick; zero means never.
	TickPeriod time.Duration
	// StallAfter is how long every worker still training may wait for a
	// release, with no transfer outstanding, before Step reports
	// ErrStalled. Without ticks no event can end such a wait, so the stall
	// is reported at once; with ticks zero means max(100·TickPeriod, 2 s)
	// (ours: far beyond any policy's control period).
	StallAfter time.Duration

	// Elastic membership (see the package doc, "Membership"); it needs a
	// policy that accepts joins (Elastic).
	//
	// MaxWorkers is the number of worker slots: ids NumWorkers ..
	// MaxWorkers-1 start outside the run and may join it (EventJoin).
	// Zero means NumWorkers (no new ids; a departed worker may rejoin).
	MaxWorkers int
	// MinWorkers pauses the run while fewer workers are members (and none
	// has finished its schedule, see Event.Quit): releases are held, so no
	// worker starts a clock, until joins bring the count back. Flushes of
	// clocks every member has finished still happen. Zero means none.
	MinWorkers int
	// RejoinAfter is the cooldown of a worker that departed mid-run
	// (Event.Quit: it quit or was lost): it may join again only
	// RejoinAfter after its leave; earlier joins fail with
	// ErrRejoinTooSoon. Zero means at once.
	RejoinAfter time.Duration
}

// Slots is the number of worker slots: MaxWorkers, or NumWorkers.
func (c *Config) Slots() int { return max(c.MaxWorkers, c.NumWorkers) }

// elastic reports whether the config asks for elastic membership.
func (c *Config) elastic() bool {
	return c.MaxWorkers > c.NumWorkers || c.MinWorkers > 0 || c.RejoinAfter > 0
}

// DefaultConfig returns a config for 4 workers with batch 32, one goroutine
// each and a 100 ms control tick.
func DefaultConfig() Config {
	return Config{NumWorkers: 4, Batch: 32, Parallelism: 1, TickPeriod: 100 * time.Millisecond}
}

// Validate reports whether the config is usable.
func (c *Config) Validate() error {
	switch {
	case c.NumWorkers <= 0:
		return fmt.Errorf("%w: NumWorkers = %d, want > 0", ErrBadConfig, c.NumWorkers)
	case c.Batch <= 0:
		return fmt.Errorf("%w: Batch = %d, want > 0", ErrBadConfig, c.Batch)
	case c.Parallelism < 0:
		return fmt.Errorf("%w: Parallelism = %d, want >= 0", ErrBadConfig, c.Parallelism)
	case c.TickPeriod < 0:
		return fmt.Errorf("%w: TickPeriod = %v, want >= 0", ErrBadConfig, c.TickPeriod)
	case c.StallAfter < 0:
		return fmt.Errorf("%w: StallAfter = %v, want >= 0", ErrBadConfig, c.StallAfter)
	case c.MaxWorkers != 0 && c.MaxWorkers < c.NumWorkers:
		return fmt.Errorf("%w: MaxWorkers = %d below NumWorkers = %d", ErrBadConfig, c.MaxWorkers, c.NumWorkers)
	case c.MaxWorkers > 1<<20:
		return fmt.Errorf("%w: MaxWorkers = %d, want <= 2^20", ErrBadConfig, c.MaxWorkers)
	case c.MinWorkers < 0 || c.MinWorkers > c.NumWorkers:
		return fmt.Errorf("%w: MinWorkers = %d, want 0..NumWorkers (%d): the run would start paused", ErrBadConfig, c.MinWorkers, c.NumWorkers)
	case c.RejoinAfter < 0:
		return fmt.Errorf("%w: RejoinAfter = %v, want >= 0", ErrBadConfig, c.RejoinAfter)
	}
	return nil
}

// Stats counts what a Coordinator has decided so far.
type Stats struct {
	Applied, Accumulated, Dropped int // pushes by decision
	Flushes                       int
	Releases                      int
	TransfersOrdered              int
	TransfersAccepted             int
	TransfersRefused              int
	TransfersDone                 int
	SamplesTransferred            int // samples in accepted transfers
	ParallelismChanges            int
	BatchChanges                  int
	Assignments                   int // assignments at release (Output.Assign)
	SamplesAssigned               int // samples they moved
	HandOvers                     int // hand-overs of departing workers' samples (HandOver)
	SamplesHandedOver             int // samples they moved
	Left                          int // workers that left (EventLeave)
	Joined                        int // workers admitted mid-run (EventJoin)
	// Retargeted counts ranges a departing taker still owed that
	// Retarget gave to another worker (accepted transfers and hand-overs
	// not pushed, assigned pieces not pushed); SamplesRetargeted the
	// samples in them. Orders not yet answered that it re-targets are
	// not counted (their ranges are the giver's until it accepts).
	Retargeted        int
	SamplesRetargeted int
	// SamplesAbandoned counts samples a departing taker owed that nobody
	// computes: what Abandon gave up, and assigned samples Retarget could
	// not move (the taker pushed part of one giver's pieces, so the rest
	// cannot be told apart). Lost, never counted twice.
	SamplesAbandoned int
	// Revoked counts own pushes taken back (Revoke); Accumulated and
	// Staleness still count them.
	Revoked int
	// MaxLead is the largest Clock(w)-MinClock() of a worker at the moment
	// it was released: how far ahead of the slowest any worker ran.
	MaxLead int
	// Staleness[d] counts admitted (not dropped) pushes whose BaseVersion
	// was d updates behind Version() when they were admitted.
	Staleness []int
}

// ownPush is what Revoke needs of an admitted push of own samples.
type ownPush struct {
	clock, buf int // the push's clock and the buffer it went to
	action     PushAction
	samples    int
	parts      bool // it carried Parts
	valid      bool
}

type transferState struct {
	order    TransferOrder // order.To is the current taker (see Retarget)
	accepted bool
	handOver bool // registered by HandOver, not ordered by the policy
	pushed   bool // the taker's push of the range was admitted
	// assigned: an assigned piece whose taker departed, re-ordered by
	// Retarget (the policy never ordered it, so it does not see its done)
	assigned bool
	// orderedTo is the taker the policy ordered, which the policy's
	// events name even after Retarget moved the range
	orderedTo WorkerID
	// batch is the giver's batch size in the order's clock
	batch int
	// abandoned: an order to a taker given up (Abandon) before its giver
	// answered; an acceptance ends it at once
	abandoned bool
}

// Coordinator is the pure core of the coordinator role: it keeps the
// cluster's synchronization state (the View), feeds events to a Policy and
// records the policy's orders. It has no goroutines, locks or clocks; a
// runtime (ps's live coordinator, or the ps/sim simulator) drives it from one
// goroutine at a time and carries out the returned orders.
//
// The runtime contract:
//   - a worker pulls, remembering Version() as its push's BaseVersion;
//   - it calls Admit for each push and applies the push per the decision;
//   - once its pushes of clock c are stored it sends EventClock{Worker,
//     Clock: c} and waits until an Output releases it;
//   - for every Output, Flush orders are carried out on all servers before
//     Release orders are delivered;
//   - a TransferOrder goes to its giver, whose answer is EventTransferResult;
//     if accepted, the taker computes the range and pushes it (Owner = the
//     giver) in one push, then the runtime sends EventTransferDone (not
//     before: a done with no push admitted is ErrBadEvent); a
//     push of another worker's samples that no accepted transfer (or
//     hand-over, or assignment) covers is refused (ErrNotOrdered);
//   - a runtime that loses a worker mid-clock may hand its unprocessed
//     samples to another worker with HandOver, which returns the order to
//     send; the taker pushes the range like a transfer's, and the lost
//     worker's EventLeave ends the hand-over; what the lost worker owed as
//     a taker it gives to survivors with Retarget (the orders to send)
//     and gives up with Abandon what none can take, and it reports done
//     for it the ranges it pushed;
//   - an Assignment rides on the releases of its giver and taker: the giver
//     computes its batch without the assigned tail, the taker computes its
//     own batch and then the assigned samples and pushes them all in one
//     push whose Parts name each owner, before its EventClock (a taker that
//     clocks owing assigned samples is refused with ErrBadEvent).
type Coordinator struct {
	cfg    Config
	policy Policy

	clock    []int
	waiting  []bool
	left     []bool
	progress []ProgressReport
	batch    []int
	par      []int
	version  uint64

	transfers map[uint64]*transferState
	pending   map[int]int // clock -> transfers not yet done or refused
	nextID    uint64
	// owed counts assigned samples not yet pushed: (from, to, clock) ->
	// samples. A taker may not clock a clock it still owes samples of.
	owed map[[3]int]int
	// pieces holds the ranges behind owed: (from, to, clock) -> the
	// assigned [lo, hi) pieces, for Retarget.
	pieces map[[3]int][][2]int
	// kept is the end of the prefix [0, kept) of its current clock's batch
	// a worker still computes itself: the lowest start of a range it gave
	// away in that clock (an assignment, an accepted transfer, a
	// hand-over), math.MaxInt if none. ownPushed is 1 + the last clock
	// whose own samples the worker pushed (an admitted push, dropped or
	// not).
	kept      []int
	ownPushed []int
	// lastOwn is each worker's last admitted push holding its own
	// samples, for Revoke
	lastOwn []ownPush

	stats Stats

	buffers map[int]int // accumulated pushes per buffer not yet flushed

	// membership: a slot is a member when joined and not left
	joined   []bool          // the slot has been a member
	quit     []bool          // its last leave was mid-run (Event.Quit)
	leftAt   []time.Duration // when it left
	held     []bool          // a release held by the pause (MinWorkers)
	finished bool            // some worker left having finished its schedule

	stalled    bool          // every worker still training waits
	stallSince time.Duration // since when
}

// NewCoordinator returns a coordinator for cfg that decides with p.
func NewCoordinator(cfg Config, p Policy) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("%w: nil policy", ErrBadConfig)
	}
	if cfg.Parallelism == 0 {
		cfg.Parallelism = 1
	}
	if el, ok := p.(Elastic); cfg.elastic() && (!ok || !el.AcceptsJoins()) {
		return nil, fmt.Errorf("%w: policy %s does not accept joins (epsp.Elastic: %s), so MaxWorkers, MinWorkers and RejoinAfter cannot be used with it", ErrBadConfig, p.Name(), whyNoJoins)
	}
	n := cfg.Slots()
	c := &Coordinator{
		cfg:       cfg,
		policy:    p,
		clock:     make([]int, n),
		waiting:   make([]bool, n),
		left:      make([]bool, n),
		progress:  make([]ProgressReport, n),
		batch:     make([]int, n),
		par:       make([]int, n),
		transfers: make(map[uint64]*transferState),
		pending:   make(map[int]int),
		owed:      make(map[[3]int]int),
		pieces:    make(map[[3]int][][2]int),
		buffers:   make(map[int]int),
		joined:    make([]bool, n),
		quit:      make([]bool, n),
		leftAt:    make([]time.Duration, n),
		held:      make([]bool, n),
		kept:      make([]int, n),
		ownPushed: make([]int, n),
		lastOwn:   make([]ownPush, n),
	}
	for w := range n {
		c.kept[w] = math.MaxInt
		c.batch[w] = cfg.Batch
		c.par[w] = cfg.Parallelism
		c.progress[w] = ProgressReport{Worker: WorkerID(w), Assigned: cfg.Batch, Parallelism: cfg.Parallelism}
		c.joined[w] = w < cfg.NumWorkers
		c.left[w] = w >= cfg.NumWorkers // a free slot is outside the run
	}
	return c, nil
}

// Config returns the coordinator's config.
func (c *Coordinator) Config() Config { return c.cfg }

// Policy returns the policy the coordinator decides with.
func (c *Coordinator) Policy() Policy { return c.policy }

// View returns the read-only state the policy sees. It stays valid and
// reflects later changes.
func (c *Coordinator) View() View { return coordView{c} }

// Stats returns a copy of the counters.
func (c *Coordinator) Stats() Stats {
	s := c.stats
	s.Staleness = append([]int(nil), c.stats.Staleness...)
	return s
}

// Admit asks the policy how push p is applied. A push naming an unknown
// worker, a version from the future or an impossible sample count is
// refused with ErrBadPush and changes nothing.
//
// A worker pushes its own samples, and another worker's only when an
// order covers them (else ErrBadPush and ErrNotOrdered): a plain push
// (no Parts) with Owner ≠ Worker needs an accepted transfer or a hand-over
// of Owner's clock Clock to Worker, not yet pushed, whose range holds at
// least Samples samples and ends within BatchSamples; it uses that order
// up (one push per order: a second push of the range is refused, as is a
// push after EventTransferDone). The parts of other owners in a push with
// Parts must be owed to the pusher by assignments (Output.Assign), and
// such a push is the pusher's own (Owner = Worker). A worker whose samples
// of a clock have been handed over may not push them itself.
func (c *Coordinator) Admit(now time.Duration, p Push) (PushDecision, error) {
	if err := c.checkWorker(p.Worker); err != nil {
		return PushDecision{}, fmt.Errorf("%w: %v", ErrBadPush, err)
	}
	if err := c.checkWorker(p.Owner); err != nil {
		return PushDecision{}, fmt.Errorf("%w: owner: %v", ErrBadPush, err)
	}
	switch {
	case p.BaseVersion > c.version:
		return PushDecision{}, fmt.Errorf("%w: base version %d is ahead of version %d", ErrBadPush, p.BaseVersion, c.version)
	case p.Samples <= 0 || p.BatchSamples < p.Samples:
		return PushDecision{}, fmt.Errorf("%w: samples %d of batch %d", ErrBadPush, p.Samples, p.BatchSamples)
	case p.Clock < 0:
		return PushDecision{}, fmt.Errorf("%w: clock %d", ErrBadPush, p.Clock)
	case p.Worker == p.Owner && c.left[p.Worker]:
		return PushDecision{}, fmt.Errorf("%w: worker %d pushed its own batch after leaving", ErrBadPush, p.Worker)
	case p.Busy < 0:
		return PushDecision{}, fmt.Errorf("%w: busy time %v", ErrBadPush, p.Busy)
	}
	tid, err := c.checkOwners(p)
	if err != nil {
		return PushDecision{}, err
	}
	d := c.policy.Admit(now, c.View(), p)
	name := c.policy.Name()
	switch d.Action {
	case ApplyNow:
		if !validScale(d.Scale) {
			return PushDecision{}, fmt.Errorf("%w: policy %s: PushDecision.Scale %v for worker %d's push of clock %d (want finite, >= 0; 0 means 1)", ErrPolicyOutput, name, d.Scale, p.Worker, p.Clock)
		}
	case Accumulate:
		if d.Clock < 0 {
			return PushDecision{}, fmt.Errorf("%w: policy %s: PushDecision.Clock %d names no buffer (want >= 0)", ErrPolicyOutput, name, d.Clock)
		}
	case Drop:
	default:
		return PushDecision{}, fmt.Errorf("%w: policy %s: unknown push action %v", ErrPolicyOutput, name, d.Action)
	}
	for _, x := range p.Parts {
		if x.Owner != p.Worker {
			k := [3]int{int(x.Owner), int(p.Worker), x.Clock}
			if c.owed[k] -= x.Samples; c.owed[k] == 0 {
				delete(c.owed, k)
				delete(c.pieces, k)
			}
		}
	}
	if tid != 0 {
		c.transfers[tid].pushed = true
	}
	if p.OwnSamples() > 0 {
		c.ownPushed[p.Worker] = max(c.ownPushed[p.Worker], p.Clock+1)
		c.lastOwn[p.Worker] = ownPush{clock: p.Clock, buf: d.Clock, action: d.Action, samples: p.Samples, parts: len(p.Parts) > 0, valid: true}
	}
	if d.Action == Drop {
		c.stats.Dropped++
		return d, nil
	}
	stale := int(c.version - p.BaseVersion)
	for len(c.stats.Staleness) <= stale {
		c.stats.Staleness = append(c.stats.Staleness, 0)
	}
	c.stats.Staleness[stale]++
	if d.Action == ApplyNow {
		c.stats.Applied++
		c.version++
	} else {
		c.stats.Accumulated++
		c.buffers[d.Clock]++
	}
	return d, nil
}

// checkOwners checks that every sample of p that is not the pusher's own
// is covered by an order (see Admit). For a plain push of another owner it
// returns the ID of the transfer or hand-over the push uses up; for a push
// with Parts it checks the parts: they add up to Samples, carry the push's
// clock, and each part of another owner's batch is at most what that
// owner's assignments to the pusher still owe.
func (c *Coordinator) checkOwners(p Push) (uint64, error) {
	if o, ok := c.handOverFrom(p.Worker); ok && o.Clock == p.Clock && p.OwnSamples() > 0 {
		return 0, fmt.Errorf("%w: %w: worker %d pushes its own samples of clock %d, handed over to worker %d (hand-over %d)", ErrBadPush, ErrNotOrdered, p.Worker, p.Clock, o.To, o.ID)
	}
	if len(p.Parts) == 0 {
		if p.Owner == p.Worker {
			return 0, nil
		}
		if id := c.coveringTransfer(p); id != 0 {
			return id, nil
		}
		return 0, fmt.Errorf("%w: %w: worker %d pushes %d samples of worker %d's clock %d (batch %d), and no accepted transfer or hand-over to it not yet pushed covers them", ErrBadPush, ErrNotOrdered, p.Worker, p.Samples, p.Owner, p.Clock, p.BatchSamples)
	}
	if p.Owner != p.Worker {
		return 0, fmt.Errorf("%w: worker %d pushes Parts as worker %d's push (a push with Parts is its pusher's own: Owner = Worker)", ErrBadPush, p.Worker, p.Owner)
	}
	sum := 0
	owed := map[[3]int]int{}
	for _, x := range p.Parts {
		if err := c.checkWorker(x.Owner); err != nil {
			return 0, fmt.Errorf("%w: part owner: %v", ErrBadPush, err)
		}
		if x.Samples <= 0 || x.Clock != p.Clock {
			return 0, fmt.Errorf("%w: part of %d samples of worker %d's clock %d in a push of clock %d", ErrBadPush, x.Samples, x.Owner, x.Clock, p.Clock)
		}
		sum += x.Samples
		if x.Owner != p.Worker {
			k := [3]int{int(x.Owner), int(p.Worker), x.Clock}
			owed[k] += x.Samples
			if owed[k] > c.owed[k] {
				return 0, fmt.Errorf("%w: %w: worker %d pushes %d samples of worker %d's clock %d, %d assigned", ErrBadPush, ErrNotOrdered, p.Worker, owed[k], x.Owner, x.Clock, c.owed[k])
			}
		}
	}
	if sum != p.Samples {
		return 0, fmt.Errorf("%w: parts add up to %d samples, push has %d", ErrBadPush, sum, p.Samples)
	}
	return 0, nil
}

// coveringTransfer returns the ID of the accepted transfer or hand-over,
// not yet pushed, that covers plain push p of another owner: from
// p.Owner to p.Worker in clock p.Clock, with at least p.Samples samples
// and ending within p.BatchSamples; 0 if there is none. Of several it
// picks one of exactly p.Samples samples, else the smallest, then the
// lowest ID.
func (c *Coordinator) coveringTransfer(p Push) uint64 {
	var best *TransferOrder
	for _, t := range c.transfers {
		o := &t.order
		if !t.accepted || t.pushed || o.From != p.Owner || o.To != p.Worker || o.Clock != p.Clock ||
			o.Samples() < p.Samples || o.Hi > p.BatchSamples {
			continue
		}
		if best == nil || coverBetter(*o, *best, p.Samples) {
			best = o
		}
	}
	if best == nil {
		return 0
	}
	return best.ID
}

// coverBetter reports whether order a covers a push of n samples better
// than b: exactly n before larger, then the smaller, then the lower ID.
func coverBetter(a, b TransferOrder, n int) bool {
	if (a.Samples() == n) != (b.Samples() == n) {
		return a.Samples() == n
	}
	if a.Samples() != b.Samples() {
		return a.Samples() < b.Samples()
	}
	return a.ID < b.ID
}

// Step feeds one event to the policy and returns its orders, after
// recording them: released workers stop waiting, flushes count as updates,
// parallelism and batch orders change the view, transfers get IDs and are
// tracked until done or refused. Releases of workers that are not waiting
// or have left (or duplicates) are removed from the returned Output.
//
// Every order is checked before anything is applied (ErrPolicyOutput, the
// error naming the policy and the field): parallelism and batch sizes
// positive, transfers of unclaimed ranges of a computing worker, flushes
// of clocks that exist — a clock some worker has reached, or a buffer a
// push accumulated into — each at most once, with a finite scale >= 0,
// releases of workers that exist. A policy that leaves
// every worker still training waiting is reported with ErrStalled (see
// Config.StallAfter).
//
// An event that contradicts the state (a worker clocking twice, a result
// for an unknown transfer) is refused with ErrBadEvent and changes nothing.
// A progress report for a clock the worker has already left is ignored.
func (c *Coordinator) Step(now time.Duration, e Event) (Output, error) {
	switch e.Kind {
	case EventClock:
		if err := c.checkWorker(e.Worker); err != nil {
			return Output{}, fmt.Errorf("%w: clock: %v", ErrBadEvent, err)
		}
		w := e.Worker
		if c.left[w] {
			return Output{}, fmt.Errorf("%w: worker %d clocked after leaving", ErrBadEvent, w)
		}
		if c.waiting[w] {
			return Output{}, fmt.Errorf("%w: worker %d clocked again while waiting at clock %d", ErrBadEvent, w, c.clock[w])
		}
		if e.Clock != c.clock[w] {
			return Output{}, fmt.Errorf("%w: worker %d finished clock %d, but is at clock %d", ErrBadEvent, w, e.Clock, c.clock[w])
		}
		for k, n := range c.owed {
			if k[1] == int(w) && k[2] == e.Clock {
				return Output{}, fmt.Errorf("%w: worker %d finished clock %d owing %d assigned samples of worker %d", ErrBadEvent, w, e.Clock, n, k[0])
			}
		}
		if o, ok := c.handOverFrom(w); ok {
			return Output{}, fmt.Errorf("%w: worker %d finished clock %d, whose samples are handed over to worker %d (hand-over %d)", ErrBadEvent, w, e.Clock, o.To, o.ID)
		}
		c.clock[w]++
		c.waiting[w] = true
		c.kept[w] = math.MaxInt
		c.progress[w] = ProgressReport{Worker: w, Clock: c.clock[w], Assigned: c.batch[w], Parallelism: c.par[w]}
	case EventProgress:
		r := e.Progress
		if err := c.checkWorker(r.Worker); err != nil {
			return Output{}, fmt.Errorf("%w: progress: %v", ErrBadEvent, err)
		}
		if r.Clock != c.clock[r.Worker] || c.waiting[r.Worker] {
			return Output{}, nil // late report of a finished clock
		}
		if r.Done < 0 || r.Assigned < 0 || r.Claimed < 0 {
			return Output{}, fmt.Errorf("%w: progress of worker %d: done %d of %d", ErrBadEvent, r.Worker, r.Done, r.Assigned)
		}
		c.progress[r.Worker] = r
		e.Worker = r.Worker
		e.Clock = r.Clock
	case EventTick:
	case EventTransferResult:
		t, ok := c.transfers[e.Transfer.ID]
		if !ok || t.accepted {
			return Output{}, fmt.Errorf("%w: result for unknown or answered transfer %d", ErrBadEvent, e.Transfer.ID)
		}
		r := e.Transfer
		o := t.order
		if r.Accepted && (r.Lo < o.Lo || r.Hi != o.Hi || r.Lo >= r.Hi) {
			return Output{}, fmt.Errorf("%w: transfer %d accepted range [%d,%d) outside ordered [%d,%d)", ErrBadEvent, r.ID, r.Lo, r.Hi, o.Lo, o.Hi)
		}
		if h, ok := c.handOverFrom(o.From); r.Accepted && ok && h.Clock == o.Clock {
			return Output{}, fmt.Errorf("%w: transfer %d accepted by worker %d, whose samples of clock %d are handed over to worker %d (hand-over %d); it can only be refused", ErrBadEvent, r.ID, o.From, o.Clock, h.To, h.ID)
		}
		r.From, r.To, r.Clock = o.From, t.orderedTo, o.Clock
		if !r.Accepted {
			r.Lo, r.Hi = 0, 0
			delete(c.transfers, r.ID)
			c.donePending(o.Clock)
			c.stats.TransfersRefused++
		} else {
			t.accepted = true
			t.order.Lo, t.order.Hi = r.Lo, r.Hi
			c.stats.TransfersAccepted++
			c.stats.SamplesTransferred += r.Hi - r.Lo
			if t.abandoned { // its taker was given up: nobody computes it
				delete(c.transfers, r.ID)
				c.donePending(o.Clock)
				c.stats.SamplesAbandoned += r.Hi - r.Lo
			}
			if c.clock[o.From] == o.Clock && !c.waiting[o.From] {
				c.kept[o.From] = min(c.kept[o.From], r.Lo)
				p := &c.progress[o.From]
				p.Assigned -= r.Hi - r.Lo
				if p.Assigned < p.Done {
					p.Assigned = p.Done
				}
			}
		}
		e.Transfer = r
		e.Worker = o.From
		e.Clock = o.Clock
	case EventTransferDone:
		t, ok := c.transfers[e.Transfer.ID]
		if !ok || !t.accepted {
			return Output{}, fmt.Errorf("%w: done for unknown or unaccepted transfer %d", ErrBadEvent, e.Transfer.ID)
		}
		if t.handOver {
			return Output{}, fmt.Errorf("%w: done for hand-over %d (its giver's EventLeave ends it)", ErrBadEvent, e.Transfer.ID)
		}
		if !t.pushed {
			return Output{}, fmt.Errorf("%w: done for transfer %d, whose push by worker %d was not admitted", ErrBadEvent, e.Transfer.ID, t.order.To)
		}
		o := t.order
		delete(c.transfers, o.ID)
		c.donePending(o.Clock)
		if t.assigned {
			// a re-ordered assigned piece: the policy never ordered it,
			// so it sees the end of its wait as a tick
			e = Event{Kind: EventTick}
			break
		}
		c.stats.TransfersDone++
		e.Transfer = TransferResult{ID: o.ID, Accepted: true, Lo: o.Lo, Hi: o.Hi, From: o.From, To: t.orderedTo, Clock: o.Clock}
		e.Worker = o.To
		e.Clock = o.Clock
	case EventLeave:
		if err := c.checkWorker(e.Worker); err != nil {
			return Output{}, fmt.Errorf("%w: leave: %v", ErrBadEvent, err)
		}
		w := e.Worker
		if !c.joined[w] {
			return Output{}, fmt.Errorf("%w: worker %d left without having joined", ErrBadEvent, w)
		}
		if c.left[w] {
			return Output{}, fmt.Errorf("%w: worker %d left twice", ErrBadEvent, w)
		}
		for id, t := range c.transfers {
			if t.handOver && t.order.From == w {
				// the hand-over ends: its range is stored if pushed, and
				// lost, never counted twice, if not (a late push is refused)
				delete(c.transfers, id)
				c.donePending(t.order.Clock)
			}
		}
		c.left[w], c.quit[w], c.leftAt[w], c.held[w] = true, e.Quit, now, false
		c.finished = c.finished || !e.Quit
		c.stats.Left++
		e.Clock = c.clock[w] - 1
	case EventJoin:
		if err := c.join(now, e.Worker); err != nil {
			return Output{}, err
		}
		e.Clock = c.clock[e.Worker]
	default:
		return Output{}, fmt.Errorf("%w: unknown kind %v", ErrBadEvent, e.Kind)
	}
	out := c.policy.Step(now, c.View(), e)
	if len(out.Assign) > 0 && c.Paused() {
		out.Assign = nil // they ride on releases the pause holds
	}
	if err := c.checkStall(now, out); err != nil {
		return Output{}, err
	}
	return c.record(out)
}

// HandOver registers the hand-over of worker from's unprocessed samples of
// its current clock to worker to, for a runtime that lost from in the
// middle of a clock and lets the run go on without it. The samples are
// the prefix [0, end) of from's batch that it still computed itself: end
// is its batch size, lowered to the start of the lowest range it gave
// away in the clock (an assignment at its release, an accepted transfer),
// whose takers compute the rest. It returns the order, with an ID from
// the transfers' sequence, for the runtime to send to the taker, which
// pushes the range with Owner = from, once, like a transferred range
// (Admit accepts that push because of the order).
//
// It returns ok = false, and registers nothing, when nothing is left to
// hand over: from is waiting (it finished the clock), its own samples of
// the clock were pushed (admitted, so counted or dropped: never twice), it
// gave away its whole batch, or they were handed over already. Workers
// that do not exist or have left, or from = to, are ErrBadEvent.
//
// The policy is not consulted. Until from leaves, the hand-over counts as
// a transfer pending for the clock (PendingTransfers), and from may
// neither push its own samples of the clock, nor clock it, nor accept a
// transfer of it (its orders not yet answered can only be refused: the
// runtime answers them so, since a lost worker cannot); its progress
// reports nothing left. from's EventLeave (which the runtime sends once
// the taker's push is stored, or when it gives up on the hand-over) ends
// it: a push of the range after that is refused, so a sample is never
// counted twice.
func (c *Coordinator) HandOver(from, to WorkerID) (o TransferOrder, ok bool, err error) {
	for _, w := range []WorkerID{from, to} {
		if err := c.checkWorker(w); err != nil {
			return TransferOrder{}, false, fmt.Errorf("%w: hand-over: %v", ErrBadEvent, err)
		}
		if c.left[w] {
			return TransferOrder{}, false, fmt.Errorf("%w: hand-over from worker %d to %d: worker %d is not in the run", ErrBadEvent, from, to, w)
		}
	}
	if from == to {
		return TransferOrder{}, false, fmt.Errorf("%w: hand-over from worker %d to itself", ErrBadEvent, from)
	}
	clock := c.clock[from]
	end := min(c.kept[from], c.batch[from])
	if c.waiting[from] || c.ownPushed[from] > clock || end <= 0 {
		return TransferOrder{}, false, nil
	}
	c.nextID++
	o = TransferOrder{ID: c.nextID, From: from, To: to, Clock: clock, Lo: 0, Hi: end}
	c.transfers[o.ID] = &transferState{order: o, accepted: true, handOver: true, orderedTo: to, batch: c.batch[from]}
	c.pending[clock]++
	c.kept[from] = 0
	c.progress[from] = ProgressReport{Worker: from, Clock: clock, Parallelism: c.par[from]}
	c.stats.HandOvers++
	c.stats.SamplesHandedOver += end
	return o, true, nil
}

// Revoke takes back worker w's own push of its current clock — admitted,
// accumulated into a buffer not yet flushed, and not followed by w's
// EventClock — for a runtime that lost w after the push was admitted and
// will drop it from every server holding it, so that a HandOver then gives
// w's samples of the clock to a survivor and each sample counts once. (A
// push is admitted once and then sent to each server: a worker lost
// between those sends leaves it stored on some servers only; package ps
// drops it at the clock's flush where the servers keep each sender's
// pushes apart.) It returns the buffer the push went to and how many
// samples it held. ok is false, and nothing changes, when there is no such
// push to take back: w pushed nothing of its current clock, or clocked it,
// or its push was applied or dropped (an update cannot be taken back), or
// carried Parts (assigned samples of other owners). The policy is not
// consulted; the buffer's count of pushes (which policies see) drops by
// one, Stats.Revoked counts it.
func (c *Coordinator) Revoke(w WorkerID) (buf, samples int, ok bool, err error) {
	if err := c.checkWorker(w); err != nil {
		return 0, 0, false, fmt.Errorf("%w: revoke: %v", ErrBadEvent, err)
	}
	if c.left[w] {
		return 0, 0, false, fmt.Errorf("%w: revoke of worker %d, which is not in the run", ErrBadEvent, w)
	}
	p := c.lastOwn[w]
	if !p.valid || p.action != Accumulate || p.parts || c.waiting[w] || p.clock != c.clock[w] || c.buffers[p.buf] <= 0 {
		return 0, 0, false, nil
	}
	c.lastOwn[w] = ownPush{}
	c.ownPushed[w] = p.clock
	if c.buffers[p.buf]--; c.buffers[p.buf] == 0 {
		delete(c.buffers, p.buf)
	}
	c.stats.Revoked++
	return p.buf, p.samples, true, nil
}

// Retarget gives every range worker from still owes as a taker to a
// survivor, for a runtime that lost from and lets the run go on without
// it, so that no clock waits for samples from will never push and none
// is counted twice. Each range goes to the first worker of to that is
// not its giver (a giver cannot take its own range back: it gave it
// away):
//
//   - a transfer or hand-over to from, accepted and not pushed, is moved
//     (same ID, same range): its new taker pushes it with Owner = the
//     giver and reports it done like its own, and from's push of it is
//     refused from now on;
//   - an order to from not yet answered is moved: if its giver accepts,
//     the new taker computes the range;
//   - the samples assigned to from at a release (Output.Assign) that it
//     has not pushed become new orders of the same pieces, from their
//     giver to the new taker, with IDs from the transfers' sequence: the
//     taker pushes each piece with Owner = its giver and reports it done
//     (EventTransferDone; the policy, which never ordered it, sees that
//     done as EventTick). A giver's pieces from pushed only in part (not
//     the runtime contract: one push holds them all) cannot be told
//     apart, so their remainder is abandoned (Stats.SamplesAbandoned).
//
// A range with no worker of to but its giver stays from's. Retarget
// returns the accepted orders to send to their new takers as tasks, by
// ID (TransferStatus.Batch gives the giver's batch size). Every moved
// range stays pending for its clock until its done (or, a hand-over, its
// giver's leave). A range from pushed but has not reported done is not
// moved (its samples were admitted; the runtime reports the done for
// it). The policy is not consulted; its events keep naming the taker it
// ordered. Workers that do not exist or have left, or from in to, are
// ErrBadEvent, and change nothing.
//
// A worker that leaves (EventLeave) keeps the ranges it took: a worker
// that left still computes them (it finished its own schedule, or quit
// between clocks), and its push of them is admitted. So a runtime that
// loses a taker must Retarget what it owed before its leave, or the
// clocks of those ranges stay pending.
func (c *Coordinator) Retarget(from WorkerID, to []WorkerID) ([]TransferOrder, error) {
	for _, w := range append([]WorkerID{from}, to...) {
		if err := c.checkWorker(w); err != nil {
			return nil, fmt.Errorf("%w: retarget: %v", ErrBadEvent, err)
		}
		if c.left[w] {
			return nil, fmt.Errorf("%w: retarget from worker %d to %v: worker %d is not in the run", ErrBadEvent, from, to, w)
		}
		if w == from && len(to) > 0 && slices.Contains(to, from) {
			return nil, fmt.Errorf("%w: retarget from worker %d to itself", ErrBadEvent, from)
		}
	}
	taker := func(giver WorkerID) (WorkerID, bool) {
		for _, w := range to {
			if w != giver {
				return w, true
			}
		}
		return 0, false
	}
	var moved []TransferOrder
	for _, t := range c.transfers {
		if t.order.To != from || t.pushed {
			continue
		}
		w, ok := taker(t.order.From)
		if !ok {
			continue
		}
		t.order.To, t.abandoned = w, false
		if t.accepted {
			moved = append(moved, t.order)
			c.stats.Retargeted++
			c.stats.SamplesRetargeted += t.order.Samples()
		}
	}
	slices.SortFunc(moved, func(a, b TransferOrder) int { return cmp.Compare(a.ID, b.ID) })
	var keys [][3]int
	for k := range c.owed {
		if k[1] == int(from) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b [3]int) int { return slices.Compare(a[:], b[:]) })
	for _, k := range keys {
		w, ok := taker(WorkerID(k[0]))
		if !ok {
			continue // they stay from's
		}
		n, ps := c.owed[k], c.pieces[k]
		delete(c.owed, k)
		delete(c.pieces, k)
		sum := 0
		for _, r := range ps {
			sum += r[1] - r[0]
		}
		if sum != n {
			c.stats.SamplesAbandoned += n
			continue
		}
		slices.SortFunc(ps, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
		for _, r := range ps {
			c.nextID++
			o := TransferOrder{ID: c.nextID, From: WorkerID(k[0]), To: w, Clock: k[2], Lo: r[0], Hi: r[1]}
			c.transfers[o.ID] = &transferState{order: o, accepted: true, assigned: true, orderedTo: w, batch: max(c.batch[o.From], o.Hi)}
			c.pending[o.Clock]++
			c.progress[from].Extra -= o.Samples()
			moved = append(moved, o)
			c.stats.Retargeted++
			c.stats.SamplesRetargeted += o.Samples()
		}
	}
	return moved, nil
}

// Abandon gives up what worker from still owes as a taker, for a runtime
// that lost it with no survivor to Retarget to: accepted transfers and
// re-ordered assigned pieces it has not pushed end (their clocks no longer
// wait for them), samples assigned to it at a release that it has not
// pushed are dropped, and orders to it not yet answered end when their
// giver answers. The samples are lost (Stats.SamplesAbandoned), never
// counted twice: from's push of them is refused from now on. Hand-overs
// to from end with their giver's leave; ranges from pushed but has not
// reported done are left for the runtime to report done. It returns the
// samples abandoned now. A worker that does not exist is ErrBadEvent.
func (c *Coordinator) Abandon(from WorkerID) (int, error) {
	if err := c.checkWorker(from); err != nil {
		return 0, fmt.Errorf("%w: abandon: %v", ErrBadEvent, err)
	}
	n := 0
	for id, t := range c.transfers {
		if t.order.To != from || t.pushed || t.handOver {
			continue
		}
		if !t.accepted {
			t.abandoned = true
			continue
		}
		delete(c.transfers, id)
		c.donePending(t.order.Clock)
		n += t.order.Samples()
	}
	for k, m := range c.owed {
		if k[1] == int(from) {
			n += m
			delete(c.owed, k)
			delete(c.pieces, k)
		}
	}
	c.stats.SamplesAbandoned += n
	return n, nil
}

// Transfers lists the transfers and hand-overs outstanding (see
// Transfer), by ID.
func (c *Coordinator) Transfers() []TransferStatus {
	ts := make([]TransferStatus, 0, len(c.transfers))
	for _, t := range c.transfers {
		ts = append(ts, t.status())
	}
	slices.SortFunc(ts, func(a, b TransferStatus) int { return cmp.Compare(a.Order.ID, b.Order.ID) })
	return ts
}

func (t *transferState) status() TransferStatus {
	return TransferStatus{Order: t.order, Accepted: t.accepted, HandOver: t.handOver, Assigned: t.assigned, Pushed: t.pushed, Batch: t.batch}
}

// TransferStatus is what the Coordinator knows of an outstanding transfer
// or hand-over.
type TransferStatus struct {
	Order    TransferOrder // with the accepted range once accepted, and its current taker (Retarget)
	Accepted bool          // the giver accepted it (a hand-over always is)
	HandOver bool          // registered by HandOver, not ordered by the policy
	Assigned bool          // an assigned piece re-ordered by Retarget, not ordered by the policy
	Pushed   bool          // the taker's push of the range was admitted
	Batch    int           // the giver's batch size in the order's clock (the taker's BatchSamples)
}

// Transfer returns the status of the transfer or hand-over with the given
// ID while it is outstanding: ordered, and not refused, done or (a
// hand-over) ended by its giver's leave.
func (c *Coordinator) Transfer(id uint64) (TransferStatus, bool) {
	t, ok := c.transfers[id]
	if !ok {
		return TransferStatus{}, false
	}
	return t.status(), true
}

// HandOvers lists the hand-overs not yet ended (by their giver's
// EventLeave), by ID.
func (c *Coordinator) HandOvers() []TransferOrder {
	var hs []TransferOrder
	for _, t := range c.transfers {
		if t.handOver {
			hs = append(hs, t.order)
		}
	}
	slices.SortFunc(hs, func(a, b TransferOrder) int { return cmp.Compare(a.ID, b.ID) })
	return hs
}

// handOverFrom returns the hand-over of worker w's samples not yet ended,
// if any.
func (c *Coordinator) handOverFrom(w WorkerID) (TransferOrder, bool) {
	for _, t := range c.transfers {
		if t.handOver && t.order.From == w {
			return t.order, true
		}
	}
	return TransferOrder{}, false
}

// validScale reports whether a policy's scale is usable: finite and not
// negative (0 reads as 1).
func validScale(x float64) bool { return x >= 0 && !math.IsInf(x, 1) }

// bufferClocks lists the buffers holding accumulated pushes, in order.
func (c *Coordinator) bufferClocks() []int {
	ks := make([]int, 0, len(c.buffers))
	for k := range c.buffers {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// checkStall reports ErrStalled when, after out, every worker still
// training would wait with no transfer outstanding, for StallAfter (at
// once without ticks). out is assumed valid; record checks it.
func (c *Coordinator) checkStall(now time.Duration, out Output) error {
	released := make(map[WorkerID]bool, len(out.Release))
	for _, w := range out.Release {
		released[w] = true
	}
	if c.Paused() {
		c.stalled = false // waiting for members, not for the policy
		return nil
	}
	var waiting []string
	for w := range c.clock {
		if c.left[w] {
			continue
		}
		if !c.waiting[w] || released[WorkerID(w)] {
			c.stalled = false
			return nil
		}
		waiting = append(waiting, fmt.Sprintf("%d at clock %d", w, c.clock[w]))
	}
	if len(waiting) == 0 || len(c.transfers) > 0 || len(out.Transfers) > 0 {
		c.stalled = false
		return nil
	}
	if !c.stalled {
		c.stalled, c.stallSince = true, now
	}
	limit := c.cfg.StallAfter
	if limit == 0 {
		limit = max(100*c.cfg.TickPeriod, 2*time.Second)
	}
	if c.cfg.TickPeriod > 0 && now-c.stallSince < limit {
		return nil
	}
	why := "and without a control tick no event can release them"
	if c.cfg.TickPeriod > 0 {
		why = fmt.Sprintf("for %v of control ticks", now-c.stallSince)
	}
	return fmt.Errorf("%w: %w: policy %s released nobody while every worker still training waits (workers %s) %s",
		ErrPolicyOutput, ErrStalled, c.policy.Name(), strings.Join(waiting, ", "), why)
}

func (c *Coordinator) donePending(clock int) {
	c.pending[clock]--
	if c.pending[clock] <= 0 {
		delete(c.pending, clock)
	}
}

// record validates a policy's output as a whole, then applies it to the
// state. Invalid output changes nothing.
func (c *Coordinator) record(out Output) (Output, error) {
	name := c.policy.Name()
	for _, o := range out.SetParallelism {
		if c.checkWorker(o.Worker) != nil || o.P < 1 {
			return Output{}, fmt.Errorf("%w: policy %s: parallelism %d for worker %d", ErrPolicyOutput, name, o.P, o.Worker)
		}
	}
	for _, o := range out.SetBatch {
		if c.checkWorker(o.Worker) != nil || o.Size < 1 {
			return Output{}, fmt.Errorf("%w: policy %s: batch %d for worker %d", ErrPolicyOutput, name, o.Size, o.Worker)
		}
	}
	for _, o := range out.Transfers {
		if c.checkWorker(o.From) != nil || c.checkWorker(o.To) != nil || o.From == o.To {
			return Output{}, fmt.Errorf("%w: policy %s: transfer from %d to %d", ErrPolicyOutput, name, o.From, o.To)
		}
		if o.Clock != c.clock[o.From] || c.waiting[o.From] {
			return Output{}, fmt.Errorf("%w: policy %s: transfer of clock %d from worker %d, which is not computing it", ErrPolicyOutput, name, o.Clock, o.From)
		}
		if o.Lo < 0 || o.Lo >= o.Hi || o.Hi > c.batch[o.From] {
			return Output{}, fmt.Errorf("%w: policy %s: transfer range [%d,%d) of batch %d", ErrPolicyOutput, name, o.Lo, o.Hi, c.batch[o.From])
		}
	}
	if err := c.checkAssign(out); err != nil {
		return Output{}, err
	}
	flushed := make(map[int]bool, len(out.Flush))
	for _, f := range out.Flush {
		exists := c.buffers[f.Clock] > 0 || (f.Clock >= 0 && f.Clock <= slices.Max(c.clock))
		if !exists || flushed[f.Clock] {
			return Output{}, fmt.Errorf("%w: policy %s: Flush of clock %d, which no worker has reached and no push accumulated into (clocks 0..%d, buffers %v), or twice", ErrPolicyOutput, name, f.Clock, slices.Max(c.clock), c.bufferClocks())
		}
		flushed[f.Clock] = true
		if !validScale(f.Scale) {
			return Output{}, fmt.Errorf("%w: policy %s: Flush of clock %d with Scale %v (want finite, >= 0; 0 means 1)", ErrPolicyOutput, name, f.Clock, f.Scale)
		}
	}
	for _, w := range out.Release {
		if err := c.checkWorker(w); err != nil {
			return Output{}, fmt.Errorf("%w: policy %s: Release of %v", ErrPolicyOutput, name, err)
		}
	}
	for _, f := range out.Flush {
		delete(c.buffers, f.Clock)
		c.version++
		c.stats.Flushes++
	}
	if c.Paused() {
		for _, w := range out.Release {
			if c.waiting[w] && !c.left[w] {
				c.held[w] = true
			}
		}
		out.Release = nil
	} else {
		for w, h := range c.held {
			if h {
				out.Release = append(out.Release, WorkerID(w))
				c.held[w] = false
			}
		}
	}
	if len(out.Release) > 0 {
		kept := out.Release[:0:0]
		min := c.minClock()
		for _, w := range out.Release {
			if !c.waiting[w] || c.left[w] {
				continue
			}
			c.waiting[w] = false
			c.stats.Releases++
			if lead := c.clock[w] - min; lead > c.stats.MaxLead {
				c.stats.MaxLead = lead
			}
			kept = append(kept, w)
		}
		out.Release = kept
	}
	for _, o := range out.SetParallelism {
		if c.par[o.Worker] != o.P {
			c.stats.ParallelismChanges++
		}
		c.par[o.Worker] = o.P
	}
	for _, o := range out.SetBatch {
		if c.batch[o.Worker] != o.Size {
			c.stats.BatchChanges++
		}
		c.batch[o.Worker] = o.Size
	}
	for _, a := range out.Assign {
		k := [3]int{int(a.From), int(a.To), a.Clock}
		c.owed[k] += a.Samples()
		c.pieces[k] = append(c.pieces[k], [2]int{a.Lo, a.Hi})
		c.kept[a.From] = min(c.kept[a.From], a.Lo)
		c.progress[a.From].Assigned -= a.Samples()
		c.progress[a.To].Extra += a.Samples()
		c.stats.Assignments++
		c.stats.SamplesAssigned += a.Samples()
	}
	if len(out.Transfers) > 0 {
		ts := make([]TransferOrder, len(out.Transfers))
		copy(ts, out.Transfers)
		for i := range ts {
			c.nextID++
			ts[i].ID = c.nextID
			c.transfers[ts[i].ID] = &transferState{order: ts[i], orderedTo: ts[i].To, batch: c.batch[ts[i].From]}
			c.pending[ts[i].Clock]++
			c.stats.TransfersOrdered++
		}
		out.Transfers = ts
	}
	return out, nil
}

// checkAssign validates out.Assign against the releases of out: giver and
// taker are distinct workers both released by out into Clock, a worker is
// not both, and each giver's pieces are disjoint and together its batch's
// tail [keep, batch), keep ≥ 0.
func (c *Coordinator) checkAssign(out Output) error {
	if len(out.Assign) == 0 {
		return nil
	}
	name := c.policy.Name()
	released := map[WorkerID]bool{}
	for _, w := range out.Release {
		if c.checkWorker(w) == nil && c.waiting[w] && !c.left[w] {
			released[w] = true
		}
	}
	resized := map[WorkerID]bool{}
	for _, o := range out.SetBatch {
		resized[o.Worker] = true
	}
	given := map[WorkerID][][2]int{}
	takes := map[WorkerID]bool{}
	for _, a := range out.Assign {
		if resized[a.From] || resized[a.To] {
			return fmt.Errorf("%w: policy %s: assignment from %d to %d in the output that resizes one of their batches", ErrPolicyOutput, name, a.From, a.To)
		}
		if c.checkWorker(a.From) != nil || c.checkWorker(a.To) != nil || a.From == a.To {
			return fmt.Errorf("%w: policy %s: assignment from %d to %d", ErrPolicyOutput, name, a.From, a.To)
		}
		if !released[a.From] || !released[a.To] {
			return fmt.Errorf("%w: policy %s: assignment from %d to %d, not both released by this output", ErrPolicyOutput, name, a.From, a.To)
		}
		if a.Clock != c.clock[a.From] || a.Clock != c.clock[a.To] {
			return fmt.Errorf("%w: policy %s: assignment of clock %d from worker %d (clock %d) to %d (clock %d)", ErrPolicyOutput, name, a.Clock, a.From, c.clock[a.From], a.To, c.clock[a.To])
		}
		if a.Lo < 0 || a.Lo >= a.Hi || a.Hi > c.batch[a.From] {
			return fmt.Errorf("%w: policy %s: assignment range [%d,%d) of batch %d", ErrPolicyOutput, name, a.Lo, a.Hi, c.batch[a.From])
		}
		given[a.From] = append(given[a.From], [2]int{a.Lo, a.Hi})
		takes[a.To] = true
	}
	for g, rs := range given {
		if takes[g] {
			return fmt.Errorf("%w: policy %s: worker %d both gives and takes assigned samples", ErrPolicyOutput, name, g)
		}
		slices.SortFunc(rs, func(a, b [2]int) int { return a[0] - b[0] })
		for i := 1; i < len(rs); i++ {
			if rs[i][0] != rs[i-1][1] {
				return fmt.Errorf("%w: policy %s: worker %d's assigned pieces [%d,%d) and [%d,%d) are not adjacent", ErrPolicyOutput, name, g, rs[i-1][0], rs[i-1][1], rs[i][0], rs[i][1])
			}
		}
		if rs[len(rs)-1][1] != c.batch[g] {
			return fmt.Errorf("%w: policy %s: worker %d's assigned pieces end at %d, not at its batch end %d", ErrPolicyOutput, name, g, rs[len(rs)-1][1], c.batch[g])
		}
	}
	return nil
}

func (c *Coordinator) checkWorker(w WorkerID) error {
	if w < 0 || int(w) >= len(c.clock) {
		return fmt.Errorf("worker %d out of range [0,%d)", w, len(c.clock))
	}
	return nil
}

// minClock is the smallest clock of the workers still training (of all
// workers that ever were members once every one has left).
func (c *Coordinator) minClock() int {
	m, all := math.MaxInt, math.MaxInt
	for w, k := range c.clock {
		if c.joined[w] {
			all = min(all, k)
		}
		if !c.left[w] {
			m = min(m, k)
		}
	}
	if m == math.MaxInt {
		return all
	}
	return m
}

// join admits worker w (EventJoin) at the join clock: it waits to be
// released into JoinClock(), as if it had just finished the clock before,
// so a barrier counts it from that clock on and a staleness gate measures
// it from there.
func (c *Coordinator) join(now time.Duration, w WorkerID) error {
	if err := c.checkWorker(w); err != nil {
		return fmt.Errorf("%w: %w: %v", ErrBadEvent, ErrJoinRefused, err)
	}
	if el, ok := c.policy.(Elastic); !ok || !el.AcceptsJoins() {
		return fmt.Errorf("%w: %w: policy %s does not accept joins (epsp.Elastic: %s)", ErrBadEvent, ErrJoinRefused, c.policy.Name(), whyNoJoins)
	}
	if !c.left[w] {
		return fmt.Errorf("%w: %w: worker %d is a member already", ErrBadEvent, ErrJoinRefused, w)
	}
	if c.joined[w] && c.quit[w] && now-c.leftAt[w] < c.cfg.RejoinAfter {
		return fmt.Errorf("%w: %w: worker %d left %v ago; it may rejoin after %v (%v from now)", ErrBadEvent, ErrRejoinTooSoon,
			w, now-c.leftAt[w], c.cfg.RejoinAfter, c.cfg.RejoinAfter-(now-c.leftAt[w]))
	}
	for _, t := range c.transfers {
		if t.order.To == w || t.order.From == w {
			return fmt.Errorf("%w: %w: worker %d still has transfer %d outstanding", ErrBadEvent, ErrJoinRefused, w, t.order.ID)
		}
	}
	for k := range c.owed {
		if k[0] == int(w) || k[1] == int(w) {
			return fmt.Errorf("%w: %w: worker %d still has assigned samples of clock %d outstanding", ErrBadEvent, ErrJoinRefused, w, k[2])
		}
	}
	j := c.JoinClock()
	c.clock[w], c.waiting[w], c.left[w], c.joined[w], c.quit[w], c.held[w] = j, true, false, true, false, false
	c.kept[w] = math.MaxInt
	c.progress[w] = ProgressReport{Worker: w, Clock: j, Assigned: c.batch[w], Parallelism: c.par[w]}
	c.stats.Joined++
	return nil
}

// whyNoJoins says why a policy may not accept joins.
const whyNoJoins = "it sizes per-worker state — speed estimates, ledgers, tiers, step counts — from NumWorkers at its first step; BSP, SSP and ASP accept joins"

// JoinClock is the clock a worker joining now is released into: the clock
// after the highest one a member has started,
//
//	J = max over members m of Clock(m) + (0 if Waiting(m) else 1),
//
// so under a barrier it joins at the next clock (the one the waiting
// members will be released into), never the clock in progress. With no
// member left it is the highest clock a former member had reached
// (unfinished clocks are computed again by the joiner).
func (c *Coordinator) JoinClock() int {
	j, any := 0, false
	for w, k := range c.clock {
		if c.left[w] {
			continue
		}
		any = true
		if !c.waiting[w] {
			k++
		}
		j = max(j, k)
	}
	if any {
		return j
	}
	for w, k := range c.clock {
		if c.joined[w] {
			j = max(j, k)
		}
	}
	return j
}

// Members lists the workers in the run (joined and not left), in order.
func (c *Coordinator) Members() []WorkerID {
	var m []WorkerID
	for w, l := range c.left {
		if !l {
			m = append(m, WorkerID(w))
		}
	}
	return m
}

// Paused reports whether the run is paused below Config.MinWorkers:
// fewer members than the minimum, and no worker has finished its
// schedule. While paused no release is delivered (they are held and
// delivered when joins end the pause).
func (c *Coordinator) Paused() bool {
	if c.cfg.MinWorkers == 0 || c.finished {
		return false
	}
	n := 0
	for _, l := range c.left {
		if !l {
			n++
		}
	}
	return n < c.cfg.MinWorkers
}

// coordView is the View of a Coordinator.
type coordView struct{ c *Coordinator }

var _ View = coordView{}

func (v coordView) NumWorkers() int            { return len(v.c.clock) }
func (v coordView) Member(w WorkerID) bool     { return !v.c.left[w] }
func (v coordView) Clock(w WorkerID) int       { return v.c.clock[w] }
func (v coordView) MinClock() int              { return v.c.minClock() }
func (v coordView) Version() uint64            { return v.c.version }
func (v coordView) Waiting(w WorkerID) bool    { return v.c.waiting[w] }
func (v coordView) Batch(w WorkerID) int       { return v.c.batch[w] }
func (v coordView) Parallelism(w WorkerID) int { return v.c.par[w] }

func (v coordView) MaxClock() int {
	m := v.c.clock[0]
	for _, k := range v.c.clock[1:] {
		if k > m {
			m = k
		}
	}
	return m
}

func (v coordView) Progress(w WorkerID) ProgressReport { return v.c.progress[w] }

func (v coordView) PendingTransfers(clock int) int { return v.c.pending[clock] }

// OldestPendingTransferClock returns the lowest clock with a transfer not
// yet done, if any. See EffectiveMinClock.
func (v coordView) OldestPendingTransferClock() (int, bool) {
	first := true
	m := 0
	for k := range v.c.pending {
		if first || k < m {
			m, first = k, false
		}
	}
	return m, !first
}

// Membership is an optional View capability of elastic runs: which
// worker slots are in the run. The Coordinator's View has it.
type Membership interface {
	// Member reports whether worker w is in the run: it has joined (at
	// the start or by EventJoin) and not left.
	Member(w WorkerID) bool
}

// PendingTransferClocks is an optional View capability: the lowest clock
// that still has transfers ordered but not done.
type PendingTransferClocks interface {
	OldestPendingTransferClock() (clock int, ok bool)
}

// EffectiveMinClock is the lowest clock not yet complete in the cluster:
// MinClock, lowered to the clock of the oldest transfer still pending when
// the view can tell (a clock whose transferred samples are still being
// computed elsewhere is not complete, even if its owner has clocked it).
// Staleness gates compare against it.
func EffectiveMinClock(v View) int {
	m := v.MinClock()
	if pv, ok := v.(PendingTransferClocks); ok {
		if k, ok := pv.OldestPendingTransferClock(); ok && k < m {
			m = k
		}
	}
	return m
}
