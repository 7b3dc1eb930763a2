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
//	C→S  hello:  "FLCN" | version (1) | flags (1) | len(id) (2) | id | nonce (32)
//	S→C  status (1); if 0: hello of the server, then, with a secret,
//	     macS = HMAC-SHA256(secret, "falcon/transport/v1 server" | helloC | helloS)
//	C→S  with a secret: macC = HMAC-SHA256(secret, "falcon/transport/v1 client" | helloC | helloS)
//	S→C  status (1)
//
// flags bit 0 says "I require the shared secret". Status 0 accepts; 1
// refuses (secret mismatch or bad MAC); 2 refuses a malformed hello. Each
// side proves it knows the secret by a MAC over both fresh nonces, so
// neither a recorded handshake nor a peer without the secret gets through,
// and the MACs bind both node names. The protocol and its constants are
// ours; HMAC-SHA256 is RFC 2104 over FIPS 180-4.
const (
	handshakeVersion = 1
	flagSecret       = 1
	nonceLen         = 32
	macLen           = sha256.Size
	maxIDLen         = 1024 // longest NodeID accepted on the wire

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

func handshakeMAC(secret []byte, role string, c, s hello) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("falcon/transport/v1 " + role))
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
		return fmt.Errorf("%w: peer refused the handshake (shared secret mismatch)", ErrUnauthorized)
	default:
		return fmt.Errorf("%w: peer refused the handshake (status %d)", ErrCorruptFrame, st[0])
	}
}

// clientHandshake runs the dialer's side over rw and returns the server's
// node name.
func clientHandshake(rw io.ReadWriter, id NodeID, secret []byte) (NodeID, error) {
	hc, err := newHello(id, secret)
	if err != nil {
		return "", err
	}
	if _, err := rw.Write(hc.raw); err != nil {
		return "", err
	}
	if err := readStatus(rw); err != nil {
		return "", err
	}
	hs, err := readHello(rw)
	if err != nil {
		return "", err
	}
	if len(secret) > 0 {
		if hs.flags&flagSecret == 0 {
			return "", fmt.Errorf("%w: peer %q does not use a shared secret", ErrUnauthorized, hs.id)
		}
		mac := make([]byte, macLen)
		if _, err := io.ReadFull(rw, mac); err != nil {
			return "", unexpectedEOF(err)
		}
		if !hmac.Equal(mac, handshakeMAC(secret, "server", hc, hs)) {
			return "", fmt.Errorf("%w: peer %q failed to prove the shared secret", ErrUnauthorized, hs.id)
		}
		if _, err := rw.Write(handshakeMAC(secret, "client", hc, hs)); err != nil {
			return "", err
		}
	}
	if err := readStatus(rw); err != nil {
		return "", err
	}
	return hs.id, nil
}

// serverHandshake runs the acceptor's side over rw and returns the client's
// node name. On refusal it tells the client why before returning an error.
func serverHandshake(rw io.ReadWriter, id NodeID, secret []byte) (NodeID, error) {
	hc, err := readHello(rw)
	if err != nil {
		rw.Write([]byte{statusMalformed})
		return "", err
	}
	wantFlag := byte(0)
	if len(secret) > 0 {
		wantFlag = flagSecret
	}
	if hc.flags&flagSecret != wantFlag {
		rw.Write([]byte{statusRefused})
		return "", fmt.Errorf("%w: client %q secret flag %d, ours %d", ErrUnauthorized, hc.id, hc.flags&flagSecret, wantFlag)
	}
	hs, err := newHello(id, secret)
	if err != nil {
		return "", err
	}
	out := append([]byte{statusOK}, hs.raw...)
	if len(secret) > 0 {
		out = append(out, handshakeMAC(secret, "server", hc, hs)...)
	}
	if _, err := rw.Write(out); err != nil {
		return "", err
	}
	if len(secret) > 0 {
		mac := make([]byte, macLen)
		if _, err := io.ReadFull(rw, mac); err != nil {
			return "", unexpectedEOF(err)
		}
		if !hmac.Equal(mac, handshakeMAC(secret, "client", hc, hs)) {
			rw.Write([]byte{statusRefused})
			return "", fmt.Errorf("%w: client %q failed to prove the shared secret", ErrUnauthorized, hc.id)
		}
	}
	if _, err := rw.Write([]byte{statusOK}); err != nil {
		return "", err
	}
	return hc.id, nil
}
