package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// relay is an on-path attacker between a dialer and an acceptor: it
// forwards every byte both ways (so a genuine handshake goes through) and
// lets the test inject bytes into, rewrite, or record the dialer→acceptor
// stream.
type relay struct {
	ln     net.Listener
	target string

	mu      sync.Mutex // serializes writes to up
	up      net.Conn   // relay → acceptor, of the last connection
	mutate  func(b []byte)
	record  bool
	rec     []byte
	upDone  chan struct{} // closed when the acceptor hangs up on up
	conns   []net.Conn
	wg      sync.WaitGroup
	accepts atomic.Int64
}

func newRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, target: target}
	r.wg.Add(1)
	go r.run()
	t.Cleanup(func() {
		ln.Close()
		r.mu.Lock()
		for _, c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) run() {
	defer r.wg.Done()
	for {
		down, err := r.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", r.target)
		if err != nil {
			down.Close()
			continue
		}
		r.accepts.Add(1)
		done := make(chan struct{})
		r.mu.Lock()
		r.up, r.upDone = up, done
		r.conns = append(r.conns, up, down)
		r.mu.Unlock()
		r.wg.Add(2)
		go func() { // dialer → acceptor, under the attacker's control
			defer r.wg.Done()
			defer up.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := down.Read(buf)
				if n > 0 {
					r.mu.Lock()
					b := buf[:n]
					if r.mutate != nil {
						r.mutate(b)
					}
					if r.record {
						r.rec = append(r.rec, b...)
					}
					_, werr := up.Write(b)
					r.mu.Unlock()
					if werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // acceptor → dialer, forwarded as it is
			defer r.wg.Done()
			defer close(done)
			defer down.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := up.Read(buf)
				if n > 0 {
					if _, werr := down.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// inject writes b into the dialer→acceptor stream of the last connection.
func (r *relay) inject(t *testing.T, b []byte) {
	t.Helper()
	r.mu.Lock()
	_, err := r.up.Write(b)
	done := r.upDone
	r.mu.Unlock()
	if err != nil {
		// A write may fail because the acceptor already dropped the
		// connection over an earlier injected frame: that is a refusal.
		select {
		case <-done:
		case <-time.After(time.Second):
			t.Fatalf("inject: %v", err)
		}
	}
}

// hungUp reports whether the acceptor closed the last connection within d.
func (r *relay) hungUp(d time.Duration) bool {
	r.mu.Lock()
	done := r.upDone
	r.mu.Unlock()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// bodyCounter counts the requests and messages whose body contains mark.
type bodyCounter struct {
	mark           []byte
	marked, others atomic.Int64
}

func (h *bodyCounter) count(b []byte) {
	if bytes.Contains(b, h.mark) {
		h.marked.Add(1)
	} else {
		h.others.Add(1)
	}
}

func (h *bodyCounter) HandleRequest(_ context.Context, _ NodeID, req []byte) ([]byte, error) {
	h.count(req)
	return append([]byte{}, req...), nil
}

func (h *bodyCounter) HandleMessage(_ NodeID, msg []byte) { h.count(msg) }

// relayPair starts an acceptor "srv" and a dialer "cli" sharing secret,
// the dialer reaching the acceptor through a relay, and completes one
// request so the handshake is done and the connection idle.
func relayPair(t *testing.T, secret []byte, h Handler) (*TCP, *relay) {
	t.Helper()
	srv, err := NewTCP(TCPConfig{ID: "srv", Secret: secret}, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	r := newRelay(t, srv.Addr().String())
	cli, err := NewTCP(TCPConfig{ID: "cli", Secret: secret, Peers: map[NodeID]string{"srv": r.addr()}}, &countingHandler{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := cli.Request(ctx, "srv", []byte("genuine")); err != nil || string(got) != "genuine" {
		t.Fatalf("genuine request through the relay = %q, %v", got, err)
	}
	return cli, r
}

// An on-path relay that forwarded a genuine authenticated handshake must
// not get a frame of its own to the handler: the acceptor refuses it and
// drops the connection.
func TestTCP_RelayInjectedFrameRefused(t *testing.T) {
	h := &bodyCounter{mark: []byte("injected")}
	cli, r := relayPair(t, []byte("relay test secret"), h)
	r.inject(t, appendFrame(t, nil, kindRequest, CodecNone, 1<<40, []byte("injected request")))
	r.inject(t, appendFrame(t, nil, kindMessage, CodecNone, 0, []byte("injected message")))
	if !r.hungUp(3 * time.Second) {
		t.Error("the acceptor kept a connection carrying an injected frame open")
	}
	if n := h.marked.Load(); n != 0 {
		t.Fatalf("handler served %d injected frames", n)
	}
	// The dialer recovers on a fresh connection.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	for range 3 {
		if _, err = cli.Request(ctx, "srv", []byte("after")); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("request after the refused injection: %v", err)
	}
}

// A relay that rewrites bytes of a genuine frame in flight, or replays a
// genuine frame, gets neither handled.
func TestTCP_RelayModifiedOrReplayedFrameRefused(t *testing.T) {
	t.Run("modified", func(t *testing.T) {
		h := &bodyCounter{mark: []byte("y")}
		cli, r := relayPair(t, []byte("relay test secret"), h)
		r.mu.Lock()
		r.mutate = func(b []byte) {
			for i := range b {
				if b[i] == 'x' {
					b[i] = 'y'
				}
			}
		}
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cli.Send(ctx, "srv", bytes.Repeat([]byte("x"), 100))
		if !r.hungUp(3 * time.Second) {
			t.Error("the acceptor kept a connection carrying a modified frame open")
		}
		if n := h.marked.Load(); n != 0 {
			t.Fatalf("handler served %d modified frames", n)
		}
	})
	t.Run("replayed", func(t *testing.T) {
		h := &bodyCounter{mark: []byte("pay me once")}
		cli, r := relayPair(t, []byte("relay test secret"), h)
		r.mu.Lock()
		r.record = true
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := cli.Request(ctx, "srv", []byte("pay me once")); err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		r.record = false
		frame := append([]byte{}, r.rec...)
		r.mu.Unlock()
		r.inject(t, frame)
		if !r.hungUp(3 * time.Second) {
			t.Error("the acceptor kept a connection carrying a replayed frame open")
		}
		if n := h.marked.Load(); n != 1 {
			t.Fatalf("handler served the request %d times, want once", n)
		}
	})
}

// openFDs counts this process's open file descriptors (Linux).
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

// Connections that never finish the handshake are capped: many idle ones
// from one source do not each hold a descriptor on the acceptor.
func TestTCP_PendingHandshakesCapped(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts descriptors in /proc")
	}
	const idle = 300
	limit := DefaultTCPConfig().MaxPendingHandshakesPerSource
	srv, err := NewTCP(TCPConfig{ID: "srv", HandshakeTimeout: 2 * time.Second}, &countingHandler{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	before := openFDs(t)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range idle {
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	time.Sleep(300 * time.Millisecond) // let the acceptor take what it will
	held := openFDs(t) - before - idle
	if held > limit+4 {
		t.Fatalf("acceptor holds %d descriptors for %d idle connections, want at most the cap %d", held, idle, limit)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	// Once the acceptor has seen the idle ones go, a genuine peer from the
	// same source gets through.
	waitPending(t, srv, 0)
	cli, err := NewTCP(TCPConfig{ID: "cli", Peers: map[NodeID]string{"srv": srv.Addr().String()}}, &countingHandler{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Request(ctx, "srv", []byte("hi")); err != nil {
		t.Fatalf("request after the idle connections closed: %v", err)
	}
}

// rawAuthClient dials srv and completes an authenticated handshake as node
// "raw"; frames written with w carry valid tags.
func rawAuthClient(t *testing.T, srv *TCP, secret []byte) (net.Conn, *conn) {
	t.Helper()
	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	ss, err := clientHandshake(c, "raw", "", testKey(t, secret), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ss.send == nil || ss.recv == nil {
		t.Fatal("authenticated handshake without TLS gave no frame keys")
	}
	return c, &conn{nc: c, seal: ss.send, fr: newFrameReader(c, 1<<20, ss.recv)}
}

// An authenticated peer that declares a body and stalls is dropped after
// BodyTimeout (plus the per-MiB allowance); a connection idle between
// frames is not.
func TestTCP_StalledBodyDropped(t *testing.T) {
	secret := []byte("stall test secret")
	srv, err := NewTCP(TCPConfig{ID: "srv", Secret: secret, BodyTimeout: 200 * time.Millisecond}, &countingHandler{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	// Idle between frames for longer than BodyTimeout: still served.
	c, w := rawAuthClient(t, srv, secret)
	for i := range 2 {
		if err := w.writeLocked(frameHeader{kind: kindRequest, id: uint64(i + 1), wireLen: 2, rawLen: 2}, [][]byte{[]byte("hi")}); err != nil {
			t.Fatal(err)
		}
		h, err := w.fr.header()
		if err != nil {
			t.Fatalf("request %d on a connection idle for %v: %v", i, 400*time.Millisecond, err)
		}
		if body, err := w.fr.bodyAppend(h, nil); err != nil || string(body) != "hi" {
			t.Fatalf("response %q, %v", body, err)
		}
		time.Sleep(400 * time.Millisecond)
	}
	c.Close()

	// Declares 1 MiB, sends 1 KiB, stalls: dropped within 0.2 s + 1 s.
	c, w = rawAuthClient(t, srv, secret)
	const declared = 1 << 20
	putHeader(w.hdr[:frameHeaderLen], frameHeader{kind: kindRequest, id: 1, wireLen: declared, rawLen: declared})
	frame, err := w.seal.tag(append([]byte{}, w.hdr[:frameHeaderLen]...), w.hdr[:frameHeaderLen])
	if err != nil {
		t.Fatal(err)
	}
	frame = append(frame, make([]byte, 1024)...)
	start := time.Now()
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(4 * time.Second))
	if _, err := readUntilHangup(c); err != nil {
		t.Fatalf("a stalled body kept the connection open: %v after %v", err, time.Since(start))
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("dropped after %v, before BodyTimeout", d)
	}
}

// memConn is a net.Conn that writes into a buffer, to capture what a
// conn's write path puts on the wire.
type memConn struct {
	net.Conn
	buf bytes.Buffer
}

func (m *memConn) Write(b []byte) (int, error) { return m.buf.Write(b) }

// authPair returns a client-side writer conn over a buffer, a factory of
// server-side readers for that stream, and the client's own reader (of
// the other direction).
func authPair(t testing.TB) (*conn, *memConn, func() *opener, *opener) {
	t.Helper()
	c, err := newHello("a", []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := newHello("b", []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := newSession("b", []byte("k"), nil, c, s, true)
	if err != nil {
		t.Fatal(err)
	}
	mc := &memConn{}
	// Each call gives a reader at the start of the stream.
	fresh := func() *opener {
		ss, err := newSession("a", []byte("k"), nil, c, s, false)
		if err != nil {
			t.Fatal(err)
		}
		return ss.recv
	}
	return &conn{nc: mc, seal: cs.send}, mc, fresh, cs.recv
}

func TestAuthStream_RoundTripInPieces(t *testing.T) {
	w, mc, fresh, _ := authPair(t)
	sizes := []int{0, 1, smallFrame, smallFrame + 1, authRecordLen - 1, authRecordLen, authRecordLen + 1, 300_000, 1<<20 + 5}
	var want [][]byte
	for i, n := range sizes {
		body := make([]byte, n)
		for j := range body {
			body[j] = byte(j*7 + i)
		}
		// Pieces cut at awkward places: empty, tiny, across record ends.
		cuts := []int{0, 0, min(n, 1), min(n, authRecordLen-3), min(n, authRecordLen+5), min(n, 2*authRecordLen), n}
		var pieces [][]byte
		for k := 1; k < len(cuts); k++ {
			pieces = append(pieces, body[cuts[k-1]:max(cuts[k-1], cuts[k])])
		}
		if err := w.writeLocked(frameHeader{kind: kindRequest, id: uint64(i + 1), wireLen: n, rawLen: n}, pieces); err != nil {
			t.Fatal(err)
		}
		want = append(want, body)
	}
	if got, exp := mc.buf.Len(), func() int {
		s := 0
		for _, n := range sizes {
			s += frameHeaderLen + tagLen + authWireLen(n)
		}
		return s
	}(); got != exp {
		t.Fatalf("wrote %d bytes, want %d (header, header tag, body, one tag per record)", got, exp)
	}
	fr := newFrameReader(bytes.NewReader(mc.buf.Bytes()), 2<<20, fresh())
	for i, body := range want {
		h, err := fr.header()
		if err != nil {
			t.Fatalf("frame %d header: %v", i, err)
		}
		got, err := fr.bodyAppend(h, nil)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("frame %d (%d bytes): %d bytes, %v", i, len(body), len(got), err)
		}
	}
}

// readAll reads frames until an error and returns how many came whole.
func readAll(r io.Reader, op *opener) (int, error) {
	fr := newFrameReader(r, 1<<20, op)
	for n := 0; ; n++ {
		h, err := fr.header()
		if err != nil {
			return n, err
		}
		if _, err := fr.bodyAppend(h, nil); err != nil {
			return n, err
		}
	}
}

// Every single-bit change anywhere in an authenticated stream, and every
// reordering, replay, drop or reflection of its frames, is refused with
// ErrUnauthorized at the frame it touches.
func TestAuthStream_TamperingRefused(t *testing.T) {
	w, mc, fresh, reverse := authPair(t)
	var frames [][]byte
	bodies := [][]byte{[]byte("first"), bytes.Repeat([]byte("second "), 20000), nil, []byte("fourth")}
	for i, b := range bodies {
		start := mc.buf.Len()
		kind, id := kindRequest, uint64(i+1)
		if b == nil {
			kind, id = kindMessage, 0
		}
		if err := w.writeLocked(frameHeader{kind: kind, id: id, wireLen: len(b), rawLen: len(b)}, [][]byte{b}); err != nil {
			t.Fatal(err)
		}
		frames = append(frames, append([]byte{}, mc.buf.Bytes()[start:]...))
	}
	stream := mc.buf.Bytes()
	if n, err := readAll(bytes.NewReader(stream), fresh()); n != len(frames) || err != io.EOF {
		t.Fatalf("genuine stream: %d frames, %v", n, err)
	}
	// Bit flips: every byte of the small frames, a sample of the big one.
	off := 0
	for fi, f := range frames {
		step := 1
		if len(f) > 4096 {
			step = 997
		}
		for i := 0; i < len(f); i += step {
			mod := append([]byte{}, stream...)
			mod[off+i] ^= 1 << (i % 8)
			n, err := readAll(bytes.NewReader(mod), fresh())
			if n > fi {
				t.Fatalf("flip at byte %d of frame %d: %d frames accepted", i, fi, n)
			}
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("flip at byte %d of frame %d: err = %v, want ErrUnauthorized", i, fi, err)
			}
		}
		off += len(f)
	}
	cat := func(idx ...int) []byte {
		var b []byte
		for _, i := range idx {
			b = append(b, frames[i]...)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		in   []byte
		ok   int // frames accepted before the refusal
	}{
		{"reordered", cat(1, 0, 2, 3), 0},
		{"replayed", cat(0, 0), 1},
		{"replayed later", cat(0, 1, 2, 0), 3},
		{"dropped", cat(0, 2, 3), 1},
		{"injected plain frame", append(cat(0), appendFrame(t, nil, kindRequest, CodecNone, 9, bytes.Repeat([]byte("x"), 100))...), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := readAll(bytes.NewReader(tc.in), fresh())
			if n != tc.ok || !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("%d frames accepted, err %v; want %d and ErrUnauthorized", n, err, tc.ok)
			}
		})
	}
	t.Run("reflected", func(t *testing.T) { // our own frames sent back to us
		n, err := readAll(bytes.NewReader(stream), reverse)
		if n != 0 || !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("%d frames accepted, err %v", n, err)
		}
	})
	t.Run("truncated", func(t *testing.T) {
		n, err := readAll(bytes.NewReader(stream[:len(stream)-1]), fresh())
		if n != len(frames)-1 || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%d frames accepted, err %v", n, err)
		}
	})
}

// The handshake's proofs cover the channel binding: peers that see
// different TLS sessions (a relay terminating TLS on both sides) fail.
func TestHandshake_ChannelBindingMismatchRefused(t *testing.T) {
	secret := []byte("binding test secret")
	for _, tc := range []struct {
		name   string
		cb, sb []byte
		ok     bool
	}{
		{"same binding", bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{1}, 32), true},
		{"different binding", bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32), false},
		{"one side unbound", nil, bytes.Repeat([]byte{2}, 32), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			a.SetDeadline(time.Now().Add(5 * time.Second))
			b.SetDeadline(time.Now().Add(5 * time.Second))
			done := make(chan error, 1)
			go func() {
				_, err := serverHandshake(b, "srv", secret, tc.sb)
				if err != nil {
					b.Close()
				}
				done <- err
			}()
			ss, err := clientHandshake(a, "cli", "", secret, tc.cb)
			if err != nil {
				a.Close()
			}
			serr := <-done
			if tc.ok {
				if err != nil || serr != nil || ss.peer != "srv" {
					t.Fatalf("client %v, server %v, peer %q", err, serr, ss.peer)
				}
				if ss.send != nil {
					t.Fatal("frames tagged although bound to a TLS session")
				}
				return
			}
			if !errors.Is(err, ErrUnauthorized) && !errors.Is(serr, ErrUnauthorized) {
				t.Fatalf("client %v, server %v; want ErrUnauthorized", err, serr)
			}
		})
	}
}

// A server that declares a large response body and stalls does not hold
// the caller: the dialer drops the connection after BodyTimeout (plus the
// per-MiB allowance) and the call fails, even for RequestAppend, which
// waits for a body it has started to receive.
func TestTCP_StalledResponseDropped(t *testing.T) {
	secret := []byte("stall test secret")
	key := testKey(t, secret)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		ss, err := serverHandshake(c, "srv", key, nil)
		if err != nil {
			return
		}
		fr := newFrameReader(c, 1<<20, ss.recv)
		h, err := fr.header()
		if err != nil {
			return
		}
		if _, err := fr.bodyAppend(h, nil); err != nil {
			return
		}
		// Answer with a header declaring 1 MiB, 1 KiB of it, then stall.
		w := &conn{nc: c, seal: ss.send}
		const declared = 1 << 20
		putHeader(w.hdr[:frameHeaderLen], frameHeader{kind: kindResponse, id: h.id, wireLen: declared, rawLen: declared})
		frame, _ := w.seal.tag(append([]byte{}, w.hdr[:frameHeaderLen]...), w.hdr[:frameHeaderLen])
		c.Write(append(frame, make([]byte, 1024)...))
		io.Copy(io.Discard, c) // until the dialer hangs up
	}()
	cli, err := NewTCP(TCPConfig{ID: "cli", Secret: secret, BodyTimeout: 200 * time.Millisecond,
		Peers: map[NodeID]string{"srv": ln.Addr().String()}}, &countingHandler{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = cli.RequestAppend(ctx, make([]byte, 0, 2<<20), "srv", []byte("q"))
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("RequestAppend against a stalled response: err = %v after %v, want ErrUnreachable", err, time.Since(start))
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("the call returned after %v", d)
	}
	<-served
}
