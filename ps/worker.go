package ps

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/transport"
)

// # Roles
//
// (This part of the package documentation sits beside the code it
// describes; the package doc in doc.go is the map.)
//
// The Server role wraps a Store. The Coordinator role wraps an
// epsp.Coordinator in one goroutine: workers ask it to admit their pushes
// (apply now with a scale, accumulate for a clock, or drop) and tell it when
// a clock's pushes are stored; it carries out the policy's orders, flushing
// on every server and waiting for all acknowledgements before it releases
// anyone, then sending parallelism, batch and transfer orders.
//
// The Worker role runs the training loop of Worker.Train for a user Model
// (a gradient function over sample ids) and a Sampler (which sample ids form
// a worker's batch of a clock; deterministic, so any worker can compute any
// other's batch):
//
//	for each clock c:
//	    pull the parameters (BaseVersion = the version the release carried)
//	    compute the batch with p goroutines claiming chunks of samples;
//	    p follows the coordinator's SetParallelism orders, live
//	    ("parallelism as an infrastructure"); report progress every few chunks
//	    (then the samples of other workers' batches its release assigned it)
//	    push the mean gradient with its sample count, as the coordinator admits it
//	    tell the coordinator clock c is done; wait for release into c+1
//	after the last clock: leave (the policy stops waiting for this worker)
//
// Task transfer (falcon.md §3, a reconstruction: the paper's protocol is
// not public): a giver takes its orders in the order they were sent and
// accepts one only if it ends where the giver's own range ends (so what it
// keeps is always one prefix [0, end) of its batch, even with several
// pieces outstanding, as EPSP's multi-taker split orders them tail-first)
// and only for samples no goroutine has claimed yet (trimming the front of
// the range), so it never computes what it gave; the taker computes the
// range with its own latest parameters and pushes it with Owner = the
// giver, in one push; servers merge the parts sample-weighted (ApplyNow
// scales each part by Samples/BatchSamples; Accumulate weights by Samples),
// so every sample of a clock counts exactly once. The coordinator admits a
// push of another worker's samples only when an accepted transfer (or a
// lost worker's hand-over, or an assignment) covers it, once; any other is
// refused (ErrRejected, wrapping the epsp core's ErrNotOrdered message). A
// transfer's (or hand-over's) done is refused from any worker but its
// taker, and before the taker's push of it is admitted, so a barrier never
// passes a range not yet counted. The chunk size (4 samples) and progress
// cadence (every 2 chunks) are our defaults, in WorkerConfig.
//
// Clock-start assignments (epsp.Output.Assign: samples [Lo, Hi) of one
// released worker's batch given to another released into the same clock)
// ride on the release messages: the giver's release says it computes
// [0, keep) of its batch, the taker's lists its pieces (owner, lo, hi,
// owner's batch size), so planning at clock start adds no message. The
// taker runs one job with one cursor over its own samples and then the
// pieces in order (a chunk is filled across the boundaries; a piece's
// sample ids are Sampler.Batch(owner, clock, size)[lo:hi], and its EvChunk
// events name the owner) and sends one push for the clock: the gradient
// sum over all of them, Samples = own + assigned, BatchSamples = own batch
// + assigned, and Parts naming each owner's share; it clocks only after
// that push. Servers merge it sample-weighted like any push. A taker
// refuses reactive transfer orders while it holds assigned samples (its
// tail is not its own); a giver still gives reactively from the end of
// what it kept. Progress reports count own samples in Done, Assigned and
// Claimed and assigned ones in Extra and ExtraDone, and every push carries
// Busy, the job's compute time (its start, after the pull, to its last
// chunk), so Samples/Busy is the worker's speed.

// Model is the user's model: a gradient function over a set of samples.
//
// Gradient adds to grad the sum over samples of the per-sample gradient of
// the loss at params, and returns the summed loss. The runtime calls it
// concurrently from several goroutines, each with its own grad buffer
// (len(grad) = len(params)); it must not modify params.
type Model interface {
	Gradient(params []float32, samples []int, grad []float32) (loss float64)
}

// Sampler assigns data to workers: Batch returns the global sample ids of
// owner's batch of size samples for clock. It must be deterministic and the
// same on every worker, because a worker that takes over part of another's
// batch computes that batch's sample ids itself.
type Sampler interface {
	Batch(owner epsp.WorkerID, clock, size int) []int
}

// ShardSampler is the default data assignment over N samples and Workers
// workers: worker w owns the samples s with s mod Workers = w, and its
// batch of clock c is the next size of them in order, starting at position
// c·size of its shard (wrapping).
type ShardSampler struct {
	N, Workers int
}

var _ Sampler = ShardSampler{}

// Batch implements Sampler.
func (s ShardSampler) Batch(owner epsp.WorkerID, clock, size int) []int {
	w := max(s.Workers, 1)
	shard := (s.N - int(owner) + w - 1) / w // samples owner, owner+w, … below N
	ids := make([]int, size)
	if shard <= 0 {
		return ids
	}
	start := clock * size
	for i := range ids {
		ids[i] = int(owner) + ((start+i)%shard)*w
	}
	return ids
}

// WorkerConfig configures a worker.
type WorkerConfig struct {
	// ID is the worker's index in the coordinator's worker list.
	ID epsp.WorkerID
	// Coordinator names the coordinator node. Required.
	Coordinator transport.NodeID
	// Client configures the worker's key-value client (servers, width,
	// partitioner).
	Client ClientConfig
	// StartTimeout bounds the wait for servers and the coordinator at
	// Start; zero means 10 s.
	StartTimeout time.Duration
	// Chunk is how many samples a compute goroutine claims at a time;
	// zero means 4. Transfers can only move samples not yet claimed.
	Chunk int
	// ProgressEvery is the number of chunks between progress reports;
	// zero means 2. A report's Done counts the samples of finished chunks,
	// so that Done/Elapsed is the worker's throughput; Claimed adds the
	// chunks still being computed.
	ProgressEvery int
	// RequestTimeout bounds each request to the coordinator (admit, clock,
	// transfer answers); waiting for a release is not a request and is
	// bounded only by the caller's ctx. Zero means 30 s; negative means no
	// bound beyond ctx.
	RequestTimeout time.Duration
	// Heartbeat is how often the worker renews its lease at the
	// coordinator (see LeaseConfig); zero means 500 ms, negative never.
	Heartbeat time.Duration
	// CoordinatorTimeout is how long the worker waits for an answer from
	// the coordinator before it fails with ErrPeerLost naming it; zero
	// means 10 s.
	CoordinatorTimeout time.Duration
	// CoordinatorWait is how long the worker waits for a coordinator that
	// stopped answering (it may be restarting from its state, see
	// CoordinatorConfig.Store): its requests are resent and its heartbeats
	// tolerate the silence that long, and then it fails with ErrPeerLost
	// naming the coordinator. Zero means what the coordinator asked in
	// its hello's answer (CoordinatorConfig.Wait: DefaultCoordinatorWait
	// for a durable coordinator, no wait for one without a Store);
	// negative means no wait.
	CoordinatorWait time.Duration
}

// DefaultWorkerConfig returns the defaults: 10 s start timeout, chunks of
// 4 samples, a progress report every 2 chunks; ID, Coordinator and
// Client.Servers must be filled in.
func DefaultWorkerConfig() WorkerConfig {
	return WorkerConfig{Client: DefaultClientConfig(), StartTimeout: 10 * time.Second, Chunk: 4, ProgressEvery: 2, RequestTimeout: 30 * time.Second}
}

// Validate checks the configuration.
func (c *WorkerConfig) Validate() error {
	if c.ID < 0 {
		return fmt.Errorf("ps: worker ID %d", c.ID)
	}
	if c.Coordinator == "" {
		return errors.New("ps: WorkerConfig.Coordinator is empty")
	}
	if c.StartTimeout < 0 || c.Chunk < 0 || c.ProgressEvery < 0 {
		return errors.New("ps: negative WorkerConfig field")
	}
	return c.Client.Validate()
}

// TrainConfig says what Worker.Train (and Cluster.Train) trains: the keys
// and lengths of the parameters, their Initializer (store.Zeros,
// store.Uniform, ...) and the clocks to run. Without Init the keys must
// already exist (ErrUnknownKey).
type TrainConfig struct {
	// Keys and Lens are the model's parameters; the Model sees their values
	// back to back in this order. Lens nil means the client's Width.
	Keys []uint64
	Lens []int
	// Init, if not nil, initialises the keys first (every worker may do it:
	// Init keeps existing keys).
	Init Initializer
	// Clocks is the number of clocks (iterations) of the run: the worker
	// computes the clocks from the one it starts at (0, or its join clock
	// when it joined mid-run, see Membership) to Clocks-1.
	Clocks int
	// Quit makes the worker leave after its last clock as departing
	// mid-run (Worker.Quit: it counts against epsp.Config.MinWorkers and
	// may rejoin after the cooldown) instead of as finished (Worker.Leave).
	Quit bool
}

// TrainStats summarises one worker's Train.
type TrainStats struct {
	// Loss[c] is the mean loss over the samples this worker computed of its
	// own batch in clock c (NaN if it computed none).
	Loss []float64
	// Samples counts samples of its own batches it computed; Given those it
	// gave away (by transfer or by assignment at release); Taken those of
	// other workers' batches it computed (transferred or assigned).
	Samples, Given, Taken int
}

// Worker is the worker role: it pulls parameters, computes gradients of
// its mini-batch with p goroutines (p set by the coordinator), pushes them
// as the coordinator's policy decides, reports progress, and gives away or
// takes over sample ranges when a transfer is ordered. It implements
// transport.Handler.
type Worker struct {
	cfg    WorkerConfig
	opts   options
	name   string
	quit   chan struct{}
	closeO sync.Once
	wg     sync.WaitGroup
	ctx    context.Context // canceled by Close
	cancel context.CancelFunc

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every state change
	tr       transport.Transport
	client   *Client
	released int // the clock the worker may compute
	version  uint64
	batch    int
	par      int
	cur      *job
	model    Model
	sampler  Sampler
	train    *TrainConfig
	params   []float32
	pversion uint64
	stats    TrainStats
	fatal    error
	closed   bool // set by Close before it waits for wg

	joinClock   int             // the clock it joined at mid-run, or -1
	helloed     bool            // the hello's answer is applied (batch, parallelism)
	early       *early          // a release that overtook the hello's answer
	incarnation uint64          // random per process (see lease.go)
	helloWait   atomic.Int64    // the coordinator's CoordinatorConfig.Wait, from its hello (ns)
	orderIDs    map[uint64]bool // guarded by mu: transfer orders and tasks had (seenOrder)
	left        atomic.Bool     // Leave succeeded: the heartbeats stop

	reach []atomic.Int64 // server → its last answer to pingServer (unix ns; lease.go)
}

var _ transport.Handler = (*Worker)(nil)

// NewWorker returns a worker; Start connects it.
func NewWorker(name string, cfg WorkerConfig, opts ...Option) (*Worker, error) {
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	if cfg.Chunk == 0 {
		cfg.Chunk = 4
	}
	if cfg.ProgressEvery == 0 {
		cfg.ProgressEvery = 2
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = defaultHeartbeat
	}
	if cfg.CoordinatorTimeout == 0 {
		cfg.CoordinatorTimeout = defaultCoordinatorTimeout
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, opts: buildOptions(opts), name: name, quit: make(chan struct{}), changed: make(chan struct{}), released: -1,
		joinClock: -1, incarnation: newIncarnation()}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	return w, nil
}

// ID returns the worker's index.
func (w *Worker) ID() epsp.WorkerID { return w.cfg.ID }

// Client returns the worker's key-value client (nil before Start).
func (w *Worker) Client() *Client {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.client
}

// Start attaches the transport and waits, up to StartTimeout, for every
// server and then the coordinator to answer. On timeout the
// ErrStartTimeout error names who is missing.
func (w *Worker) Start(ctx context.Context, tr transport.Transport) error {
	cl, err := NewClient(tr, w.cfg.Client)
	if err != nil {
		return err
	}
	if err := waitServers(ctx, cl, w.cfg.StartTimeout); err != nil {
		return fmt.Errorf("%s: %w", w.name, err)
	}
	w.mu.Lock()
	w.tr, w.client = tr, cl
	w.mu.Unlock()
	hctx, cancel := context.WithTimeout(ctx, w.cfg.StartTimeout)
	defer cancel()
	var resp []byte
	backoff := time.Millisecond
	for {
		resp, err = w.coordCall(hctx, w.helloMsg())
		if err != nil && hctx.Err() != nil && ctx.Err() == nil {
			// the start deadline passed during the call
			return fmt.Errorf("%w: %s waiting for coordinator: %s unreachable (%v)", ErrStartTimeout, w.name, w.cfg.Coordinator, err)
		}
		if err == nil || !errors.Is(err, ErrCoordinatorUnavailable) {
			break
		}
		select {
		case <-hctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: %s waiting for coordinator: %s unreachable (%v)", ErrStartTimeout, w.name, w.cfg.Coordinator, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("%s: hello: %w", w.name, err)
	}
	h, err := decodeHello(resp)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.batch, w.par = h.batch, h.par
	w.helloed = true
	w.helloWait.Store(int64(h.wait))
	if h.join {
		// Admitted mid-run at clock h.clock: it starts there once the
		// coordinator releases it (its first pull reads the parameters
		// of then). The release may have come before this answer.
		w.joinClock = h.clock
		if e := w.early; e != nil {
			w.early = nil
			err = w.setReleasedAssignLocked(e.clock, e.version, e.ra)
		}
	} else {
		w.setReleasedLocked(h.clock, h.version)
	}
	w.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: release: %w", w.name, err)
	}
	w.startHeartbeats()
	return nil
}

// JoinClock returns the clock the worker was admitted at when it joined a
// running job (see Membership), or -1 when it started with the run.
func (w *Worker) JoinClock() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.joinClock
}

// Close stops the worker's goroutines and waits for them; a running Train
// returns ErrClosed. It does not close the transport.
func (w *Worker) Close() error {
	w.closeO.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		close(w.quit)
		w.cancel()
	})
	w.wg.Wait()
	return nil
}

// Err returns the error that broke the worker's background work, if any.
func (w *Worker) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fatal
}

// setFatal records the first error that broke the worker's background
// work, wakes its waiters and reports the failure to the coordinator.
func (w *Worker) setFatal(err error) {
	w.mu.Lock()
	first := w.fatal == nil
	if first {
		w.fatal = err
	}
	w.broadcastLocked()
	w.mu.Unlock()
	if first && !errors.Is(err, ErrAborted) {
		w.reportFail(err)
	}
}

// reportFail tells the coordinator this worker failed (best effort), so it
// can abort the run instead of leaving the others waiting at a barrier.
func (w *Worker) reportFail(err error) {
	w.mu.Lock()
	tr := w.tr
	w.mu.Unlock()
	if tr == nil {
		return
	}
	e := wire.NewMsg(nil, wire.OpFail)
	e.Str(err.Error())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = tr.Send(ctx, w.cfg.Coordinator, e.B)
}

func (w *Worker) broadcastLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// setReleasedLocked moves the worker into clock c with a fresh job.
func (w *Worker) setReleasedLocked(c int, version uint64) {
	_ = w.setReleasedAssignLocked(c, version, nil) // no assignment, no error
}

// waitFor blocks until cond (checked under w.mu) holds.
func (w *Worker) waitFor(ctx context.Context, cond func() bool) error {
	for {
		w.mu.Lock()
		ok, ch, fatal := cond(), w.changed, w.fatal
		w.mu.Unlock()
		if ok {
			return nil
		}
		if fatal != nil {
			return fatal
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-w.quit:
			return ErrClosed
		}
	}
}

func (w *Worker) coordCall(ctx context.Context, req []byte) ([]byte, error) {
	var first time.Time
	backoff := 20 * time.Millisecond
	for {
		resp, err := request(ctx, w.tr, w.cfg.Coordinator, req, w.cfg.RequestTimeout)
		if err == nil {
			return wire.ParseResponse(resp, string(w.cfg.Coordinator))
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		wait := w.coordWait()
		if first.IsZero() {
			first = time.Now()
		}
		if wait <= 0 {
			return nil, fmt.Errorf("%w: %s: %w", ErrCoordinatorUnavailable, w.cfg.Coordinator, err)
		}
		if gone := time.Since(first); gone >= wait {
			return nil, fmt.Errorf("%w: %s: %w: no answer for %v (CoordinatorWait %v): %w", ErrPeerLost, w.name, ErrCoordinatorUnavailable,
				gone.Round(time.Millisecond), wait, err)
		}
		// The coordinator may be restarting from its state: resend (a
		// resent clock or leave is counted once, see coordstate.go).
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-w.quit:
			return nil, ErrClosed
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// seenOrder reports whether the worker has had the transfer order (or,
// with the top bit set, the task) of this id, and notes it: a restarted
// coordinator sends again the orders and tasks it cannot know arrived.
// It remembers the last 1024 of each kind (ids only grow).
func (w *Worker) seenOrder(id uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.orderIDs == nil {
		w.orderIDs = map[uint64]bool{}
	}
	if w.orderIDs[id] {
		return true
	}
	w.orderIDs[id] = true
	if len(w.orderIDs) > 2048 {
		ids := slices.Sorted(maps.Keys(w.orderIDs))
		for _, x := range ids[:len(ids)/2] {
			delete(w.orderIDs, x)
		}
	}
	return false
}

// coordWait is how long the worker waits for a silent coordinator
// (WorkerConfig.CoordinatorWait).
func (w *Worker) coordWait() time.Duration {
	switch {
	case w.cfg.CoordinatorWait > 0:
		return w.cfg.CoordinatorWait
	case w.cfg.CoordinatorWait < 0:
		return 0
	}
	return time.Duration(w.helloWait.Load())
}

// HandleRequest refuses requests: workers only receive one-way orders.
func (w *Worker) HandleRequest(context.Context, transport.NodeID, []byte) ([]byte, error) {
	return wire.ErrResponse(fmt.Errorf("%w: workers serve no requests", ErrMalformed)), nil
}

// HandleMessage receives the coordinator's orders.
func (w *Worker) HandleMessage(from transport.NodeID, msg []byte) {
	defer w.opts.served("worker", w.name, w.opts.now(), msg, nil, nil)
	if from != w.cfg.Coordinator {
		return
	}
	w.mu.Lock()
	started := w.tr != nil
	w.mu.Unlock()
	if !started {
		return // an order before Start has no job or client to act on
	}
	defer func() {
		if p := recover(); p != nil {
			w.setFatal(w.opts.recovered(w.name, from, p))
		}
	}()
	o, body, err := wire.Header(msg)
	if err != nil {
		return
	}
	d := decoder{B: body}
	switch o {
	case wire.OpRelease:
		c, v, ra, err := decodeRelease(&d)
		if err != nil {
			// A lost release would leave the worker waiting forever.
			w.setFatal(fmt.Errorf("ps: %s: release: %w", w.name, err))
			return
		}
		w.mu.Lock()
		if !w.helloed {
			// A joiner's release can overtake the hello's answer (it is
			// sent before the answer, on another path): its job needs the
			// batch the answer carries, so Start applies it.
			w.early = &early{c, v, ra}
			w.mu.Unlock()
			return
		}
		err = w.setReleasedAssignLocked(c, v, ra)
		w.mu.Unlock()
		if err != nil {
			w.setFatal(err)
		}
	case wire.OpSetParallelism:
		p := d.Int(1, maxInt32, "parallelism")
		if d.End() != nil {
			return
		}
		w.mu.Lock()
		w.par = p
		j := w.cur
		w.mu.Unlock()
		if j != nil {
			j.setP(p)
		}
		w.opts.emit(event.Event{Kind: event.Parallelism, Node: w.name, Worker: w.cfg.ID, P: p})
	case wire.OpSetBatch:
		b := d.Int(1, maxWireBatch, "batch")
		if d.End() != nil {
			return
		}
		w.mu.Lock()
		w.batch = b
		w.mu.Unlock()
		w.opts.emit(event.Event{Kind: event.Batch, Node: w.name, Worker: w.cfg.ID, Samples: b})
	case wire.OpTransferOrder:
		ord := epsp.TransferOrder{ID: d.U64(), From: w.cfg.ID, To: epsp.WorkerID(d.Int(0, maxInt32, "to")),
			Clock: d.Int(0, 1<<62, "clock"), Lo: d.Int(0, 1<<62, "lo"), Hi: d.Int(0, 1<<62, "hi")}
		if d.End() != nil || w.seenOrder(ord.ID) {
			return // a restarted coordinator sends again what it is unsure of
		}
		// Give (or refuse) here, in the order the coordinator sent the
		// orders, so that the pieces of a split, ordered tail-first, are
		// taken tail-first; only the answer waits for the network.
		acc, lo, hi, batch := w.giveTail(ord)
		w.goBackground(func() { w.answerTransfer(ord, acc, lo, hi, batch) })
	case wire.OpAbort:
		msg := d.Str()
		if d.End() != nil {
			return
		}
		w.setFatal(fmt.Errorf("%w: %s", ErrAborted, msg))
	case wire.OpTransferTask:
		t := transferTask{id: d.U64(), owner: epsp.WorkerID(d.Int(0, maxInt32, "owner")), clock: d.Int(0, 1<<62, "clock"),
			lo: d.Int(0, 1<<62, "lo"), hi: d.Int(0, 1<<62, "hi"), batch: d.Int(1, maxWireBatch, "batch"), version: d.U64()}
		if d.End() != nil || t.lo >= t.hi || t.hi > t.batch || w.seenOrder(1<<63|t.id) {
			return
		}
		w.goBackground(func() { w.takeOver(t) })
	}
}

// early is a release received before the hello's answer.
type early struct {
	clock   int
	version uint64
	ra      *releaseAssign
}

// track adds one goroutine to the set Close waits for, unless Close has
// begun; it reports whether the goroutine may start.
func (w *Worker) track() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.wg.Add(1)
	return true
}

// goBackground runs f in a goroutine Close waits for.
func (w *Worker) goBackground(f func()) {
	if !w.track() {
		return
	}
	go func() {
		defer w.wg.Done()
		defer func() {
			if p := recover(); p != nil {
				w.setFatal(w.opts.recovered(w.name, w.cfg.Coordinator, p))
			}
		}()
		f()
	}()
}

// giveTail is the giver's side of a transfer: give [Lo,Hi) (possibly
// trimmed at the front) if no goroutine has claimed it yet and it is the
// tail of what the worker still owns of its batch (Hi is the batch end or
// the start of a range already given). The pieces of a multi-taker split
// come tail-first, so each is the tail when it arrives; a piece below one
// that was refused or trimmed is refused, which keeps the worker's own
// part one prefix [0, end) as the policy's ledger expects. Orders arrive
// one at a time (HandleMessage is sequential per sender), so nothing
// gives between the check and giveAway. It returns the answer and the
// owner's batch size (0 if the order is not for the current clock).
func (w *Worker) giveTail(o epsp.TransferOrder) (acc bool, lo, hi, batch int) {
	w.mu.Lock()
	j := w.cur
	w.mu.Unlock()
	if j == nil || j.clock != o.Clock {
		return false, 0, 0, 0
	}
	if o.Hi != j.ownedEnd() {
		return false, 0, 0, j.size
	}
	acc, lo, hi = j.giveAway(o.Lo, o.Hi)
	if acc {
		w.mu.Lock()
		w.stats.Given += hi - lo
		w.mu.Unlock()
	}
	return acc, lo, hi, j.size
}

// ownedEnd is the end of the job's range not given away: hi0 lowered past
// every given range that ends there.
func (j *job) ownedEnd() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	end := j.hi0
	for moved := true; moved; {
		moved = false
		for _, g := range j.given {
			if g.hi == end && g.lo < end {
				end, moved = g.lo, true
			}
		}
	}
	return end
}

// answerTransfer sends the giver's answer to the coordinator.
func (w *Worker) answerTransfer(o epsp.TransferOrder, acc bool, lo, hi, batch int) {
	e := wire.NewMsg(nil, wire.OpTransferResult)
	e.U64(o.ID)
	if acc {
		e.U8(1)
	} else {
		e.U8(0)
	}
	e.I64(int64(lo))
	e.I64(int64(hi))
	e.I64(int64(batch))
	if _, err := w.coordCall(w.ctx, e.B); err != nil && w.ctx.Err() == nil {
		w.setFatal(fmt.Errorf("ps: %s answering transfer %d: %w", w.name, o.ID, err))
	}
}

// takeOver is the taker's side: compute [lo,hi) of the owner's batch and
// push it with Owner = the giver.
func (w *Worker) takeOver(t transferTask) {
	err := w.waitFor(w.ctx, func() bool { return w.model != nil && w.params != nil })
	if err != nil {
		if w.ctx.Err() == nil {
			w.setFatal(fmt.Errorf("ps: %s cannot take over transfer %d: %w", w.name, t.id, err))
		}
		return
	}
	w.mu.Lock()
	params, version, par := w.params, w.pversion, w.par
	w.mu.Unlock()
	if version > t.version {
		version = t.version
	}
	j := w.newJob(t.owner, t.clock, t.batch, t.lo, t.hi, false)
	j.start(params, version, par)
	select {
	case <-j.doneCh:
	case <-w.quit:
		return
	}
	if j.done == 0 {
		return
	}
	push := epsp.Push{Worker: w.cfg.ID, Owner: t.owner, Clock: t.clock, BaseVersion: version, Samples: j.done, BatchSamples: t.batch, Busy: j.busy()}
	if err := w.pushGrad(w.ctx, push, j.grad); err != nil {
		if w.ctx.Err() == nil {
			w.setFatal(fmt.Errorf("ps: %s pushing transfer %d: %w", w.name, t.id, err))
		}
		return
	}
	w.mu.Lock()
	w.stats.Taken += j.done
	w.mu.Unlock()
	e := wire.NewMsg(nil, wire.OpTransferDone)
	e.U64(t.id)
	if _, err := w.coordCall(w.ctx, e.B); err != nil && w.ctx.Err() == nil {
		w.setFatal(fmt.Errorf("ps: %s finishing transfer %d: %w", w.name, t.id, err))
	}
}

// pushGrad admits a push and sends it to the servers: grad holds the sum
// of per-sample gradients over push.Samples samples.
func (w *Worker) pushGrad(ctx context.Context, push epsp.Push, grad []float32) error {
	tc := w.train
	return w.pushGradTo(ctx, push, tc.Keys, tc.Lens, grad)
}

func (w *Worker) pushGradTo(ctx context.Context, push epsp.Push, keys []uint64, lens []int, grad []float32) error {
	// Validate before the coordinator counts the push.
	if err := w.client.validate(ctx, keys, lens, len(grad)); err != nil {
		return err
	}
	e := wire.NewMsg(nil, wire.OpAdmit)
	encodePush(&e, push)
	resp, err := w.coordCall(ctx, e.B)
	if err != nil {
		return err
	}
	dec, err := decodeDecision(resp)
	if err != nil {
		return err
	}
	inv := 1 / float32(push.Samples)
	for i := range grad {
		grad[i] *= inv // the mean gradient over the push's samples
	}
	var pa pushArgs
	switch dec.Action {
	case epsp.Drop:
		return nil
	case epsp.ApplyNow:
		pa = pushArgs{mode: wire.ModeApply, clock: push.Clock, scale: dec.EffectiveScale() * float64(push.Samples) / float64(push.BatchSamples), weight: float64(push.Samples)}
	case epsp.Accumulate:
		pa = pushArgs{mode: wire.ModeAccumulate, clock: dec.Clock, scale: 1, weight: float64(push.Samples)}
	default:
		return fmt.Errorf("%w: push action %d", ErrMalformed, dec.Action)
	}
	return w.client.do(ctx, wire.OpPush, keys, grad, nil, lens, pa)
}

// Train runs tc.Clocks clocks of data-parallel training of model on the
// batches sampler assigns, following the coordinator's orders. It returns
// when this worker's last clock is released and it has left (Leave; the
// worker keeps serving transfers until Close).
//
// An error after training has begun (a server or the coordinator
// unreachable) is reported to the coordinator, which aborts the run so
// that the other workers return ErrAborted instead of waiting forever.
func (w *Worker) Train(ctx context.Context, model Model, sampler Sampler, tc TrainConfig) (TrainStats, error) {
	if model == nil || sampler == nil {
		return TrainStats{}, errors.New("ps: Train needs a Model and a Sampler")
	}
	w.mu.Lock()
	if w.client == nil {
		w.mu.Unlock()
		return TrainStats{}, errors.New("ps: Train before Start")
	}
	if w.train != nil {
		w.mu.Unlock()
		return TrainStats{}, errors.New("ps: Train called twice")
	}
	total, err := w.client.checkShape(tc.Keys, tc.Lens)
	if err != nil {
		w.mu.Unlock()
		return TrainStats{}, err
	}
	w.model, w.sampler, w.train = model, sampler, &tc
	w.mu.Unlock()
	st, err := w.run(ctx, tc, total)
	if err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrAborted) {
		w.reportFail(err)
	}
	return st, err
}

func (w *Worker) run(ctx context.Context, tc TrainConfig, total int) (TrainStats, error) {
	if tc.Init != nil {
		if err := w.client.InitWith(ctx, tc.Keys, tc.Lens, tc.Init); err != nil {
			return TrainStats{}, err
		}
	}
	loss := make([]float64, 0, tc.Clocks)
	// A joiner waits for its first release (into its join clock).
	if err := w.waitFor(ctx, func() bool { return w.released >= 0 }); err != nil {
		return w.statsWith(loss), err
	}
	for {
		w.mu.Lock()
		c, j, version := w.released, w.cur, w.version
		w.mu.Unlock()
		if c >= tc.Clocks {
			break
		}
		w.clockStarted(c)
		w.opts.emit(event.Event{Kind: event.ClockStart, Node: w.name, Worker: w.cfg.ID, Clock: c})
		params := make([]float32, total)
		if err := w.client.Pull(ctx, tc.Keys, params, tc.Lens); err != nil {
			return w.statsWith(loss), err
		}
		w.opts.emit(event.Event{Kind: event.Pulled, Node: w.name, Worker: w.cfg.ID, Clock: c})
		w.mu.Lock()
		w.params, w.pversion = params, version
		par := w.par
		w.broadcastLocked()
		w.mu.Unlock()
		j.start(params, version, par)
		select {
		case <-j.doneCh:
		case <-ctx.Done():
			return w.statsWith(loss), ctx.Err()
		case <-w.quit:
			return w.statsWith(loss), ErrClosed
		}
		// One push for the clock: the own samples and the assigned ones
		// (Parts say whose), weighted by the samples it covers.
		n, x := j.done, j.xdone
		w.opts.emit(event.Event{Kind: event.Computed, Node: w.name, Worker: w.cfg.ID, Clock: c, Samples: n + x})
		if n > 0 {
			loss = append(loss, j.loss/float64(n))
		} else {
			loss = append(loss, math.NaN())
		}
		if n+x > 0 {
			push := epsp.Push{Worker: w.cfg.ID, Owner: w.cfg.ID, Clock: c, BaseVersion: version, Samples: n + x, BatchSamples: j.size + j.xtotal,
				Parts: j.pushParts(w.cfg.ID), Busy: j.busy()}
			if err := w.pushGrad(ctx, push, j.grad); err != nil {
				return w.statsWith(loss), err
			}
			w.opts.emit(event.Event{Kind: event.Pushed, Node: w.name, Worker: w.cfg.ID, Clock: c, Samples: n + x})
		}
		w.mu.Lock()
		w.stats.Samples += n
		w.stats.Taken += x
		w.stats.Given += j.size - j.hi0 // assigned away at release
		w.mu.Unlock()
		if _, err := w.Clock(ctx); err != nil {
			return w.statsWith(loss), err
		}
	}
	if tc.Quit {
		return w.statsWith(loss), w.Quit(ctx)
	}
	err := w.Leave(ctx)
	switch {
	case err != nil && errors.Is(context.Cause(ctx), errRunOver):
		// Cluster.Wait's shutdown ended the run, which a coordinator
		// does only once it has counted every member's leave: this
		// one's answer was still on its way (or a successor, restored
		// with the leave counted, ended the run while this worker
		// backed off to resend it).
		err = nil
	case errors.Is(err, ErrCoordinatorUnavailable):
		// Every clock was released: the work is done and pushed. A
		// coordinator that ends its run as soon as every leave is
		// served can exit before its answer to this one is written
		// (seen in TestMultiProcess_ServerRestartBitIdentical: "EOF"
		// after clock 7); whether it recorded the leave is its own
		// outcome to report, not this worker's failure.
		lg := w.opts.log
		if lg == nil {
			lg = slog.Default()
		}
		lg.Warn("ps: the coordinator did not confirm this worker's leave; its training is done", "worker", w.name, "err", err)
		err = nil
	}
	return w.statsWith(loss), err
}

func (w *Worker) statsWith(loss []float64) TrainStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Loss = loss
	return s
}

func (w *Worker) sendProgress(r epsp.ProgressReport) {
	e := wire.NewMsg(nil, wire.OpProgress)
	encodeProgress(&e, r)
	ctx, cancel := context.WithTimeout(w.ctx, time.Second)
	defer cancel()
	_ = w.tr.Send(ctx, w.cfg.Coordinator, e.B) // best effort: a lost report only delays control
}

// CurrentClock returns the clock the worker may compute now and the model
// version its release carried (use it as the BaseVersion of its pushes).
func (w *Worker) CurrentClock() (clock int, version uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.released, w.version
}

// PushGradient is the manual-loop counterpart of Train (Bösen style: Pull,
// compute, PushGradient, Clock): it asks the coordinator to admit a push of
// grad — the mean gradient over samples samples of this worker's current
// clock — and sends it to the servers as decided. grad is laid out as keys
// and lens in Push. Do not mix with Train.
func (w *Worker) PushGradient(ctx context.Context, keys []uint64, grad []float32, lens []int, samples int) error {
	if samples <= 0 {
		return fmt.Errorf("%w: push of %d samples", ErrLengthMismatch, samples)
	}
	c, version := w.CurrentClock()
	sum := make([]float32, len(grad))
	for i, g := range grad {
		sum[i] = g * float32(samples) // pushGrad divides by the sample count
	}
	push := epsp.Push{Worker: w.cfg.ID, Owner: w.cfg.ID, Clock: c, BaseVersion: version, Samples: samples, BatchSamples: samples}
	return w.pushGradTo(ctx, push, keys, lens, sum)
}

// Leave tells the coordinator that this worker has finished training: it
// will push its own batch and clock no more (epsp.EventLeave), so policies
// that count pushes per step (Sync-opt) stop waiting for it and release
// the workers still training. The worker still computes transferred
// ranges until Close. Train ends with it, after its last clock is
// released; a manual loop calls it after its last Clock.
func (w *Worker) Leave(ctx context.Context) error {
	_, err := w.coordCall(ctx, wire.NewMsg(nil, wire.OpLeave).B)
	if err == nil {
		w.left.Store(true)
	}
	return err
}

// Quit takes the worker out of a running job before the end of its
// schedule (a voluntary scale-down): like Leave, but it counts against
// epsp.Config.MinWorkers, and the worker (or a new process under its
// name) may join again after epsp.Config.RejoinAfter. Call it between
// clocks: the clock in progress is not waited for by any barrier, and its
// samples not yet pushed are not computed by anyone.
func (w *Worker) Quit(ctx context.Context) error {
	e := wire.NewMsg(nil, wire.OpLeave)
	e.U8(1)
	_, err := w.coordCall(ctx, e.B)
	if err == nil {
		w.left.Store(true)
	}
	return err
}

// Clock ends the worker's current clock (its pushes must be stored) and
// blocks until the coordinator's policy releases it into the next one;
// it returns the new clock.
func (w *Worker) Clock(ctx context.Context) (int, error) {
	defer w.blocked(w.opts.now())
	c, _ := w.CurrentClock()
	e := wire.NewMsg(nil, wire.OpClock)
	e.I64(int64(c))
	if _, err := w.coordCall(ctx, e.B); err != nil {
		return c, err
	}
	if err := w.waitFor(ctx, func() bool { return w.released > c }); err != nil {
		return c, err
	}
	c, _ = w.CurrentClock()
	return c, nil
}
