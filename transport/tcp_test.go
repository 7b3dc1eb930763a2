package transport_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/falconml/falcon/transport"
	"github.com/falconml/falcon/transport/transporttest"
)

// tcpCluster starts len(hs) TCP nodes on loopback, each knowing every
// other's address, built from base (ID and Peers are set here).
func tcpCluster(t testing.TB, base transport.TCPConfig, hs []transport.Handler) []*transport.TCP {
	t.Helper()
	var nodes []*transport.TCP
	for i, h := range hs {
		cfg := base
		cfg.ID = transport.NodeID(fmt.Sprintf("node%d", i))
		tr, err := transport.NewTCP(cfg, h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		nodes = append(nodes, tr)
	}
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				a.AddPeer(b.LocalID(), b.Addr().String())
			}
		}
	}
	return nodes
}

func tcpFactory(base transport.TCPConfig) transporttest.Factory {
	return func(t *testing.T, hs []transport.Handler) *transporttest.Cluster {
		c := &transporttest.Cluster{}
		for _, n := range tcpCluster(t, base, hs) {
			c.Nodes = append(c.Nodes, n)
		}
		return c
	}
}

func TestTCP_Conformance(t *testing.T) {
	transporttest.Run(t, tcpFactory(transport.TCPConfig{}))
}

func TestTCP_ConformanceCompressedAuthenticatedTLS(t *testing.T) {
	cfg := transport.TCPConfig{
		Compression: transport.AboveSize(512, transport.CodecLZ4),
		Secret:      []byte("falcon test secret"),
		TLS:         selfSignedTLS(t),
	}
	transporttest.Run(t, tcpFactory(cfg))
}

// With a secret and no TLS every frame carries tags (auth.go).
func TestTCP_ConformanceAuthenticated(t *testing.T) {
	transporttest.Run(t, tcpFactory(transport.TCPConfig{Secret: []byte("falcon test secret")}))
}

func TestTCP_ConformanceAuthenticatedCompressed(t *testing.T) {
	cfg := transport.TCPConfig{
		Compression: transport.AboveSize(512, transport.CodecLZ4),
		Secret:      []byte("falcon test secret"),
	}
	transporttest.Run(t, tcpFactory(cfg))
}

// With a secret per pair of nodes (minted from a master by PairSecret),
// every connection proves its pair's.
func TestTCP_ConformancePeerSecrets(t *testing.T) {
	master := []byte("falcon test master secret, 32 b.")
	f := func(t *testing.T, hs []transport.Handler) *transporttest.Cluster {
		var nodes []*transport.TCP
		for i, h := range hs {
			id := transport.NodeID(fmt.Sprintf("node%d", i))
			pair := func(peer transport.NodeID) []byte { return transport.PairSecret(master, id, peer) }
			tr, err := transport.NewTCP(transport.TCPConfig{ID: id, PeerSecret: pair}, h)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tr.Close() })
			nodes = append(nodes, tr)
		}
		c := &transporttest.Cluster{}
		for _, a := range nodes {
			for _, b := range nodes {
				if a != b {
					a.AddPeer(b.LocalID(), b.Addr().String())
				}
			}
			c.Nodes = append(c.Nodes, a)
		}
		return c
	}
	transporttest.Run(t, f)
}

// With keys minted per pair, a worker given only its key with the server
// can prove only its own name to it: the from the handler sees cannot be
// borrowed, and workers cannot reach each other.
func TestTCP_PeerSecretBindsNames(t *testing.T) {
	master := []byte("falcon test master secret, 32 b.")
	rec := &transporttest.Recorder{}
	srv, err := transport.NewTCP(transport.TCPConfig{ID: "server-0",
		PeerSecret: func(p transport.NodeID) []byte { return transport.PairSecret(master, "server-0", p) }}, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	worker := func(id transport.NodeID, key []byte, h transport.Handler) *transport.TCP {
		tr, err := transport.NewTCP(transport.TCPConfig{ID: id,
			PeerSecret: func(transport.NodeID) []byte { return key },
			Peers:      map[transport.NodeID]string{"server-0": srv.Addr().String()}}, h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	k1 := transport.PairSecret(master, "worker-1", "server-0")
	wrec := &transporttest.Recorder{}
	w1 := worker("worker-1", k1, wrec)
	ctx := testCtx(t)
	if _, err := w1.Request(ctx, "server-0", []byte("hi")); err != nil {
		t.Fatalf("worker-1 with its own secret: %v", err)
	}
	if from := rec.RequestSenders(); len(from) != 1 || from[0] != "worker-1" {
		t.Fatalf("handler saw requests from %q, want one from worker-1", from)
	}
	// worker-1's secret under another name: refused.
	imp := worker("coordinator", k1, transporttest.Echo{})
	if _, err := imp.Request(ctx, "server-0", []byte("flush")); !errors.Is(err, transport.ErrUnauthorized) {
		t.Fatalf("worker-1's secret claiming coordinator: err = %v, want ErrUnauthorized", err)
	}
	// The trusted node reaches worker-1; worker-2 does not.
	srv.AddPeer("worker-1", w1.Addr().String())
	if err := srv.Send(ctx, "worker-1", []byte("release")); err != nil {
		t.Fatalf("server to worker-1: %v", err)
	}
	if _, err := wrec.WaitMessages(ctx, 1); err != nil {
		t.Fatal(err)
	}
	w2 := worker("worker-2", transport.PairSecret(master, "worker-2", "server-0"), transporttest.Echo{})
	w2.AddPeer("worker-1", w1.Addr().String())
	if _, err := w2.Request(ctx, "worker-1", []byte("x")); !errors.Is(err, transport.ErrUnauthorized) {
		t.Fatalf("worker-2 to worker-1: err = %v, want ErrUnauthorized", err)
	}
	if n := rec.NumRequests() + wrec.NumRequests(); n != 1 {
		t.Fatalf("handlers saw %d requests, want only worker-1's first", n)
	}
	// A node with no secret for a peer refuses to dial it.
	none, err := transport.NewTCP(transport.TCPConfig{ID: "worker-3",
		PeerSecret: func(transport.NodeID) []byte { return nil },
		Peers:      map[transport.NodeID]string{"server-0": srv.Addr().String()}}, transporttest.Echo{})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	if _, err := none.Request(ctx, "server-0", []byte("x")); !errors.Is(err, transport.ErrUnauthorized) {
		t.Fatalf("dial without a secret for the peer: err = %v, want ErrUnauthorized", err)
	}
}

func TestTCPConfig_Validate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*transport.TCPConfig)
		ok   bool
	}{
		{"default with id", func(c *transport.TCPConfig) {}, true},
		{"zero with id", func(c *transport.TCPConfig) { *c = transport.TCPConfig{ID: "a"} }, true},
		{"no id", func(c *transport.TCPConfig) { c.ID = "" }, false},
		{"negative max frame", func(c *transport.TCPConfig) { c.MaxFrameSize = -1 }, false},
		{"negative dial timeout", func(c *transport.TCPConfig) { c.DialTimeout = -time.Second }, false},
		{"negative pending handshakes", func(c *transport.TCPConfig) { c.MaxPendingHandshakes = -1 }, false},
		{"no body timeout", func(c *transport.TCPConfig) { c.BodyTimeout = -1 }, true},
		{"empty peer address", func(c *transport.TCPConfig) { c.Peers = map[transport.NodeID]string{"b": ""} }, false},
		{"tls without certificate", func(c *transport.TCPConfig) { c.TLS = &tls.Config{} }, false},
		{"secret and peer secrets", func(c *transport.TCPConfig) {
			c.Secret, c.PeerSecret = []byte("s"), func(transport.NodeID) []byte { return nil }
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := transport.DefaultTCPConfig()
			c.ID = "a"
			tc.edit(&c)
			if err := c.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	if d := transport.DefaultTCPConfig(); d.ListenAddr != "127.0.0.1:0" {
		t.Errorf("default ListenAddr = %q, want loopback", d.ListenAddr)
	}
	if d := transport.DefaultTCPConfig(); d.MaxPendingHandshakes != 64 || d.BodyTimeout != 30*time.Second {
		t.Errorf("default MaxPendingHandshakes %d, BodyTimeout %v; want 64 and 30s", d.MaxPendingHandshakes, d.BodyTimeout)
	}
}

func TestTCP_ListensOnLoopbackByDefault(t *testing.T) {
	tr, err := transport.NewTCP(transport.TCPConfig{ID: "a"}, transporttest.Echo{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ip := tr.Addr().(*net.TCPAddr).IP
	if !ip.IsLoopback() {
		t.Fatalf("default listener bound to %v, want a loopback address", tr.Addr())
	}
}

func TestTCP_WrongSecretRefused(t *testing.T) {
	tests := []struct {
		name           string
		client, server []byte
	}{
		{"different secrets", []byte("falcon test secret"), []byte("secret-B, 16 bytes+")},
		{"client without secret", nil, []byte("secret-B, 16 bytes+")},
		{"server without secret", []byte("falcon test secret"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &transporttest.Recorder{}
			srv, err := transport.NewTCP(transport.TCPConfig{ID: "srv", Secret: tc.server}, rec)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			cli, err := transport.NewTCP(transport.TCPConfig{ID: "cli", Secret: tc.client,
				Peers: map[transport.NodeID]string{"srv": srv.Addr().String()}}, transporttest.Echo{})
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			ctx := testCtx(t)
			if _, err := cli.Request(ctx, "srv", []byte("x")); !errors.Is(err, transport.ErrUnauthorized) {
				t.Fatalf("Request: err = %v, want ErrUnauthorized", err)
			}
			if err := cli.Send(ctx, "srv", []byte("x")); err == nil {
				t.Fatal("Send with the wrong secret succeeded")
			}
			// Give a wrongly accepted message time to arrive before checking.
			time.Sleep(50 * time.Millisecond)
			if n, m := rec.NumRequests(), len(rec.Messages()); n != 0 || m != 0 {
				t.Fatalf("handler saw %d requests and %d messages from an unauthenticated peer", n, m)
			}
		})
	}
}

func TestTCP_RightSecretAccepted(t *testing.T) {
	nodes := tcpCluster(t, transport.TCPConfig{Secret: []byte("falcon test secret")}, []transport.Handler{transporttest.Echo{}, transporttest.Echo{}})
	got, err := nodes[0].Request(testCtx(t), nodes[1].LocalID(), []byte("hi"))
	if err != nil || string(got) != "hi" {
		t.Fatalf("Request = %q, %v", got, err)
	}
}

func TestTCP_WrongNodeAtAddressRefused(t *testing.T) {
	nodes := tcpCluster(t, transport.TCPConfig{}, []transport.Handler{transporttest.Echo{}, transporttest.Echo{}})
	nodes[0].AddPeer("impostor", nodes[1].Addr().String())
	_, err := nodes[0].Request(testCtx(t), "impostor", []byte("x"))
	if !errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("Request to an address held by another node: err = %v, want ErrUnreachable", err)
	}
}

func TestTCP_OversizedRefused(t *testing.T) {
	rec := &transporttest.Recorder{}
	srv, err := transport.NewTCP(transport.TCPConfig{ID: "srv", MaxFrameSize: 1024}, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err := transport.NewTCP(transport.TCPConfig{ID: "cli", MaxFrameSize: 1 << 20,
		Peers: map[transport.NodeID]string{"srv": srv.Addr().String()}}, transporttest.Echo{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	small, err := transport.NewTCP(transport.TCPConfig{ID: "small", MaxFrameSize: 1024,
		Peers: map[transport.NodeID]string{"srv": srv.Addr().String()}}, transporttest.Echo{})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	ctx := testCtx(t)
	// The sender refuses its own oversized body before sending.
	if _, err := small.Request(ctx, "srv", make([]byte, 1025)); !errors.Is(err, transport.ErrFrameTooLarge) {
		t.Fatalf("local oversized Request: err = %v, want ErrFrameTooLarge", err)
	}
	if err := small.Send(ctx, "srv", make([]byte, 1025)); !errors.Is(err, transport.ErrFrameTooLarge) {
		t.Fatalf("local oversized Send: err = %v, want ErrFrameTooLarge", err)
	}
	// The receiver refuses a frame above its own limit and drops the
	// connection; the handler never sees it.
	if _, err := cli.Request(ctx, "srv", make([]byte, 2048)); !errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("Request above the server's limit: err = %v, want ErrUnreachable", err)
	}
	if rec.NumRequests() != 0 {
		t.Fatal("handler saw an oversized request")
	}
	// The next request at the limit gets a new connection and succeeds.
	if _, err := cli.Request(ctx, "srv", make([]byte, 1024)); err != nil {
		t.Fatalf("Request at the limit after a refused one: %v", err)
	}
}

// A connection dropped under the transport (here cut by a relay) is
// replaced by a new one on the next call.
func TestTCP_DroppedConnectionRecovers(t *testing.T) {
	nodes := tcpCluster(t, transport.TCPConfig{}, []transport.Handler{transporttest.Echo{}, transporttest.Echo{}})
	a, b := nodes[0], nodes[1]
	// Route a's traffic to b through a proxy we can cut.
	proxy := newProxy(t, b.Addr().String())
	a.AddPeer(b.LocalID(), proxy.addr())
	ctx := testCtx(t)
	if _, err := a.Request(ctx, b.LocalID(), []byte("one")); err != nil {
		t.Fatal(err)
	}
	proxy.cutAll()
	// The request on the dead connection fails (or, if the reader saw the
	// cut first, is sent on a fresh connection and succeeds); either way
	// the one after it succeeds on a new connection.
	_, _ = a.Request(ctx, b.LocalID(), []byte("two"))
	got, err := a.Request(ctx, b.LocalID(), []byte("three"))
	if err != nil || string(got) != "three" {
		t.Fatalf("Request after the connection dropped = %q, %v", got, err)
	}
	if n := proxy.accepted.Load(); n < 2 {
		t.Fatalf("proxy saw %d connections, want a redial (>= 2)", n)
	}
}

// proxy is a TCP relay whose connections the test can cut.
type proxy struct {
	ln       net.Listener
	target   string
	accepted atomic.Int64
	conns    chan net.Conn
	done     chan struct{}
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: make(chan net.Conn, 64), done: make(chan struct{})}
	go p.run()
	t.Cleanup(func() {
		ln.Close()
		<-p.done
		p.cutAll()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) run() {
	defer close(p.done)
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.conns <- c
		p.conns <- up
		go func() { copyAndClose(up, c) }()
		go func() { copyAndClose(c, up) }()
	}
}

func copyAndClose(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
}

func (p *proxy) cutAll() {
	for {
		select {
		case c := <-p.conns:
			c.Close()
		default:
			return
		}
	}
}

func TestTCP_BackoffAfterFailedDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens here now
	cli, err := transport.NewTCP(transport.TCPConfig{ID: "cli", ReconnectBackoff: time.Hour,
		Peers: map[transport.NodeID]string{"gone": dead}}, transporttest.Echo{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := testCtx(t)
	_, err1 := cli.Request(ctx, "gone", []byte("x"))
	_, err2 := cli.Request(ctx, "gone", []byte("x"))
	if !errors.Is(err1, transport.ErrUnreachable) || !errors.Is(err2, transport.ErrUnreachable) {
		t.Fatalf("errors = %v, %v; want ErrUnreachable", err1, err2)
	}
	// A new address resets the backoff, so the next call dials it.
	srv, err := transport.NewTCP(transport.TCPConfig{ID: "gone"}, transporttest.Echo{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli.AddPeer("gone", srv.Addr().String())
	if _, err := cli.Request(ctx, "gone", []byte("x")); err != nil {
		t.Fatalf("Request after AddPeer: %v", err)
	}
}

func TestTCP_CloseLeavesNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	release := make(chan struct{})
	block := transporttest.Funcs{Request: func(ctx context.Context, _ transport.NodeID, req []byte) ([]byte, error) {
		select {
		case <-ctx.Done():
		case <-release:
		}
		return nil, ctx.Err()
	}}
	var nodes []*transport.TCP
	for i := range 3 {
		tr, err := transport.NewTCP(transport.TCPConfig{ID: transport.NodeID(fmt.Sprint("n", i))}, block)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, tr)
	}
	for _, a := range nodes {
		for _, b := range nodes {
			a.AddPeer(b.LocalID(), b.Addr().String())
		}
	}
	// Leave requests blocked in handlers and messages in flight, then close.
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 6)
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				go func() {
					_, err := a.Request(ctx, b.LocalID(), []byte("x"))
					errs <- err
				}()
				a.Send(ctx, b.LocalID(), []byte("m"))
			}
		}
	}
	time.Sleep(50 * time.Millisecond)
	for _, n := range nodes {
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	for range 6 {
		if err := <-errs; err == nil {
			t.Error("a request blocked at Close succeeded")
		}
	}
	cancel()
	close(release)
}

// selfSignedTLS returns a config that serves a fresh self-signed
// certificate for 127.0.0.1 and trusts only it.
func selfSignedTLS(t testing.TB) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "falcon transport test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}},
		RootCAs:      pool,
		MinVersion:   tls.VersionTLS13,
	}
}

func TestTCP_TLS(t *testing.T) {
	cfg := selfSignedTLS(t)
	nodes := tcpCluster(t, transport.TCPConfig{TLS: cfg}, []transport.Handler{transporttest.Echo{}, transporttest.Echo{}})
	ctx := testCtx(t)
	if got, err := nodes[0].Request(ctx, nodes[1].LocalID(), []byte("over tls")); err != nil || string(got) != "over tls" {
		t.Fatalf("Request over TLS = %q, %v", got, err)
	}
	// A client that does not trust the certificate is refused.
	other := selfSignedTLS(t)
	stranger, err := transport.NewTCP(transport.TCPConfig{ID: "stranger", TLS: other,
		Peers: map[transport.NodeID]string{nodes[1].LocalID(): nodes[1].Addr().String()}}, transporttest.Echo{})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if _, err := stranger.Request(ctx, nodes[1].LocalID(), []byte("x")); !errors.Is(err, transport.ErrUnauthorized) {
		t.Fatalf("Request from a client that does not trust the server's certificate: err = %v, want ErrUnauthorized", err)
	}
	// A plaintext client cannot talk to a TLS server.
	plain, err := transport.NewTCP(transport.TCPConfig{ID: "plain", DialTimeout: time.Second,
		Peers: map[transport.NodeID]string{nodes[1].LocalID(): nodes[1].Addr().String()}}, transporttest.Echo{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Request(ctx, nodes[1].LocalID(), []byte("x")); err == nil {
		t.Fatal("plaintext Request to a TLS server succeeded")
	}
}

func TestTCP_InFlightFailsWhenConnectionDrops(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{}, 1)
	h := transporttest.Funcs{Request: func(ctx context.Context, _ transport.NodeID, req []byte) ([]byte, error) {
		if string(req) == "block" {
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return req, nil
	}}
	nodes := tcpCluster(t, transport.TCPConfig{}, []transport.Handler{transporttest.Echo{}, h})
	a, b := nodes[0], nodes[1]
	proxy := newProxy(t, b.Addr().String())
	a.AddPeer(b.LocalID(), proxy.addr())
	ctx := testCtx(t)
	done := make(chan error, 1)
	go func() {
		_, err := a.Request(ctx, b.LocalID(), []byte("block"))
		done <- err
	}()
	<-started
	proxy.cutAll()
	select {
	case err := <-done:
		if !errors.Is(err, transport.ErrUnreachable) {
			t.Fatalf("in-flight request on a dropped connection: err = %v, want ErrUnreachable", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("in-flight request did not fail after its connection dropped")
	}
	if got, err := a.Request(ctx, b.LocalID(), []byte("again")); err != nil || string(got) != "again" {
		t.Fatalf("Request after the drop = %q, %v", got, err)
	}
}

func TestTCP_CompressionObserved(t *testing.T) {
	obs := &observingPolicy{CompressionPolicy: transport.Always(transport.CodecSnappy), obs: make(chan observation, 16)}
	nodes := tcpCluster(t, transport.TCPConfig{Compression: obs}, []transport.Handler{transporttest.Echo{}, transporttest.Echo{}})
	msg := gradientBytes(10_000, 9)
	sparse := make([]byte, 40_000) // mostly zeros: compresses well
	for i := 0; i < len(sparse); i += 97 {
		sparse[i] = byte(i)
	}
	ctx := testCtx(t)
	for _, m := range [][]byte{msg, sparse} {
		got, err := nodes[0].Request(ctx, nodes[1].LocalID(), m)
		if err != nil || !bytes.Equal(got, m) {
			t.Fatalf("compressed echo: err = %v, equal = %v", err, bytes.Equal(got, m))
		}
	}
	want := []struct {
		to     transport.NodeID
		shrank bool
	}{{"node1", false}, {"node0", false}, {"node1", true}, {"node0", true}}
	for _, w := range want {
		o := <-obs.obs
		if o.to != w.to || o.c != transport.CodecSnappy || o.wire <= 0 {
			t.Fatalf("observation %+v, want to=%s with snappy", o, w.to)
		}
		if shrank := o.wire < o.raw/4; shrank != w.shrank {
			t.Fatalf("observation %+v: shrank by 4x = %v, want %v", o, shrank, w.shrank)
		}
	}
}

func TestTCP_Stats(t *testing.T) {
	rec := &transporttest.Recorder{}
	nodes := tcpCluster(t, transport.TCPConfig{Compression: transport.Always(transport.CodecLZ4)}, []transport.Handler{transporttest.Echo{}, rec})
	checkStats(t, nodes[0], nodes[1], func() { rec.WaitMessages(testCtx(t), 1) })
}

func TestTCP_MutualTLS(t *testing.T) {
	cfg := selfSignedTLS(t)
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	cfg.ClientCAs = cfg.RootCAs
	rec := &transporttest.Recorder{}
	nodes := tcpCluster(t, transport.TCPConfig{TLS: cfg}, []transport.Handler{transporttest.Echo{}, rec})
	ctx := testCtx(t)
	if got, err := nodes[0].Request(ctx, nodes[1].LocalID(), []byte("mtls")); err != nil || string(got) != "mtls" {
		t.Fatalf("Request over mutual TLS = %q, %v", got, err)
	}
	// A client whose certificate the server does not trust, though it
	// trusts the server, is refused and never reaches the handler.
	other := selfSignedTLS(t)
	other.RootCAs = cfg.RootCAs
	stranger, err := transport.NewTCP(transport.TCPConfig{ID: "stranger", TLS: other,
		Peers: map[transport.NodeID]string{nodes[1].LocalID(): nodes[1].Addr().String()}}, transporttest.Echo{})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if _, err := stranger.Request(ctx, nodes[1].LocalID(), []byte("x")); err == nil {
		t.Fatal("Request with an untrusted client certificate succeeded")
	}
	if rec.NumRequests() != 1 {
		t.Fatalf("handler saw %d requests, want only the trusted one", rec.NumRequests())
	}
}

func TestTCP_RemovePeer(t *testing.T) {
	nodes := tcpCluster(t, transport.TCPConfig{}, []transport.Handler{transporttest.Echo{}, transporttest.Echo{}})
	a, b := nodes[0], nodes[1]
	ctx := testCtx(t)
	if _, err := a.Request(ctx, b.LocalID(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	a.RemovePeer(b.LocalID())
	if _, err := a.Request(ctx, b.LocalID(), []byte("x")); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Fatalf("Request to a removed peer: err = %v, want ErrUnknownPeer", err)
	}
	a.AddPeer(b.LocalID(), b.Addr().String())
	if got, err := a.Request(ctx, b.LocalID(), []byte("back")); err != nil || string(got) != "back" {
		t.Fatalf("Request after re-adding the peer = %q, %v", got, err)
	}
}
