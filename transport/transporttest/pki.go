package transporttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconml/falcon/transport"
)

// PKI is a throwaway certificate authority for tests: an ECDSA P-256 CA
// valid for one hour around its creation, which issues node certificates
// (ECDSA P-256, one hour, usable as TLS server and client certificates)
// carrying the names given as DNS SANs, as transport.TCPConfig.CertIdentity
// reads them.
type PKI struct {
	// CAPEM is the CA's certificate, PEM-encoded.
	CAPEM  []byte
	ca     *x509.Certificate
	key    *ecdsa.PrivateKey
	serial atomic.Int64
}

// NewPKI makes a fresh CA named name.
func NewPKI(t testing.TB, name string) *PKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca: ca, key: key}
	p.serial.Store(1)
	return p
}

// CertOptions shape a certificate Issue makes; the zero value is a valid
// node certificate.
type CertOptions struct {
	// CommonName is the subject's CommonName; empty means none.
	CommonName string
	// NotBefore and NotAfter bound the validity; zero means one hour
	// before and after now.
	NotBefore, NotAfter time.Time
	// ServerOnly leaves out the TLS client usage.
	ServerOnly bool
	// IPs are IP SANs, for a dialer that verifies the address it dials
	// rather than the node name (TLS without CertIdentity).
	IPs []net.IP
}

// Issue returns a certificate carrying names as DNS SANs and its private
// key, both PEM-encoded.
func (p *PKI) Issue(t testing.TB, o CertOptions, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if o.NotBefore.IsZero() {
		o.NotBefore = now.Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = now.Add(time.Hour)
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if o.ServerOnly {
		usage = usage[:1]
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial.Add(1)), Subject: pkix.Name{CommonName: o.CommonName},
		NotBefore: o.NotBefore, NotAfter: o.NotAfter, DNSNames: names, IPAddresses: o.IPs,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
}

// TLS returns the transport.IdentityTLS config of node id, with a fresh
// certificate naming id, valid for the loopback addresses too (so a
// dialer without CertIdentity, which verifies the address, accepts it).
func (p *PKI) TLS(t testing.TB, id transport.NodeID) *tls.Config {
	t.Helper()
	c, k := p.Issue(t, CertOptions{IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}, string(id))
	cfg, err := transport.IdentityTLS(id, p.CAPEM, c, k)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
