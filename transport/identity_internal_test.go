package transport

import (
	"crypto/x509"
	"errors"
	"strings"
	"testing"
)

// checkCertName matches a DNS SAN exactly: no wildcard, no CommonName,
// case sensitive; a refusal wraps ErrUnauthorized and names both the
// claimed name and the certificate's.
func TestCheckCertName(t *testing.T) {
	cert := func(cn string, dns ...string) *x509.Certificate {
		c := &x509.Certificate{DNSNames: dns}
		c.Subject.CommonName = cn
		return c
	}
	ok := []struct {
		c  *x509.Certificate
		id NodeID
	}{
		{cert("", "worker-0"), "worker-0"},
		{cert("", "falcon-worker-0-0.falcon", "worker-0"), "worker-0"},
	}
	for _, tc := range ok {
		if err := checkCertName(tc.c, tc.id, "client"); err != nil {
			t.Errorf("%v for %q: %v", tc.c.DNSNames, tc.id, err)
		}
	}
	bad := []struct {
		c  *x509.Certificate
		id NodeID
	}{
		{cert("", "worker-0"), "coordinator"},
		{cert("", "*"), "coordinator"},
		{cert("", "*.falcon"), "coordinator.falcon"},
		{cert("coordinator"), "coordinator"},
		{cert("", "Coordinator"), "coordinator"},
		{nil, "coordinator"},
	}
	for _, tc := range bad {
		err := checkCertName(tc.c, tc.id, "client")
		if !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%v claiming %q: err = %v, want ErrUnauthorized", tc.c, tc.id, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, string(tc.id)) {
			t.Errorf("%q does not name the claimed %q", msg, tc.id)
		}
		if tc.c != nil {
			for _, n := range tc.c.DNSNames {
				if !strings.Contains(msg, n) {
					t.Errorf("%q does not name the certificate's %q", msg, n)
				}
			}
		}
	}
}
