package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconml/falcon/transport"
)

// Every node's file holds its key with each other node and nothing else;
// the two ends of a pair hold the same key; minting again with a node
// added keeps every existing key.
func TestRun_MintsPairKeys(t *testing.T) {
	dir := t.TempDir()
	master := filepath.Join(dir, "master.hex")
	if err := os.WriteFile(master, []byte(strings.Repeat("5a", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mintTo := func(out, nodes string) map[string]transport.PairKeys {
		var so bytes.Buffer
		if err := run([]string{"-master", master, "-nodes", nodes, "-out", out}, &so, io.Discard); err != nil {
			t.Fatal(err)
		}
		got := map[string]transport.PairKeys{}
		for _, n := range strings.Split(nodes, ",") {
			p := filepath.Join(out, n+".keys")
			k, err := transport.LoadPairKeys(p)
			if err != nil {
				t.Fatal(err)
			}
			if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v, %v; want 0600", p, st.Mode().Perm(), err)
			}
			got[n] = k
		}
		return got
	}
	three := mintTo(filepath.Join(dir, "a"), "coordinator,server-0,worker-0")
	for a, ka := range three {
		if len(ka) != 2 {
			t.Errorf("%s holds %d keys, want 2", a, len(ka))
		}
		if ka.Secret(transport.NodeID(a)) != nil {
			t.Errorf("%s holds a key with itself", a)
		}
		for b, kb := range three {
			if a != b && !bytes.Equal(ka.Secret(transport.NodeID(b)), kb.Secret(transport.NodeID(a))) {
				t.Errorf("%s and %s hold different keys for their pair", a, b)
			}
		}
	}
	four := mintTo(filepath.Join(dir, "b"), "coordinator,server-0,worker-0,worker-1")
	for a, ka := range three {
		for p, k := range ka {
			if !bytes.Equal(four[a].Secret(p), k) {
				t.Errorf("adding worker-1 changed the key of %s with %s", a, p)
			}
		}
	}
	for _, bad := range [][]string{
		{"-master", master, "-nodes", "a", "-out", dir},
		{"-master", master, "-nodes", "a,a", "-out", dir},
		{"-master", master, "-nodes", "a,../b", "-out", dir},
		{"-nodes", "a,b", "-out", dir},
	} {
		if err := run(bad, io.Discard, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	short := filepath.Join(dir, "short.hex")
	if err := os.WriteFile(short, []byte("abcd"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-master", short, "-nodes", "a,b", "-out", dir}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("a 2-byte master: %v, want refused naming the minimum", err)
	}
}
