package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"time"
)

// Node identity by mutual TLS (TCPConfig.CertIdentity).
//
// A shared secret proves that a peer is a member of the cluster, not which
// member: any holder can claim any name. Under CertIdentity each node holds
// its own certificate, issued by the operator's CA, and the name a
// connection proves is a name in the peer's certificate:
//
//	the certificate of node N carries N as a DNS subject alternative
//	name (RFC 5280 §4.2.1.6), matched exactly: byte for byte, case
//	sensitive, no wildcard.
//
// The CommonName is not read. RFC 6125 §6.4.4 allows the CommonName only
// when a certificate has no DNS name, and Go's verifier (since Go 1.15) no
// longer accepts it as a host name at all; a fallback to it would hold on
// the accepting side and fail on the dialing side. (Kubernetes names a
// client by its CommonName, system:node:<name>; etcd can require a
// peer's DNS name, --peer-cert-allowed-hostname. We follow etcd: the same
// certificate serves as server and client certificate, and a server
// certificate is checked by DNS name.) cert-manager issues such a certificate from a Certificate
// whose dnsNames holds the node name, e.g. dnsNames: [server-0,
// falcon-server-0-0.falcon]; other DNS names (a pod's address) may sit
// beside it, and must not be another node's name.
//
// Both sides check: the acceptor refuses a hello whose claimed name is not
// in the dialer's certificate (before any frame, with the status that
// refuses a wrong secret), and the dialer verifies the acceptor's
// certificate against the name of the node it dials (TLS ServerName =
// that name, then the exact match above) and, as always, that the hello
// answering carries that name. A secret, when also set, is proven as
// before; it then adds membership to the identity TLS proves.

// errIdentity is the cause of an identity refusal; it wraps ErrUnauthorized.
var errIdentity = fmt.Errorf("%w: certificate identity", ErrUnauthorized)

// certNames returns the node names cert proves: its DNS subject
// alternative names.
func certNames(cert *x509.Certificate) []string {
	if cert == nil {
		return nil
	}
	return cert.DNSNames
}

// checkCertName returns nil when cert proves the node name id, else an
// error wrapping ErrUnauthorized that names both id and the names cert
// carries.
func checkCertName(cert *x509.Certificate, id NodeID, what string) error {
	if cert == nil {
		return fmt.Errorf("%w: %s presented no certificate, claims %q", errIdentity, what, id)
	}
	if slices.Contains(certNames(cert), string(id)) {
		return nil
	}
	return fmt.Errorf("%w: %s claims %q but its certificate names %q (DNS SANs)", errIdentity, what, id, certNames(cert))
}

// peerLeaf returns the verified leaf certificate of the peer of tc, or nil
// when TLS verified none.
func peerLeaf(tc *tls.Conn) *x509.Certificate {
	cs := tc.ConnectionState()
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil
	}
	return cs.VerifiedChains[0][0]
}

// checkAccepted checks, under CertIdentity, that the client certificate
// of the accepted connection nc proves the name id its hello claims: a
// name it does not prove is refused, whatever secret it might know.
func (t *TCP) checkAccepted(nc net.Conn, id NodeID) error {
	if !t.cfg.CertIdentity {
		return nil
	}
	tc, _ := nc.(*tls.Conn)
	if tc == nil {
		return fmt.Errorf("%w: client claims %q without TLS", errIdentity, id)
	}
	return checkCertName(peerLeaf(tc), id, "client")
}

// dialTLS adjusts the TLS config of a dial to node to: under CertIdentity
// the acceptor's certificate is verified against the node name, not the
// address's host.
func (t *TCP) dialTLS(cfg *tls.Config, to NodeID) {
	if t.cfg.CertIdentity {
		cfg.ServerName = string(to)
	}
}

// checkDialed checks, under CertIdentity, that the acceptor's certificate
// on tc proves the name to (exactly: the TLS check also admits a wildcard).
func (t *TCP) checkDialed(tc *tls.Conn, to NodeID, addr string) error {
	if !t.cfg.CertIdentity {
		return nil
	}
	return checkCertName(peerLeaf(tc), to, "node at "+addr)
}

// validateIdentity checks the TLS settings CertIdentity needs.
func (c *TCPConfig) validateIdentity() error {
	if !c.CertIdentity {
		return nil
	}
	t := c.TLS
	switch {
	case t == nil:
		return errors.New("transport: TCPConfig.CertIdentity needs TLS (IdentityTLS builds it)")
	case t.ClientAuth != tls.RequireAndVerifyClientCert:
		return fmt.Errorf("transport: TCPConfig.CertIdentity needs TLS.ClientAuth = RequireAndVerifyClientCert, have %v", t.ClientAuth)
	case t.ClientCAs == nil:
		return errors.New("transport: TCPConfig.CertIdentity needs TLS.ClientCAs, the CA that issues the nodes' certificates")
	case t.InsecureSkipVerify:
		return errors.New("transport: TCPConfig.CertIdentity with TLS.InsecureSkipVerify would accept any acceptor")
	case t.ServerName != "":
		return fmt.Errorf("transport: TCPConfig.CertIdentity verifies each acceptor against the node name dialed; TLS.ServerName %q must be empty", t.ServerName)
	case len(t.Certificates) != 1:
		return fmt.Errorf("transport: TCPConfig.CertIdentity needs exactly one TLS certificate (this node's), have %d", len(t.Certificates))
	}
	leaf := t.Certificates[0].Leaf
	if leaf == nil {
		if len(t.Certificates[0].Certificate) == 0 {
			return errors.New("transport: TCPConfig.TLS certificate is empty")
		}
		var err error
		if leaf, err = x509.ParseCertificate(t.Certificates[0].Certificate[0]); err != nil {
			return fmt.Errorf("transport: TCPConfig.TLS certificate: %w", err)
		}
	}
	if !slices.Contains(certNames(leaf), string(c.ID)) {
		return fmt.Errorf("transport: TCPConfig.CertIdentity: this node is %q but its certificate names %q (DNS SANs)", c.ID, certNames(leaf))
	}
	return nil
}

// IdentityFiles names the PEM files of one node's identity, as a cluster
// binary is given them (e.g. mounted from a cert-manager Secret: ca.crt,
// tls.crt, tls.key).
type IdentityFiles struct {
	// CA holds the certificate(s) of the CA that issues every node's
	// certificate; peers are verified against it. Required.
	CA string
	// Cert holds this node's certificate (then any intermediates), with
	// the node name as a DNS SAN. Required.
	Cert string
	// Key holds the private key of Cert (PKCS #1, PKCS #8 or SEC 1).
	// Required.
	Key string
}

// Validate reports a missing file name.
func (f IdentityFiles) Validate() error {
	var missing []string
	for _, p := range []struct{ name, v string }{{"CA", f.CA}, {"Cert", f.Cert}, {"Key", f.Key}} {
		if p.v == "" {
			missing = append(missing, p.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("transport: IdentityFiles without %q (CA, Cert and Key are all required)", missing)
	}
	return nil
}

// LoadIdentityTLS reads f and returns IdentityTLS of node id; every error
// names the file at fault.
func LoadIdentityTLS(id NodeID, f IdentityFiles) (*tls.Config, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	read := func(p string) ([]byte, error) {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("transport: identity: %w", err)
		}
		return b, nil
	}
	ca, err := read(f.CA)
	if err != nil {
		return nil, err
	}
	cert, err := read(f.Cert)
	if err != nil {
		return nil, err
	}
	key, err := read(f.Key)
	if err != nil {
		return nil, err
	}
	cfg, err := identityTLS(id, ca, cert, key, time.Now())
	if err != nil {
		return nil, fmt.Errorf("%w (CA %s, certificate %s, key %s)", err, f.CA, f.Cert, f.Key)
	}
	return cfg, nil
}

// IdentityTLS returns the mutual-TLS config of node id from PEM bytes: the
// CA bundle that issues every node's certificate, this node's certificate
// chain and its private key. One config serves both sides: it presents the
// certificate when accepting and when dialing, requires and verifies a
// client certificate, trusts only the CA, and speaks TLS 1.3 only. Use it
// with TCPConfig.CertIdentity = true. It refuses, naming the cause: a CA
// bundle without a certificate, a key that does not match the
// certificate, a certificate the CA did not issue or that is not valid
// now, one not usable for both TLS server and client authentication, and
// one that does not carry id as a DNS SAN.
func IdentityTLS(id NodeID, caPEM, certPEM, keyPEM []byte) (*tls.Config, error) {
	return identityTLS(id, caPEM, certPEM, keyPEM, time.Now())
}

func identityTLS(id NodeID, caPEM, certPEM, keyPEM []byte, now time.Time) (*tls.Config, error) {
	if id == "" {
		return nil, errors.New("transport: identity: empty node name")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("transport: identity: the CA bundle holds no PEM certificate")
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("transport: identity: certificate and key: %w", err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("transport: identity: certificate: %w", err)
		}
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("transport: identity: intermediate certificate: %w", err)
		}
		inter.AddCert(c)
	}
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("transport: identity: certificate of %q is valid from %v to %v, not now (%v)",
			id, leaf.NotBefore.UTC(), leaf.NotAfter.UTC(), now.UTC())
	}
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
			what := "server"
			if u == x509.ExtKeyUsageClientAuth {
				what = "client"
			}
			return nil, fmt.Errorf("transport: identity: certificate of %q does not verify against the CA as a TLS %s certificate: %w", id, what, err)
		}
	}
	if !slices.Contains(certNames(leaf), string(id)) {
		return nil, fmt.Errorf("transport: identity: certificate names %q (DNS SANs), not this node %q", certNames(leaf), id)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{pair},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}, nil
}
