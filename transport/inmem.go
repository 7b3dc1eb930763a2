package transport

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxFrameSize is the default bound on one message body, raw or
// encoded: 64 MiB, enough for 16 M float32 values per message.
const DefaultMaxFrameSize = 64 << 20

// inmemQueueLen is how many one-way messages may wait undelivered on one
// sender→receiver link before Send blocks (backpressure, like a full TCP
// window). Ours; large enough that tests never notice it.
const inmemQueueLen = 1024

// InmemOption configures an InmemNetwork.
type InmemOption func(*InmemNetwork)

// WithRand sets the random source that drives drops and delay jitter. The
// default is a PCG seeded with (1, 2), so runs are repeatable. The network
// uses r under its own lock; do not share r with other goroutines.
func WithRand(r *rand.Rand) InmemOption { return func(n *InmemNetwork) { n.rng = r } }

// WithCompression makes every node encode each message with the codec p
// chooses and the receiver decode it, exactly as the TCP transport does, so
// that policies and codecs are exercised in-process. The default (nil) only
// copies bytes.
func WithCompression(p CompressionPolicy) InmemOption {
	return func(n *InmemNetwork) { n.policy = p }
}

// WithMaxMessageSize bounds the size of one request, response or message
// (default DefaultMaxFrameSize); larger ones fail with ErrFrameTooLarge.
func WithMaxMessageSize(size int) InmemOption {
	return func(n *InmemNetwork) { n.maxSize = size }
}

// InmemNetwork is an in-process network of Inmem transports with fault
// seams: links can be cut (Disconnect, Partition), messages dropped with a
// probability and delayed by a fixed time plus uniform jitter, and nodes
// killed. Every random choice comes from one seeded source.
//
// Failure semantics, chosen to be prompt and predictable in tests:
//   - A Request or Send over a cut link, or to a node that has left or been
//     killed, fails at once with ErrUnreachable. A request in flight when its
//     link is cut or its target dies fails promptly with ErrUnreachable.
//   - A Request or Send to a name that never joined fails with
//     ErrUnknownPeer.
//   - A dropped one-way message vanishes (Send still returns nil). A dropped
//     request behaves like a lost packet: the caller waits until its ctx is
//     done (or either node closes), so give such calls a deadline.
//   - One-way messages still queued when their link is cut or their target
//     closes are lost.
//
// All methods are safe for concurrent use.
type InmemNetwork struct {
	mu      sync.Mutex
	rng     *rand.Rand
	policy  CompressionPolicy
	maxSize int
	nodes   map[NodeID]*Inmem
	known   map[NodeID]bool
	cut     map[[2]NodeID]bool
	group   map[NodeID]int // nil when not partitioned
	drop    float64
	delay   time.Duration
	jitter  time.Duration
	closed  bool
}

// NewInmemNetwork returns an empty network.
func NewInmemNetwork(opts ...InmemOption) *InmemNetwork {
	n := &InmemNetwork{
		maxSize: DefaultMaxFrameSize,
		nodes:   make(map[NodeID]*Inmem),
		known:   make(map[NodeID]bool),
		cut:     make(map[[2]NodeID]bool),
	}
	for _, o := range opts {
		o(n)
	}
	if n.rng == nil {
		n.rng = rand.New(rand.NewPCG(1, 2))
	}
	if n.maxSize <= 0 {
		n.maxSize = DefaultMaxFrameSize
	}
	return n
}

// Join adds a node named id whose incoming traffic is served by h. A name
// may join again after its previous node closed or was killed (a restart);
// joining a name that is live is an error.
func (n *InmemNetwork) Join(id NodeID, h Handler) (*Inmem, error) {
	if h == nil {
		return nil, errors.New("transport: Join with nil Handler")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, ErrClosed
	}
	if _, ok := n.nodes[id]; ok {
		return nil, fmt.Errorf("transport: node %q already joined", id)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Inmem{
		net:    n,
		id:     id,
		h:      h,
		ctx:    ctx,
		cancel: cancel,
		links:  make(map[NodeID]chan inmemMsg),
	}
	n.nodes[id] = t
	n.known[id] = true
	return t, nil
}

// Node returns the live node named id, or nil.
func (n *InmemNetwork) Node(id NodeID) *Inmem {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.nodes[id]
}

// Disconnect cuts the link between a and b in both directions.
func (n *InmemNetwork) Disconnect(a, b NodeID) {
	n.mu.Lock()
	n.cut[pairKey(a, b)] = true
	n.mu.Unlock()
}

// Reconnect restores the link between a and b cut by Disconnect (a
// partition, if any, still applies).
func (n *InmemNetwork) Reconnect(a, b NodeID) {
	n.mu.Lock()
	delete(n.cut, pairKey(a, b))
	n.mu.Unlock()
}

// Partition splits the network: nodes can reach each other only within the
// same group. Nodes named in no group form one further group together. A
// new Partition replaces the previous one.
func (n *InmemNetwork) Partition(groups ...[]NodeID) {
	g := make(map[NodeID]int)
	for i, grp := range groups {
		for _, id := range grp {
			g[id] = i + 1
		}
	}
	n.mu.Lock()
	n.group = g
	n.mu.Unlock()
}

// Heal removes the partition and every Disconnect.
func (n *InmemNetwork) Heal() {
	n.mu.Lock()
	n.group = nil
	clear(n.cut)
	n.mu.Unlock()
}

// SetDropRate sets the probability in [0, 1] that a message or request is
// lost. Values outside the range are clamped.
func (n *InmemNetwork) SetDropRate(p float64) {
	n.mu.Lock()
	n.drop = min(max(p, 0), 1)
	n.mu.Unlock()
}

// SetDelay delays every delivery (each one-way message, each request and
// each response) by fixed plus a uniform random duration in [0, jitter).
// One-way messages from one sender to one receiver stay in order.
func (n *InmemNetwork) SetDelay(fixed, jitter time.Duration) {
	n.mu.Lock()
	n.delay, n.jitter = max(fixed, 0), max(jitter, 0)
	n.mu.Unlock()
}

// Kill crashes the live node named id: requests in flight to it fail with
// ErrUnreachable, later calls to it fail with ErrUnreachable, and its own
// calls return ErrClosed. It waits for the node's goroutines like Close.
func (n *InmemNetwork) Kill(id NodeID) error {
	t := n.Node(id)
	if t == nil {
		return fmt.Errorf("%w: %q is not live", ErrUnknownPeer, id)
	}
	return t.Close()
}

// Close closes every node and refuses further joins.
func (n *InmemNetwork) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return ErrClosed
	}
	n.closed = true
	nodes := make([]*Inmem, 0, len(n.nodes))
	for _, t := range n.nodes {
		nodes = append(nodes, t)
	}
	n.mu.Unlock()
	for _, t := range nodes {
		t.Close()
	}
	return nil
}

func pairKey(a, b NodeID) [2]NodeID {
	if b < a {
		a, b = b, a
	}
	return [2]NodeID{a, b}
}

// linkUpLocked reports whether a can reach b. n.mu must be held.
func (n *InmemNetwork) linkUpLocked(a, b NodeID) bool {
	if a == b {
		return true
	}
	if n.cut[pairKey(a, b)] {
		return false
	}
	if n.group != nil && n.group[a] != n.group[b] {
		return false
	}
	return true
}

func (n *InmemNetwork) linkUp(a, b NodeID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.linkUpLocked(a, b)
}

// route checks that from can reach to now and rolls the dice for the
// delivery: whether it is dropped and how long it is delayed.
func (n *InmemNetwork) route(from, to NodeID) (*Inmem, bool, time.Duration, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.nodes[to]
	if !ok {
		if n.known[to] {
			return nil, false, 0, fmt.Errorf("%w: %q has left", ErrUnreachable, to)
		}
		return nil, false, 0, fmt.Errorf("%w: %q", ErrUnknownPeer, to)
	}
	if !n.linkUpLocked(from, to) {
		return nil, false, 0, fmt.Errorf("%w: link %q-%q is down", ErrUnreachable, from, to)
	}
	dropped := n.drop > 0 && n.rng.Float64() < n.drop
	return t, dropped, n.sampleDelayLocked(), nil
}

func (n *InmemNetwork) sampleDelayLocked() time.Duration {
	d := n.delay
	if n.jitter > 0 {
		d += time.Duration(n.rng.Int64N(int64(n.jitter)))
	}
	return d
}

func (n *InmemNetwork) sampleDelay() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sampleDelayLocked()
}

func (n *InmemNetwork) leave(t *Inmem) {
	n.mu.Lock()
	if n.nodes[t.id] == t {
		delete(n.nodes, t.id)
	}
	n.mu.Unlock()
}

// encode turns msg into an owned wire body with the network's policy.
func (n *InmemNetwork) encode(to NodeID, msg []byte) (inmemMsg, error) {
	if len(msg) > n.maxSize {
		return inmemMsg{}, fmt.Errorf("%w: %d bytes, maximum %d", ErrFrameTooLarge, len(msg), n.maxSize)
	}
	if n.policy == nil {
		return inmemMsg{body: append([]byte(nil), msg...), raw: len(msg)}, nil
	}
	sp := getBuf(max(MaxCompressedLen(CodecLZ4, len(msg)), MaxCompressedLen(CodecSnappy, len(msg))))
	defer putBuf(sp)
	c, wire, _, err := encodeBody(n.policy, to, msg, (*sp)[:0])
	if err != nil {
		return inmemMsg{}, err
	}
	return inmemMsg{codec: c, body: append([]byte(nil), wire...), raw: len(msg)}, nil
}

// encodeLent encodes a request or response body that the receiving side
// only reads while the sending side waits for it, so nothing needs copying:
// a raw body is msg itself (borrowed), a compressed one lives in a pooled
// buffer (m.pool) that the receiver releases once it has decoded it.
func (n *InmemNetwork) encodeLent(to NodeID, msg []byte) (inmemMsg, error) {
	if len(msg) > n.maxSize {
		return inmemMsg{}, fmt.Errorf("%w: %d bytes, maximum %d", ErrFrameTooLarge, len(msg), n.maxSize)
	}
	lent := inmemMsg{body: msg, raw: len(msg), borrowed: true}
	if n.policy == nil || len(msg) == 0 {
		return lent, nil
	}
	sp := getBuf(max(MaxCompressedLen(CodecLZ4, len(msg)), MaxCompressedLen(CodecSnappy, len(msg))))
	c, wire, _, err := encodeBody(n.policy, to, msg, (*sp)[:0])
	if err != nil || c == CodecNone {
		putBuf(sp)
		return lent, err
	}
	return inmemMsg{codec: c, body: wire, raw: len(msg), pool: sp}, nil
}

// decodeLent returns the body of a message from encodeLent for its
// receiver: a raw body as it is, a compressed one decoded into a pooled
// buffer (returned as ret, nil for a raw body). It releases m.pool.
func (n *InmemNetwork) decodeLent(m inmemMsg) (body []byte, ret *[]byte, err error) {
	if m.codec == CodecNone {
		return m.body, nil, nil
	}
	defer putBuf(m.pool)
	ret = getBuf(m.raw)
	body, err = Decompress((*ret)[:0], m.codec, m.body, m.raw, n.maxSize)
	if err != nil {
		putBuf(ret)
		return nil, nil, err
	}
	return body, ret, nil
}

// decode returns the receiver's view of m: its body when uncompressed
// (owned, or borrowed from a caller that waits), else a fresh decoding.
func (n *InmemNetwork) decode(m inmemMsg) ([]byte, error) {
	if m.codec == CodecNone {
		return m.body, nil
	}
	return Decompress(nil, m.codec, m.body, m.raw, n.maxSize)
}

type inmemMsg struct {
	from     NodeID
	codec    Codec
	body     []byte
	raw      int
	due      time.Time
	borrowed bool     // body is the sender's memory
	pool     *[]byte  // pooled buffer holding body, released by the receiver
	resp     *[]byte  // pooled response buffer body was built in (see finish)
	pieces   [][]byte // a request in pieces, for a VectorHandler (body nil)
}

// wireLen is the size of m on the wire.
func (m *inmemMsg) wireLen() int {
	if m.pieces != nil {
		return m.raw
	}
	return len(m.body)
}

// Inmem is one node of an InmemNetwork. Without compression a request is
// not copied: the handler reads the caller's buffer and its response is
// handed to the caller as it is (the Handler ownership rules make this
// safe, and Request waits for a handler still reading req before returning
// early). One-way messages are copied, since the sender goes on at once;
// the handler receives its own copy of each.
type Inmem struct {
	net    *InmemNetwork
	id     NodeID
	h      Handler
	ctx    context.Context // canceled on Close; passed to handlers
	cancel context.CancelFunc

	stats counters

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	links  map[NodeID]chan inmemMsg // inbound one-way queues by sender
}

var (
	_ Transport       = (*Inmem)(nil)
	_ RequestAppender = (*Inmem)(nil)
	_ VectorRequester = (*Inmem)(nil)
)

// LocalID returns the node's name.
func (t *Inmem) LocalID() NodeID { return t.id }

// Stats returns the traffic counters (see Stats). A dropped message counts
// as sent, not received.
func (t *Inmem) Stats() Stats { return t.stats.snapshot() }

// Network returns the network t belongs to.
func (t *Inmem) Network() *InmemNetwork { return t.net }

// Close removes the node from its network, cancels the context given to
// its running handlers and waits for every goroutine delivering to it.
// Requests in flight to it fail with ErrUnreachable.
func (t *Inmem) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	t.closed = true
	t.mu.Unlock()
	t.net.leave(t)
	t.cancel()
	t.wg.Wait()
	return nil
}

func (t *Inmem) done() <-chan struct{} { return t.ctx.Done() }

func (t *Inmem) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// Send delivers msg to node to's HandleMessage, after the network's delay,
// in order with the other messages t sends to it.
func (t *Inmem) Send(ctx context.Context, to NodeID, msg []byte) error {
	if t.isClosed() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dst, dropped, delay, err := t.net.route(t.id, to)
	if err != nil {
		return err
	}
	m, err := t.net.encode(to, msg)
	if err != nil {
		return err
	}
	t.stats.sent(m.raw, len(m.body))
	if dropped {
		return nil
	}
	m.from = t.id
	m.due = time.Now().Add(delay)
	q, err := dst.queue(t.id)
	if err != nil {
		return err
	}
	select {
	case q <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-dst.done():
		return fmt.Errorf("%w: %q closed", ErrUnreachable, to)
	case <-t.done():
		return ErrClosed
	}
}

// queue returns the inbound queue for messages from sender, starting its
// delivery goroutine on first use.
func (t *Inmem) queue(from NodeID) (chan inmemMsg, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, fmt.Errorf("%w: %q closed", ErrUnreachable, t.id)
	}
	q, ok := t.links[from]
	if !ok {
		q = make(chan inmemMsg, inmemQueueLen)
		t.links[from] = q
		t.wg.Add(1)
		go t.deliver(q)
	}
	return q, nil
}

// deliver hands queued messages to the handler one at a time, in order.
func (t *Inmem) deliver(q chan inmemMsg) {
	defer t.wg.Done()
	for {
		select {
		case <-t.done():
			return
		case m := <-q:
			if !sleepUntil(m.due, t.done()) {
				return
			}
			if !t.net.linkUp(m.from, t.id) {
				continue // lost in flight
			}
			body, err := t.net.decode(m)
			if err != nil {
				continue // cannot happen for bodies our own encoder made
			}
			t.stats.received(m.raw, len(m.body))
			t.h.HandleMessage(m.from, body)
		}
	}
}

// inmemCall is one request in flight. When its handler borrows the
// caller's memory (req without compression, or the caller's dst), the
// caller that gives up early must not return while the handler still uses
// that memory: state decides the race between the caller abandoning the
// call and the serving goroutine starting the handler, and released closes
// once the handler has returned (or will never run).
type inmemCall struct {
	res         chan inmemResult // buffered 1
	released    chan struct{}
	state       atomic.Int32
	borrowed    bool // the handler reads or writes the caller's memory
	dst         []byte
	appendTo    bool // offer dst to an AppendHandler
	wantsAppend bool // RequestAppend on a compressing network
	ctx         context.Context
	cancel      context.CancelFunc
}

const (
	callPending int32 = iota
	callRunning
	callAbandoned
)

type inmemResult struct {
	msg inmemMsg // the response: a borrowed handler slice or an encoded body
	err error
}

// abandon gives up the call. It returns at once unless the handler is
// running on the caller's memory; then it cancels the handler's ctx and
// waits for the handler to return.
func (c *inmemCall) abandon() {
	if c.state.CompareAndSwap(callPending, callAbandoned) {
		if c.cancel != nil {
			c.cancel()
		}
		return
	}
	if c.cancel != nil {
		c.cancel()
	}
	if c.borrowed {
		<-c.released
	}
}

// RequestAppend is Request with the response appended to dst (see
// RequestAppender). When the target's handler is an AppendHandler and the
// network does not compress, the handler writes its response straight into
// dst's spare capacity: no copy at all. Otherwise the response is copied
// into dst when it fits (a response too big for an empty dst is returned
// as it is instead). On error it returns dst unchanged.
func (t *Inmem) RequestAppend(ctx context.Context, dst []byte, to NodeID, req []byte) ([]byte, error) {
	resp, err := t.request(ctx, to, req, dst, true)
	if err != nil {
		return dst, err
	}
	return resp, nil
}

// Request delivers req to node to's HandleRequest and waits for the
// response (see InmemNetwork for failure semantics). Without compression
// neither direction is copied: the handler reads req itself and the caller
// gets the very slice the handler returned (see Handler for the rules that
// make this safe).
func (t *Inmem) Request(ctx context.Context, to NodeID, req []byte) ([]byte, error) {
	return t.request(ctx, to, req, nil, false)
}

// RequestAppendV is RequestAppend with the request given in pieces (see
// VectorRequester). Without compression a VectorHandler reads the pieces
// themselves; other handlers get them joined in a pooled buffer.
func (t *Inmem) RequestAppendV(ctx context.Context, dst []byte, to NodeID, reqs [][]byte) ([]byte, error) {
	resp, err := t.request(ctx, to, nil, dst, true, reqs)
	if err != nil {
		return dst, err
	}
	return resp, nil
}

func (t *Inmem) request(ctx context.Context, to NodeID, req, dst []byte, appendMode bool, pieces ...[][]byte) (out []byte, err error) {
	if t.isClosed() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	peer, dropped, delay, err := t.net.route(t.id, to)
	if err != nil {
		return nil, err
	}
	var m inmemMsg
	if len(pieces) == 0 {
		m, err = t.net.encodeLent(to, req)
	} else if _, ok := peer.h.(VectorHandler); ok && t.net.policy == nil {
		if n := piecesLen(pieces[0]); n > t.net.maxSize {
			err = fmt.Errorf("%w: %d bytes, maximum %d", ErrFrameTooLarge, n, t.net.maxSize)
		} else {
			m = inmemMsg{raw: n, borrowed: true, pieces: pieces[0]}
		}
	} else {
		// The handler needs one slice: join the pieces in a buffer that,
		// lent like req, is free again once this call returns (unless the
		// response handed to the caller is that very buffer, an echo).
		jp := getBuf(piecesLen(pieces[0]))
		defer func() {
			if !overlaps(out, *jp) {
				putBuf(jp)
			}
		}()
		m, err = t.net.encodeLent(to, joinPieces((*jp)[:0], pieces[0]))
	}
	if err != nil {
		return nil, err
	}
	t.stats.sent(m.raw, m.wireLen())
	m.from = t.id
	c := &inmemCall{res: make(chan inmemResult, 1), released: make(chan struct{}), borrowed: m.borrowed}
	if appendMode && t.net.policy == nil {
		c.dst, c.appendTo, c.borrowed = dst[len(dst):], true, true
	}
	c.wantsAppend = appendMode
	if !dropped {
		if err := peer.serve(t, m, delay, c); err != nil {
			return nil, err
		}
	}
	select {
	case r := <-c.res:
		return t.finish(r, dst, appendMode)
	case <-ctx.Done():
		c.abandon()
		return nil, ctx.Err()
	case <-peer.done():
		c.abandon()
		// The handler may have answered just before the target closed.
		select {
		case r := <-c.res:
			return t.finish(r, dst, appendMode)
		default:
		}
		return nil, fmt.Errorf("%w: %q closed with the request in flight", ErrUnreachable, to)
	case <-t.done():
		c.abandon()
		return nil, ErrClosed
	}
}

// finish turns a delivered response into the caller's result, in the
// caller's goroutine (so dst is only ever written by its owner or by a
// handler the caller waits for).
func (t *Inmem) finish(r inmemResult, dst []byte, appendMode bool) ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	m := r.msg
	if m.codec != CodecNone {
		var base []byte
		if appendMode {
			base = dst
		}
		out, err := Decompress(base, m.codec, m.body, m.raw, t.net.maxSize)
		putBuf(m.pool)
		return out, err
	}
	if !appendMode {
		return m.body, nil
	}
	out := joinAppend(dst, m.body)
	if m.resp != nil && (len(m.body) == 0 || &out[len(out)-len(m.body)] != &m.body[0]) {
		putRespBuf(m.resp, m.body, nil) // copied out: the buffer is free again
	}
	return out, nil
}

// joinAppend returns dst extended by out, where out is either written in
// dst's spare capacity already (an AppendHandler's result) or a handed-over
// slice.
func joinAppend(dst, out []byte) []byte {
	n := len(out)
	if n == 0 {
		return dst
	}
	if cap(dst)-len(dst) >= n && &dst[:len(dst)+1][len(dst)] == &out[0] {
		return dst[:len(dst)+n]
	}
	if len(dst) == 0 && cap(dst) < n {
		return out // a copy would need a new buffer anyway
	}
	return append(dst, out...)
}

// serve runs one request on t's handler in a goroutine t owns. The
// handler's ctx ends when t closes or the caller gives up.
func (t *Inmem) serve(from *Inmem, m inmemMsg, delay time.Duration, c *inmemCall) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("%w: %q closed", ErrUnreachable, t.id)
	}
	c.ctx, c.cancel = context.WithCancel(t.ctx)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer c.cancel()
		released := false
		release := func() {
			if !released {
				released = true
				close(c.released)
			}
		}
		defer release()
		if !sleepFor(delay, t.done(), from.done()) {
			return
		}
		if !t.net.linkUp(from.id, t.id) {
			c.res <- inmemResult{err: fmt.Errorf("%w: link %q-%q went down", ErrUnreachable, from.id, t.id)}
			return
		}
		body, reqBuf, err := t.net.decodeLent(m)
		if err != nil {
			c.res <- inmemResult{err: err}
			return
		}
		if !c.state.CompareAndSwap(callPending, callRunning) {
			putBuf(reqBuf)
			return // the caller gave up before the handler started
		}
		t.stats.received(m.raw, m.wireLen())
		var resp []byte
		var herr error
		var respBuf *[]byte
		ah, isAppend := t.h.(AppendHandler)
		switch {
		case m.pieces != nil: // only ever sent to a VectorHandler, uncompressed
			resp, herr = t.h.(VectorHandler).HandleRequestV(c.ctx, from.id, m.pieces, c.dst)
		case isAppend && c.appendTo:
			resp, herr = ah.HandleRequestAppend(c.ctx, from.id, body, c.dst)
		case isAppend && c.wantsAppend:
			// Compressed network: the response is encoded (or copied into
			// dst by the caller) before its buffer is needed again.
			respBuf = getRespBuf()
			resp, herr = ah.HandleRequestAppend(c.ctx, from.id, body, (*respBuf)[:0])
		default:
			resp, herr = t.h.HandleRequest(c.ctx, from.id, body)
		}
		// Encoding (compressing) reads resp, which may alias the caller's
		// req: it happens before release. After release the goroutine
		// touches neither the caller's req nor its dst: resp is handed over
		// and only passed on.
		var rm inmemMsg
		if herr == nil {
			rm, err = t.net.encodeLent(from.id, resp)
			if respBuf != nil {
				if rm.codec == CodecNone {
					rm.resp = respBuf // the caller releases it once copied
				} else {
					putRespBuf(respBuf, resp, body)
				}
			}
		}
		release()
		if reqBuf != nil && !overlaps(resp, *reqBuf) {
			putBuf(reqBuf)
		}
		if t.ctx.Err() != nil {
			return // the node closed under the handler: no response leaves it
		}
		if herr != nil {
			msg := herr.Error()
			t.stats.sent(len(msg), len(msg))
			from.stats.received(len(msg), len(msg))
			c.res <- inmemResult{err: &RemoteError{Node: t.id, Msg: msg}}
			return
		}
		if err != nil {
			c.res <- inmemResult{err: fmt.Errorf("transport: response from %q: %w", t.id, err)}
			return
		}
		t.stats.sent(rm.raw, len(rm.body))
		if !sleepFor(t.net.sampleDelay(), t.done(), from.done()) {
			return
		}
		if !t.net.linkUp(from.id, t.id) {
			c.res <- inmemResult{err: fmt.Errorf("%w: link %q-%q went down", ErrUnreachable, from.id, t.id)}
			return
		}
		from.stats.received(rm.raw, len(rm.body))
		c.res <- inmemResult{msg: rm}
	}()
	return nil
}

// sleepFor waits d or until one of done closes; it reports whether the
// full duration passed.
func sleepFor(d time.Duration, done ...<-chan struct{}) bool {
	if d <= 0 {
		for _, c := range done {
			select {
			case <-c:
				return false
			default:
			}
		}
		return true
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	var d2 <-chan struct{}
	if len(done) > 1 {
		d2 = done[1]
	}
	select {
	case <-tm.C:
		return true
	case <-done[0]:
		return false
	case <-d2:
		return false
	}
}

func sleepUntil(at time.Time, done <-chan struct{}) bool {
	return sleepFor(time.Until(at), done)
}
