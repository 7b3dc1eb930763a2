package transport_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/transport"
	"github.com/falconml/falcon/transport/transporttest"
)

// identityNode starts node id presenting a certificate that names
// certName, with CertIdentity set to enforce (an impostor runs with it
// off: IdentityTLS and Validate refuse a certificate naming another node).
func identityNode(t *testing.T, pki *transporttest.PKI, id, certName transport.NodeID, enforce bool, h transport.Handler, secret []byte) *transport.TCP {
	t.Helper()
	tr, err := transport.NewTCP(transport.TCPConfig{ID: id, TLS: pki.TLS(t, certName), CertIdentity: enforce, Secret: secret}, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// Every transport guarantee holds under CertIdentity (each node with its
// own certificate, and a secret too).
func TestTCP_ConformanceCertIdentity(t *testing.T) {
	pki := transporttest.NewPKI(t, "falcon conformance CA")
	transporttest.Run(t, func(t *testing.T, hs []transport.Handler) *transporttest.Cluster {
		c := &transporttest.Cluster{}
		var nodes []*transport.TCP
		for i, h := range hs {
			id := transport.NodeID(fmt.Sprintf("node%d", i))
			nodes = append(nodes, identityNode(t, pki, id, id, true, h, []byte("falcon test secret")))
		}
		for _, a := range nodes {
			for _, b := range nodes {
				if a != b {
					a.AddPeer(b.LocalID(), b.Addr().String())
				}
			}
			c.Nodes = append(c.Nodes, a)
		}
		return c
	})
}

// A member holding its own certificate (worker-0's) that claims another
// name (coordinator) is refused at the handshake by an acceptor under
// CertIdentity, and its request never reaches the handler; the real
// coordinator's identical request is accepted and seen as the
// coordinator's. Without CertIdentity (TLS proving only "some certificate
// of the CA", as before this option existed) the same impostor gets
// through under the borrowed name: that is what the option closes.
func TestCertIdentity_AcceptorRefusesBorrowedName(t *testing.T) {
	pki := transporttest.NewPKI(t, "falcon test CA")
	ctx := testCtx(t)
	for _, secret := range [][]byte{nil, []byte("falcon shared secret, membership")} {
		t.Run(fmt.Sprintf("secret=%v", secret != nil), func(t *testing.T) {
			rec := &transporttest.Recorder{}
			srv := identityNode(t, pki, "server-0", "server-0", true, rec, secret)
			coord := identityNode(t, pki, "coordinator", "coordinator", true, transporttest.Echo{}, secret)
			imp := identityNode(t, pki, "coordinator", "worker-0", false, transporttest.Echo{}, secret)
			coord.AddPeer("server-0", srv.Addr().String())
			imp.AddPeer("server-0", srv.Addr().String())

			if _, err := imp.Request(ctx, "server-0", []byte("flush")); !errors.Is(err, transport.ErrUnauthorized) {
				t.Fatalf("worker-0's certificate claiming coordinator: err = %v, want ErrUnauthorized", err)
			}
			if n := rec.NumRequests(); n != 0 {
				t.Fatalf("the handler saw %d requests from the impostor", n)
			}
			if _, err := coord.Request(ctx, "server-0", []byte("flush")); err != nil {
				t.Fatalf("the coordinator's own request: %v", err)
			}
			if from := rec.RequestSenders(); !slices.Equal(from, []transport.NodeID{"coordinator"}) {
				t.Fatalf("handler saw requests from %q, want one from coordinator", from)
			}

			// The same impostor against an acceptor without CertIdentity.
			oldRec := &transporttest.Recorder{}
			old := identityNode(t, pki, "server-1", "server-1", false, oldRec, secret)
			imp.AddPeer("server-1", old.Addr().String())
			if _, err := imp.Request(ctx, "server-1", []byte("flush")); err != nil {
				t.Fatalf("without CertIdentity the impostor was refused: %v", err)
			}
			if from := oldRec.RequestSenders(); !slices.Equal(from, []transport.NodeID{"coordinator"}) {
				t.Fatalf("without CertIdentity the handler saw %q, want the borrowed name coordinator", from)
			}
		})
	}
}

// A dialer under CertIdentity refuses an acceptor whose certificate does
// not name the node it dialed, even when that acceptor's hello claims
// the right name; the error names both.
func TestCertIdentity_DialerChecksAcceptor(t *testing.T) {
	pki := transporttest.NewPKI(t, "falcon test CA")
	ctx := testCtx(t)
	rec := &transporttest.Recorder{}
	// worker-0's certificate answering at server-0's address, saying it is
	// server-0.
	evil := identityNode(t, pki, "server-0", "worker-0", false, rec, nil)
	coord := identityNode(t, pki, "coordinator", "coordinator", true, transporttest.Echo{}, nil)
	coord.AddPeer("server-0", evil.Addr().String())
	_, err := coord.Request(ctx, "server-0", []byte("init"))
	if !errors.Is(err, transport.ErrUnauthorized) {
		t.Fatalf("err = %v, want ErrUnauthorized", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "server-0") || !strings.Contains(msg, "worker-0") {
		t.Fatalf("%q does not name both the node dialed (server-0) and the certificate's name (worker-0)", msg)
	}
	if n := rec.NumRequests(); n != 0 {
		t.Fatalf("the impostor acceptor got %d requests", n)
	}
	// The real server-0 at the same name is reached.
	real := identityNode(t, pki, "server-0", "server-0", true, transporttest.Echo{}, nil)
	coord.AddPeer("server-0", real.Addr().String())
	deadline := time.Now().Add(10 * time.Second) // the failed dial's backoff (20 ms) must pass
	for {
		_, err := coord.Request(ctx, "server-0", []byte("init"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the real server-0: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// IdentityTLS refuses, naming the cause, what would make a node unable
// to prove its name; LoadIdentityTLS names the file.
func TestIdentityTLS_Refusals(t *testing.T) {
	pki := transporttest.NewPKI(t, "falcon test CA")
	other := transporttest.NewPKI(t, "another CA")
	cert, key := pki.Issue(t, transporttest.CertOptions{}, "worker-0")
	if _, err := transport.IdentityTLS("worker-0", pki.CAPEM, cert, key); err != nil {
		t.Fatalf("a good certificate: %v", err)
	}
	_, key2 := pki.Issue(t, transporttest.CertOptions{}, "worker-0")
	foreign, fkey := other.Issue(t, transporttest.CertOptions{}, "worker-0")
	now := time.Now()
	expired, ekey := pki.Issue(t, transporttest.CertOptions{NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Minute)}, "worker-0")
	srvOnly, skey := pki.Issue(t, transporttest.CertOptions{ServerOnly: true}, "worker-0")
	cnOnly, ckey := pki.Issue(t, transporttest.CertOptions{CommonName: "worker-0"})
	tests := []struct {
		name          string
		id            transport.NodeID
		ca, cert, key []byte
		want1, want2  string
	}{
		{"other node's certificate", "coordinator", pki.CAPEM, cert, key, `"coordinator"`, `"worker-0"`},
		{"key of another certificate", "worker-0", pki.CAPEM, cert, key2, "certificate and key", ""},
		{"issued by another CA", "worker-0", pki.CAPEM, foreign, fkey, "does not verify against the CA", ""},
		{"expired", "worker-0", pki.CAPEM, expired, ekey, "valid from", "not now"},
		{"server usage only", "worker-0", pki.CAPEM, srvOnly, skey, "TLS client certificate", ""},
		{"name in CommonName only", "worker-0", pki.CAPEM, cnOnly, ckey, `not this node "worker-0"`, "DNS SANs"},
		{"no CA", "worker-0", []byte("not pem"), cert, key, "CA bundle holds no PEM certificate", ""},
		{"no name", "", pki.CAPEM, cert, key, "empty node name", ""},
	}
	for _, tc := range tests {
		_, err := transport.IdentityTLS(tc.id, tc.ca, tc.cert, tc.key)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tc.want1) || !strings.Contains(msg, tc.want2) {
			t.Errorf("%s: %q does not say %q and %q", tc.name, msg, tc.want1, tc.want2)
		}
	}

	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	files := transport.IdentityFiles{CA: write("ca.crt", pki.CAPEM), Cert: write("tls.crt", cert), Key: write("tls.key", key)}
	if _, err := transport.LoadIdentityTLS("worker-0", files); err != nil {
		t.Fatalf("LoadIdentityTLS: %v", err)
	}
	if _, err := transport.LoadIdentityTLS("coordinator", files); err == nil || !strings.Contains(err.Error(), files.Cert) {
		t.Errorf("LoadIdentityTLS of a mismatched name: %v, want an error naming %s", err, files.Cert)
	}
	missing := files
	missing.Key = filepath.Join(dir, "absent.key")
	if _, err := transport.LoadIdentityTLS("worker-0", missing); err == nil || !strings.Contains(err.Error(), "absent.key") {
		t.Errorf("LoadIdentityTLS of a missing file: %v, want an error naming it", err)
	}
	if err := (transport.IdentityFiles{Cert: "x"}).Validate(); err == nil || !strings.Contains(err.Error(), "CA") || !strings.Contains(err.Error(), "Key") {
		t.Errorf("IdentityFiles without CA and Key: %v, want both named", err)
	}
}

// TCPConfig.Validate refuses CertIdentity without the TLS it needs.
func TestTCPConfig_ValidateCertIdentity(t *testing.T) {
	pki := transporttest.NewPKI(t, "falcon test CA")
	good := func() transport.TCPConfig {
		return transport.TCPConfig{ID: "worker-0", TLS: pki.TLS(t, "worker-0"), CertIdentity: true}
	}
	c := good()
	if err := c.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	tests := []struct {
		name string
		edit func(*transport.TCPConfig)
		want string
	}{
		{"no TLS", func(c *transport.TCPConfig) { c.TLS = nil }, "needs TLS"},
		{"client certificates not required", func(c *transport.TCPConfig) { c.TLS.ClientAuth = tls.VerifyClientCertIfGiven }, "RequireAndVerifyClientCert"},
		{"no client CAs", func(c *transport.TCPConfig) { c.TLS.ClientCAs = nil }, "ClientCAs"},
		{"skip verify", func(c *transport.TCPConfig) { c.TLS.InsecureSkipVerify = true }, "InsecureSkipVerify"},
		{"server name", func(c *transport.TCPConfig) { c.TLS.ServerName = "10.0.0.1" }, "ServerName"},
		{"another node's certificate", func(c *transport.TCPConfig) { c.ID = "coordinator" }, `"coordinator" but its certificate names ["worker-0"]`},
	}
	for _, tc := range tests {
		c := good()
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
