package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// TCPConfig configures a TCP transport. Zero fields take the defaults that
// DefaultTCPConfig documents, except where a field says otherwise.
type TCPConfig struct {
	// ID is this node's name; required.
	ID NodeID
	// ListenAddr is the address to listen on. Empty means "127.0.0.1:0"
	// (loopback, a free port); listening on all interfaces must be asked
	// for explicitly, e.g. ":7000".
	ListenAddr string
	// Peers maps node names to "host:port" addresses. Nil means none yet
	// (see AddPeer). The map is copied.
	Peers map[NodeID]string
	// MaxFrameSize bounds a message body in bytes, raw and on the wire, in
	// both directions; a frame declaring more is refused before anything is
	// allocated for it and its connection is closed. Zero means
	// DefaultMaxFrameSize (64 MiB).
	MaxFrameSize int
	// Compression chooses the codec per outgoing message. Nil means Never.
	Compression CompressionPolicy
	// TLS, when non-nil, wraps every connection in TLS with this config:
	// it must hold Certificates to accept connections and whatever the
	// dialing side needs to verify them (RootCAs, ServerName; an empty
	// ServerName is taken from the peer address). For mutual TLS also set
	// ClientAuth and ClientCAs; the same Certificates then serve as the
	// client certificate. A failed certificate check is ErrUnauthorized.
	// Nil means plaintext.
	TLS *tls.Config
	// CertIdentity makes the name a connection proves the node name in
	// the peer's certificate (a DNS SAN equal to the NodeID, see
	// identity.go): an acceptor refuses a hello claiming a name the
	// dialer's certificate does not carry, and a dialer refuses an
	// acceptor whose certificate does not carry the name it dialed. It
	// needs TLS with this node's certificate (naming ID), ClientAuth
	// RequireAndVerifyClientCert and ClientCAs, and no ServerName;
	// IdentityTLS builds such a config. False: TLS, if any, proves only
	// that a peer holds some certificate of the CA.
	CertIdentity bool
	// Secret, when non-empty, is a shared secret every connection must
	// prove in both directions (an HMAC-SHA256 challenge-response, the
	// dialer first, see doc.go) before any frame is accepted; without TLS,
	// every frame is then authenticated too (a GMAC tag under a
	// per-connection key), so bytes injected, replayed, reordered or
	// modified on the path are refused and the connection dropped. The
	// name a peer proved is the from a Handler sees; a shared secret proves
	// membership only, so any holder can claim any name (see "Trust model"
	// in doc.go). It must have at least
	// MinSecretLen (16) bytes, or Validate fails with ErrWeakSecret; use 32
	// random bytes. It is stretched with scrypt (kdf.go) before use, once
	// per process: NewTCP takes about 70 ms the first time a process sees
	// a secret. Nil means no authentication at all: a peer's claimed name
	// is then taken on trust and frames are not checked.
	Secret []byte
	// PeerSecret, when non-nil, replaces Secret with one secret per peer:
	// it returns the secret this node shares with the named peer, for the
	// peer it dials and for the name a dialing peer claims; nil or empty
	// refuses that peer (ErrUnauthorized). Everything Secret does then
	// holds per peer, and a member can prove only the names whose secrets
	// it holds, so the from a Handler sees is a name its peer could not
	// have borrowed. Use keys minted per pair of nodes by the operator
	// (MintPairKeys; a node loads its own with LoadPairKeys and sets
	// PeerSecret to their Secret method). It must be safe for concurrent
	// use. Setting both Secret and PeerSecret is invalid.
	PeerSecret func(peer NodeID) []byte
	// DialTimeout bounds connecting to a peer, TLS and handshake included.
	// Zero means 5 s.
	DialTimeout time.Duration
	// HandshakeTimeout bounds an accepted connection's TLS and handshake,
	// counted from its accept. Zero means 3 s: a handshake is two round
	// trips after TLS's, so 3 s leaves a loaded machine or a long path
	// ample room, while a connection that sends nothing is gone soon.
	HandshakeTimeout time.Duration
	// MaxPendingHandshakes bounds the accepted connections that have not
	// finished their TLS and handshake. The accept loop never waits for
	// one to finish: a connection accepted at the bound closes the oldest
	// pending one, so idle strangers hold at most this many descriptors,
	// each for at most HandshakeTimeout, and cannot keep a member's fresh
	// connection from being accepted. Zero means 64.
	MaxPendingHandshakes int
	// MaxPendingHandshakesPerSource bounds the pending handshakes (see
	// MaxPendingHandshakes) from one source: one IPv4 address, or one
	// IPv6 /64 prefix (the block one host is usually given). A connection
	// accepted over it is closed at once, so one host cannot take every
	// slot, nor close the others' pending handshakes at its own pace
	// without bound. A node dials each peer once and redials only
	// after its connection died, so a member host rarely has more than a
	// few handshakes pending with one acceptor. Zero means 16.
	MaxPendingHandshakesPerSource int
	// HandshakeFailed, when non-nil, is called with the remote address and
	// the cause for each accepted connection closed before its handshake
	// completed: refused (ErrUnauthorized; ErrHandshakeVersion, naming
	// both versions; a malformed hello), out of HandshakeTimeout, over
	// MaxPendingHandshakesPerSource, or closed as the oldest pending at
	// MaxPendingHandshakes. It runs on the acceptor's goroutines, possibly
	// concurrently, once for every connection a stranger opens: it must be
	// safe for concurrent use and must not block (rate-limit any logging).
	// Nil means the causes are dropped.
	HandshakeFailed func(remote net.Addr, err error)
	// BodyTimeout bounds the reading of one frame body once its header
	// has arrived: a body must be complete within BodyTimeout plus one
	// second per MiB declared (a 1 MiB/s floor), or the connection is
	// dropped, so a peer that declares a large body and stalls does not
	// hold a connection, its buffer and (on the calling side) a caller
	// forever. A body already read ahead is not timed. Zero means 30 s;
	// negative means no bound.
	BodyTimeout time.Duration
	// ReconnectBackoff is the wait after a failed dial to a peer before the
	// next call may dial it again; calls in between fail at once with the
	// last dial error. It doubles with each consecutive failure up to
	// MaxReconnectBackoff and resets on success. Zero means 20 ms;
	// negative means no backoff (every call dials).
	ReconnectBackoff time.Duration
	// MaxReconnectBackoff caps ReconnectBackoff's doubling. Zero means 2 s.
	MaxReconnectBackoff time.Duration
	// WriteTimeout bounds the writing of one frame, so that a peer that
	// stops reading cannot hold a connection (and every caller and handler
	// waiting to write on it) forever; a write that runs out of time kills
	// the connection. A caller's ctx deadline, when sooner, applies as
	// well. Zero means 1 minute; negative means no bound.
	WriteTimeout time.Duration
	// MaxConcurrentRequests bounds the requests served at once for one
	// incoming connection; more wait, unread, in the socket (backpressure).
	// Zero means 1024.
	MaxConcurrentRequests int
}

// DefaultTCPConfig returns a configuration with every default filled in;
// set ID (and Peers) before use.
func DefaultTCPConfig() TCPConfig {
	return TCPConfig{
		ListenAddr:            "127.0.0.1:0",
		MaxFrameSize:          DefaultMaxFrameSize,
		Compression:           Never,
		DialTimeout:           5 * time.Second,
		HandshakeTimeout:      3 * time.Second,
		MaxPendingHandshakes:  64,
		BodyTimeout:           30 * time.Second,
		ReconnectBackoff:      20 * time.Millisecond,
		MaxReconnectBackoff:   2 * time.Second,
		WriteTimeout:          time.Minute,
		MaxConcurrentRequests: 1024,

		MaxPendingHandshakesPerSource: 16,
	}
}

// Validate reports the first invalid field.
func (c *TCPConfig) Validate() error {
	switch {
	case c.ID == "":
		return errors.New("transport: TCPConfig.ID is empty")
	case len(c.ID) > maxIDLen:
		return fmt.Errorf("transport: TCPConfig.ID has %d bytes, maximum %d", len(c.ID), maxIDLen)
	case c.MaxFrameSize < 0 || c.MaxFrameSize > maxFrameSizeLimit:
		return fmt.Errorf("transport: TCPConfig.MaxFrameSize %d outside [0, %d]", c.MaxFrameSize, maxFrameSizeLimit)
	case c.DialTimeout < 0:
		return fmt.Errorf("transport: TCPConfig.DialTimeout %v is negative", c.DialTimeout)
	case c.HandshakeTimeout < 0:
		return fmt.Errorf("transport: TCPConfig.HandshakeTimeout %v is negative", c.HandshakeTimeout)
	case c.MaxReconnectBackoff < 0:
		return fmt.Errorf("transport: TCPConfig.MaxReconnectBackoff %v is negative", c.MaxReconnectBackoff)
	case c.MaxPendingHandshakes < 0:
		return fmt.Errorf("transport: TCPConfig.MaxPendingHandshakes %d is negative", c.MaxPendingHandshakes)
	case c.MaxPendingHandshakesPerSource < 0:
		return fmt.Errorf("transport: TCPConfig.MaxPendingHandshakesPerSource %d is negative", c.MaxPendingHandshakesPerSource)
	case c.MaxConcurrentRequests < 0:
		return fmt.Errorf("transport: TCPConfig.MaxConcurrentRequests %d is negative", c.MaxConcurrentRequests)
	case len(c.Secret) > 0 && c.PeerSecret != nil:
		return errors.New("transport: TCPConfig has both Secret and PeerSecret")
	case len(c.Secret) > 0 && len(c.Secret) < MinSecretLen:
		return checkSecret("TCPConfig.Secret", c.Secret)
	case c.TLS != nil && len(c.TLS.Certificates) == 0 && c.TLS.GetCertificate == nil && c.TLS.GetConfigForClient == nil:
		return errors.New("transport: TCPConfig.TLS has no certificate to accept connections with")
	}
	if err := c.validateIdentity(); err != nil {
		return err
	}
	for id, addr := range c.Peers {
		if id == "" || addr == "" {
			return fmt.Errorf("transport: TCPConfig.Peers has an empty name or address (%q: %q)", id, addr)
		}
	}
	return nil
}

func (c TCPConfig) withDefaults() TCPConfig {
	d := DefaultTCPConfig()
	if c.ListenAddr == "" {
		c.ListenAddr = d.ListenAddr
	}
	if c.MaxFrameSize == 0 {
		c.MaxFrameSize = d.MaxFrameSize
	}
	if c.Compression == nil {
		c.Compression = d.Compression
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = d.DialTimeout
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = d.HandshakeTimeout
	}
	if c.MaxPendingHandshakes == 0 {
		c.MaxPendingHandshakes = d.MaxPendingHandshakes
	}
	if c.MaxPendingHandshakesPerSource == 0 {
		c.MaxPendingHandshakesPerSource = d.MaxPendingHandshakesPerSource
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = d.BodyTimeout
	}
	if c.ReconnectBackoff == 0 {
		c.ReconnectBackoff = d.ReconnectBackoff
	}
	if c.MaxReconnectBackoff == 0 {
		c.MaxReconnectBackoff = d.MaxReconnectBackoff
	}
	if c.MaxConcurrentRequests == 0 {
		c.MaxConcurrentRequests = d.MaxConcurrentRequests
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = d.WriteTimeout
	}
	return c
}

// Buffer sizes (ours): a read buffer large enough that small frames arrive
// in one read system call, and a bound under which header and body are
// copied together into one write instead of a two-element writev.
const (
	readBufferSize = 64 << 10
	smallFrame     = 16 << 10
)

// minBodyRate is the slowest body transfer BodyTimeout allows for, in
// bytes per second (ours): the deadline of a body of n bytes is
// BodyTimeout + n/minBodyRate.
const minBodyRate = 1 << 20

func (c *TCPConfig) bodyDeadline(n int) time.Duration {
	return c.BodyTimeout + time.Duration(n)*time.Second/minBodyRate
}

// TCP is a Transport over TCP (optionally TLS) connections. For each peer
// it dials one connection on first use and multiplexes every request and
// message to that peer over it; requests are correlated by id, so many
// callers share the connection. It serves the connections others dial to
// it with its Handler. See doc.go for the wire format.
type TCP struct {
	cfg    TCPConfig
	h      Handler
	ln     net.Listener
	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	stats  counters
	key    []byte     // Secret stretched (kdf.go); nil without a Secret
	hs     pendingSet // accepted connections in their handshake

	mu      sync.Mutex
	closed  bool
	peers   map[NodeID]string
	out     map[NodeID]*peerState
	inbound map[*conn]struct{}
	// msgLocks serializes HandleMessage per sender across the sender's
	// connections (an old one may still be draining when a new one starts).
	msgLocks map[NodeID]*msgLock
}

type msgLock struct {
	mu   sync.Mutex
	refs int
}

var (
	_ Transport       = (*TCP)(nil)
	_ RequestAppender = (*TCP)(nil)
	_ VectorRequester = (*TCP)(nil)
)

type peerState struct {
	conn     *conn
	dialing  chan struct{} // non-nil while a dial is in progress
	failures int
	retryAt  time.Time
	lastErr  error
}

// NewTCP validates cfg, listens on cfg.ListenAddr and starts serving with h.
func NewTCP(cfg TCPConfig, h Handler) (*TCP, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("transport: NewTCP with nil Handler")
	}
	cfg = cfg.withDefaults()
	var key []byte
	if len(cfg.Secret) > 0 {
		var err error
		if key, err = stretch(context.Background(), cfg.Secret, true); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("transport: listen on %s: %w", cfg.ListenAddr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &TCP{
		cfg:     cfg,
		h:       h,
		ln:      ln,
		ctx:     ctx,
		cancel:  cancel,
		peers:   make(map[NodeID]string, len(cfg.Peers)),
		out:     make(map[NodeID]*peerState),
		inbound: make(map[*conn]struct{}),
		key:     key,
		hs:      newPendingSet(cfg.MaxPendingHandshakes, cfg.MaxPendingHandshakesPerSource),

		msgLocks: make(map[NodeID]*msgLock),
	}
	for id, addr := range cfg.Peers {
		t.peers[id] = addr
	}
	t.cfg.Peers = nil
	t.wg.Add(1)
	go t.acceptLoop()
	return t, nil
}

// LocalID returns the node's name.
func (t *TCP) LocalID() NodeID { return t.cfg.ID }

// Stats returns the traffic counters (see Stats).
func (t *TCP) Stats() Stats { return t.stats.snapshot() }

// Addr returns the address the transport listens on (with the real port
// when ListenAddr asked for port 0).
func (t *TCP) Addr() net.Addr { return t.ln.Addr() }

// AddPeer sets or replaces the address of node id. A replaced address takes
// effect for the next connection dialed to id.
func (t *TCP) AddPeer(id NodeID, addr string) {
	t.mu.Lock()
	t.peers[id] = addr
	if ps := t.out[id]; ps != nil {
		ps.failures, ps.retryAt = 0, time.Time{}
	}
	t.mu.Unlock()
}

// RemovePeer forgets node id and closes the connection to it; calls in
// flight on that connection fail with ErrUnreachable.
func (t *TCP) RemovePeer(id NodeID) {
	t.mu.Lock()
	delete(t.peers, id)
	ps := t.out[id]
	delete(t.out, id)
	t.mu.Unlock()
	if ps != nil && ps.conn != nil {
		ps.conn.fail(fmt.Errorf("%w: peer %q removed", ErrUnreachable, id))
	}
}

// Close stops listening, closes every connection (calls in flight fail
// with ErrClosed here and ErrUnreachable at the peers), cancels the
// context passed to running handlers, and returns once every goroutine the
// transport started has ended, handlers included.
func (t *TCP) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	t.closed = true
	var conns []*conn
	for _, ps := range t.out {
		if ps.conn != nil {
			conns = append(conns, ps.conn)
		}
	}
	for c := range t.inbound {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	err := t.ln.Close()
	// Connections first, so a handler that returns because of the
	// cancellation below cannot answer: to the peer this is a crash.
	for _, c := range conns {
		c.fail(ErrClosed)
	}
	t.cancel()
	t.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("transport: close listener: %w", err)
	}
	return nil
}

// Request sends req to node to and waits for the response. Failures:
// ErrClosed after Close; ErrUnknownPeer for a name with no address;
// ErrUnreachable (wrapping the cause) when the peer cannot be dialed or the
// connection breaks with the request in flight; ErrUnauthorized when the
// handshake fails; ErrFrameTooLarge for a body above MaxFrameSize;
// *RemoteError when the peer's handler fails; ctx.Err() when ctx ends
// first.
func (t *TCP) Request(ctx context.Context, to NodeID, req []byte) ([]byte, error) {
	return t.requestAppend(ctx, nil, to, req)
}

// RequestAppend is Request with the response appended to dst (see
// RequestAppender): a caller that passes its previous response back as
// dst[:0] reads large responses without allocating. If ctx ends while the
// response is being received into dst, RequestAppend waits for the rest of
// that frame (or the connection's death, at the latest when BodyTimeout
// runs out) so that it never returns with dst still being written. On
// error it returns dst unchanged.
func (t *TCP) RequestAppend(ctx context.Context, dst []byte, to NodeID, req []byte) ([]byte, error) {
	resp, err := t.requestAppend(ctx, dst, to, req)
	if err != nil {
		return dst, err
	}
	return resp, nil
}

// RequestAppendV is RequestAppend with the request given in pieces (see
// VectorRequester): uncompressed, header and pieces go out in one writev.
func (t *TCP) RequestAppendV(ctx context.Context, dst []byte, to NodeID, reqs [][]byte) ([]byte, error) {
	if len(reqs) == 1 {
		return t.RequestAppend(ctx, dst, to, reqs[0])
	}
	resp, err := t.requestPieces(ctx, dst, to, reqs)
	if err != nil {
		return dst, err
	}
	return resp, nil
}

func (t *TCP) requestAppend(ctx context.Context, dst []byte, to NodeID, req []byte) ([]byte, error) {
	one := [1][]byte{req}
	return t.requestPieces(ctx, dst, to, one[:])
}

func (t *TCP) requestPieces(ctx context.Context, dst []byte, to NodeID, reqs [][]byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n := piecesLen(reqs); n > t.cfg.MaxFrameSize {
		return nil, fmt.Errorf("%w: request of %d bytes, maximum %d", ErrFrameTooLarge, n, t.cfg.MaxFrameSize)
	}
	c, err := t.conn(ctx, to)
	if err != nil {
		return nil, err
	}
	call, err := c.register(dst)
	if err != nil {
		return nil, err
	}
	if err := c.writePieces(ctx, kindRequest, call.id, reqs); err != nil {
		c.unregister(call.id)
		return nil, err
	}
	select {
	case r := <-call.ch:
		return r.body, r.err
	case <-ctx.Done():
		if c.unregister(call.id) {
			c.sendCancel(call.id)
			return nil, ctx.Err()
		}
		// The reader has taken the call and may be writing into dst: wait
		// for it to finish with the frame.
		r := <-call.ch
		return r.body, r.err
	}
}

// Send writes msg to the connection to node to and returns once it is
// written to the socket. Failures are those of Request except
// *RemoteError; a message written just before the connection breaks may
// be lost without an error.
func (t *TCP) Send(ctx context.Context, to NodeID, msg []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(msg) > t.cfg.MaxFrameSize {
		return fmt.Errorf("%w: message of %d bytes, maximum %d", ErrFrameTooLarge, len(msg), t.cfg.MaxFrameSize)
	}
	c, err := t.conn(ctx, to)
	if err != nil {
		return err
	}
	return c.writeMsg(ctx, kindMessage, 0, msg)
}

// conn returns the live connection to node to, dialing it if needed. One
// dial per peer runs at a time; concurrent callers wait for it.
func (t *TCP) conn(ctx context.Context, to NodeID) (*conn, error) {
	for {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return nil, ErrClosed
		}
		addr, ok := t.peers[to]
		if !ok {
			t.mu.Unlock()
			return nil, fmt.Errorf("%w: %q", ErrUnknownPeer, to)
		}
		ps := t.out[to]
		if ps == nil {
			ps = &peerState{}
			t.out[to] = ps
		}
		if c := ps.conn; c != nil {
			if !c.isDead() {
				t.mu.Unlock()
				return c, nil
			}
			ps.conn = nil
		}
		if ch := ps.dialing; ch != nil {
			t.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if t.cfg.ReconnectBackoff > 0 && time.Now().Before(ps.retryAt) {
			err := ps.lastErr
			t.mu.Unlock()
			return nil, err
		}
		ch := make(chan struct{})
		ps.dialing = ch
		t.mu.Unlock()

		c, err := t.dial(ctx, to, addr)

		t.mu.Lock()
		ps.dialing = nil
		close(ch)
		if err != nil {
			if ctx.Err() == nil && t.ctx.Err() == nil {
				ps.failures++
				ps.retryAt = time.Now().Add(t.backoff(ps.failures))
				ps.lastErr = err
			}
			t.mu.Unlock()
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, ctxErr
			}
			return nil, err
		}
		if t.closed {
			t.mu.Unlock()
			c.fail(ErrClosed)
			return nil, ErrClosed
		}
		if t.out[to] != ps { // RemovePeer ran during the dial
			t.mu.Unlock()
			c.fail(fmt.Errorf("%w: peer %q removed", ErrUnreachable, to))
			continue
		}
		ps.conn, ps.failures, ps.lastErr = c, 0, nil
		t.wg.Add(1)
		t.mu.Unlock()
		go c.clientLoop()
		return c, nil
	}
}

func (t *TCP) backoff(failures int) time.Duration {
	d := t.cfg.ReconnectBackoff
	for i := 1; i < failures && d < t.cfg.MaxReconnectBackoff; i++ {
		d *= 2
	}
	return min(d, t.cfg.MaxReconnectBackoff)
}

// dial connects to node to at addr and runs TLS and the handshake.
func (t *TCP) dial(ctx context.Context, to NodeID, addr string) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, t.cfg.DialTimeout)
	defer cancel()
	stop := context.AfterFunc(t.ctx, cancel) // Close interrupts dials
	defer stop()
	_, key, err := t.handshakeKey(dctx, to, true)
	if err != nil {
		switch {
		case t.ctx.Err() != nil:
			return nil, ErrClosed
		case errors.Is(err, ErrUnauthorized):
			return nil, fmt.Errorf("handshake with %q at %s: %w", to, addr, err)
		}
		return nil, fmt.Errorf("%w: handshake with %q at %s: %v", ErrUnreachable, to, addr, err)
	}
	d := net.Dialer{}
	raw, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %q at %s: %v", ErrUnreachable, to, addr, err)
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	nc := raw
	var binding []byte
	unblock := context.AfterFunc(dctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*conn, error) {
		unblock()
		raw.Close()
		if t.ctx.Err() != nil {
			return nil, ErrClosed
		}
		if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrCorruptFrame) || errors.Is(err, ErrHandshakeVersion) {
			return nil, fmt.Errorf("handshake with %q at %s: %w", to, addr, err)
		}
		var cve *tls.CertificateVerificationError
		if errors.As(err, &cve) {
			return nil, fmt.Errorf("%w: TLS with %q at %s: %v", ErrUnauthorized, to, addr, err)
		}
		return nil, fmt.Errorf("%w: handshake with %q at %s: %v", ErrUnreachable, to, addr, err)
	}
	if t.cfg.TLS != nil {
		cfg := t.cfg.TLS.Clone()
		if cfg.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				cfg.ServerName = host
			}
		}
		t.dialTLS(cfg, to)
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(dctx); err != nil {
			return fail(err)
		}
		if err := t.checkDialed(tc, to, addr); err != nil {
			return fail(err)
		}
		nc = tc
		binding = tlsBinding(tc)
	}
	ss, err := clientHandshake(nc, t.cfg.ID, to, key, binding)
	if err != nil {
		return fail(err)
	}
	if !unblock() {
		// The dial deadline fired during the handshake: the deadline is
		// poisoned, treat the connection as failed.
		raw.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: handshake with %q at %s timed out", ErrUnreachable, to, addr)
	}
	raw.SetDeadline(time.Time{})
	return t.newConn(raw, nc, ss, true), nil
}

// secretFor returns the secret a connection with peer must prove (nil for
// none), and false when peer is refused.
func (t *TCP) secretFor(peer NodeID) ([]byte, bool) {
	if t.cfg.PeerSecret == nil {
		return t.cfg.Secret, true
	}
	k := t.cfg.PeerSecret(peer)
	return k, len(k) > 0
}

// tlsBinding returns the channel binding of a TLS connection (RFC 9266's
// tls-exporter), or nil when the TLS version cannot export it safely
// (TLS 1.2 without extended master secret), in which case frames are
// authenticated by their own tags as without TLS.
func tlsBinding(tc *tls.Conn) []byte {
	cs := tc.ConnectionState()
	b, err := cs.ExportKeyingMaterial(exporterLabel, nil, exporterLen)
	if err != nil {
		return nil
	}
	return b
}

// acceptLoop accepts connections and starts each one's handshake. It
// never waits for a handshake to finish: a connection from a source over
// MaxPendingHandshakesPerSource is closed at once, and one accepted at
// MaxPendingHandshakes closes the oldest pending handshake (pendingSet).
func (t *TCP) acceptLoop() {
	defer t.wg.Done()
	var delay time.Duration
	for {
		raw, err := t.ln.Accept()
		if err != nil {
			if t.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off and retry.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(delay):
			case <-t.ctx.Done():
				return
			}
			continue
		}
		delay = 0
		hctx, cancel := context.WithTimeout(t.ctx, t.cfg.HandshakeTimeout)
		src := sourceOf(raw.RemoteAddr())
		p := t.hs.admit(src, cancel)
		if p == nil {
			cancel()
			raw.Close()
			t.handshakeFailed(raw, fmt.Errorf("transport: closed at once: %d handshakes already pending from %v (MaxPendingHandshakesPerSource)", t.cfg.MaxPendingHandshakesPerSource, src))
			continue
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			t.hs.done(p)
			cancel()
			raw.Close()
			return
		}
		t.wg.Add(1)
		t.mu.Unlock()
		go t.serveConn(hctx, raw, p)
	}
}

// serveConn authenticates an accepted connection within hctx and serves
// it.
func (t *TCP) serveConn(hctx context.Context, raw net.Conn, p *pendingHS) {
	defer t.wg.Done()
	ss, nc, err := t.acceptHandshake(hctx, raw)
	if !t.hs.done(p) { // closed as the oldest pending at the bound
		raw.Close()
		err = fmt.Errorf("transport: closed as the oldest of %d pending handshakes (MaxPendingHandshakes)", t.cfg.MaxPendingHandshakes)
	} else if err != nil && errors.Is(hctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("transport: handshake not finished within HandshakeTimeout (%v): %w", t.cfg.HandshakeTimeout, err)
	}
	p.cancel()
	if err != nil {
		if t.ctx.Err() == nil {
			t.handshakeFailed(raw, err)
		}
		return
	}
	from := ss.peer
	c := t.newConn(raw, nc, ss, false)
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		c.fail(ErrClosed)
		return
	}
	t.inbound[c] = struct{}{}
	ml := t.msgLocks[from]
	if ml == nil {
		ml = &msgLock{}
		t.msgLocks[from] = ml
	}
	ml.refs++
	t.mu.Unlock()
	c.serverLoop(&ml.mu)
	t.mu.Lock()
	delete(t.inbound, c)
	if ml.refs--; ml.refs == 0 {
		delete(t.msgLocks, from)
	}
	t.mu.Unlock()
}

// acceptHandshake runs TLS and the handshake on an accepted connection
// until hctx ends (HandshakeTimeout after the accept, or sooner when the
// connection is closed as the oldest pending); on failure it closes raw.
func (t *TCP) acceptHandshake(hctx context.Context, raw net.Conn) (session, net.Conn, error) {
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	unblock := context.AfterFunc(hctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
	nc := raw
	var binding []byte
	if t.cfg.TLS != nil {
		tc := tls.Server(raw, t.cfg.TLS)
		if err := tc.HandshakeContext(hctx); err != nil {
			unblock()
			raw.Close()
			return session{}, nil, fmt.Errorf("transport: TLS: %w", err)
		}
		nc = tc
		binding = tlsBinding(tc)
	}
	// A key derived for a name the client claims is trusted in the cache
	// only once the client has proved it (see stretch).
	var secret, key []byte
	keyFor := func(peer NodeID) ([]byte, error) {
		if err := t.checkAccepted(nc, peer); err != nil {
			return nil, err
		}
		var err error
		secret, key, err = t.handshakeKey(hctx, peer, false)
		return key, err
	}
	ss, err := serverHandshakeFor(nc, t.cfg.ID, keyFor, binding)
	if !unblock() && err == nil {
		err = hctx.Err() // the deadline fired as the handshake ended: it is poisoned
	}
	if err != nil {
		raw.Close()
		return session{}, nil, err
	}
	if key != nil {
		trust(secret, key)
	}
	raw.SetDeadline(time.Time{})
	return ss, nc, nil
}

// handshakeFailed reports why an accepted connection was closed before
// its handshake completed (TCPConfig.HandshakeFailed).
func (t *TCP) handshakeFailed(raw net.Conn, err error) {
	if f := t.cfg.HandshakeFailed; f != nil {
		f(raw.RemoteAddr(), err)
	}
}

// conn is one authenticated connection. A dialed (client) connection
// carries this node's requests and messages to peer and their responses
// back; an accepted (server) connection carries the peer's requests and
// messages to this node's handler and its responses back.
type conn struct {
	t    *TCP
	raw  net.Conn // the TCP socket, closed to kill the connection
	nc   net.Conn // raw, or TLS over it; all I/O goes through nc
	peer NodeID   // the name the peer proved in the handshake (claimed, without a secret)
	fr   *frameReader
	seal *sealer // tags outgoing frames; nil on an unauthenticated stream

	ctx    context.Context // ends when the connection dies; given to handlers
	cancel context.CancelFunc

	wmu     chan struct{} // one-slot semaphore serializing frame writes
	hdr     [frameHeaderLen + tagLen]byte
	wbuf    []byte
	bufs    [][]byte // scratch for writev: header and body pieces
	tags    []byte   // the body tags of the frame being written
	scratch []byte   // a record that straddles body pieces, joined to be tagged

	nextID   atomic.Uint64
	mu       sync.Mutex
	pending  map[uint64]*call              // client side: calls awaiting a response
	inflight map[uint64]context.CancelFunc // server side: requests being handled
	err      error                         // why the connection died; set once, before cancel
}

type call struct {
	id  uint64
	ch  chan callResult // buffered 1
	dst []byte          // the response is appended to it
}

type callResult struct {
	body []byte
	err  error
}

func (t *TCP) newConn(raw, nc net.Conn, ss session, client bool) *conn {
	ctx, cancel := context.WithCancel(t.ctx)
	c := &conn{
		t:      t,
		raw:    raw,
		nc:     nc,
		peer:   ss.peer,
		fr:     newConnReader(nc, readBufferSize, t.cfg.MaxFrameSize, ss.recv),
		seal:   ss.send,
		ctx:    ctx,
		cancel: cancel,
		wmu:    make(chan struct{}, 1),
	}
	if client {
		c.pending = make(map[uint64]*call)
	} else {
		c.inflight = make(map[uint64]context.CancelFunc)
	}
	return c
}

func (c *conn) isDead() bool { return c.ctx.Err() != nil }

// fail kills the connection with cause err (once) and fails every call in
// flight on it.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	c.cancel()
	c.raw.Close()
	for _, cl := range pending {
		cl.ch <- callResult{err: err}
	}
}

// deadErr is the error calls see on a dead connection.
func (c *conn) deadErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		return fmt.Errorf("%w: connection to %q closed", ErrUnreachable, c.peer)
	}
	return c.err
}

func (c *conn) register(dst []byte) (*call, error) {
	cl := &call{id: c.nextID.Add(1), ch: make(chan callResult, 1), dst: dst}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		if c.err != nil {
			return nil, c.err
		}
		return nil, fmt.Errorf("%w: connection to %q closed", ErrUnreachable, c.peer)
	}
	c.pending[cl.id] = cl
	return cl, nil
}

// unregister removes call id and reports whether it was still pending.
func (c *conn) unregister(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[id]; !ok {
		return false
	}
	delete(c.pending, id)
	return true
}

// sendCancel tells the peer, best effort and without blocking the caller,
// that request id was abandoned, so its handler's ctx is canceled.
func (c *conn) sendCancel(id uint64) {
	t := c.t
	t.mu.Lock()
	if t.closed || c.isDead() {
		t.mu.Unlock()
		return
	}
	t.wg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		c.writeFrame(context.Background(), frameHeader{kind: kindCancel, id: id}, nil)
	}()
}

func (c *conn) take(id uint64) *call {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.pending[id]
	delete(c.pending, id)
	return cl
}

// writePieces writes the concatenation of reqs as one frame: uncompressed
// without joining the pieces, otherwise joined (in a pooled buffer) and
// encoded by writeMsg.
func (c *conn) writePieces(ctx context.Context, kind frameKind, id uint64, reqs [][]byte) error {
	if len(reqs) == 1 {
		return c.writeMsg(ctx, kind, id, reqs[0])
	}
	n := piecesLen(reqs)
	if _, never := c.t.cfg.Compression.(never); !never && n > 0 {
		jp := getBuf(n)
		defer putBuf(jp)
		return c.writeMsg(ctx, kind, id, joinPieces((*jp)[:0], reqs))
	}
	return c.writeFrameV(ctx, frameHeader{kind: kind, codec: CodecNone, id: id, wireLen: n, rawLen: n}, reqs)
}

// writeMsg encodes msg with the compression policy and writes it as one
// frame.
func (c *conn) writeMsg(ctx context.Context, kind frameKind, id uint64, msg []byte) error {
	p := c.t.cfg.Compression
	codec := CodecNone
	if len(msg) > 0 {
		codec = p.Choose(c.peer, msg)
	}
	if codec == CodecNone {
		return c.writeFrame(ctx, frameHeader{kind: kind, codec: CodecNone, id: id, wireLen: len(msg), rawLen: len(msg)}, msg)
	}
	if !codec.Valid() {
		return fmt.Errorf("transport: compression policy chose unknown codec %d", uint8(codec))
	}
	sp := getBuf(MaxCompressedLen(codec, len(msg)))
	defer putBuf(sp)
	start := time.Now()
	wire, err := Compress((*sp)[:0], codec, msg)
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	if o, ok := p.(CompressionObserver); ok {
		o.Observe(c.peer, codec, len(msg), len(wire), elapsed)
	}
	if len(wire) >= len(msg) {
		codec, wire = CodecNone, msg
	}
	return c.writeFrame(ctx, frameHeader{kind: kind, codec: codec, id: id, wireLen: len(wire), rawLen: len(msg)}, wire)
}

// writeFrame writes one frame. ctx (nil for none) bounds the wait for the
// connection and the write itself; a write cut short by ctx leaves a
// partial frame on the stream, so it kills the connection.
func (c *conn) writeFrame(ctx context.Context, h frameHeader, body []byte) error {
	one := [1][]byte{body}
	return c.writeFrameV(ctx, h, one[:])
}

// writeFrameV is writeFrame with the body given in pieces.
func (c *conn) writeFrameV(ctx context.Context, h frameHeader, body [][]byte) error {
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	select {
	case c.wmu <- struct{}{}:
	case <-c.ctx.Done():
		return c.deadErr()
	case <-done:
		return ctx.Err()
	}
	defer func() { <-c.wmu }()
	if c.isDead() {
		return c.deadErr()
	}
	if wt := c.t.cfg.WriteTimeout; wt > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(wt))
	}
	var stop func() bool
	var fired chan struct{}
	if done != nil {
		fired = make(chan struct{})
		stop = context.AfterFunc(ctx, func() {
			c.nc.SetWriteDeadline(time.Unix(1, 0))
			close(fired)
		})
	}
	err := c.writeLocked(h, body)
	if stop != nil && !stop() {
		<-fired
		if err != nil {
			c.fail(fmt.Errorf("%w: write to %q interrupted: %v", ErrUnreachable, c.peer, ctx.Err()))
			return ctx.Err()
		}
		if c.t.cfg.WriteTimeout <= 0 {
			c.nc.SetWriteDeadline(time.Time{})
		}
	}
	if err != nil {
		c.fail(fmt.Errorf("%w: write to %q: %v", ErrUnreachable, c.peer, err))
		return c.deadErr()
	}
	c.t.stats.sent(h.rawLen, h.wireLen)
	return nil
}

// writeLocked writes one frame, with its tags on an authenticated stream
// (header, its tag, then each record of the body followed by its tag),
// under the write lock.
func (c *conn) writeLocked(h frameHeader, body [][]byte) error {
	putHeader(c.hdr[:frameHeaderLen], h)
	hdr := c.hdr[:frameHeaderLen]
	if c.seal != nil {
		if _, err := c.seal.tag(c.hdr[:frameHeaderLen], hdr); err != nil {
			return err
		}
		hdr = c.hdr[:]
	}
	if h.wireLen <= smallFrame {
		c.wbuf = joinPieces(append(c.wbuf[:0], hdr...), body)
		if c.seal != nil && h.wireLen > 0 { // one record: smallFrame < authRecordLen
			c.wbuf = slices.Grow(c.wbuf, tagLen)
			var err error
			if c.wbuf, err = c.seal.tag(c.wbuf, c.wbuf[len(hdr):]); err != nil {
				return err
			}
		}
		_, err := c.nc.Write(c.wbuf)
		return err
	}
	c.bufs = append(c.bufs[:0], hdr)
	if c.seal != nil {
		return c.writeTagged(body, h.wireLen)
	}
	c.bufs = append(c.bufs, body...)
	return c.flush()
}

// flush writes c.bufs with one writev and empties it.
func (c *conn) flush() error {
	nb := net.Buffers(c.bufs)
	_, err := nb.WriteTo(c.nc)
	clear(c.bufs)
	c.bufs = c.bufs[:0]
	return err
}

// authFlushLen is how many tagged body bytes are gathered before they are
// written (ours): tagging the next records while the peer already reads
// and checks the previous ones overlaps the two sides' work.
const authFlushLen = authRecordLen

// writeTagged writes, after the header already in c.bufs, the body pieces
// cut into records of authRecordLen bytes, each followed by its tag,
// flushing every authFlushLen bytes. A record lying in one piece is
// tagged where it lies; one that straddles pieces is joined into
// c.scratch to be tagged (at most authRecordLen bytes copied per piece
// boundary), and sent from the pieces all the same.
func (c *conn) writeTagged(body [][]byte, n int) error {
	c.tags = slices.Grow(c.tags[:0], tagLen*authRecords(n))
	pi, off := 0, 0 // next unsent byte: body[pi][off]
	pending := 0
	for n > 0 {
		rl := min(n, authRecordLen)
		n -= rl
		for len(body[pi]) == off { // skip exhausted (and empty) pieces
			pi, off = pi+1, 0
		}
		var ad []byte
		if len(body[pi])-off >= rl {
			ad = body[pi][off : off+rl]
			c.bufs = append(c.bufs, ad)
			off += rl
		} else {
			c.scratch = c.scratch[:0]
			for need := rl; need > 0; {
				for len(body[pi]) == off {
					pi, off = pi+1, 0
				}
				k := min(need, len(body[pi])-off)
				part := body[pi][off : off+k]
				c.bufs = append(c.bufs, part)
				c.scratch = append(c.scratch, part...)
				off += k
				need -= k
			}
			ad = c.scratch
		}
		t0 := len(c.tags)
		var err error
		if c.tags, err = c.seal.tag(c.tags, ad); err != nil {
			return err
		}
		c.bufs = append(c.bufs, c.tags[t0:len(c.tags):len(c.tags)])
		if pending += rl; pending >= authFlushLen || n == 0 {
			if err := c.flush(); err != nil {
				return err
			}
			pending = 0
		}
	}
	return nil
}

// readErr turns a read failure into the connection's cause of death.
func (c *conn) readErr(err error) error {
	if errors.Is(err, ErrCorruptFrame) || errors.Is(err, ErrFrameTooLarge) || errors.Is(err, ErrUnauthorized) {
		return fmt.Errorf("%w: from %q: %w", ErrUnreachable, c.peer, err)
	}
	return fmt.Errorf("%w: connection to %q: %v", ErrUnreachable, c.peer, err)
}

// clientLoop reads responses on a dialed connection until it dies.
func (c *conn) clientLoop() {
	defer c.t.wg.Done()
	for {
		h, err := c.fr.header()
		if err != nil {
			c.fail(c.readErr(err))
			return
		}
		if h.kind != kindResponse && h.kind != kindError {
			c.fail(c.readErr(fmt.Errorf("%w: unexpected %s frame on a client connection", ErrCorruptFrame, h.kind)))
			return
		}
		cl := c.take(h.id)
		armed := c.armBody(h)
		if cl == nil { // canceled by its caller: skip the body
			if err := c.fr.discard(h.wireLen); err != nil {
				c.fail(c.readErr(err))
				return
			}
			c.disarmBody(armed)
			continue
		}
		var body []byte
		if h.kind == kindError {
			body, err = c.fr.bodyAppend(h, nil)
		} else {
			body, err = c.fr.bodyAppend(h, cl.dst)
		}
		c.disarmBody(armed)
		if err != nil {
			err = c.readErr(err)
			cl.ch <- callResult{err: err}
			c.fail(err)
			return
		}
		c.t.stats.received(h.rawLen, h.wireLen)
		if h.kind == kindError {
			cl.ch <- callResult{err: &RemoteError{Node: c.peer, Msg: string(body)}}
			continue
		}
		cl.ch <- callResult{body: body}
	}
}

// serverLoop reads requests and messages on an accepted connection until it
// dies. Messages are handled inline, one at a time, in arrival order;
// requests each in their own goroutine, at most MaxConcurrentRequests at
// once.
func (c *conn) serverLoop(msgMu *sync.Mutex) {
	defer c.fail(fmt.Errorf("%w: connection from %q closed", ErrUnreachable, c.peer))
	sem := make(chan struct{}, c.t.cfg.MaxConcurrentRequests)
	for {
		h, err := c.fr.header()
		if err != nil {
			return
		}
		switch h.kind {
		case kindMessage:
			armed := c.armBody(h)
			body, ret, err := c.fr.body(h, false)
			if err != nil {
				return
			}
			c.disarmBody(armed)
			c.t.stats.received(h.rawLen, h.wireLen)
			msgMu.Lock()
			c.t.h.HandleMessage(c.peer, body)
			msgMu.Unlock()
			putBuf(ret)
		case kindRequest:
			select {
			case sem <- struct{}{}:
			case <-c.ctx.Done():
				return
			}
			armed := c.armBody(h)
			body, ret, err := c.fr.body(h, false)
			if err != nil {
				<-sem
				return
			}
			c.disarmBody(armed)
			c.t.stats.received(h.rawLen, h.wireLen)
			rctx, cancel := context.WithCancel(c.ctx)
			c.mu.Lock()
			if old := c.inflight[h.id]; old != nil {
				old() // a peer reusing a live id: the older handler is abandoned
			}
			c.inflight[h.id] = cancel
			c.mu.Unlock()
			c.t.wg.Add(1)
			go c.serveRequest(rctx, cancel, h.id, body, ret, sem)
		case kindCancel:
			c.mu.Lock()
			if cancel := c.inflight[h.id]; cancel != nil {
				cancel()
			}
			c.mu.Unlock()
		default:
			return // responses never travel this way: a confused or hostile peer
		}
	}
}

// maxErrorMsg bounds the handler error text sent back in an error frame.
const maxErrorMsg = 64 << 10

func (c *conn) serveRequest(ctx context.Context, cancel context.CancelFunc, id uint64, body []byte, ret *[]byte, sem chan struct{}) {
	defer c.t.wg.Done()
	defer func() {
		c.mu.Lock()
		if c.inflight != nil {
			delete(c.inflight, id)
		}
		c.mu.Unlock()
		cancel()
	}()
	defer func() { <-sem }()
	// The request buffer goes back to the pool only after the response is
	// written, so a handler may answer with (a slice of) its request.
	defer putBuf(ret)
	var resp []byte
	var herr error
	if ah, ok := c.t.h.(AppendHandler); ok {
		rp := getRespBuf()
		resp, herr = ah.HandleRequestAppend(ctx, c.peer, body, (*rp)[:0])
		defer putRespBuf(rp, resp, body)
	} else {
		resp, herr = c.t.h.HandleRequest(ctx, c.peer, body)
	}
	if c.isDead() || ctx.Err() != nil {
		return // connection gone, or the caller gave up: nobody waits
	}
	if herr != nil {
		msg := herr.Error()
		if len(msg) > maxErrorMsg {
			msg = msg[:maxErrorMsg]
		}
		c.writeFrame(context.Background(), frameHeader{kind: kindError, id: id, wireLen: len(msg), rawLen: len(msg)}, []byte(msg))
		return
	}
	if len(resp) > c.t.cfg.MaxFrameSize {
		msg := fmt.Sprintf("response of %d bytes exceeds the maximum frame size %d", len(resp), c.t.cfg.MaxFrameSize)
		c.writeFrame(context.Background(), frameHeader{kind: kindError, id: id, wireLen: len(msg), rawLen: len(msg)}, []byte(msg))
		return
	}
	if err := c.writeMsg(context.Background(), kindResponse, id, resp); err != nil && !c.isDead() {
		msg := err.Error()
		c.writeFrame(context.Background(), frameHeader{kind: kindError, id: id, wireLen: len(msg), rawLen: len(msg)}, []byte(msg))
	}
}

// armBody sets the read deadline for the body of the frame whose header h
// was just read (see TCPConfig.BodyTimeout) and reports whether it did: a
// body already read ahead, or an empty one, is not timed.
func (c *conn) armBody(h frameHeader) bool {
	if c.t.cfg.BodyTimeout < 0 || h.wireLen == 0 || c.fr.buffered(h.wireLen) {
		return false
	}
	c.nc.SetReadDeadline(time.Now().Add(c.t.cfg.bodyDeadline(h.wireLen)))
	return true
}

// disarmBody clears the deadline armBody set: between frames a connection
// may stay idle.
func (c *conn) disarmBody(armed bool) {
	if armed {
		c.nc.SetReadDeadline(time.Time{})
	}
}
