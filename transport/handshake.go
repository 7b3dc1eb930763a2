package transport

import (
	"container/list"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
)

// Connection handshake, version 3, run once per TCP connection before any
// frame (after TLS, when configured). The dialer is the client, the
// acceptor the server; K is the stretched secret (kdf.go), absent without
// a secret. Integers are big-endian.
//
//	C→S  helloC = "FLCN" | version (1 byte: 3) | flags (1) | len(id) (2) | id | nonce (32)
//	S→C  status (1); if 0: helloS, the acceptor's hello (same layout, no MAC);
//	     if 3: the acceptor's version (1)
//	C→S  with a secret: macC = HMAC-SHA256(K, "falcon/transport/v3 client" | len(b) (1) | b | helloC | helloS)
//	S→C  status (1); if 0, with a secret: macS = HMAC-SHA256(K, "falcon/transport/v3 server" | len(b) (1) | b | helloC | helloS)
//
// flags bit 0 says "I require the shared secret". Status 0 accepts (so
// far); 1 refuses (no secret for that name, secret setting mismatch, or a
// wrong macC); 2 refuses a malformed hello; 3 refuses a hello of another
// version and carries the acceptor's, so both sides can name both. The
// dialer proves first: the acceptor sends nothing keyed until a macC has
// checked, so a stranger who connects learns the acceptor's name and
// nonce and nothing that tests a guess of the secret (issue 25, finding
// 8). The dialer checks the acceptor's name before it proves anything.
// Each side's MAC covers both fresh nonces and both names and is
// role-tagged, so neither a recorded handshake nor a peer without the
// secret gets through, and neither proof passes as the other. b is the
// channel binding: under TLS, 32 bytes of the TLS exporter (RFC 5705,
// label "EXPORTER-falcon-transport-v3"; the "tls-exporter" binding of
// RFC 9266), so the proof holds only inside the TLS session it ran in;
// empty without TLS. With a secret and without TLS, both sides then derive
// the session keys that authenticate every frame from K (auth.go). The
// protocol and its constants are ours; HMAC-SHA256 is RFC 2104 over
// FIPS 180-4.
//
// Versions: 1 had no secret proofs of frames; 2 had the acceptor prove
// first and used the secret unstretched. Version 3 talks to neither: a v3
// acceptor answers an older hello with status 3; a v2 or v1 acceptor
// answers a v3 hello with status 2 (malformed).
const (
	handshakeVersion = 3
	flagSecret       = 1
	nonceLen         = 32
	macLen           = sha256.Size
	maxIDLen         = 1024 // longest NodeID accepted on the wire
	maxBindingLen    = 255  // channel binding bytes, length in one byte
	exporterLabel    = "EXPORTER-falcon-transport-v3"
	exporterLen      = 32

	statusOK        = 0
	statusRefused   = 1
	statusMalformed = 2
	statusVersion   = 3
)

// ErrHandshakeVersion is the cause of a handshake refused because the
// peer speaks another handshake version; the error names both versions.
var ErrHandshakeVersion = errors.New("transport: handshake version mismatch")

// versionError is a handshake refused for its version: peer is the
// version the peer speaks.
type versionError struct{ peer byte }

func (e *versionError) Error() string {
	return fmt.Sprintf("transport: peer speaks handshake v%d, we speak v%d", e.peer, handshakeVersion)
}

func (e *versionError) Unwrap() error { return ErrHandshakeVersion }

var handshakeMagic = [4]byte{'F', 'L', 'C', 'N'}

type hello struct {
	flags byte
	id    NodeID
	nonce [nonceLen]byte
	raw   []byte // the encoded hello, covered by the MACs
}

// newHello returns this node's hello; key is the stretched secret (nil:
// none), which only sets the flag.
func newHello(id NodeID, key []byte) (hello, error) {
	if len(id) > maxIDLen {
		return hello{}, fmt.Errorf("transport: node id of %d bytes exceeds %d", len(id), maxIDLen)
	}
	h := hello{id: id}
	if len(key) > 0 {
		h.flags = flagSecret
	}
	if _, err := rand.Read(h.nonce[:]); err != nil {
		return hello{}, fmt.Errorf("transport: nonce: %w", err)
	}
	b := make([]byte, 0, 8+len(id)+nonceLen)
	b = append(b, handshakeMagic[:]...)
	b = append(b, handshakeVersion, h.flags)
	b = binary.BigEndian.AppendUint16(b, uint16(len(id)))
	b = append(b, id...)
	b = append(b, h.nonce[:]...)
	h.raw = b
	return h, nil
}

// readHello reads a hello. A hello of another version is a *versionError.
func readHello(r io.Reader) (hello, error) {
	var fixed [8]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return hello{}, err
	}
	if [4]byte(fixed[:4]) != handshakeMagic {
		return hello{}, fmt.Errorf("%w: not a falcon transport handshake", ErrCorruptFrame)
	}
	n := int(binary.BigEndian.Uint16(fixed[6:8]))
	if fixed[4] != handshakeVersion {
		// Versions 1 to 3 share the hello's layout: read the rest, so
		// that closing the connection after the answer does not reset it
		// with the answer still unread.
		if n <= maxIDLen {
			io.CopyN(io.Discard, r, int64(n+nonceLen))
		}
		return hello{}, &versionError{peer: fixed[4]}
	}
	if n > maxIDLen {
		return hello{}, fmt.Errorf("%w: node id of %d bytes exceeds %d", ErrCorruptFrame, n, maxIDLen)
	}
	rest := make([]byte, n+nonceLen)
	if _, err := io.ReadFull(r, rest); err != nil {
		return hello{}, unexpectedEOF(err)
	}
	h := hello{flags: fixed[5], id: NodeID(rest[:n])}
	copy(h.nonce[:], rest[n:])
	h.raw = append(fixed[:], rest...)
	return h, nil
}

func handshakeMAC(key []byte, role string, binding []byte, c, s hello) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("falcon/transport/v3 " + role))
	m.Write([]byte{byte(len(binding))})
	m.Write(binding)
	m.Write(c.raw)
	m.Write(s.raw)
	return m.Sum(nil)
}

// readStatus reads the acceptor's status byte (and, for status 3, its
// version) and returns nil for status 0. refused describes status 1.
func readStatus(r io.Reader, refused string) error {
	var st [1]byte
	if _, err := io.ReadFull(r, st[:]); err != nil {
		return unexpectedEOF(err)
	}
	switch st[0] {
	case statusOK:
		return nil
	case statusRefused:
		return fmt.Errorf("%w: peer refused the handshake (%s)", ErrUnauthorized, refused)
	case statusMalformed:
		return fmt.Errorf("%w: peer refused our hello as malformed (acceptors of handshake v1 and v2 answer so to any other version; we speak v%d)", ErrCorruptFrame, handshakeVersion)
	case statusVersion:
		if _, err := io.ReadFull(r, st[:]); err != nil {
			return unexpectedEOF(err)
		}
		return &versionError{peer: st[0]}
	default:
		return fmt.Errorf("%w: peer refused the handshake (status %d)", ErrCorruptFrame, st[0])
	}
}

// session is the outcome of a handshake: the peer's name, proven when a
// secret was used, and, when frames are to be authenticated, the two
// directions' tag states.
type session struct {
	peer NodeID
	send *sealer // nil: frames go out without tags
	recv *opener // nil: frames come in without tags
}

// newSession derives the frame keys from the stretched secret key when it
// was proven outside TLS (binding empty); client says which side this is.
func newSession(peer NodeID, key, binding []byte, c, s hello, client bool) (session, error) {
	ss := session{peer: peer}
	if len(key) == 0 || len(binding) > 0 {
		return ss, nil
	}
	c2s, s2c, err := sessionKeys(key, c, s)
	if err != nil {
		return session{}, fmt.Errorf("transport: session keys: %w", err)
	}
	send, recv := c2s, s2c
	if !client {
		send, recv = s2c, c2s
	}
	ss.send, ss.recv = &sealer{aead: send}, &opener{aead: recv}
	return ss, nil
}

func checkBinding(binding []byte) error {
	if len(binding) > maxBindingLen {
		return fmt.Errorf("transport: channel binding of %d bytes exceeds %d", len(binding), maxBindingLen)
	}
	return nil
}

// clientHandshake runs the dialer's side over rw and returns the session
// with the server. key is the stretched secret (nil: none); want, when
// not empty, is the name the acceptor must have, checked before this side
// proves anything; binding is the channel binding (nil without TLS).
func clientHandshake(rw io.ReadWriter, id, want NodeID, key, binding []byte) (session, error) {
	if err := checkBinding(binding); err != nil {
		return session{}, err
	}
	hc, err := newHello(id, key)
	if err != nil {
		return session{}, err
	}
	if _, err := rw.Write(hc.raw); err != nil {
		return session{}, err
	}
	if err := readStatus(rw, "shared secret setting or name refused, or under CertIdentity a name our certificate does not carry"); err != nil {
		return session{}, err
	}
	hs, err := readHello(rw)
	if err != nil {
		return session{}, unexpectedEOF(err)
	}
	if want != "" && hs.id != want {
		return session{}, fmt.Errorf("transport: the address belongs to node %q, not %q", hs.id, want)
	}
	if len(key) == 0 {
		if err := readStatus(rw, "refused"); err != nil {
			return session{}, err
		}
		return newSession(hs.id, nil, binding, hc, hs, true)
	}
	if hs.flags&flagSecret == 0 {
		return session{}, fmt.Errorf("%w: peer %q does not use a shared secret", ErrUnauthorized, hs.id)
	}
	if _, err := rw.Write(handshakeMAC(key, "client", binding, hc, hs)); err != nil {
		return session{}, err
	}
	if err := readStatus(rw, "shared secret mismatch"); err != nil {
		return session{}, err
	}
	var mac [macLen]byte
	if _, err := io.ReadFull(rw, mac[:]); err != nil {
		return session{}, unexpectedEOF(err)
	}
	if !hmac.Equal(mac[:], handshakeMAC(key, "server", binding, hc, hs)) {
		return session{}, fmt.Errorf("%w: peer %q failed to prove the shared secret", ErrUnauthorized, hs.id)
	}
	return newSession(hs.id, key, binding, hc, hs, true)
}

// serverHandshake runs the acceptor's side over rw with one stretched
// secret key for every client (nil: none) and returns the session with
// the client.
func serverHandshake(rw io.ReadWriter, id NodeID, key, binding []byte) (session, error) {
	return serverHandshakeFor(rw, id, func(NodeID) ([]byte, error) { return key, nil }, binding)
}

// serverHandshakeFor runs the acceptor's side over rw and returns the
// session with the client, which must prove the stretched key keyFor
// gives for the name it claims (nil: no secret; an error refuses that
// name). On refusal it tells the client why before returning an error.
func serverHandshakeFor(rw io.ReadWriter, id NodeID, keyFor func(NodeID) ([]byte, error), binding []byte) (session, error) {
	if err := checkBinding(binding); err != nil {
		return session{}, err
	}
	hc, err := readHello(rw)
	if err != nil {
		var ve *versionError
		if errors.As(err, &ve) {
			rw.Write([]byte{statusVersion, handshakeVersion})
		} else {
			rw.Write([]byte{statusMalformed})
		}
		return session{}, err
	}
	key, err := keyFor(hc.id)
	if err != nil {
		rw.Write([]byte{statusRefused})
		return session{}, fmt.Errorf("%w: client %q: %w", ErrUnauthorized, hc.id, err)
	}
	wantFlag := byte(0)
	if len(key) > 0 {
		wantFlag = flagSecret
	}
	if hc.flags&flagSecret != wantFlag {
		rw.Write([]byte{statusRefused})
		return session{}, fmt.Errorf("%w: client %q secret flag %d, ours %d", ErrUnauthorized, hc.id, hc.flags&flagSecret, wantFlag)
	}
	hs, err := newHello(id, key)
	if err != nil {
		return session{}, err
	}
	if _, err := rw.Write(append([]byte{statusOK}, hs.raw...)); err != nil {
		return session{}, err
	}
	if len(key) == 0 {
		if _, err := rw.Write([]byte{statusOK}); err != nil {
			return session{}, err
		}
		return newSession(hc.id, nil, binding, hc, hs, false)
	}
	// Nothing keyed has left this side yet: the client proves first.
	var mac [macLen]byte
	if _, err := io.ReadFull(rw, mac[:]); err != nil {
		return session{}, unexpectedEOF(err)
	}
	if !hmac.Equal(mac[:], handshakeMAC(key, "client", binding, hc, hs)) {
		rw.Write([]byte{statusRefused})
		return session{}, fmt.Errorf("%w: client %q failed to prove the shared secret", ErrUnauthorized, hc.id)
	}
	out := append([]byte{statusOK}, handshakeMAC(key, "server", binding, hc, hs)...)
	if _, err := rw.Write(out); err != nil {
		return session{}, err
	}
	return newSession(hc.id, key, binding, hc, hs, false)
}

// pendingSet tracks an acceptor's connections in their TLS and handshake
// (TCPConfig.MaxPendingHandshakes, MaxPendingHandshakesPerSource): at
// most max in all, oldest first, and at most perSource from one source.
type pendingSet struct {
	max, perSource int

	mu    sync.Mutex
	order list.List // of *pendingHS, oldest first
	bySrc map[netip.Prefix]int
}

// pendingHS is one connection in its handshake.
type pendingHS struct {
	src     netip.Prefix
	elem    *list.Element      // in order; nil once removed
	cancel  context.CancelFunc // ends the handshake
	evicted bool               // closed as the oldest at the bound
}

func newPendingSet(max, perSource int) pendingSet {
	return pendingSet{max: max, perSource: perSource, bySrc: make(map[netip.Prefix]int)}
}

// admit registers a connection from src whose handshake cancel ends. It
// returns nil, registering nothing, when src already has perSource
// handshakes pending; at max pending in all it ends the oldest one.
func (s *pendingSet) admit(src netip.Prefix, cancel context.CancelFunc) *pendingHS {
	s.mu.Lock()
	if s.bySrc[src] >= s.perSource {
		s.mu.Unlock()
		return nil
	}
	var victim *pendingHS
	if s.order.Len() >= s.max {
		victim = s.order.Front().Value.(*pendingHS)
		s.removeLocked(victim)
		victim.evicted = true
	}
	p := &pendingHS{src: src, cancel: cancel}
	p.elem = s.order.PushBack(p)
	s.bySrc[src]++
	s.mu.Unlock()
	if victim != nil {
		victim.cancel()
	}
	return p
}

// done removes p once its handshake has ended and reports whether it was
// still pending (false: it was ended as the oldest at the bound).
func (s *pendingSet) done(p *pendingHS) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.evicted {
		return false
	}
	s.removeLocked(p)
	return true
}

func (s *pendingSet) removeLocked(p *pendingHS) {
	if p.elem == nil {
		return
	}
	s.order.Remove(p.elem)
	p.elem = nil
	if s.bySrc[p.src]--; s.bySrc[p.src] <= 0 {
		delete(s.bySrc, p.src)
	}
}

// counts returns the pending handshakes in all and from src.
func (s *pendingSet) counts(src netip.Prefix) (total, fromSrc int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len(), s.bySrc[src]
}

// sourceOf is the source a connection from a counts against: its IPv4
// address, or the /64 prefix of its IPv6 address.
func sourceOf(a net.Addr) netip.Prefix {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}
	}
	ip := ta.AddrPort().Addr().Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	pfx, err := ip.Prefix(bits)
	if err != nil {
		return netip.Prefix{}
	}
	return pfx
}
