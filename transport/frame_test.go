package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// appendFrame appends a complete frame to b, compressing body with codec.
func appendFrame(t testing.TB, b []byte, kind frameKind, codec Codec, id uint64, body []byte) []byte {
	wire, err := Compress(nil, codec, body)
	if err != nil {
		t.Fatal(err)
	}
	var hdr [frameHeaderLen]byte
	putHeader(hdr[:], frameHeader{kind: kind, codec: codec, id: id, wireLen: len(wire), rawLen: len(body)})
	return append(append(b, hdr[:]...), wire...)
}

// rawHeader builds a header with arbitrary field values.
func rawHeader(length uint32, kind, codec, r1, r2 byte, id uint64, raw uint32) []byte {
	b := make([]byte, frameHeaderLen)
	b[0], b[1], b[2], b[3] = byte(length>>24), byte(length>>16), byte(length>>8), byte(length)
	b[4], b[5], b[6], b[7] = kind, codec, r1, r2
	for i := range 8 {
		b[8+i] = byte(id >> (56 - 8*i))
	}
	b[16], b[17], b[18], b[19] = byte(raw>>24), byte(raw>>16), byte(raw>>8), byte(raw)
	return b
}

func TestParseHeader(t *testing.T) {
	const max = 1 << 20
	tests := []struct {
		name string
		hdr  []byte
		want error // nil: valid
	}{
		{"request", rawHeader(16+5, 1, 0, 0, 0, 9, 5), nil},
		{"message", rawHeader(16, 4, 0, 0, 0, 0, 0), nil},
		{"cancel", rawHeader(16, 5, 0, 0, 0, 8, 0), nil},
		{"cancel without id", rawHeader(16, 5, 0, 0, 0, 0, 0), ErrCorruptFrame},
		{"cancel with body", rawHeader(16+1, 5, 0, 0, 0, 8, 1), ErrCorruptFrame},
		{"lz4 response", rawHeader(16+10, 2, 1, 0, 0, 3, 500), nil},
		{"length below header", rawHeader(15, 1, 0, 0, 0, 9, 0), ErrCorruptFrame},
		{"wire over max", rawHeader(16+max+1, 1, 0, 0, 0, 9, max+1), ErrFrameTooLarge},
		{"declared 4 GiB", rawHeader(1<<32-1, 1, 0, 0, 0, 9, 1<<32-1), ErrFrameTooLarge},
		{"raw over max", rawHeader(16+10, 1, 1, 0, 0, 9, max+1), ErrFrameTooLarge},
		{"reserved set", rawHeader(16, 4, 0, 0, 1, 0, 0), ErrCorruptFrame},
		{"unknown kind", rawHeader(16, 9, 0, 0, 0, 1, 0), ErrCorruptFrame},
		{"kind zero", rawHeader(16, 0, 0, 0, 0, 1, 0), ErrCorruptFrame},
		{"request id zero", rawHeader(16, 1, 0, 0, 0, 0, 0), ErrCorruptFrame},
		{"message with id", rawHeader(16, 4, 0, 0, 0, 5, 0), ErrCorruptFrame},
		{"unknown codec", rawHeader(16+4, 1, 7, 0, 0, 1, 4), ErrCorruptFrame},
		{"none with raw mismatch", rawHeader(16+4, 1, 0, 0, 0, 1, 5), ErrCorruptFrame},
		{"compressed error", rawHeader(16+4, 3, 1, 0, 0, 1, 8), ErrCorruptFrame},
		{"implausible lz4 ratio", rawHeader(16+1, 1, 1, 0, 0, 1, max), ErrCorruptFrame},
		{"implausible snappy ratio", rawHeader(16+100, 1, 2, 0, 0, 1, 100_000), ErrCorruptFrame},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseHeader(tc.hdr, max)
			if tc.want == nil && err != nil {
				t.Fatalf("valid header refused: %v", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func FuzzDecodeFrame(f *testing.F) {
	body := bytes.Repeat([]byte("falcon gradient bytes "), 40)
	f.Add(appendFrame(f, nil, kindRequest, CodecNone, 1, body))
	f.Add(appendFrame(f, nil, kindResponse, CodecLZ4, 2, body))
	f.Add(appendFrame(f, nil, kindMessage, CodecSnappy, 0, body))
	f.Add(appendFrame(f, nil, kindError, CodecNone, 3, []byte("boom")))
	f.Add(appendFrame(f, nil, kindMessage, CodecNone, 0, nil))
	f.Add(appendFrame(f, nil, kindCancel, CodecNone, 6, nil))
	f.Add(appendFrame(f, nil, kindRequest, CodecLZ4, 4, nil))
	lz := appendFrame(f, nil, kindRequest, CodecLZ4, 5, body)
	f.Add(lz[:len(lz)-3])                         // truncated
	f.Add(rawHeader(1<<31, 1, 0, 0, 0, 1, 1<<31)) // oversized
	f.Add(rawHeader(16+4, 1, 1, 0, 0, 1, 900))    // lz4 body missing
	f.Add(append(rawHeader(16+4, 1, 1, 0, 0, 1, 900), 0xff, 0xff, 0xff, 0xff))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		const max = 1 << 16
		var hdr [frameHeaderLen]byte
		r := bytes.NewReader(data)
		h, body, _, err := readFrame(r, hdr[:], max, true)
		if err != nil {
			return
		}
		if len(body) != h.rawLen || h.rawLen > max || h.wireLen > max {
			t.Fatalf("accepted frame %+v with a %d-byte body", h, len(body))
		}
		if h.codec == CodecNone && !bytes.Equal(body, data[frameHeaderLen:frameHeaderLen+h.wireLen]) {
			t.Fatal("uncompressed body differs from the bytes on the wire")
		}
		// Whatever was accepted re-encodes to a frame that decodes the same.
		again := appendFrame(t, nil, h.kind, h.codec, h.id, body)
		h2, body2, _, err := readFrame(bytes.NewReader(again), hdr[:], max, true)
		if err != nil || h2.kind != h.kind || h2.id != h.id || !bytes.Equal(body2, body) {
			t.Fatalf("re-encoded frame decodes to %+v, %v (want %+v)", h2, err, h)
		}
	})
}

type countingHandler struct{ requests, messages atomic.Int64 }

func (c *countingHandler) HandleRequest(_ context.Context, _ NodeID, req []byte) ([]byte, error) {
	c.requests.Add(1)
	return append([]byte{}, req...), nil
}

func (c *countingHandler) HandleMessage(NodeID, []byte) { c.messages.Add(1) }

// rawClient dials srv and completes the handshake as node "raw".
func rawClient(t *testing.T, srv *TCP) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := clientHandshake(c, "raw", "", nil, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// readUntilHangup reads c until the peer closes it (EOF or reset) and
// returns how many bytes came; any other error (a timeout) is returned.
func readUntilHangup(c net.Conn) (int64, error) {
	n, err := io.Copy(io.Discard, c)
	if errors.Is(err, syscall.ECONNRESET) {
		err = nil
	}
	return n, err
}

func TestTCP_CorruptFrameRefused(t *testing.T) {
	h := &countingHandler{}
	srv, err := NewTCP(TCPConfig{ID: "srv", MaxFrameSize: 1 << 20}, h)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	lzGarbage := append(rawHeader(16+64, 1, 1, 0, 0, 1, 4096), bytes.Repeat([]byte{0xf0, 0xff}, 32)...)
	snGarbage := append(rawHeader(16+64, 4, 2, 0, 0, 0, 1000), bytes.Repeat([]byte{0xff}, 64)...)
	tests := []struct {
		name  string
		frame []byte
	}{
		{"declares 1 GiB", rawHeader(16+1<<30, 1, 0, 0, 0, 1, 1<<30)},
		{"unknown kind", rawHeader(16, 9, 0, 0, 0, 1, 0)},
		{"response to a server", rawHeader(16, 2, 0, 0, 0, 1, 0)},
		{"cancel with body", append(rawHeader(16+1, 5, 0, 0, 0, 1, 1), 0)},
		{"reserved bytes", rawHeader(16, 4, 0, 1, 0, 0, 0)},
		{"lz4 garbage", lzGarbage},
		{"snappy garbage", snGarbage},
		{"not a frame", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := rawClient(t, srv)
			if _, err := c.Write(tc.frame); err != nil {
				t.Fatal(err)
			}
			// The server must hang up without answering.
			if n, err := readUntilHangup(c); err != nil || n != 0 {
				t.Fatalf("server answered %d bytes (err %v), want a plain close", n, err)
			}
		})
	}
	if r, m := h.requests.Load(), h.messages.Load(); r != 0 || m != 0 {
		t.Fatalf("handler saw %d requests and %d messages from corrupt frames", r, m)
	}
	// A well-formed frame on a fresh connection is served; a cancel for an
	// id that is not in flight is ignored.
	c := rawClient(t, srv)
	stray := appendFrame(t, nil, kindCancel, CodecNone, 999, nil)
	if _, err := c.Write(appendFrame(t, stray, kindRequest, CodecLZ4, 77, bytes.Repeat([]byte("ok"), 500))); err != nil {
		t.Fatal(err)
	}
	var hdr [frameHeaderLen]byte
	fh, body, _, err := readFrame(c, hdr[:], 1<<20, true)
	if err != nil || fh.kind != kindResponse || fh.id != 77 || !bytes.Equal(body, bytes.Repeat([]byte("ok"), 500)) {
		t.Fatalf("response %+v, %d bytes, %v", fh, len(body), err)
	}
}

func TestTCP_HandshakeRefusesStrangers(t *testing.T) {
	h := &countingHandler{}
	srv, err := NewTCP(TCPConfig{ID: "srv", HandshakeTimeout: 200 * time.Millisecond}, h)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tests := []struct {
		name string
		send []byte
	}{
		{"silent", nil},
		{"bad magic", []byte("HTTP/1.1 200 OK\r\n\r\n")},
		{"huge id", append([]byte{'F', 'L', 'C', 'N', handshakeVersion, 0, 0xff, 0xff}, make([]byte, 64)...)},
		{"version 1", append([]byte{'F', 'L', 'C', 'N', 1, 0, 0, 3, 'o', 'l', 'd'}, make([]byte, nonceLen)...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.Write(tc.send)
			// The server closes the connection: on its handshake timeout
			// for a silent peer, at once for a malformed hello.
			if _, err := readUntilHangup(c); err != nil {
				t.Fatalf("connection not closed by the server: %v", err)
			}
		})
	}
	if h.requests.Load() != 0 {
		t.Fatal("handler called")
	}
}

// bigResponder answers every request with n bytes.
type bigResponder struct{ n int }

func (b bigResponder) HandleRequest(context.Context, NodeID, []byte) ([]byte, error) {
	return make([]byte, b.n), nil
}
func (bigResponder) HandleMessage(NodeID, []byte) {}

func TestTCP_WriteTimeoutDropsStalledReader(t *testing.T) {
	const size = 32 << 20 // more than loopback socket buffers hold
	srv, err := NewTCP(TCPConfig{ID: "srv", WriteTimeout: 100 * time.Millisecond}, bigResponder{size})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := rawClient(t, srv)
	if _, err := c.Write(appendFrame(t, nil, kindRequest, CodecNone, 1, []byte("x"))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // stall: read nothing
	n, err := readUntilHangup(c)
	if err != nil {
		t.Fatalf("server did not drop a connection whose reader stalled: %v", err)
	}
	if n >= size+frameHeaderLen {
		t.Fatalf("read the whole %d-byte response; the write was not cut", n)
	}
}
