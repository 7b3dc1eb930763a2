package transport

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode"
)

// Pair keys: one secret per pair of nodes, minted by the operator
// (TCPConfig.PeerSecret = keys.Secret).
//
// A connection between a and b proves K_ab, which only a, b and the
// operator hold, so the acceptor knows the dialer is a or b: since it is
// b itself, the dialer is a. A node is given only its own keys (one per
// peer it talks to), so it can neither derive nor prove any other pair's
// key: a worker cannot pose as the coordinator to a server. The operator
// mints every key from one master that never leaves the minting tool
// (cmd/falcon-pairkeys writes every node's key file):
//
//	K_ab = PairSecret(master, a, b) = HMAC-SHA256(master, "falcon/transport/v2 pair secret" | len(lo) (2) | lo | len(hi) (2) | hi)
//
// with lo, hi = a, b in byte order, so K_ab = K_ba (HMAC as a PRF, RFC
// 2104; the lengths keep ("ab","c") and ("a","bc") apart). A node that joins
// later needs a key with every peer it talks to, and each of those peers
// needs the same key in its own file: pair keys must be re-minted and
// redistributed to the joiner's peers, which is why mutual TLS
// (CertIdentity), where a joiner needs only its own certificate, is the
// recommended way to prove identity.
//
// Key file format (ParsePairKeys, PairKeys.MarshalText): UTF-8 text, one
// line per peer, "<peer name> <key in hex>", fields separated by spaces
// or tabs; blank lines and lines starting with '#' are ignored. A key is
// PairKeyMin to PairKeyMax bytes (64 to 128 hex digits); a name is at
// most 1024 bytes without white space; a name appears once; the file is
// at most MaxPairKeysFile bytes. For example:
//
//	# pair keys of worker-3, minted 2026-12-05
//	coordinator 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//	server-0    60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752
const (
	PairKeyMin      = 32       // bytes of the shortest key accepted
	PairKeyMax      = 64       // bytes of the longest key accepted
	MaxPairKeysFile = 16 << 20 // bytes of the largest key file read

	pairLabel = "falcon/transport/v2 pair secret"
)

// PairSecret returns the key of the pair of nodes a and b under master
// (see the formula above); it is symmetric in a and b. Only the
// operator's minting tool calls it: a node given master could derive
// every pair's key.
func PairSecret(master []byte, a, b NodeID) []byte {
	if a > b {
		a, b = b, a
	}
	m := hmac.New(sha256.New, master)
	m.Write([]byte(pairLabel))
	var n [2]byte
	for _, s := range []NodeID{a, b} {
		binary.BigEndian.PutUint16(n[:], uint16(min(len(s), 0xffff)))
		m.Write(n[:])
		m.Write([]byte(s))
	}
	return m.Sum(nil)
}

// PairKeys are one node's keys, by peer. Its Secret method is a
// TCPConfig.PeerSecret; it is safe for concurrent use once built.
type PairKeys map[NodeID][]byte

// Secret returns the key shared with peer, nil for a peer without one
// (the transport then refuses that peer).
func (k PairKeys) Secret(peer NodeID) []byte { return k[peer] }

// MintPairKeys returns the keys of node self with each of peers under
// master, what the operator writes into self's key file. master must
// have at least PairKeyMin bytes.
func MintPairKeys(master []byte, self NodeID, peers []NodeID) (PairKeys, error) {
	if len(master) < PairKeyMin {
		return nil, fmt.Errorf("transport: pair-key master of %d bytes, want at least %d random bytes", len(master), PairKeyMin)
	}
	if err := checkKeyName(self); err != nil {
		return nil, err
	}
	k := make(PairKeys, len(peers))
	for _, p := range peers {
		if p == self {
			continue
		}
		if err := checkKeyName(p); err != nil {
			return nil, err
		}
		k[p] = PairSecret(master, self, p)
	}
	return k, nil
}

// MarshalText writes k in the key file format, one line per peer in name
// order.
func (k PairKeys) MarshalText() ([]byte, error) {
	names := make([]NodeID, 0, len(k))
	for p := range k {
		names = append(names, p)
	}
	slices.Sort(names)
	var b bytes.Buffer
	for _, p := range names {
		if err := checkKeyName(p); err != nil {
			return nil, err
		}
		if n := len(k[p]); n < PairKeyMin || n > PairKeyMax {
			return nil, fmt.Errorf("transport: pair key with %q has %d bytes, want %d to %d", p, n, PairKeyMin, PairKeyMax)
		}
		fmt.Fprintf(&b, "%s %x\n", p, k[p])
	}
	return b.Bytes(), nil
}

// checkKeyName checks a name can stand in a key file.
func checkKeyName(p NodeID) error {
	switch {
	case p == "":
		return errors.New("transport: pair keys: empty node name")
	case len(p) > maxIDLen:
		return fmt.Errorf("transport: pair keys: node name of %d bytes exceeds %d", len(p), maxIDLen)
	case strings.IndexFunc(string(p), unicode.IsSpace) >= 0 || p[0] == '#':
		return fmt.Errorf("transport: pair keys: node name %q holds white space or starts with '#'", p)
	}
	return nil
}

// ParsePairKeys reads a key file (format above). Errors give the line.
func ParsePairKeys(data []byte) (PairKeys, error) {
	if len(data) > MaxPairKeysFile {
		return nil, fmt.Errorf("transport: pair-key file of %d bytes exceeds %d", len(data), MaxPairKeysFile)
	}
	k := PairKeys{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("transport: pair keys line %d: %d fields, want \"<peer> <hex key>\"", i+1, len(f))
		}
		p := NodeID(f[0])
		if err := checkKeyName(p); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if len(f[1]) < 2*PairKeyMin || len(f[1]) > 2*PairKeyMax {
			return nil, fmt.Errorf("transport: pair keys line %d: key of %q has %d hex digits, want %d to %d", i+1, p, len(f[1]), 2*PairKeyMin, 2*PairKeyMax)
		}
		key, err := hex.DecodeString(f[1])
		if err != nil {
			return nil, fmt.Errorf("transport: pair keys line %d: key of %q: %v", i+1, p, err)
		}
		if _, dup := k[p]; dup {
			return nil, fmt.Errorf("transport: pair keys line %d: a second key for %q", i+1, p)
		}
		k[p] = key
	}
	if len(k) == 0 {
		return nil, errors.New("transport: pair-key file holds no key")
	}
	return k, nil
}

// LoadPairKeys reads the key file at path; errors name it. A file bigger
// than MaxPairKeysFile is refused before it is read whole.
func LoadPairKeys(path string) (PairKeys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("transport: pair keys: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > MaxPairKeysFile {
		return nil, fmt.Errorf("transport: pair keys %s: %d bytes exceeds %d", path, st.Size(), MaxPairKeysFile)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(f, MaxPairKeysFile+1)); err != nil {
		return nil, fmt.Errorf("transport: pair keys %s: %w", path, err)
	}
	k, err := ParsePairKeys(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return k, nil
}
