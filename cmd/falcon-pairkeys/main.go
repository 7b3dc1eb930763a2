// Command falcon-pairkeys is the operator's minting tool for transport's pair
// keys: from one master secret it writes, for each node, a key file
// holding that node's key with every other node (transport.MintPairKeys,
// in the format transport.ParsePairKeys reads), and nothing else, so a
// node cannot derive or prove another pair's key.
//
//	openssl rand -hex 32 > master.hex      # keep it with the operator only
//	go run ./cmd/falcon-pairkeys -master master.hex -nodes coordinator,server-0,server-1,worker-0,worker-1 -out keys
//
// writes keys/<node>.keys (mode 0600), to be given to that node only
// (it loads them with transport.LoadPairKeys and sets TCPConfig.PeerSecret
// to their Secret method). The keys are a function of the master and the
// two names, so minting again with a node added leaves every existing key
// as it was and adds the newcomer's: hand the newcomer its file and every
// other node its rewritten one (which each must reload). That step for
// every peer of a joiner is why per-node certificates
// (transport.TCPConfig.CertIdentity) are the recommended identity.
package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/falconml/falcon/transport"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "pairkeys: %v\n", err)
			os.Exit(2)
		}
	}
}

// run parses args, mints every node's keys and writes them.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pairkeys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	master := fs.String("master", "", "file holding the master secret in hex (at least 64 hex digits), e.g. from openssl rand -hex 32")
	nodes := fs.String("nodes", "", "comma-separated node names, e.g. coordinator,server-0,worker-0")
	out := fs.String("out", "", "directory to write <node>.keys into (created if absent)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *master == "" || *nodes == "" || *out == "" || fs.NArg() > 0 {
		return errors.New("give -master, -nodes and -out (and no other arguments)")
	}
	raw, err := os.ReadFile(*master)
	if err != nil {
		return err
	}
	m, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		return fmt.Errorf("master %s: not hex: %v", *master, err)
	}
	var names []transport.NodeID
	seen := map[transport.NodeID]bool{}
	for _, n := range strings.Split(*nodes, ",") {
		id := transport.NodeID(strings.TrimSpace(n))
		if seen[id] {
			return fmt.Errorf("node %q named twice", id)
		}
		if strings.ContainsAny(string(id), `/\`) || id == "." || id == ".." {
			return fmt.Errorf("node name %q cannot name a file", id)
		}
		seen[id] = true
		names = append(names, id)
	}
	if len(names) < 2 {
		return errors.New("-nodes names fewer than two nodes: there is no pair")
	}
	if err := os.MkdirAll(*out, 0o700); err != nil {
		return err
	}
	for _, n := range names {
		k, err := transport.MintPairKeys(m, n, names)
		if err != nil {
			return err
		}
		text, err := k.MarshalText()
		if err != nil {
			return err
		}
		p := filepath.Join(*out, string(n)+".keys")
		head := fmt.Sprintf("# pair keys of %s: one line per peer, \"<peer> <hex key>\"; give this file to %s only\n", n, n)
		if err := os.WriteFile(p, append([]byte(head), text...), 0o600); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: %d keys\n", p, len(k))
	}
	return nil
}
