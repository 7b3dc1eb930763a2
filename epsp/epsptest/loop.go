package epsptest

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/straggler"
)

// Loop errors.
var (
	// ErrDeadlock: no event is left but some worker has not finished.
	ErrDeadlock = errors.New("epsptest: loop deadlocked")
	// ErrSamples: a sample of some clock was pushed twice, or never.
	ErrSamples = errors.New("epsptest: samples not pushed exactly once")
	// ErrLoopConfig: a bad LoopConfig.
	ErrLoopConfig = errors.New("epsptest: bad loop config")
)

// LoopConfig configures [RunLoop].
type LoopConfig struct {
	// Model gives each worker's rate; required. Its NumWorkers is the
	// cluster size.
	Model straggler.Model
	// Batch is every worker's initial batch. 0 means 64.
	Batch int
	// Parallelism is every worker's initial parallelism. 0 means 1.
	Parallelism int
	// Clocks: the loop ends once every worker has completed this many
	// clocks (faster workers keep going until then; clocks still running
	// at the end are abandoned, transfers in flight are finished). 0 means 20.
	Clocks int
	// ProgressEvery is the period of progress reports while a worker
	// computes its own batch. 0 means none.
	ProgressEvery time.Duration
	// Tick is the control tick period. 0 means none.
	Tick time.Duration
	// Horizon stops the loop (with an error) at this virtual time. 0 means 1 h.
	Horizon time.Duration
	// Check, if set, runs after every Admit (out is empty) and Step; an
	// error stops the loop and is returned.
	Check func(l *Loop, now time.Duration, out epsp.Output) error
}

// LoopResult is what [RunLoop] reports.
type LoopResult struct {
	End    time.Duration // virtual time when the last worker finished
	Clocks []int         // completed clocks per worker
	Stats  epsp.Stats    // the coordinator's counters
	// Pushes counts pushes by action.
	Pushes map[epsp.PushAction]int
	// Parallelism and Batch are every worker's final settings.
	Parallelism, Batch []int
}

type loopWorker struct {
	start   time.Duration // start of the current own clock
	rate    float64
	held    int // own samples [0, held) of the current clock
	base    uint64
	gen     int // invalidates scheduled finish/progress events
	running bool
	busy    time.Duration // a taker computes transfers until busy
}

type loopEvent struct {
	at   time.Duration
	seq  uint64
	kind int
	w    int
	gen  int
	o    epsp.TransferOrder
	base uint64
	busy time.Duration // evTaken: the compute time of the range
}

const (
	evFinish = iota
	evProgress
	evTick
	evAnswer
	evTaken
)

type loopQueue []loopEvent

func (q loopQueue) Len() int { return len(q) }
func (q loopQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q loopQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *loopQueue) Push(x any)   { *q = append(*q, x.(loopEvent)) }
func (q *loopQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// Loop is a small deterministic virtual-time cluster driving a real
// [epsp.Coordinator]: each worker pulls on release, computes its batch at
// the model's rate (fixed for the clock, read when the clock starts),
// reports progress, pushes its part and clocks (each push carries its
// compute time as Push.Busy); a giver accepts a
// transfer only if it has not reached Lo, and a taker computes the range
// at its own rate and pushes it with Owner = the giver. Events at the
// same time run in the order they were scheduled. Not a stable API.
type Loop struct {
	C      *epsp.Coordinator
	cfg    LoopConfig
	ws     []loopWorker
	q      loopQueue
	seq    uint64
	now    time.Duration
	open   map[uint64]epsp.TransferOrder
	refuse []epsp.TransferOrder
	pushed map[[2]int]int // (owner, clock) -> samples pushed
	batch  map[[2]int]int // (owner, clock) -> batch
	res    LoopResult
	// stopping: every worker has completed Clocks clocks; running clocks
	// are abandoned and only transfers in flight are drained.
	stopping bool
}

// RunLoop runs policy p on the cluster cfg describes until every worker
// has completed cfg.Clocks clocks. It checks that every sample of every
// completed clock was pushed exactly once (ErrSamples).
func RunLoop(cfg LoopConfig, p epsp.Policy) (*LoopResult, error) {
	l, err := NewLoop(cfg, p)
	if err != nil {
		return nil, err
	}
	return l.Run()
}

// NewLoop prepares a loop; call Run.
func NewLoop(cfg LoopConfig, p epsp.Policy) (*Loop, error) {
	if cfg.Model == nil {
		return nil, fmt.Errorf("%w: nil Model", ErrLoopConfig)
	}
	if cfg.Batch < 0 || cfg.Clocks < 0 || cfg.ProgressEvery < 0 || cfg.Tick < 0 || cfg.Horizon < 0 {
		return nil, fmt.Errorf("%w: negative field", ErrLoopConfig)
	}
	if cfg.Batch == 0 {
		cfg.Batch = 64
	}
	if cfg.Clocks == 0 {
		cfg.Clocks = 20
	}
	if cfg.Horizon == 0 {
		cfg.Horizon = time.Hour
	}
	n := cfg.Model.NumWorkers()
	c, err := epsp.NewCoordinator(epsp.Config{NumWorkers: n, Batch: cfg.Batch, Parallelism: cfg.Parallelism, TickPeriod: cfg.Tick}, p)
	if err != nil {
		return nil, err
	}
	l := &Loop{C: c, cfg: cfg, ws: make([]loopWorker, n), pushed: map[[2]int]int{}, batch: map[[2]int]int{}, open: map[uint64]epsp.TransferOrder{},
		res: LoopResult{Pushes: map[epsp.PushAction]int{}}}
	return l, nil
}

// Open returns the transfer orders not yet refused or done, by id.
func (l *Loop) Open() []epsp.TransferOrder {
	out := make([]epsp.TransferOrder, 0, len(l.open))
	for _, o := range l.open {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b epsp.TransferOrder) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Refused returns the transfer orders the givers refused, in order.
func (l *Loop) Refused() []epsp.TransferOrder { return slices.Clone(l.refuse) }

// Now is the loop's virtual time.
func (l *Loop) Now() time.Duration { return l.now }

func (l *Loop) schedule(e loopEvent) {
	l.seq++
	e.seq = l.seq
	e.at = max(e.at, l.now)
	heap.Push(&l.q, e)
}

// startClock starts worker w's current clock at now.
func (l *Loop) startClock(w int) {
	v := l.C.View()
	id := epsp.WorkerID(w)
	k := &l.ws[w]
	if l.stopping {
		k.running = false
		return
	}
	k.gen++
	k.running = true
	k.start = max(l.now, k.busy)
	k.base = v.Version()
	k.held = v.Batch(id)
	k.rate = l.cfg.Model.Rate(w, v.Parallelism(id), k.start)
	l.batch[[2]int{w, v.Clock(id)}] = k.held
	l.schedule(loopEvent{at: k.start + l.span(k.held, k.rate), kind: evFinish, w: w, gen: k.gen})
	if l.cfg.ProgressEvery > 0 {
		l.schedule(loopEvent{at: k.start + l.cfg.ProgressEvery, kind: evProgress, w: w, gen: k.gen})
	}
}

func (l *Loop) span(samples int, rate float64) time.Duration {
	if rate <= 0 {
		return l.cfg.Horizon
	}
	return time.Duration(math.Ceil(float64(samples) / rate * 1e9))
}

// cursor is the number of own samples w has processed by now.
func (l *Loop) cursor(w int) int {
	k := &l.ws[w]
	if l.now <= k.start {
		return 0
	}
	return min(k.held, int(math.Floor(k.rate*(l.now-k.start).Seconds())))
}

func (l *Loop) admit(p epsp.Push) error {
	key := [2]int{int(p.Owner), p.Clock}
	l.pushed[key] += p.Samples
	if l.pushed[key] > l.batch[key] {
		return fmt.Errorf("%w: worker %d clock %d: %d samples pushed of batch %d", ErrSamples, p.Owner, p.Clock, l.pushed[key], l.batch[key])
	}
	d, err := l.C.Admit(l.now, p)
	if err != nil {
		return err
	}
	l.res.Pushes[d.Action]++
	if l.cfg.Check != nil {
		return l.cfg.Check(l, l.now, epsp.Output{})
	}
	return nil
}

func (l *Loop) step(e epsp.Event) error {
	out, err := l.C.Step(l.now, e)
	if errors.Is(err, epsp.ErrStalled) {
		// The coordinator saw what the loop would find at its end: no
		// event can release anyone.
		return fmt.Errorf("%w at %v: %w", ErrDeadlock, l.now, err)
	}
	if err != nil {
		return err
	}
	for _, o := range out.Transfers {
		l.open[o.ID] = o
		l.schedule(loopEvent{at: l.now, kind: evAnswer, o: o})
	}
	if l.cfg.Check != nil {
		if err := l.cfg.Check(l, l.now, out); err != nil {
			return err
		}
	}
	for _, w := range out.Release {
		l.startClock(int(w))
	}
	return nil
}

func (l *Loop) done() bool {
	v := l.C.View()
	for w := range l.ws {
		if v.Clock(epsp.WorkerID(w)) < l.cfg.Clocks {
			return false
		}
	}
	return true
}

// Run plays the loop to the end.
func (l *Loop) Run() (*LoopResult, error) {
	for w := range l.ws {
		l.startClock(w)
	}
	if l.cfg.Tick > 0 {
		l.schedule(loopEvent{at: l.cfg.Tick, kind: evTick})
	}
	for l.q.Len() > 0 {
		e := heap.Pop(&l.q).(loopEvent)
		if e.at > l.cfg.Horizon {
			return nil, fmt.Errorf("%w: horizon %v reached", ErrDeadlock, l.cfg.Horizon)
		}
		l.now = e.at
		v := l.C.View()
		if !l.stopping && l.done() {
			l.stopping = true
			l.res.End = l.now
		}
		if l.stopping && (e.kind == evFinish || e.kind == evProgress || e.kind == evTick) {
			continue
		}
		switch e.kind {
		case evFinish:
			k := &l.ws[e.w]
			if e.gen != k.gen || !k.running {
				continue
			}
			k.running = false
			id := epsp.WorkerID(e.w)
			c := v.Clock(id)
			if k.held > 0 {
				b := l.batch[[2]int{e.w, c}]
				if err := l.admit(epsp.Push{Worker: id, Owner: id, Clock: c, BaseVersion: k.base, Samples: k.held, BatchSamples: b, Busy: l.now - k.start}); err != nil {
					return nil, err
				}
			}
			if err := l.step(epsp.Event{Kind: epsp.EventClock, Worker: id, Clock: c}); err != nil {
				return nil, err
			}
		case evProgress:
			k := &l.ws[e.w]
			if e.gen != k.gen || !k.running {
				continue
			}
			id := epsp.WorkerID(e.w)
			r := epsp.ProgressReport{Worker: id, Clock: v.Clock(id), Done: l.cursor(e.w), Assigned: k.held,
				Parallelism: v.Parallelism(id), Elapsed: l.now - k.start}
			if err := l.step(epsp.Event{Kind: epsp.EventProgress, Progress: r}); err != nil {
				return nil, err
			}
			l.schedule(loopEvent{at: l.now + l.cfg.ProgressEvery, kind: evProgress, w: e.w, gen: k.gen})
		case evTick:
			if err := l.step(epsp.Event{Kind: epsp.EventTick}); err != nil {
				return nil, err
			}
			l.schedule(loopEvent{at: l.now + l.cfg.Tick, kind: evTick})
		case evAnswer:
			o := e.o
			g := &l.ws[o.From]
			ok := !l.stopping && g.running && v.Clock(o.From) == o.Clock && l.cursor(int(o.From)) <= o.Lo && o.Hi <= g.held
			res := epsp.TransferResult{ID: o.ID, Accepted: ok}
			if !ok {
				delete(l.open, o.ID)
				l.refuse = append(l.refuse, o)
			}
			if ok {
				res.Lo, res.Hi = o.Lo, o.Hi
				g.held = o.Lo
				g.gen++
				l.schedule(loopEvent{at: g.start + l.span(g.held, g.rate), kind: evFinish, w: int(o.From), gen: g.gen})
				if l.cfg.ProgressEvery > 0 {
					l.schedule(loopEvent{at: l.now + l.cfg.ProgressEvery, kind: evProgress, w: int(o.From), gen: g.gen})
				}
				t := &l.ws[o.To]
				from := max(l.now, t.busy)
				rate := l.cfg.Model.Rate(int(o.To), v.Parallelism(o.To), from)
				span := l.span(o.Samples(), rate)
				t.busy = from + span
				l.schedule(loopEvent{at: t.busy, kind: evTaken, o: o, base: v.Version(), busy: span})
			}
			if err := l.step(epsp.Event{Kind: epsp.EventTransferResult, Transfer: res}); err != nil {
				return nil, err
			}
		case evTaken:
			o := e.o
			b := l.batch[[2]int{int(o.From), o.Clock}]
			if err := l.admit(epsp.Push{Worker: o.To, Owner: o.From, Clock: o.Clock, BaseVersion: e.base, Samples: o.Samples(), BatchSamples: b, Busy: e.busy}); err != nil {
				return nil, err
			}
			delete(l.open, o.ID) // done as the policy sees it
			if err := l.step(epsp.Event{Kind: epsp.EventTransferDone, Transfer: epsp.TransferResult{ID: o.ID}}); err != nil {
				return nil, err
			}
		}
	}
	if !l.done() {
		return nil, fmt.Errorf("%w at %v: clocks %v", ErrDeadlock, l.now, l.clocks())
	}
	v := l.C.View()
	for key, b := range l.batch {
		if key[1] < v.Clock(epsp.WorkerID(key[0])) && l.pushed[key] != b {
			return nil, fmt.Errorf("%w: worker %d clock %d: %d of %d samples pushed", ErrSamples, key[0], key[1], l.pushed[key], b)
		}
	}
	if !l.stopping {
		l.res.End = l.now
	}
	l.res.Clocks = l.clocks()
	for w := range l.ws {
		l.res.Parallelism = append(l.res.Parallelism, v.Parallelism(epsp.WorkerID(w)))
		l.res.Batch = append(l.res.Batch, v.Batch(epsp.WorkerID(w)))
	}
	l.res.Stats = l.C.Stats()
	return &l.res, nil
}

func (l *Loop) clocks() []int {
	v := l.C.View()
	out := make([]int, len(l.ws))
	for w := range out {
		out[w] = v.Clock(epsp.WorkerID(w))
	}
	return out
}
