package live

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/transport"
)

type aflow struct {
	src, dst  int
	bytes     uint64
	class     uint32
	rate      float64
	kind      byte
	sendCores float64
	recvCores float64
	seen      uint64 // epoch of the last push that listed it

	// sender side (src is this agent)
	bucket   *bucket
	sending  bool
	cancel   context.CancelCauseFunc
	acked    uint64
	wire     uint64
	reported bool // acked == bytes has been reported

	// receiver side (dst is this agent)
	buf      []byte
	got      uint64
	complete bool
	taken    bool
}

type acoflow struct {
	flows map[uint32]*aflow
	err   error
}

type mkey struct {
	class uint32
	kind  byte
}

// Agent runs one port of the fabric: the client API for the applications
// on its machine (Register, Send, Receive, Unregister), the pacing and codec
// pools of the flows it sends and receives, and the reports to the
// coordinator. It is the transport.Handler of its node: create the
// transport with it, then call Start.
type Agent struct {
	cfg AgentConfig

	mu       sync.Mutex
	tr       transport.Transport
	port     int
	names    []transport.NodeID
	started  bool
	dead     error
	epoch    uint64
	coflows  map[uint64]*acoflow
	buffered int64
	meas     map[mkey]*measurement
	changed  chan struct{}
	lastOK   time.Time

	cpool, dpool *pool
	reportNow    chan struct{}
	quit         chan struct{}
	done         chan struct{}
	closeOnce    sync.Once
}

// NewAgent validates cfg and returns an agent; it serves nothing until
// Start.
func NewAgent(cfg AgentConfig) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Agent{
		cfg:       cfg,
		coflows:   make(map[uint64]*acoflow),
		meas:      make(map[mkey]*measurement),
		changed:   make(chan struct{}),
		cpool:     newPool(cfg.MaxWorkers, cfg.SpeedPerGrantedCore),
		dpool:     newPool(cfg.MaxWorkers, cfg.SpeedPerGrantedCore),
		reportNow: make(chan struct{}, 1),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
	}, nil
}

// Start joins the coordinator over tr (the transport whose handler the
// agent is), learning the agent's port, and starts reporting. ctx bounds
// the join.
func (a *Agent) Start(ctx context.Context, tr transport.Transport) error {
	a.mu.Lock()
	if a.started || a.dead != nil {
		a.mu.Unlock()
		return fmt.Errorf("%w: agent already started or closed", ErrClosed)
	}
	a.tr = tr
	a.mu.Unlock()
	if err := a.hello(ctx); err != nil {
		return err
	}
	a.mu.Lock()
	a.started, a.lastOK = true, time.Now()
	a.mu.Unlock()
	go a.reporter()
	return nil
}

func (a *Agent) hello(ctx context.Context) error {
	resp, err := a.tr.Request(ctx, a.cfg.Coordinator, encodeEmpty(tHello))
	if err != nil {
		return a.coordErr(err)
	}
	w, err := decodeWelcome(resp)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.port, a.names = int(w.Port), w.Names
	a.mu.Unlock()
	return nil
}

// Port returns the agent's port index (valid after Start).
func (a *Agent) Port() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.port
}

// Close stops the agent: its reports end, and every call waiting on it
// returns ErrClosed. It does not close the transport.
func (a *Agent) Close() error {
	a.closeOnce.Do(func() {
		a.die(fmt.Errorf("%w: agent", ErrClosed))
		close(a.quit)
		a.mu.Lock()
		started := a.started
		a.mu.Unlock()
		if started {
			<-a.done
		}
		a.cpool.close()
		a.dpool.close()
	})
	return nil
}

// die fails everything the agent knows with err (the first cause stays).
func (a *Agent) die(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dead != nil {
		return
	}
	a.dead = err
	for _, ac := range a.coflows {
		for _, fl := range ac.flows {
			if fl.cancel != nil {
				fl.cancel(err)
			}
		}
	}
	a.notify()
}

// notify wakes every waiter; a.mu held.
func (a *Agent) notify() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// remote turns a handler's error from a peer back into this package's
// sentinel when its text carries one (the first, the outermost cause).
func remote(err error) error {
	var re *transport.RemoteError
	if !errors.As(err, &re) {
		return err
	}
	var first error
	at := len(re.Msg)
	for _, s := range []error{ErrInvalidCoflow, ErrUnknownCoflow, ErrAgentDead, ErrCoordinatorDead, ErrBadAllocation, ErrTooLarge, ErrMalformed, ErrInvalidConfig, ErrClosed} {
		if i := strings.Index(re.Msg, s.Error()); i >= 0 && i < at {
			first, at = s, i
		}
	}
	if first == nil {
		return err
	}
	return fmt.Errorf("%w: %s: %w", first, re.Node, err)
}

func (a *Agent) coordErr(err error) error {
	if errors.Is(err, transport.ErrUnreachable) || errors.Is(err, transport.ErrUnknownPeer) {
		return fmt.Errorf("%w: %s: %w", ErrCoordinatorDead, a.cfg.Coordinator, err)
	}
	return remote(err)
}

// request sends a client request to the coordinator, bounded by ctx and
// ReportTimeout.
func (a *Agent) request(ctx context.Context, msg []byte) ([]byte, error) {
	a.mu.Lock()
	dead, started := a.dead, a.started
	a.mu.Unlock()
	if dead != nil {
		return nil, dead
	}
	if !started {
		return nil, fmt.Errorf("%w: agent not started", ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ReportTimeout)
	defer cancel()
	resp, err := a.tr.Request(ctx, a.cfg.Coordinator, msg)
	if err != nil {
		return nil, a.coordErr(err)
	}
	return resp, nil
}

// Register registers a coflow of flows (Src and Dst are port indices, the
// agents' positions in Config.Agents; Bytes a whole number of bytes; Class
// a data class of the fabric; ID is ignored) with weight (0 means 1) and
// returns its id. The coflow arrives now: the scheduler sees it at once.
func (a *Agent) Register(ctx context.Context, flows []coflow.Flow, weight float64) (CoflowID, error) {
	if len(flows) == 0 || len(flows) > MaxFlowsPerCoflow {
		return 0, fmt.Errorf("%w: %d flows (want 1..%d)", ErrInvalidCoflow, len(flows), MaxFlowsPerCoflow)
	}
	m := registerMsg{Weight: weight, Flows: make([]wireFlow, len(flows))}
	for j, f := range flows {
		if f.Src < 0 || f.Dst < 0 || f.Src > math.MaxUint32 || f.Dst > math.MaxUint32 || f.Class < 0 || f.Class > math.MaxUint32 ||
			!(f.Bytes >= 1) || f.Bytes > 1<<62 || f.Bytes != math.Trunc(f.Bytes) {
			return 0, fmt.Errorf("%w: flow %d: %d→%d, %v bytes, class %d", ErrInvalidCoflow, j, f.Src, f.Dst, f.Bytes, f.Class)
		}
		m.Flows[j] = wireFlow{Src: uint32(f.Src), Dst: uint32(f.Dst), Bytes: uint64(f.Bytes), Class: uint32(f.Class)}
	}
	resp, err := a.request(ctx, encodeRegister(m))
	if err != nil {
		return 0, err
	}
	id, err := decodeID(resp, tRegistered)
	return CoflowID(id), err
}

// Unregister forgets a coflow at the coordinator and, through it, at every
// agent: its unreceived data is dropped and calls still waiting on it
// fail with ErrUnknownCoflow. Applications unregister every coflow they
// register, finished or failed (as with Varys' client): until then its
// result and its received data are kept.
func (a *Agent) Unregister(ctx context.Context, id CoflowID) error {
	resp, err := a.request(ctx, encodeID(tUnregister, uint64(id)))
	if err != nil {
		return err
	}
	return decodeEmpty(resp, tOK)
}

// await waits until pred holds on the coflow's state (under a.mu), the
// coflow fails, the agent dies or ctx ends, and returns pred's flow.
func (a *Agent) await(ctx context.Context, id CoflowID, flow int, limit <-chan time.Time, pred func(fl *aflow) bool) (*aflow, error) {
	for {
		a.mu.Lock()
		if a.dead != nil {
			err := a.dead
			a.mu.Unlock()
			return nil, err
		}
		if ac := a.coflows[uint64(id)]; ac != nil {
			if ac.err != nil {
				a.mu.Unlock()
				return nil, ac.err
			}
			if fl := ac.flows[uint32(flow)]; fl != nil && pred(fl) {
				return fl, nil // a.mu held
			}
		}
		ch := a.changed
		a.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-limit:
			return nil, fmt.Errorf("%w: coflow %d flow %d not announced by %s within %v", ErrUnknownCoflow, id, flow, a.cfg.Coordinator, a.cfg.AnnounceTimeout)
		}
	}
}

// Send sends data as flow flow of coflow id, whose source must be this
// agent's port and whose size len(data) must be. It returns once the
// receiving agent has every byte, after pacing at the rates and compressing
// with the codecs and cores the scheduler allocates; or with the error that
// failed it (ErrAgentDead naming the receiver when it cannot be reached,
// the coflow's failure, ErrCoordinatorDead, ctx's error). data must not be
// modified until Send returns.
func (a *Agent) Send(ctx context.Context, id CoflowID, flow int, data []byte) error {
	t := time.NewTimer(a.cfg.AnnounceTimeout)
	defer t.Stop()
	fl, err := a.await(ctx, id, flow, t.C, func(fl *aflow) bool { return fl.bucket != nil })
	if err != nil {
		return err
	}
	if fl.sending || fl.acked > 0 {
		a.mu.Unlock()
		return fmt.Errorf("%w: coflow %d flow %d already sent", ErrInvalidCoflow, id, flow)
	}
	if uint64(len(data)) != fl.bytes {
		a.mu.Unlock()
		return fmt.Errorf("%w: coflow %d flow %d: %d bytes given, %d registered", ErrInvalidCoflow, id, flow, len(data), fl.bytes)
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	fl.sending, fl.cancel = true, cancel
	dst := a.names[fl.dst]
	a.mu.Unlock()

	err = a.pipeline(sctx, id, flow, fl, dst, data)
	a.mu.Lock()
	fl.sending, fl.cancel = false, nil
	a.mu.Unlock()
	if err != nil {
		if c := context.Cause(sctx); c != nil && !errors.Is(c, context.Canceled) {
			return c
		}
		return err
	}
	select {
	case a.reportNow <- struct{}{}:
	default:
	}
	return nil
}

type prepared struct {
	off     int
	raw     int
	kind    byte
	payload []byte
	err     error
	done    chan struct{}
}

// pipeline runs compress → send for one flow, PipelineDepth chunks deep in
// each stage; the receiver decompresses each chunk as it arrives.
func (a *Agent) pipeline(ctx context.Context, id CoflowID, flow int, fl *aflow, dst transport.NodeID, data []byte) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	depth, size := a.cfg.PipelineDepth, a.cfg.ChunkBytes
	var wg sync.WaitGroup
	defer wg.Wait()
	futures := make(chan *prepared, depth)
	wg.Add(1)
	go func() { // compress stage
		defer wg.Done()
		defer close(futures)
		for off := 0; off < len(data); off += size {
			raw := data[off:min(off+size, len(data))]
			a.mu.Lock()
			kind := fl.kind
			a.mu.Unlock()
			p := &prepared{off: off, raw: len(raw), kind: kind, payload: raw, done: make(chan struct{})}
			select {
			case futures <- p:
			case <-ctx.Done():
				return
			}
			if kind == kindRaw {
				close(p.done)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(p.done)
				var out []byte
				var n int
				var smaller bool
				err := a.cpool.run(ctx, func() { out, n, smaller = compress(kind, raw) }, func(took time.Duration) {
					a.addMeas(fl.class, kind, func(m *measurement) {
						m.RawC += uint64(len(raw))
						m.OutC += uint64(n)
						m.NsC += uint64(max(took, 1))
					})
				})
				if err != nil {
					p.err = err
					return
				}
				if smaller {
					p.payload = out
				} else {
					p.kind = kindRaw
				}
			}()
		}
	}()
	sem := make(chan struct{}, depth)
	for p := range futures {
		select {
		case <-p.done:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		if p.err != nil {
			cancel(p.err)
			break
		}
		if err := fl.bucket.wait(ctx, len(p.payload)); err != nil {
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		head := chunkHead(chunkMsg{Coflow: uint64(id), Flow: uint32(flow), Class: fl.class, Offset: uint64(p.off),
			Total: fl.bytes, Kind: p.kind, RawLen: uint32(p.raw)})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cctx, ccancel := context.WithTimeout(ctx, a.cfg.ChunkTimeout)
			defer ccancel()
			resp, err := transport.RequestAppendV(cctx, a.tr, nil, dst, [][]byte{head, p.payload})
			if err == nil {
				err = decodeEmpty(resp, tOK)
			}
			if err != nil {
				if errors.Is(err, transport.ErrUnreachable) || errors.Is(err, transport.ErrUnknownPeer) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					err = fmt.Errorf("%w: %s: %w", ErrAgentDead, dst, err)
				} else {
					err = remote(err)
				}
				cancel(err)
				return
			}
			a.mu.Lock()
			fl.acked += uint64(p.raw)
			fl.wire += uint64(len(p.payload))
			a.mu.Unlock()
		}()
	}
	wg.Wait() // the compress stage (it stops at ctx's end) and the sends in flight
	if c := context.Cause(ctx); c != nil {
		return c
	}
	return nil
}

func (a *Agent) addMeas(class uint32, kind byte, f func(*measurement)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := mkey{class, kind}
	m := a.meas[k]
	if m == nil {
		m = &measurement{Class: class, Kind: kind}
		a.meas[k] = m
	}
	f(m)
}

// Receive waits until every byte of flow flow of coflow id, whose
// destination is this agent's port, has arrived, and returns them (exactly
// the bytes sent); the agent then forgets them, so a flow is received once.
// It fails with the coflow's failure, ErrCoordinatorDead, ErrClosed or
// ctx's error; ctx bounds the wait.
func (a *Agent) Receive(ctx context.Context, id CoflowID, flow int) ([]byte, error) {
	fl, err := a.await(ctx, id, flow, nil, func(fl *aflow) bool { return fl.complete || fl.taken })
	if err != nil {
		return nil, err
	}
	defer a.mu.Unlock()
	if fl.taken {
		return nil, fmt.Errorf("%w: coflow %d flow %d already received", ErrUnknownCoflow, id, flow)
	}
	data := fl.buf
	fl.buf, fl.taken = nil, true
	a.buffered -= int64(fl.bytes)
	return data, nil
}

// HandleMessage ignores one-way messages.
func (a *Agent) HandleMessage(transport.NodeID, []byte) {}

// HandleRequest serves the coordinator's pushes and other agents' chunks.
func (a *Agent) HandleRequest(ctx context.Context, from transport.NodeID, req []byte) ([]byte, error) {
	switch msgType(req) {
	case tPush:
		if from != a.cfg.Coordinator {
			return nil, fmt.Errorf("%w: push from %q", ErrMalformed, from)
		}
		m, err := decodePush(req)
		if err != nil {
			return nil, err
		}
		if err := a.applyPush(m); err != nil {
			return nil, err
		}
		return encodeEmpty(tOK), nil
	case tChunk:
		m, err := decodeChunk(req)
		if err != nil {
			return nil, err
		}
		if err := a.receiveChunk(ctx, from, m); err != nil {
			return nil, err
		}
		return encodeEmpty(tOK), nil
	}
	return nil, fmt.Errorf("%w: unexpected message type %d", ErrMalformed, msgType(req))
}

func (a *Agent) applyPush(m pushMsg) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dead != nil {
		return a.dead
	}
	if !a.started && a.names == nil {
		return fmt.Errorf("%w: push before welcome", ErrClosed)
	}
	if m.Epoch <= a.epoch {
		return nil // stale
	}
	a.epoch = m.Epoch
	var sendCores, recvCores float64
	for _, pf := range m.Flows {
		if int64(pf.Src) >= int64(len(a.names)) || int64(pf.Dst) >= int64(len(a.names)) ||
			(int(pf.Src) != a.port && int(pf.Dst) != a.port) {
			continue
		}
		ac := a.coflows[pf.Coflow]
		if ac == nil {
			ac = &acoflow{flows: make(map[uint32]*aflow)}
			a.coflows[pf.Coflow] = ac
		}
		if ac.err != nil {
			continue
		}
		fl := ac.flows[pf.Flow]
		if fl == nil {
			fl = &aflow{src: int(pf.Src), dst: int(pf.Dst), bytes: pf.Bytes, class: pf.Class}
			ac.flows[pf.Flow] = fl
		}
		if fl.bytes != pf.Bytes || fl.src != int(pf.Src) || fl.dst != int(pf.Dst) {
			continue // inconsistent with what a chunk declared; keep the first
		}
		if fl.src == a.port && fl.bucket == nil {
			fl.bucket = newBucket(float64(a.cfg.ChunkBytes))
		}
		fl.rate, fl.kind, fl.sendCores, fl.recvCores, fl.seen = pf.Rate, pf.Kind, pf.SendCores, pf.RecvCores, m.Epoch
		if fl.bucket != nil {
			fl.bucket.setRate(pf.Rate)
			sendCores += pf.SendCores
		}
		if fl.dst == a.port {
			recvCores += pf.RecvCores
		}
	}
	for _, ac := range a.coflows {
		for _, fl := range ac.flows {
			if fl.seen != m.Epoch && fl.bucket != nil {
				fl.bucket.setRate(0) // finished, or its coflow is
			}
		}
	}
	a.cpool.setCores(sendCores)
	a.dpool.setCores(recvCores)
	for _, f := range m.Failed {
		var err error
		switch f.Reason {
		case reasonAgentDead:
			err = fmt.Errorf("%w: %s", ErrAgentDead, f.Node)
		default:
			err = fmt.Errorf("%w: coflow %d failed at %s", ErrBadAllocation, f.Coflow, a.cfg.Coordinator)
		}
		ac := a.coflows[f.Coflow]
		if ac == nil {
			ac = &acoflow{}
			a.coflows[f.Coflow] = ac
		}
		a.drop(ac, err)
		ac.err = err
	}
	for _, g := range m.Gone {
		if ac := a.coflows[g]; ac != nil {
			a.drop(ac, fmt.Errorf("%w: %d unregistered", ErrUnknownCoflow, g))
			delete(a.coflows, g)
		}
	}
	a.notify()
	return nil
}

// drop cancels a coflow's sends and frees its receive buffers; a.mu held.
func (a *Agent) drop(ac *acoflow, err error) {
	for _, fl := range ac.flows {
		if fl.cancel != nil {
			fl.cancel(err)
		}
		if fl.buf != nil {
			a.buffered -= int64(fl.bytes)
			fl.buf = nil
		}
	}
	ac.flows = nil
}

func (a *Agent) receiveChunk(ctx context.Context, from transport.NodeID, m chunkMsg) error {
	a.mu.Lock()
	if a.dead != nil {
		err := a.dead
		a.mu.Unlock()
		return err
	}
	src := -1
	for p, n := range a.names {
		if n == from {
			src = p
		}
	}
	if src < 0 {
		a.mu.Unlock()
		return fmt.Errorf("%w: chunk from %q, not an agent", ErrMalformed, from)
	}
	a.mu.Unlock()
	// Only flows the coordinator announced hold state here; the sender may
	// have heard of the flow a moment before this agent did.
	t := time.NewTimer(a.cfg.AnnounceTimeout)
	defer t.Stop()
	fl, err := a.await(ctx, CoflowID(m.Coflow), int(m.Flow), t.C, func(*aflow) bool { return true })
	if err != nil {
		return err
	}
	ac := a.coflows[m.Coflow]
	if fl.src != src || fl.dst != a.port || fl.bytes != m.Total || fl.complete || fl.taken {
		a.mu.Unlock()
		return fmt.Errorf("%w: chunk of coflow %d flow %d does not fit it", ErrMalformed, m.Coflow, m.Flow)
	}
	if fl.buf == nil {
		if a.buffered+int64(fl.bytes) > a.cfg.MaxBufferedBytes {
			a.mu.Unlock()
			return fmt.Errorf("%w: %d bytes buffered, flow of %d over MaxBufferedBytes", ErrTooLarge, a.buffered, fl.bytes)
		}
		a.buffered += int64(fl.bytes)
		fl.buf = make([]byte, fl.bytes)
	}
	out := fl.buf[m.Offset : m.Offset+uint64(m.RawLen)]
	a.mu.Unlock()

	if m.Kind == kindRaw {
		err = decompress(kindRaw, m.Payload, out)
	} else {
		var derr error
		class, kind, rawLen := fl.class, m.Kind, uint64(m.RawLen)
		err = a.dpool.run(ctx, func() { derr = decompress(m.Kind, m.Payload, out) }, func(took time.Duration) {
			if derr != nil {
				return
			}
			a.addMeas(class, kind, func(x *measurement) { // the announced class, not the chunk's
				x.RawD += rawLen
				x.NsD += uint64(max(took, 1))
			})
		})
		if err == nil {
			err = derr
		}
	}
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ac.err != nil || fl.buf == nil {
		return fmt.Errorf("%w: coflow %d dropped", ErrUnknownCoflow, m.Coflow)
	}
	fl.got = min(fl.got+uint64(m.RawLen), fl.bytes)
	if fl.got == fl.bytes {
		fl.complete = true
		a.notify()
	}
	return nil
}

// reporter sends the agent's progress and measurements every
// ReportInterval (and at once when a flow finishes); when none has been
// answered for CoordinatorTimeout the coordinator is dead.
func (a *Agent) reporter() {
	defer close(a.done)
	tick := time.NewTicker(a.cfg.ReportInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-a.reportNow:
		case <-a.quit:
			return
		}
		a.reportOnce()
	}
}

func (a *Agent) reportOnce() {
	a.mu.Lock()
	if a.dead != nil {
		a.mu.Unlock()
		return
	}
	var m reportMsg
	var done []*aflow
	for id, ac := range a.coflows {
		for j, fl := range ac.flows {
			if fl.bucket == nil || fl.reported {
				continue
			}
			m.Progress = append(m.Progress, progress{Coflow: id, Flow: j, Acked: fl.acked, Wire: fl.wire})
			if fl.acked == fl.bytes {
				done = append(done, fl)
			}
		}
	}
	for k, x := range a.meas {
		m.Meas = append(m.Meas, *x)
		delete(a.meas, k)
	}
	a.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ReportTimeout)
	defer cancel()
	go func() {
		select {
		case <-a.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	resp, err := a.tr.Request(ctx, a.cfg.Coordinator, encodeReport(m))
	if err == nil {
		err = decodeEmpty(resp, tOK)
	}
	if err != nil && errors.Is(remote(err), ErrAgentDead) {
		// The coordinator gave up on us (and failed our coflows); join again.
		err = a.hello(ctx)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if err == nil {
		a.lastOK = now
		for _, fl := range done {
			fl.reported = true
		}
		return
	}
	if now.Sub(a.lastOK) > a.cfg.CoordinatorTimeout && a.dead == nil {
		a.mu.Unlock()
		a.die(fmt.Errorf("%w: %s: %w", ErrCoordinatorDead, a.cfg.Coordinator, err))
		a.mu.Lock()
	}
}

var _ transport.Handler = (*Agent)(nil)
