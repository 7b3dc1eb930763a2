package ps

import (
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/falconml/falcon/transport"
)

// FuzzParsePeers: any string either parses into an address book that
// prints back to the same book, or is refused with ErrBadPeers.
func FuzzParsePeers(f *testing.F) {
	for _, s := range []string{
		"", "coordinator=h:1", "server-0=a:7000, worker-0=b:7000,",
		"a=b", "=x:1", "a=x:1,a=y:2", " , ,", "a==:1", "a=[::1]:7000",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParsePeers(s)
		if err != nil {
			if !errors.Is(err, ErrBadPeers) {
				t.Fatalf("ParsePeers(%q) = %v, want ErrBadPeers", s, err)
			}
			return
		}
		names := make([]string, 0, len(m))
		for n, addr := range m {
			if n == "" || addr == "" || !strings.Contains(addr, ":") {
				t.Fatalf("ParsePeers(%q) accepted entry %q=%q", s, n, addr)
			}
			names = append(names, string(n))
		}
		sort.Strings(names)
		var b strings.Builder
		for _, n := range names {
			b.WriteString(n + "=" + m[transport.NodeID(n)] + ",")
		}
		m2, err := ParsePeers(b.String())
		if err != nil || len(m2) != len(m) {
			t.Fatalf("round trip of %q: %v, %d entries, want %d", b.String(), err, len(m2), len(m))
		}
		for n, addr := range m {
			if m2[n] != addr {
				t.Fatalf("round trip of %q: %q=%q, want %q", b.String(), n, m2[n], addr)
			}
		}
	})
}

// FuzzParseNode: a name is accepted only if it is exactly the name
// NodeName gives its role and rank, with the rank in range.
func FuzzParseNode(f *testing.F) {
	for _, s := range []string{"coordinator", "server-0", "worker-3", "worker-03", "server--1", "worker-", "-1", "server-9999999999999999999"} {
		f.Add(s, 2, 4)
	}
	f.Fuzz(func(t *testing.T, name string, servers, workers int) {
		role, rank, err := ParseNode(transport.NodeID(name), servers, workers)
		if err != nil {
			if !errors.Is(err, ErrBadNodeName) {
				t.Fatalf("ParseNode(%q) = %v, want ErrBadNodeName", name, err)
			}
			return
		}
		if got := NodeName(role, rank); got != transport.NodeID(name) {
			t.Fatalf("ParseNode(%q) = %s %d, which names %q", name, role, rank, got)
		}
		switch role {
		case RoleServer:
			if rank < 0 || rank >= servers {
				t.Fatalf("ParseNode(%q) accepted rank %d of %d servers", name, rank, servers)
			}
		case RoleWorker:
			if rank < 0 || rank >= workers {
				t.Fatalf("ParseNode(%q) accepted rank %d of %d workers", name, rank, workers)
			}
		}
	})
}
