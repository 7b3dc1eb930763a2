//go:build linux

package transport

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// dialFrom opens a TCP connection to addr from the loopback address src
// and closes it at the end of the test; it skips when src cannot be bound.
func dialFrom(t *testing.T, addr string, src net.IP) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("cannot dial from %v: %v", src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer reports whether the acceptor closed c: a read returns EOF
// (or a reset) before the long deadline, which only an acceptor that
// never closes would reach.
func closedByPeer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

func member(t *testing.T, srv *TCP) {
	t.Helper()
	cli, err := NewTCP(TCPConfig{ID: "member", Peers: map[NodeID]string{"srv": srv.Addr().String()}}, &countingHandler{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*DefaultTCPConfig().DialTimeout)
	defer cancel()
	if _, err := cli.Request(ctx, "srv", []byte("hi")); err != nil {
		t.Fatalf("member's request: %v", err)
	}
}

// Connections from one source over MaxPendingHandshakesPerSource are
// closed at once (long before HandshakeTimeout), those under it stay
// pending, and a member from another source connects meanwhile.
func TestTCP_PendingHandshakesPerSource(t *testing.T) {
	const perSource = 2
	var fails failures
	srv, err := NewTCP(TCPConfig{ID: "srv", MaxPendingHandshakesPerSource: perSource, HandshakeTimeout: time.Hour,
		HandshakeFailed: fails.add}, &countingHandler{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	src := net.IPv4(127, 0, 0, 2)
	var conns []net.Conn
	for range perSource + 3 {
		conns = append(conns, dialFrom(t, srv.Addr().String(), src))
	}
	// Accepts run in arrival order: the last three are the ones over.
	for i, c := range conns[perSource:] {
		if !closedByPeer(c) {
			t.Fatalf("connection %d from %v, over the limit of %d, was not closed", perSource+i+1, src, perSource)
		}
	}
	_, from := srv.hs.counts(sourceOf(&net.TCPAddr{IP: src}))
	if from != perSource {
		t.Fatalf("%d handshakes pending from %v, want %d", from, src, perSource)
	}
	for _, err := range fails.wait(t, 3) {
		if !strings.Contains(err.Error(), "MaxPendingHandshakesPerSource") {
			t.Fatalf("cause reported for a connection over the per-source bound: %v", err)
		}
	}
	member(t, srv)
}

// At MaxPendingHandshakes, a new connection closes the oldest pending
// handshake: the accept loop never waits, and a member connects while
// strangers hold every slot.
func TestTCP_PendingHandshakesOldestClosed(t *testing.T) {
	const max = 3
	var fails failures
	srv, err := NewTCP(TCPConfig{ID: "srv", MaxPendingHandshakes: max, HandshakeTimeout: time.Hour,
		HandshakeFailed: fails.add}, &countingHandler{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var conns []net.Conn
	for i := range max {
		conns = append(conns, dialFrom(t, srv.Addr().String(), net.IPv4(127, 0, 0, byte(2+i))))
		waitPending(t, srv, i+1)
	}
	dialFrom(t, srv.Addr().String(), net.IPv4(127, 0, 0, 9))
	if !closedByPeer(conns[0]) {
		t.Fatal("the oldest pending handshake was not closed at the bound")
	}
	if err := fails.wait(t, 1)[0]; !strings.Contains(err.Error(), "oldest of 3 pending") {
		t.Fatalf("cause reported for the oldest pending handshake: %v", err)
	}
	waitPending(t, srv, max)
	member(t, srv)
}

// A connection that sends nothing is closed after HandshakeTimeout.
func TestTCP_IdleHandshakeClosedAtDeadline(t *testing.T) {
	var fails failures
	srv, err := NewTCP(TCPConfig{ID: "srv", HandshakeTimeout: 100 * time.Millisecond, HandshakeFailed: fails.add}, &countingHandler{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := dialFrom(t, srv.Addr().String(), net.IPv4(127, 0, 0, 2))
	if !closedByPeer(c) {
		t.Fatal("an idle connection outlived the 100 ms handshake deadline by 30 s")
	}
	if err := fails.wait(t, 1)[0]; !strings.Contains(err.Error(), "HandshakeTimeout (100ms)") {
		t.Fatalf("cause reported for the idle connection: %v", err)
	}
	waitPending(t, srv, 0)
}
