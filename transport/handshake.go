package transport

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
)

// Connection handshake, run once per TCP connection before any frame (after
// TLS, when configured). The dialer is the client, the acceptor the server.
//
//	C→S  hello:  "FLCN" | version (2) | flags (1) | len(id) (2) | id | nonce (32)
//	S→C  status (1); if 0: hello of the server, then, with a secret,
//	     macS = HMAC-SHA256(secret, "falcon/transport/v2 server" | len(b) (1) | b | helloC | helloS)
//	C→S  with a secret: macC = HMAC-SHA256(secret, "falcon/transport/v2 client" | len(b) (1) | b | helloC | helloS)
//	S→C  status (1)
//
// flags bit 0 says "I require the shared secret". Status 0 accepts; 1
// refuses (secret mismatch or bad MAC); 2 refuses a malformed hello. Each
// side proves it knows the secret by a MAC over both fresh nonces, so
// neither a recorded handshake nor a peer without the secret gets through,
// and the MACs bind both node names. b is the channel binding: under TLS,
// 32 bytes of the TLS exporter (RFC 5705, label
// "EXPORTER-falcon-transport-v2"; the "tls-exporter" binding of RFC 9266),
// so the proof holds only inside the TLS session it ran in; empty without
// TLS. With a secret and without TLS, both sides then derive the session
// keys that authenticate every frame (auth.go). The protocol and its
// constants are ours; HMAC-SHA256 is RFC 2104 over FIPS 180-4.
//
// Version 2 (frames authenticated under a secret, channel binding) does not
// talk to version 1: the acceptor refuses the hello as malformed.
const (
	handshakeVersion = 2
	flagSecret       = 1
	nonceLen         = 32
	macLen           = sha256.Size
	maxIDLen         = 1024 // longest NodeID accepted on the wire
	maxBindingLen    = 255  // channel binding bytes, length in one byte
	exporterLabel    = "EXPORTER-falcon-transport-v2"
	exporterLen      = 32

	statusOK        = 0
	statusRefused   = 1
	statusMalformed = 2
)

var handshakeMagic = [4]byte{'F', 'L', 'C', 'N'}

type hello struct {
	flags byte
	id    NodeID
	nonce [nonceLen]byte
	raw   []byte // the encoded hello, covered by the MACs
}

func newHello(id NodeID, secret []byte) (hello, error) {
	if len(id) > maxIDLen {
		return hello{}, fmt.Errorf("transport: node id of %d bytes exceeds %d", len(id), maxIDLen)
	}
	h := hello{id: id}
	if len(secret) > 0 {
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

func readHello(r io.Reader) (hello, error) {
	var fixed [8]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return hello{}, err
	}
	if [4]byte(fixed[:4]) != handshakeMagic {
		return hello{}, fmt.Errorf("%w: not a falcon transport handshake", ErrCorruptFrame)
	}
	if fixed[4] != handshakeVersion {
		return hello{}, fmt.Errorf("%w: handshake version %d, want %d", ErrCorruptFrame, fixed[4], handshakeVersion)
	}
	n := int(binary.BigEndian.Uint16(fixed[6:8]))
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

func handshakeMAC(secret []byte, role string, binding []byte, c, s hello) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("falcon/transport/v2 " + role))
	m.Write([]byte{byte(len(binding))})
	m.Write(binding)
	m.Write(c.raw)
	m.Write(s.raw)
	return m.Sum(nil)
}

func readStatus(r io.Reader) error {
	var st [1]byte
	if _, err := io.ReadFull(r, st[:]); err != nil {
		return unexpectedEOF(err)
	}
	switch st[0] {
	case statusOK:
		return nil
	case statusRefused:
		return fmt.Errorf("%w: peer refused the handshake (secret mismatch, or under CertIdentity a name our certificate does not carry)", ErrUnauthorized)
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

// newSession derives the frame keys when a secret was proven outside TLS
// (binding empty); client says which side this is.
func newSession(peer NodeID, secret, binding []byte, c, s hello, client bool) (session, error) {
	ss := session{peer: peer}
	if len(secret) == 0 || len(binding) > 0 {
		return ss, nil
	}
	c2s, s2c, err := sessionKeys(secret, c, s)
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
// with the server. binding is the channel binding (nil without TLS).
func clientHandshake(rw io.ReadWriter, id NodeID, secret, binding []byte) (session, error) {
	if err := checkBinding(binding); err != nil {
		return session{}, err
	}
	hc, err := newHello(id, secret)
	if err != nil {
		return session{}, err
	}
	if _, err := rw.Write(hc.raw); err != nil {
		return session{}, err
	}
	if err := readStatus(rw); err != nil {
		return session{}, err
	}
	hs, err := readHello(rw)
	if err != nil {
		return session{}, err
	}
	if len(secret) > 0 {
		if hs.flags&flagSecret == 0 {
			return session{}, fmt.Errorf("%w: peer %q does not use a shared secret", ErrUnauthorized, hs.id)
		}
		var mac [macLen]byte
		if _, err := io.ReadFull(rw, mac[:]); err != nil {
			return session{}, unexpectedEOF(err)
		}
		if !hmac.Equal(mac[:], handshakeMAC(secret, "server", binding, hc, hs)) {
			return session{}, fmt.Errorf("%w: peer %q failed to prove the shared secret", ErrUnauthorized, hs.id)
		}
		if _, err := rw.Write(handshakeMAC(secret, "client", binding, hc, hs)); err != nil {
			return session{}, err
		}
	}
	if err := readStatus(rw); err != nil {
		return session{}, err
	}
	return newSession(hs.id, secret, binding, hc, hs, true)
}

// serverHandshake runs the acceptor's side over rw with one secret for
// every client (nil: none) and returns the session with the client.
func serverHandshake(rw io.ReadWriter, id NodeID, secret, binding []byte) (session, error) {
	return serverHandshakeFor(rw, id, func(NodeID) ([]byte, bool) { return secret, true }, binding)
}

// serverHandshakeFor runs the acceptor's side over rw and returns the
// session with the client, which must prove the secret secretFor gives for
// the name it claims (ok false refuses that name). On refusal it tells the
// client why before returning an error.
func serverHandshakeFor(rw io.ReadWriter, id NodeID, secretFor func(NodeID) ([]byte, bool), binding []byte) (session, error) {
	if err := checkBinding(binding); err != nil {
		return session{}, err
	}
	hc, err := readHello(rw)
	if err != nil {
		rw.Write([]byte{statusMalformed})
		return session{}, err
	}
	secret, ok := secretFor(hc.id)
	if !ok {
		rw.Write([]byte{statusRefused})
		return session{}, fmt.Errorf("%w: no secret for client %q", ErrUnauthorized, hc.id)
	}
	wantFlag := byte(0)
	if len(secret) > 0 {
		wantFlag = flagSecret
	}
	if hc.flags&flagSecret != wantFlag {
		rw.Write([]byte{statusRefused})
		return session{}, fmt.Errorf("%w: client %q secret flag %d, ours %d", ErrUnauthorized, hc.id, hc.flags&flagSecret, wantFlag)
	}
	hs, err := newHello(id, secret)
	if err != nil {
		return session{}, err
	}
	out := append([]byte{statusOK}, hs.raw...)
	if len(secret) > 0 {
		out = append(out, handshakeMAC(secret, "server", binding, hc, hs)...)
	}
	if _, err := rw.Write(out); err != nil {
		return session{}, err
	}
	if len(secret) > 0 {
		var mac [macLen]byte
		if _, err := io.ReadFull(rw, mac[:]); err != nil {
			return session{}, unexpectedEOF(err)
		}
		if !hmac.Equal(mac[:], handshakeMAC(secret, "client", binding, hc, hs)) {
			rw.Write([]byte{statusRefused})
			return session{}, fmt.Errorf("%w: client %q failed to prove the shared secret", ErrUnauthorized, hc.id)
		}
	}
	if _, err := rw.Write([]byte{statusOK}); err != nil {
		return session{}, err
	}
	return newSession(hc.id, secret, binding, hc, hs, false)
}
