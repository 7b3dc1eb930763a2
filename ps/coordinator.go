package ps

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/transport"
)

// CoordinatorConfig configures the coordinator role.
type CoordinatorConfig struct {
	// EPSP is the synchronisation state's config (workers, initial batch
	// and parallelism, control tick).
	EPSP epsp.Config
	// Servers names the server nodes, in partitioner order. Required.
	Servers []transport.NodeID
	// Workers names worker i's node: EPSP.NumWorkers names, or
	// EPSP.Slots() of them for an elastic run (the first NumWorkers start
	// the run; the others may join it, see Membership). With NumWorkers
	// names only, no new slot can join (departed workers may rejoin).
	Workers []transport.NodeID
	// StartTimeout bounds the wait for servers at Start and for workers in
	// WaitWorkers; zero means 10 s.
	StartTimeout time.Duration
	// OrderTimeout bounds each flush and each order sent to a worker; zero
	// means 30 s.
	OrderTimeout time.Duration
	// Lease configures failure detection (see LeaseConfig).
	Lease LeaseConfig
	// Membership configures elastic membership's pause bound and change
	// hook (see MembershipConfig; the rules are in EPSP).
	Membership MembershipConfig
	// Store, when set, keeps the coordinator's state so that a coordinator
	// started on the same store after a crash resumes the run
	// (coordstate.go says what is kept and when it is saved);
	// DirCoordinatorStore keeps it in a directory. Nil means not durable:
	// a coordinator that dies ends the run.
	Store CoordinatorStore
	// Wait, with a Store, is how long this coordinator tells the workers
	// (in their hello's answer) and, in a Cluster, the other nodes (in its
	// pings' answers) to wait for it when it stops answering, before they
	// fail naming it: the time a supervisor has to start it again. Zero
	// means DefaultCoordinatorWait; negative tells them not to wait.
	// Without a Store it tells them nothing (they do not wait: nothing
	// could resume the run).
	Wait time.Duration
	// SendersApart says the servers keep each sender's pushes of a clock
	// apart (StoreConfig.Deterministic; a Cluster sets it from its Store).
	// Under ContinueWithout the coordinator then drops, at a clock's
	// flush, the push of a worker it lost after that push was admitted and
	// before the worker clocked, and hands the worker's samples to a
	// survivor, so each sample counts once on every server even when the
	// push reached some servers only (partial.go). False: such a push
	// stays where it arrived, and a partial update is reported.
	SendersApart bool
}

// DefaultCoordinatorConfig returns epsp.DefaultConfig with the default
// timeouts; Servers and Workers must be filled in.
func DefaultCoordinatorConfig() CoordinatorConfig {
	return CoordinatorConfig{EPSP: epsp.DefaultConfig(), StartTimeout: 10 * time.Second, OrderTimeout: 30 * time.Second}
}

// Validate checks the configuration.
func (c *CoordinatorConfig) Validate() error {
	if err := c.EPSP.Validate(); err != nil {
		return err
	}
	if len(c.Servers) == 0 {
		return errors.New("ps: CoordinatorConfig.Servers is empty")
	}
	if len(c.Workers) != c.EPSP.NumWorkers && len(c.Workers) != c.EPSP.Slots() {
		return fmt.Errorf("ps: %d worker names for %d workers (%d slots)", len(c.Workers), c.EPSP.NumWorkers, c.EPSP.Slots())
	}
	if err := c.Membership.Validate(); err != nil {
		return err
	}
	if c.StartTimeout < 0 || c.OrderTimeout < 0 {
		return errors.New("ps: negative timeout")
	}
	return c.Lease.Validate()
}

// Coordinator is the coordinator role: a thin concurrent shell around an
// epsp.Coordinator. One goroutine owns the core and serves workers' events
// one at a time; for every policy Output it carries out the flushes on all
// servers and waits for them before it delivers releases, then sends
// parallelism, batch and transfer orders. It implements transport.Handler.
type Coordinator struct {
	cfg    CoordinatorConfig
	opts   options
	core   *epsp.Coordinator
	names  map[transport.NodeID]epsp.WorkerID
	reqs   chan *coordReq
	quit   chan struct{}
	wg     sync.WaitGroup
	closeO sync.Once
	// gone: the coordinator stopped as a crash would (Abandon, or a save
	// refused with ErrSuperseded); set before quit closes
	gone atomic.Bool

	runCtx    context.Context // canceled by Close
	runCancel context.CancelFunc

	mu      sync.Mutex
	tr      transport.Transport
	client  *Client
	joined  []bool
	fatal   error
	stats   epsp.Stats
	started bool

	lease *leases

	lrScale    atomic.Uint64 // float64 bits of SetLRScale's factor; 0 means 1
	paused     bool          // guarded by mu: the core is paused below MinWorkers
	pauseTimer *time.Timer   // loop-owned: the pause's deadline
	pauseSince time.Time     // loop-owned

	// durable state (coordstate.go); log is nil without a Store
	log     *coordLog
	nowBase time.Duration // the restored run's time when this process started
	// redoFlush and redoRel are the last restored outputs with flushes
	// and with releases, which Start carries out again
	redoFlush, redoRel *epsp.Output
	restored           bool
	looping            bool // loop-owned: the loop runs
	maxTransferID      uint64
	// lastAdmit: restored, each worker's last admitted push, for its
	// first admit since (resentAdmit); loop-owned
	lastAdmit map[epsp.WorkerID]lastAdmitted
	statsDue  bool // loop-owned: stats to publish after the answer
	// open and doubt (partial.go; loop-owned): the admitted pushes of each
	// buffer clock not yet flushed, and the lost workers among them
	open  map[int][]openPush
	doubt map[int][]epsp.WorkerID
	// drop (partial.go; loop-owned): per buffer clock, the lost workers
	// whose pushes its flush leaves out (SendersApart)
	drop map[int][]string
}

var _ transport.Handler = (*Coordinator)(nil)

type coordReq struct {
	op     op
	worker epsp.WorkerID
	push   epsp.Push
	ev     epsp.Event
	batch  int
	reason string         // wire.OpFail
	inc    uint64         // wire.OpHello: the worker's incarnation
	reply  chan coordResp // nil for one-way messages
}

type coordResp struct {
	dec   epsp.PushDecision
	hello helloInfo
	err   error
}

// NewCoordinator returns a coordinator deciding with policy.
func NewCoordinator(cfg CoordinatorConfig, policy epsp.Policy, opts ...Option) (*Coordinator, error) {
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	if cfg.OrderTimeout == 0 {
		cfg.OrderTimeout = 30 * time.Second
	}
	cfg.Lease = cfg.Lease.withDefaults()
	cfg.Membership = cfg.Membership.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	slots := cfg.EPSP.Slots()
	if len(cfg.Workers) < slots {
		// names for the initial workers only: no other slot can join
		cfg.EPSP.MaxWorkers = 0
		slots = cfg.EPSP.NumWorkers
	}
	core, err := epsp.NewCoordinator(cfg.EPSP, policy)
	if err != nil {
		return nil, err
	}
	c := &Coordinator{
		cfg:    cfg,
		opts:   buildOptions(opts),
		core:   core,
		names:  make(map[transport.NodeID]epsp.WorkerID),
		reqs:   make(chan *coordReq, 256),
		quit:   make(chan struct{}),
		joined: make([]bool, slots),
		lease:  newLeases(cfg.Lease, cfg.EPSP.NumWorkers, slots, len(cfg.Servers)),
	}
	c.runCtx, c.runCancel = context.WithCancel(context.Background())
	c.meterStragglers(slots)
	for i, n := range cfg.Workers {
		if _, dup := c.names[n]; dup {
			return nil, fmt.Errorf("ps: worker node %q listed twice", n)
		}
		c.names[n] = epsp.WorkerID(i)
	}
	if cfg.Store != nil {
		if err := c.restore(policy); err != nil {
			return nil, err
		}
	}
	if cfg.Lease.OnWorkerLost == ContinueWithout && !cfg.SendersApart && len(cfg.Servers) > 1 {
		c.opts.log.Info("ps: ContinueWithout over servers that sum their senders' pushes together: a lost worker's push that reached some servers only stays there, reported at its flush (StoreConfig.Deterministic would drop it from all; partial.go)")
	}
	return c, nil
}

// Start attaches the transport, waits (up to StartTimeout) until every
// server answers, and starts serving. On timeout it returns an
// ErrStartTimeout error naming the missing servers.
func (c *Coordinator) Start(ctx context.Context, tr transport.Transport) error {
	cl, err := NewClient(tr, ClientConfig{Servers: c.cfg.Servers, Retry: c.cfg.Lease.ServerRestart})
	if err != nil {
		return err
	}
	if err := waitServers(ctx, cl, c.cfg.StartTimeout); err != nil {
		return err
	}
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("ps: coordinator started twice")
	}
	c.started = true
	c.tr, c.client = tr, cl
	c.mu.Unlock()
	if err := c.redo(ctx); err != nil {
		return err
	}
	c.wg.Add(1)
	go c.loop()
	c.startLeases()
	return nil
}

// Close stops the coordinator's goroutine and waits for it. Pending worker
// requests fail with ErrClosed (after Abandon, they stay unanswered as
// Abandon says). It does not close the transport.
func (c *Coordinator) Close() error {
	c.closeO.Do(func() { close(c.quit); c.runCancel() })
	c.wg.Wait()
	return nil
}

// Abandon stops the coordinator as a crash of its process would, and
// waits for its goroutines: for a coordinator that another one has taken
// over, or is about to, from the same state (a standby whose leadership
// was lost: contrib/etcd's RunStandby). A CoordinatorStore whose save
// fails with an error wrapping ErrSuperseded has the same effect, from
// that save on. It does not close the transport; close it after, without
// Cluster.Close (which tells the other nodes that the run is over).
//
// From then on the coordinator sends nothing (no abort, release, order,
// task or flush; a send already under way when Abandon is called may
// still arrive, as at a crash), saves nothing and pings nobody, and it
// answers no request: a request pending or arriving later gets a
// transport-level error (its HandleRequest returns a nil response and an
// error wrapping ErrSuperseded, which a transport delivers as a
// *transport.RemoteError), not a response of ps; one-way messages
// (progress, failure reports) are dropped. Workers treat that as they
// treat a coordinator that crashed: they resend every request, backing
// off to every 500 ms, and their heartbeats tolerate the silence, for
// WorkerConfig.CoordinatorWait (the wait the coordinator advertised:
// CoordinatorConfig.Wait), so a successor that answers at the same node
// name within that wait resumes the run and finds every request again
// (a resend is counted once, coordstate.go); after the wait they fail
// with ErrPeerLost naming the coordinator. Servers see nothing: the
// coordinator's lease pings stop and no flush comes until the successor
// redoes the last one. Without a Store the workers do not wait (nothing
// could resume the run) and fail at their first request.
//
// Err then returns an error wrapping ErrSuperseded (joined to the error
// that had stopped the run before, if any). Close after Abandon only
// waits; Abandon after Close, or twice, does nothing more.
func (c *Coordinator) Abandon() {
	c.abandon(fmt.Errorf("%w (Coordinator.Abandon)", ErrSuperseded))
	c.wg.Wait()
}

// abandon stops the coordinator crash-like (Abandon) with err as its Err;
// it does not wait, so the loop may call it.
func (c *Coordinator) abandon(err error) {
	c.mu.Lock()
	if c.gone.Load() {
		c.mu.Unlock()
		return
	}
	if c.fatal == nil {
		c.fatal = err
	} else {
		c.fatal = errors.Join(c.fatal, err)
	}
	c.gone.Store(true)
	c.mu.Unlock()
	c.opts.log.Warn("ps: coordinator stops as a crash would: superseded", "err", err)
	c.closeO.Do(func() { close(c.quit); c.runCancel() })
}

// errGone is what an abandoned coordinator's HandleRequest returns.
var errGone = fmt.Errorf("%w: this coordinator stopped; retry", ErrSuperseded)

// closedResp is HandleRequest's answer once the coordinator stopped:
// ErrClosed after Close, no response of ps after Abandon.
func (c *Coordinator) closedResp() ([]byte, error) {
	if c.gone.Load() {
		return nil, errGone
	}
	return wire.ErrResponse(ErrClosed), nil
}

// Stats returns the core's counters (updated after every event).
func (c *Coordinator) Stats() epsp.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Err returns the error that stopped the coordinator (a failed flush), or nil.
func (c *Coordinator) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fatal
}

// WaitWorkers waits until every initial worker (EPSP.NumWorkers) has said
// hello, up to StartTimeout; on timeout the ErrStartTimeout error lists the
// missing workers.
func (c *Coordinator) WaitWorkers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		c.mu.Lock()
		var missing []string
		for i, j := range c.joined[:c.cfg.EPSP.NumWorkers] {
			if !j {
				missing = append(missing, string(c.cfg.Workers[i]))
			}
		}
		c.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for %d/%d workers: %s not joined", ErrStartTimeout,
				len(missing), c.cfg.EPSP.NumWorkers, strings.Join(missing, ", "))
		case <-tick.C:
		}
	}
}

// waitServers pings every server until all answer or the deadline passes.
// A server that refuses the handshake (transport.ErrUnauthorized) fails the
// wait at once.
func waitServers(ctx context.Context, cl *Client, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	n := len(cl.servers)
	last := make([]error, n)
	ok := make([]bool, n)
	backoff := time.Millisecond
	for {
		missing := 0
		for s := range n {
			if ok[s] {
				continue
			}
			pctx, pcancel := context.WithTimeout(ctx, max(backoff*4, 20*time.Millisecond))
			err := cl.Ping(pctx, s)
			pcancel()
			if err == nil {
				ok[s] = true
				continue
			}
			if errors.Is(err, transport.ErrUnauthorized) {
				// A refused handshake will not heal by retrying: the
				// secret or the TLS identity is wrong. Fail now.
				return fmt.Errorf("ps: start: %s refused the handshake: %w", cl.servers[s], err)
			}
			last[s] = err
			missing++
		}
		if missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			var parts []string
			for s := range n {
				if !ok[s] {
					parts = append(parts, fmt.Sprintf("%s unreachable (%v)", cl.servers[s], last[s]))
				}
			}
			return fmt.Errorf("%w: waiting for %d/%d servers: %s", ErrStartTimeout, missing, n, strings.Join(parts, "; "))
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// HandleRequest serves workers' requests.
func (c *Coordinator) HandleRequest(ctx context.Context, from transport.NodeID, req []byte) (resp []byte, err error) {
	defer c.opts.served("coordinator", "coordinator", c.opts.now(), req, nil, &resp)
	defer func() {
		if p := recover(); p != nil {
			resp, err = wire.ErrResponse(c.opts.recovered("coordinator", from, p)), nil
		}
	}()
	if c.gone.Load() {
		return nil, errGone
	}
	if len(req) >= 2 && req[0] == wire.Version && op(req[1]) == wire.OpHeartbeat {
		resp := c.heartbeat(from, req[2:])
		if c.gone.Load() {
			// stopped meanwhile: its Err (set with gone) may have made
			// the answer an abort
			return nil, errGone
		}
		return resp, nil
	}
	r, err := c.decode(from, req)
	if err != nil {
		return wire.ErrResponse(err), nil
	}
	if err := c.lease.bind(c, r.worker, r.inc, r.op == wire.OpHello); err != nil {
		return wire.ErrResponse(err), nil
	}
	r.reply = make(chan coordResp, 1)
	select {
	case c.reqs <- r:
	case <-c.quit:
		return c.closedResp()
	case <-ctx.Done():
		return c.closedResp()
	}
	var res coordResp
	select {
	case res = <-r.reply:
	case <-c.quit:
		return c.closedResp()
	}
	if c.gone.Load() {
		// stopped while it served the request (its save was refused):
		// the answer, if any, may depend on a state nobody keeps
		return nil, errGone
	}
	if res.err != nil {
		return wire.ErrResponse(res.err), nil
	}
	e := encoder{B: wire.OKResponse(nil)}
	switch r.op {
	case wire.OpHello:
		e.I64(int64(res.hello.clock))
		e.U64(res.hello.version)
		e.I64(int64(res.hello.batch))
		e.I64(int64(res.hello.par))
		if res.hello.join {
			e.U8(1)
		} else {
			e.U8(0)
		}
		e.I64(int64(c.advertisedWait())) // how long to wait for this coordinator
	case wire.OpAdmit:
		e.U8(uint8(res.dec.Action))
		e.F64(res.dec.Scale)
		e.I64(int64(res.dec.Clock))
	}
	return e.B, nil
}

// HandleMessage receives progress reports and failure reports.
func (c *Coordinator) HandleMessage(from transport.NodeID, msg []byte) {
	defer c.opts.served("coordinator", "coordinator", c.opts.now(), msg, nil, nil)
	defer func() {
		if p := recover(); p != nil {
			c.opts.recovered("coordinator", from, p)
		}
	}()
	if c.gone.Load() {
		return
	}
	r, err := c.decode(from, msg)
	if err != nil || (r.op != wire.OpProgress && r.op != wire.OpFail) {
		return
	}
	select {
	case c.reqs <- r:
	case <-c.quit:
	}
}

func (c *Coordinator) decode(from transport.NodeID, b []byte) (*coordReq, error) {
	o, body, err := wire.Header(b)
	if err != nil {
		return nil, err
	}
	w, ok := c.names[from]
	if !ok {
		return nil, fmt.Errorf("%w: op %d from %q refused by the coordinator: not a worker of this cluster", ErrForbidden, o, from)
	}
	d := decoder{B: body}
	r := &coordReq{op: o, worker: w}
	switch o {
	case wire.OpHello:
		if id := d.Int(0, 1<<31, "worker id"); d.Err == nil && epsp.WorkerID(id) != w {
			return nil, fmt.Errorf("%w: %q is worker %d of this cluster but says it is worker %d (WorkerConfig.ID)", ErrRejected, from, w, id)
		}
		r.inc = d.U64()
	case wire.OpAdmit:
		r.push = decodePush(&d)
		if r.push.Worker != w {
			return nil, fmt.Errorf("%w: %q pushes as worker %d", ErrRejected, from, r.push.Worker)
		}
	case wire.OpClock:
		r.ev = epsp.Event{Kind: epsp.EventClock, Worker: w, Clock: d.Int(0, 1<<62, "clock")}
	case wire.OpProgress:
		p := decodeProgress(&d)
		p.Worker = w
		r.ev = epsp.Event{Kind: epsp.EventProgress, Worker: w, Clock: p.Clock, Progress: p}
	case wire.OpTransferResult:
		id := d.U64()
		acc := d.U8() != 0
		lo := d.Int(0, 1<<62, "lo")
		hi := d.Int(0, 1<<62, "hi")
		r.batch = d.Int(0, 1<<62, "batch")
		r.ev = epsp.Event{Kind: epsp.EventTransferResult, Worker: w, Transfer: epsp.TransferResult{ID: id, Accepted: acc, Lo: lo, Hi: hi}}
	case wire.OpTransferDone:
		r.ev = epsp.Event{Kind: epsp.EventTransferDone, Worker: w, Transfer: epsp.TransferResult{ID: d.U64()}}
	case wire.OpLeave:
		r.ev = epsp.Event{Kind: epsp.EventLeave, Worker: w}
		if len(d.B) > 0 { // quit mid-run (Worker.Quit); empty: finished
			r.ev.Quit = d.U8() != 0
		}
	case wire.OpFail:
		r.reason = d.Str()
	default:
		return nil, fmt.Errorf("%w: unknown coordinator op %d", ErrMalformed, o)
	}
	if err := d.End(); err != nil {
		return nil, err
	}
	return r, nil
}

func (c *Coordinator) loop() {
	defer c.wg.Done()
	var tick <-chan time.Time
	if p := c.cfg.EPSP.TickPeriod; p > 0 {
		t := time.NewTicker(p)
		defer t.Stop()
		tick = t.C
	}
	// transfer orders awaiting an answer: id → order (to build the taker's task)
	orders := make(map[uint64]epsp.TransferOrder)
	if c.restored {
		for _, ts := range c.core.Transfers() {
			if !ts.Accepted {
				orders[ts.Order.ID] = ts.Order
			}
		}
	}
	c.looping = true
	for {
		if c.gone.Load() {
			return
		}
		if c.statsDue {
			c.publishStats()
		}
		select {
		case <-c.quit:
			return
		case <-tick:
			if c.Err() == nil {
				c.step(epsp.Event{Kind: epsp.EventTick}, orders)
			}
		case <-c.pauseC():
			c.pauseExpired()
		case r := <-c.reqs:
			if c.log == nil {
				res := c.serveReq(r, orders)
				if r.reply != nil {
					r.reply <- res
				}
				continue
			}
			c.serveGroup(r, orders)
		}
	}
}

// maxGroup bounds the requests a durable coordinator answers after one
// save (serveGroup).
const maxGroup = 64

// serveGroup serves r and the requests already queued behind it (at most
// maxGroup), in order, then saves once and answers them all (group
// commit: one fsync for the answers a save held back, not one each).
func (c *Coordinator) serveGroup(r *coordReq, orders map[uint64]epsp.TransferOrder) {
	group := []*coordReq{r}
more:
	for len(group) < maxGroup {
		select {
		case r := <-c.reqs:
			group = append(group, r)
		default:
			break more
		}
	}
	res := make([]coordResp, len(group))
	for i, r := range group {
		res[i] = c.serveReq(r, orders)
		if r.op == wire.OpHello && res[i].err == nil {
			c.log.hello(r.worker, r.inc)
		}
	}
	// write-ahead: the answers leave after the state they depend on
	err := c.persist()
	for i, r := range group {
		if r.reply == nil {
			continue
		}
		if err != nil && res[i].err == nil {
			res[i] = coordResp{err: fmt.Errorf("%w: %v", ErrAborted, err)}
		}
		r.reply <- res[i]
	}
}

func (c *Coordinator) serveReq(r *coordReq, orders map[uint64]epsp.TransferOrder) (res coordResp) {
	// A panic here (a policy's bug, or input the checks missed) aborts the
	// run with an error that names it instead of ending the process.
	defer func() {
		if p := recover(); p != nil {
			err := c.opts.recovered("coordinator", c.cfg.Workers[r.worker], p)
			c.setFatal(err)
			res = coordResp{err: err}
		}
	}()
	if err := c.Err(); err != nil {
		return coordResp{err: fmt.Errorf("%w: %v", ErrAborted, err)}
	}
	if r.op == wire.OpFail {
		if c.lease.isLost(r.worker) {
			// A worker declared lost learns it on its next request and
			// reports that as its failure; the run already goes on
			// without it, so its report ends nothing.
			c.opts.log.Info("ps: a lost worker reports its failure", "worker", c.cfg.Workers[r.worker], "reason", r.reason)
			return coordResp{}
		}
		c.setFatal(fmt.Errorf("ps: %s failed: %s", c.cfg.Workers[r.worker], r.reason))
		return coordResp{}
	}
	now := c.now()
	switch r.op {
	case wire.OpHello:
		if !c.isMember(r.worker) {
			return c.serveJoin(r, orders)
		}
		if c.lease.departed(r.worker) {
			// lost, and still leaving: its samples are being handed over
			return coordResp{err: fmt.Errorf("%w: %s is still leaving the run (its unprocessed samples are being handed over); retry", ErrRejoinTooSoon, c.cfg.Workers[r.worker])}
		}
		c.mu.Lock()
		c.joined[r.worker] = true
		c.mu.Unlock()
		v := c.core.View()
		return coordResp{hello: helloInfo{clock: v.Clock(r.worker), version: v.Version(), batch: v.Batch(r.worker), par: v.Parallelism(r.worker)}}
	case wire.OpAdmit:
		if d, ok := c.resentAdmit(r); ok {
			return coordResp{dec: d}
		}
		d, err := c.coreAdmit(now, r.push)
		if err != nil {
			return coordResp{err: fmt.Errorf("%w: %v", ErrRejected, err)}
		}
		if d.Action == epsp.ApplyNow {
			d.Scale = d.EffectiveScale() * c.LRScale()
		}
		c.snapshot()
		c.lease.started(r.worker)
		c.admitted(r.push, d)
		c.opts.emit(event.Event{Kind: event.PushAdmitted, Node: "coordinator", Worker: r.push.Worker, Owner: r.push.Owner, Clock: r.push.Clock, Samples: r.push.Samples, Push: r.push, Decision: d})
		return coordResp{dec: d}
	case wire.OpTransferResult:
		o, ok := orders[r.ev.Transfer.ID]
		if !ok && c.log != nil && c.answered(r.ev.Transfer.ID) {
			// a resend of an answer the log holds (its answer was lost
			// with a coordinator that was restarted)
			return coordResp{}
		}
		if ok && o.From != r.worker {
			return coordResp{err: fmt.Errorf("%w: worker %d answers transfer %d of worker %d", ErrRejected, r.worker, o.ID, o.From)}
		}
		delete(orders, r.ev.Transfer.ID)
		if ok { // before the orders the answer causes
			res := r.ev.Transfer
			if !res.Accepted {
				res.Lo, res.Hi = 0, 0
			}
			c.opts.emit(event.Event{Kind: event.TransferResult, Node: "coordinator", Worker: o.From, Clock: o.Clock, Lo: res.Lo, Hi: res.Hi, Transfer: o, Result: res})
		}
		err := c.step(r.ev, orders)
		if err == nil && ok && r.ev.Transfer.Accepted {
			// The core's order names the taker now: Retarget may have
			// moved it from a lost one. If the core ended it (its lost
			// taker's ranges were given up, Abandon) nobody computes it;
			// if its taker is lost and not yet served, serveLost moves it
			// and sends it.
			if ts, live := c.core.Transfer(o.ID); live && ts.Accepted && !ts.Pushed && !c.lease.isLost(ts.Order.To) {
				c.sendTask(ts.Order, r.batch, false) // a failed send aborts the run: nobody else computes the range
			}
		}
		return coordResp{err: err}
	case wire.OpTransferDone:
		ts, ok := c.core.Transfer(r.ev.Transfer.ID)
		if !ok && c.log != nil && r.ev.Transfer.ID <= c.maxTransferID {
			return coordResp{} // a resend of a done the log holds
		}
		if ok && ts.Order.To != r.worker {
			return coordResp{err: fmt.Errorf("%w: worker %d reports transfer %d given to worker %d", ErrRejected, r.worker, ts.Order.ID, ts.Order.To)}
		}
		if ok && ts.HandOver {
			return coordResp{err: c.handedOver(ts.Order, orders)}
		}
		return coordResp{err: c.step(r.ev, orders)} // step emits what it reports (emitCause)
	case wire.OpClock, wire.OpProgress:
		c.lease.started(r.worker)
		if r.op == wire.OpClock && c.log != nil && r.ev.Clock < c.core.View().Clock(r.worker) {
			// a resend of a clock the log holds (its answer was lost
			// with a coordinator that was restarted): counted once
			return coordResp{}
		}
		return coordResp{err: c.step(r.ev, orders)}
	case wire.OpLeave:
		if c.log != nil && !c.isMember(r.worker) && !c.lease.isLost(r.worker) && c.core.View().Clock(r.worker) > 0 {
			// a resend of a leave the log holds
			return coordResp{}
		}
		old, clock := len(c.core.Members()), c.core.View().Clock(r.worker)
		err := c.step(r.ev, orders)
		if err == nil {
			c.lease.leave(r.worker)
			k := Finished
			if r.ev.Quit {
				k = Quit
			}
			c.changed(k, r.worker, old, clock)
		}
		return coordResp{err: err}
	case wire.OpLost:
		if c.log != nil {
			c.log.lost(r.worker, r.reason)
		}
		err := c.serveLost(r.worker, orders)
		if err == nil {
			err = c.everyWorkerLost()
		}
		return coordResp{err: err}
	}
	return coordResp{err: fmt.Errorf("%w: op %d", ErrMalformed, r.op)}
}

// setFatal records the first fatal error and tells every worker the run
// is aborted, so that none waits forever for a release. It runs on the
// loop goroutine.
func (c *Coordinator) setFatal(err error) {
	c.mu.Lock()
	first := c.fatal == nil && !c.gone.Load() // abandoned: it tells nobody
	if first {
		c.fatal = err
	}
	c.mu.Unlock()
	if !first {
		return
	}
	e := wire.NewMsg(nil, wire.OpAbort)
	e.Str(err.Error())
	// All at once, best effort: a dead worker cannot be told, and each
	// send may wait up to OrderTimeout, so the survivors hear of the abort
	// within one OrderTimeout however many workers are dead. Send copies
	// the message, so the goroutines share e.B.
	var wg sync.WaitGroup
	for w := range c.cfg.Workers {
		wg.Go(func() { c.sendNow(epsp.WorkerID(w), e.B) })
	}
	wg.Wait()
}

func (c *Coordinator) snapshot() {
	if c.looping && c.log != nil {
		// published once the state behind it is saved and answered
		// (loop): Stats must not show a leave whose answer is still to
		// come, or Cluster.WaitTrained would end the run under a worker
		// still waiting for it
		c.statsDue = true
		return
	}
	c.publishStats()
}

func (c *Coordinator) publishStats() {
	c.statsDue = false
	s := c.core.Stats()
	c.mu.Lock()
	c.stats = s
	c.mu.Unlock()
}

// step feeds an event to the core and carries out the Output.
func (c *Coordinator) step(ev epsp.Event, orders map[uint64]epsp.TransferOrder) error {
	out, err := c.coreStep(c.now(), ev)
	if err != nil {
		if errors.Is(err, epsp.ErrPolicyOutput) {
			c.setFatal(err)
		}
		return fmt.Errorf("%w: %v", ErrRejected, err)
	}
	c.snapshot()
	c.emitCause(ev) // before the orders it caused: observers see causal order
	return c.execute(out, orders)
}

// execute carries out an Output: flushes (all servers, acknowledged)
// before releases, then parallelism, batch and transfer orders.
func (c *Coordinator) execute(out epsp.Output, orders map[uint64]epsp.TransferOrder) error {
	if len(out.Flush)+len(out.SetParallelism)+len(out.SetBatch)+len(out.Release)+len(out.Transfers) > 0 {
		if err := c.persist(); err != nil { // write-ahead: before the output leaves
			return fmt.Errorf("%w: %v", ErrAborted, err)
		}
	}
	for _, f := range out.Flush {
		ctx, cancel := c.orderCtx()
		weights, err := c.client.flushWeights(ctx, f.Clock, epsp.PushDecision{Scale: f.Scale}.EffectiveScale()*c.LRScale(), c.drop[f.Clock])
		cancel()
		if err != nil {
			err = fmt.Errorf("ps: flush of clock %d: %w", f.Clock, err)
			c.setFatal(err)
			return fmt.Errorf("%w: %v", ErrAborted, err)
		}
		c.checkFlush(f.Clock, weights)
		c.flushedClock(f.Clock)
		delete(c.drop, f.Clock)
	}
	v := c.core.View()
	for _, o := range out.SetParallelism {
		e := wire.NewMsg(nil, wire.OpSetParallelism)
		e.I64(int64(o.P))
		c.opts.emit(event.Event{Kind: event.Parallelism, Node: "coordinator", Worker: o.Worker, P: o.P})
		c.send(o.Worker, e.B)
	}
	for _, o := range out.SetBatch {
		e := wire.NewMsg(nil, wire.OpSetBatch)
		e.I64(int64(o.Size))
		c.opts.emit(event.Event{Kind: event.Batch, Node: "coordinator", Worker: o.Worker, Samples: o.Size})
		c.send(o.Worker, e.B)
	}
	ra, err := releaseAssignments(out, v)
	if err != nil {
		c.setFatal(err)
		return fmt.Errorf("%w: %v", ErrAborted, err)
	}
	for _, w := range out.Release {
		e := wire.NewMsg(nil, wire.OpRelease)
		encodeRelease(&e, v.Clock(w), v.Version(), ra[w]) // the assignments ride on the release
		c.opts.emit(event.Event{Kind: event.Release, Node: "coordinator", Worker: w, Clock: v.Clock(w)})
		if err := c.send(w, e.B); err != nil {
			c.unreachable(w, fmt.Errorf("ps: release of %s: %w", c.cfg.Workers[w], err))
		}
	}
	var refused []uint64
	for _, o := range out.Transfers {
		orders[o.ID] = o
		e := wire.NewMsg(nil, wire.OpTransferOrder)
		e.U64(o.ID)
		e.I64(int64(o.To))
		e.I64(int64(o.Clock))
		e.I64(int64(o.Lo))
		e.I64(int64(o.Hi))
		c.opts.emit(event.Event{Kind: event.TransferOrdered, Node: "coordinator", Worker: o.From, Clock: o.Clock, Lo: o.Lo, Hi: o.Hi, Transfer: o})
		if c.lease.isLost(o.From) || c.lease.isLost(o.To) {
			// a lost giver (still leaving: its samples are being handed
			// over) answers nothing, and a lost taker would compute
			// nothing
			refused = append(refused, o.ID)
			continue
		}
		if err := c.send(o.From, e.B); err != nil {
			refused = append(refused, o.ID)
		}
	}
	// An order that cannot reach its giver, or whose giver or taker was
	// declared lost, counts as refused.
	for _, id := range refused {
		delete(orders, id)
		if err := c.step(epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: id}}, orders); err != nil {
			return err
		}
	}
	return nil
}

func (c *Coordinator) orderCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.runCtx, c.cfg.OrderTimeout)
}

// unreachable handles a send to worker w that failed with err: the lease
// declares w lost at its next check (within LeaseConfig.Interval), and
// the lost-worker policy decides (ContinueWithout: the run goes on
// without it; AbortRun: the run aborts naming it). With leases off the
// run aborts now, as nothing else would notice.
func (c *Coordinator) unreachable(w epsp.WorkerID, err error) {
	if !c.lease.unreachable(w, err) {
		c.setFatal(err)
	}
}

func (c *Coordinator) send(w epsp.WorkerID, msg []byte) error {
	if err := c.persist(); err != nil { // write-ahead: before the order leaves
		return err
	}
	return c.sendNow(w, msg)
}

// sendNow is send without saving the state first (an abort, a repeated
// release).
func (c *Coordinator) sendNow(w epsp.WorkerID, msg []byte) error {
	if c.gone.Load() {
		return errGone // abandoned: it sends nothing
	}
	ctx, cancel := c.orderCtx()
	defer cancel()
	return c.tr.Send(ctx, c.cfg.Workers[w], msg)
}
