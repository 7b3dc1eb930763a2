package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// Finding 8 of issue 25: a stranger that sends a hello receives no keyed
// value. After the acceptor's status and hello nothing comes until the
// dialer has sent its MAC; a wrong MAC gets the refusal status and the
// connection closed, nothing else.
func TestHandshake_StrangerGetsNoKeyedValue(t *testing.T) {
	secret := []byte("falcon test secret")
	var fails failures
	srv, err := NewTCP(TCPConfig{ID: "srv", Secret: secret, HandshakeFailed: fails.add}, &countingHandler{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	hc, err := newHello("stranger", secret)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(hc.raw); err != nil {
		t.Fatal(err)
	}
	var st [1]byte
	if _, err := io.ReadFull(c, st[:]); err != nil || st[0] != statusOK {
		t.Fatalf("status after the stranger's hello = %d, %v; want %d", st[0], err, statusOK)
	}
	if _, err := readHello(c); err != nil {
		t.Fatalf("acceptor's hello: %v", err)
	}
	if _, err := c.Write(make([]byte, macLen)); err != nil { // a wrong MAC
		t.Fatal(err)
	}
	rest, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading until the acceptor hangs up: %v", err)
	}
	if !bytes.Equal(rest, []byte{statusRefused}) {
		t.Fatalf("after its hello the acceptor sent the stranger %d bytes (%x) and closed; want only the refusal status %d", len(rest), rest, statusRefused)
	}
	if err := fails.wait(t, 1)[0]; !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("acceptor's cause for the stranger = %v, want ErrUnauthorized", err)
	}

	// The same exchange with the right MAC: accepted, and only then the
	// acceptor's proof.
	key := testKey(t, secret)
	m, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.SetDeadline(time.Now().Add(10 * time.Second))
	hc, err = newHello("member", key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Write(hc.raw); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(m, st[:]); err != nil || st[0] != statusOK {
		t.Fatalf("status after the member's hello = %d, %v", st[0], err)
	}
	hs, err := readHello(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Write(handshakeMAC(key, "client", nil, hc, hs)); err != nil {
		t.Fatal(err)
	}
	var fin [1 + macLen]byte
	if _, err := io.ReadFull(m, fin[:]); err != nil || fin[0] != statusOK {
		t.Fatalf("answer to the member's MAC = %x, %v; want status %d and the acceptor's MAC", fin, err, statusOK)
	}
	if !bytes.Equal(fin[1:], handshakeMAC(key, "server", nil, hc, hs)) {
		t.Fatal("the acceptor's MAC does not check")
	}
}

// The secret is stretched before use: a dialer that proves the bare
// secret is refused, one that proves its scrypt key is accepted.
func TestHandshake_SecretIsStretched(t *testing.T) {
	secret := []byte("falcon test secret")
	srv, err := NewTCP(TCPConfig{ID: "srv", Secret: secret}, &countingHandler{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, tc := range []struct {
		name string
		key  []byte
		ok   bool
	}{
		{"bare secret", secret, false},
		{"stretched", testKey(t, secret), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			_, err = clientHandshake(c, "cli", "srv", tc.key, nil)
			if tc.ok != (err == nil) {
				t.Fatalf("handshake proving the %s: %v", tc.name, err)
			}
			if !tc.ok && !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("handshake proving the %s: %v, want ErrUnauthorized", tc.name, err)
			}
		})
	}
}

// A hello of another handshake version is answered with a status that
// carries the acceptor's version, and both sides' errors name both
// versions; a hello of this version, same shape, is accepted.
func TestHandshake_VersionMismatchNamesBoth(t *testing.T) {
	var fails failures
	srv, err := NewTCP(TCPConfig{ID: "srv", HandshakeFailed: fails.add}, &countingHandler{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	answer := func(version byte) []byte {
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(helloBytes(version, 0, "old", 3)); err != nil {
			t.Fatal(err)
		}
		if version == handshakeVersion {
			b := make([]byte, 1+8+3+nonceLen+1) // status, hello of "srv", status
			if _, err := io.ReadFull(c, b); err != nil {
				t.Fatal(err)
			}
			return b
		}
		b, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if got, want := answer(2), []byte{statusVersion, handshakeVersion}; !bytes.Equal(got, want) {
		t.Fatalf("answer to a v2 hello = %x, want %x (version status, our version)", got, want)
	}
	if got := answer(handshakeVersion); got[0] != statusOK || got[len(got)-1] != statusOK {
		t.Fatalf("answer to a v%d hello = %x, want it accepted", handshakeVersion, got)
	}

	// The acceptor's error, as HandshakeFailed reports it and as the
	// handshake returns it.
	want := "transport: peer speaks handshake v2, we speak v3"
	if err := fails.wait(t, 1)[0]; err.Error() != want || !errors.Is(err, ErrHandshakeVersion) {
		t.Fatalf("acceptor's cause for a v2 hello = %v; want %q wrapping ErrHandshakeVersion", err, want)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go a.Write(helloBytes(2, 0, "old", 3))
	go io.Copy(io.Discard, a)
	_, err = serverHandshake(b, "srv", nil, nil)
	if err == nil || err.Error() != want || !errors.Is(err, ErrHandshakeVersion) {
		t.Fatalf("acceptor's error for a v2 hello = %v; want %q wrapping ErrHandshakeVersion", err, want)
	}

	// The dialer's error, from an acceptor that speaks v4.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		readHello(c) // a v3 hello
		c.Write([]byte{statusVersion, 4})
	}()
	cli, err := NewTCP(TCPConfig{ID: "cli", Peers: map[NodeID]string{"srv": ln.Addr().String()}}, &countingHandler{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = cli.Request(ctx, "srv", []byte("x"))
	if !errors.Is(err, ErrHandshakeVersion) || !strings.Contains(err.Error(), "peer speaks handshake v4, we speak v3") {
		t.Fatalf("dialer's error against a v4 acceptor = %v; want ErrHandshakeVersion naming v4 and v3", err)
	}
}

// failures collects the causes TCPConfig.HandshakeFailed reports.
type failures struct {
	mu   sync.Mutex
	errs []error
}

func (f *failures) add(_ net.Addr, err error) {
	f.mu.Lock()
	f.errs = append(f.errs, err)
	f.mu.Unlock()
}

// wait returns the first n causes reported, failing the test if they do
// not come.
func (f *failures) wait(t *testing.T, n int) []error {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		f.mu.Lock()
		errs := append([]error(nil), f.errs...)
		f.mu.Unlock()
		if len(errs) >= n {
			return errs[:n]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d handshake failures reported (%v), want %d", len(errs), errs, n)
		}
	}
}

// waitPending waits until srv counts total pending handshakes in all.
func waitPending(t *testing.T, srv *TCP, total int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n, _ := srv.hs.counts(netip.Prefix{})
		if n == total {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d handshakes pending, want %d", n, total)
		}
	}
}

// testKey stretches secret as a TCP transport does.
func testKey(t testing.TB, secret []byte) []byte {
	t.Helper()
	k, err := stretch(context.Background(), secret, true)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
