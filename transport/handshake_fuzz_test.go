package transport

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
)

// fuzzRW is a handshake peer that sends fixed bytes and swallows replies.
type fuzzRW struct {
	r io.Reader
	w bytes.Buffer
}

func (f *fuzzRW) Read(p []byte) (int, error)  { return f.r.Read(p) }
func (f *fuzzRW) Write(p []byte) (int, error) { return f.w.Write(p) }

// helloBytes encodes a hello with arbitrary fields.
func helloBytes(version, flags byte, id string, declared int) []byte {
	b := append([]byte{}, handshakeMagic[:]...)
	b = append(b, version, flags)
	b = binary.BigEndian.AppendUint16(b, uint16(declared))
	b = append(b, id...)
	return append(b, make([]byte, nonceLen)...)
}

// FuzzHandshake feeds arbitrary bytes to both sides of the handshake, with
// and without a (stretched) secret key, and to the hello decoder. Nothing
// may panic or allocate beyond the declared limits; with a key no input
// may pass (that would be a forged proof); a decoded hello re-encodes to
// the bytes it came from; and the acceptor, until the input has proved
// the key, writes nothing but status bytes and its hello (no keyed value).
func FuzzHandshake(f *testing.F) {
	good, err := newHello("worker-1", []byte("k"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good.raw)
	f.Add(append([]byte{statusOK}, good.raw...))
	f.Add(append(append([]byte{statusOK}, good.raw...), make([]byte, macLen+1)...))
	f.Add(helloBytes(handshakeVersion, 0, "srv", 3))
	f.Add(helloBytes(handshakeVersion, flagSecret, "srv", 3))
	f.Add(helloBytes(1, 0, "old", 3))          // version 1 peer
	f.Add(helloBytes(2, flagSecret, "old", 3)) // version 2 peer
	f.Add(append(append([]byte{statusOK}, good.raw...), statusOK))
	f.Add([]byte{statusVersion, 2})
	f.Add([]byte{statusMalformed})
	f.Add(helloBytes(handshakeVersion, 0, "x", 0xffff))    // declares 64 KiB id
	f.Add(helloBytes(handshakeVersion, 0, "", maxIDLen+1)) // just over the limit
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{statusRefused})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if h, err := readHello(bytes.NewReader(data)); err == nil {
			if len(h.id) > maxIDLen || len(h.raw) != 8+len(h.id)+nonceLen ||
				!bytes.Equal(h.raw, data[:len(h.raw)]) || string(h.id) != string(data[8:8+len(h.id)]) {
				t.Fatalf("hello %q (%d-byte id) does not match its input", h.id, len(h.id))
			}
		}
		for _, secret := range [][]byte{nil, []byte("fuzz secret")} {
			srw := &fuzzRW{r: bytes.NewReader(data)}
			ss, err := serverHandshake(srw, "srv", secret, nil)
			if err == nil && len(secret) > 0 {
				t.Fatalf("server accepted %q without the secret", ss.peer)
			}
			if out := srw.w.Bytes(); len(secret) > 0 && len(out) > 2 {
				// status and the server's hello (8 + 3 + nonce), then at
				// most the refusal: no MAC
				const hl = 1 + 8 + 3 + nonceLen
				tail := out[min(hl, len(out)):]
				if out[0] != statusOK || len(out) < hl || len(tail) > 0 && !bytes.Equal(tail, []byte{statusRefused}) {
					t.Fatalf("server wrote %d bytes (%x) to a peer that proved nothing", len(out), out)
				}
			}
			if err == nil && (ss.send != nil || len(ss.peer) > maxIDLen) {
				t.Fatalf("unauthenticated session %+v", ss)
			}
			ss, err = clientHandshake(&fuzzRW{r: bytes.NewReader(data)}, "cli", "", secret, nil)
			if err == nil && len(secret) > 0 {
				t.Fatalf("client accepted %q without the secret", ss.peer)
			}
		}
	})
}

// FuzzDecodeAuthFrame feeds arbitrary bytes to an authenticated stream's
// reader. A frame is accepted only if it is exactly what the sealing side
// would have written (so none but the seeds, which are genuine), and
// nothing is allocated for a header that does not check.
func FuzzDecodeAuthFrame(f *testing.F) {
	newWriter, newReader := fixedSession(f)
	seal := func(h frameHeader, body []byte) []byte {
		w := newWriter()
		if err := w.writeLocked(h, [][]byte{body}); err != nil {
			f.Fatal(err)
		}
		return w.nc.(*memConn).buf.Bytes()
	}
	for i, n := range []int{0, 5, smallFrame + 1, authRecordLen + 3} {
		body := bytes.Repeat([]byte{byte(i)}, n)
		f.Add(seal(frameHeader{kind: kindRequest, id: uint64(i + 1), wireLen: n, rawLen: n}, body))
	}
	f.Add(seal(frameHeader{kind: kindMessage, wireLen: 3, rawLen: 3}, []byte("msg")))
	f.Add(appendFrame(f, nil, kindRequest, CodecNone, 1, []byte("plain frame, no tags, nothing to see")))
	f.Add(rawHeader(1<<31, 1, 0, 0, 0, 1, 1<<31))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := newFrameReader(bytes.NewReader(data), 1<<20, newReader())
		h, err := fr.header()
		if err != nil {
			return
		}
		body, err := fr.bodyAppend(h, nil)
		if err != nil {
			return
		}
		if want := seal(h, body); !bytes.Equal(data[:len(want)], want) {
			t.Fatalf("accepted a %s frame of %d bytes that was never sealed", h.kind, len(body))
		}
	})
}

// fixedSession returns factories of a writer and a reader for the client
// to server direction of one fixed session, each starting at the stream's
// first tag.
func fixedSession(t testing.TB) (newWriter func() *conn, newReader func() *opener) {
	var c, s hello
	var err error
	if c, err = newHello("a", []byte("k")); err != nil {
		t.Fatal(err)
	}
	if s, err = newHello("b", []byte("k")); err != nil {
		t.Fatal(err)
	}
	newWriter = func() *conn {
		ss, err := newSession("b", []byte("k"), nil, c, s, true)
		if err != nil {
			t.Fatal(err)
		}
		return &conn{nc: &memConn{}, seal: ss.send}
	}
	newReader = func() *opener {
		ss, err := newSession("a", []byte("k"), nil, c, s, false)
		if err != nil {
			t.Fatal(err)
		}
		return ss.recv
	}
	return newWriter, newReader
}
