package transport_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/falconml/falcon/transport"
	"github.com/falconml/falcon/transport/transporttest"
)

var pairMaster = []byte("falcon test pair-key master, 32+ random bytes in production")

// pairNode starts node id with the keys the operator minted for it with
// peers.
func pairNode(t *testing.T, id transport.NodeID, keys transport.PairKeys, h transport.Handler) *transport.TCP {
	t.Helper()
	tr, err := transport.NewTCP(transport.TCPConfig{ID: id, PeerSecret: keys.Secret}, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func mint(t *testing.T, self transport.NodeID, peers ...transport.NodeID) transport.PairKeys {
	t.Helper()
	k, err := transport.MintPairKeys(pairMaster, self, peers)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Finding 7 of issue 25: with keys minted per pair, the coordinator
// reaches a server and their request goes through (under the recipe of
// NodeSecret's old doc it could not: see TestNodeSecret_RecipeCannotConnect),
// and so does a worker; a worker holding its key with the server cannot
// pose as the coordinator to that server, neither with that key nor with
// every key it holds.
func TestPairKeys_ConnectAndBindNames(t *testing.T) {
	ctx := testCtx(t)
	all := []transport.NodeID{"coordinator", "server-0", "worker-0"}
	rec := &transporttest.Recorder{}
	srv := pairNode(t, "server-0", mint(t, "server-0", all...), rec)
	coord := pairNode(t, "coordinator", mint(t, "coordinator", all...), transporttest.Echo{})
	wk := mint(t, "worker-0", all...)
	w := pairNode(t, "worker-0", wk, transporttest.Echo{})
	for _, n := range []*transport.TCP{coord, w} {
		n.AddPeer("server-0", srv.Addr().String())
	}
	if _, err := coord.Request(ctx, "server-0", []byte("flush")); err != nil {
		t.Fatalf("coordinator to server-0 under pair keys: %v", err)
	}
	if _, err := w.Request(ctx, "server-0", []byte("push")); err != nil {
		t.Fatalf("worker-0 to server-0 under pair keys: %v", err)
	}
	// worker-0 claims coordinator, proving what it holds.
	for name, secret := range map[string]func(transport.NodeID) []byte{
		"its key with server-0": func(transport.NodeID) []byte { return wk["server-0"] },
		"every key it holds":    wk.Secret,
	} {
		imp := pairNode(t, "coordinator", transport.PairKeys{"server-0": secret("server-0")}, transporttest.Echo{})
		imp.AddPeer("server-0", srv.Addr().String())
		if _, err := imp.Request(ctx, "server-0", []byte("flush")); !errors.Is(err, transport.ErrUnauthorized) {
			t.Errorf("worker-0 claiming coordinator with %s: err = %v, want ErrUnauthorized", name, err)
		}
	}
	if from := rec.RequestSenders(); !slices.Equal(from, []transport.NodeID{"coordinator", "worker-0"}) {
		t.Fatalf("server-0's handler saw %q, want coordinator then worker-0", from)
	}
	// The keys are a pair's: symmetric, and distinct per pair.
	if !bytes.Equal(transport.PairSecret(pairMaster, "a", "b"), transport.PairSecret(pairMaster, "b", "a")) {
		t.Error("PairSecret is not symmetric")
	}
	if bytes.Equal(transport.PairSecret(pairMaster, "ab", "c"), transport.PairSecret(pairMaster, "a", "bc")) {
		t.Error("PairSecret(ab, c) = PairSecret(a, bc)")
	}
}

// The recipe NodeSecret's doc gave (PeerSecret(p) = NodeSecret(master, p)
// on the trusted nodes) cannot connect two of them: the dialer proves the
// acceptor's node secret, the acceptor expects the dialer's. Kept as the
// record of why NodeSecret is deprecated (finding 7 of issue 25).
func TestNodeSecret_RecipeCannotConnect(t *testing.T) {
	ctx := testCtx(t)
	recipe := func(p transport.NodeID) []byte { return transport.NodeSecret(pairMaster, p) }
	srv, err := transport.NewTCP(transport.TCPConfig{ID: "server-0", PeerSecret: recipe}, transporttest.Echo{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	coord, err := transport.NewTCP(transport.TCPConfig{ID: "coordinator", PeerSecret: recipe,
		Peers: map[transport.NodeID]string{"server-0": srv.Addr().String()}}, transporttest.Echo{})
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Close()
	if _, err := coord.Request(ctx, "server-0", []byte("x")); !errors.Is(err, transport.ErrUnauthorized) {
		t.Fatalf("coordinator to server-0 under the NodeSecret recipe: err = %v, want ErrUnauthorized", err)
	}
}

// A key file round-trips, and ParsePairKeys refuses, naming the line,
// what would leave a node with a wrong or short key.
func TestParsePairKeys(t *testing.T) {
	k := mint(t, "worker-3", "coordinator", "server-0", "server-1")
	text, err := k.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	back, err := transport.ParsePairKeys(append([]byte("# pair keys of worker-3\n\n"), text...))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 3 || !bytes.Equal(back["server-1"], k["server-1"]) || back.Secret("worker-4") != nil {
		t.Fatalf("round trip gave %v", back)
	}
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, text, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := transport.LoadPairKeys(p); err != nil || len(got) != 3 {
		t.Fatalf("LoadPairKeys = %v, %v", got, err)
	}
	key := strings.Repeat("ab", 32)
	bad := []struct{ in, want string }{
		{"server-0 " + strings.Repeat("ab", 31), "line 1: key of \"server-0\" has 62 hex digits"},
		{"server-0 " + strings.Repeat("ab", 65), "130 hex digits"},
		{"server-0 " + strings.Repeat("zz", 32), "line 1: key of \"server-0\""},
		{"server-0\n", "line 1: 1 fields"},
		{"a " + key + "\nb " + key + " extra", "line 2: 3 fields"},
		{"a " + key + "\na " + key, "line 2: a second key for \"a\""},
		{"# nothing\n", "holds no key"},
		{strings.Repeat("x", transport.MaxPairKeysFile+1), "exceeds"},
	}
	for _, tc := range bad {
		_, err := transport.ParsePairKeys([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePairKeys(%.40q) = %v, want an error saying %q", tc.in, err, tc.want)
		}
	}
	if _, err := transport.MintPairKeys([]byte("short"), "a", []transport.NodeID{"b"}); err == nil {
		t.Error("MintPairKeys with a 5-byte master accepted")
	}
}

// ParsePairKeys never panics, allocates within its input's size, and what
// it accepts round-trips through MarshalText.
func FuzzParsePairKeys(f *testing.F) {
	f.Add([]byte("coordinator " + strings.Repeat("0f", 32) + "\n# c\n\nserver-0\t" + strings.Repeat("a0", 40) + "\n"))
	f.Add([]byte("x y z\n"))
	f.Add([]byte("#\n a " + strings.Repeat("1", 64)))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := transport.ParsePairKeys(data)
		if err != nil {
			return
		}
		text, err := k.MarshalText()
		if err != nil {
			t.Fatalf("accepted %q but cannot write it back: %v", data, err)
		}
		back, err := transport.ParsePairKeys(text)
		if err != nil || len(back) != len(k) {
			t.Fatalf("round trip of %q: %v, %d keys, want %d", data, err, len(back), len(k))
		}
		for p, v := range k {
			if !bytes.Equal(back[p], v) {
				t.Fatalf("round trip changed the key of %q", p)
			}
		}
	})
}
