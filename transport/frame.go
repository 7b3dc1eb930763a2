package transport

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"sync"
	"unsafe"
)

// Frame layout on a TCP connection (all integers big-endian; see doc.go):
//
//	offset size field
//	0      4    length: bytes after this field = 16 + len(body)
//	4      1    kind: 1 request, 2 response, 3 error, 4 one-way message, 5 cancel
//	5      1    codec of the body: 0 none, 1 lz4 block, 2 snappy block
//	6      2    reserved, must be zero
//	8      8    correlation id (nonzero for request/response/error, zero for one-way)
//	16     4    raw length: the body's length after decoding
//	20     ...  body
const (
	frameHeaderLen = 20
	frameLenField  = 4
	// maxFrameSizeLimit is the largest MaxFrameSize the 32-bit length
	// field can express after the 16 header bytes it also counts.
	maxFrameSizeLimit = 1<<32 - 1 - (frameHeaderLen - frameLenField)
)

type frameKind uint8

const (
	kindRequest  frameKind = 1
	kindResponse frameKind = 2
	kindError    frameKind = 3
	kindMessage  frameKind = 4
	kindCancel   frameKind = 5 // the caller gave up on request id; empty body
)

func (k frameKind) String() string {
	switch k {
	case kindRequest:
		return "request"
	case kindResponse:
		return "response"
	case kindError:
		return "error"
	case kindMessage:
		return "message"
	case kindCancel:
		return "cancel"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// frameHeader is a decoded frame header. wireLen is the body's length on the
// wire, rawLen after decoding.
type frameHeader struct {
	kind    frameKind
	codec   Codec
	id      uint64
	wireLen int
	rawLen  int
}

// putHeader writes h into b[:frameHeaderLen].
func putHeader(b []byte, h frameHeader) {
	_ = b[frameHeaderLen-1]
	binary.BigEndian.PutUint32(b[0:4], uint32(h.wireLen+frameHeaderLen-frameLenField))
	b[4] = byte(h.kind)
	b[5] = byte(h.codec)
	b[6], b[7] = 0, 0
	binary.BigEndian.PutUint64(b[8:16], h.id)
	binary.BigEndian.PutUint32(b[16:20], uint32(h.rawLen))
}

// parseHeader decodes and validates a frame header against maxSize, the
// largest body accepted raw or on the wire. It fails with ErrFrameTooLarge
// for a declared size above maxSize and ErrCorruptFrame for anything else
// malformed, so the caller can refuse a frame before allocating its body.
func parseHeader(b []byte, maxSize int) (frameHeader, error) {
	n := binary.BigEndian.Uint32(b[0:4])
	if n < frameHeaderLen-frameLenField {
		return frameHeader{}, fmt.Errorf("%w: length field %d is shorter than the header", ErrCorruptFrame, n)
	}
	h := frameHeader{
		kind:    frameKind(b[4]),
		codec:   Codec(b[5]),
		id:      binary.BigEndian.Uint64(b[8:16]),
		wireLen: int(n) - (frameHeaderLen - frameLenField),
		rawLen:  int(binary.BigEndian.Uint32(b[16:20])),
	}
	if h.wireLen > maxSize {
		return h, fmt.Errorf("%w: %s body of %d bytes, maximum %d", ErrFrameTooLarge, h.kind, h.wireLen, maxSize)
	}
	if h.rawLen > maxSize {
		return h, fmt.Errorf("%w: %s decodes to %d bytes, maximum %d", ErrFrameTooLarge, h.kind, h.rawLen, maxSize)
	}
	if b[6] != 0 || b[7] != 0 {
		return h, fmt.Errorf("%w: reserved bytes %#x %#x are not zero", ErrCorruptFrame, b[6], b[7])
	}
	switch h.kind {
	case kindRequest, kindResponse, kindError:
		if h.id == 0 {
			return h, fmt.Errorf("%w: %s with correlation id 0", ErrCorruptFrame, h.kind)
		}
	case kindMessage:
		if h.id != 0 {
			return h, fmt.Errorf("%w: one-way message with correlation id %d", ErrCorruptFrame, h.id)
		}
	case kindCancel:
		if h.id == 0 || h.wireLen != 0 || h.codec != CodecNone {
			return h, fmt.Errorf("%w: cancel frame needs an id and an empty body", ErrCorruptFrame)
		}
	default:
		return h, fmt.Errorf("%w: unknown frame kind %d", ErrCorruptFrame, uint8(h.kind))
	}
	if !h.codec.Valid() {
		return h, fmt.Errorf("%w: unknown codec %d", ErrCorruptFrame, uint8(h.codec))
	}
	if h.codec == CodecNone && h.rawLen != h.wireLen {
		return h, fmt.Errorf("%w: uncompressed body of %d bytes declares raw length %d", ErrCorruptFrame, h.wireLen, h.rawLen)
	}
	if h.codec != CodecNone && h.kind == kindError {
		return h, fmt.Errorf("%w: compressed error frame", ErrCorruptFrame)
	}
	if err := checkDecodedLen(h.codec, h.wireLen, h.rawLen, maxSize); err != nil {
		return h, err
	}
	return h, nil
}

// frameReader reads the frames of one connection's incoming stream. With
// op set the stream is authenticated (auth.go): each header is followed by
// its tag, checked before the header is parsed, and each body by one tag
// per record of authRecordLen bytes, checked as the record arrives and
// before anything decodes it. Nothing is allocated for a frame before its
// header has checked and passed parseHeader's bounds.
type frameReader struct {
	r       io.Reader
	br      *bufio.Reader // r, when it is one (to tell what is buffered)
	under   io.Reader     // what br reads from: large bodies bypass br
	max     int           // largest body accepted, raw or on the wire
	op      *opener       // nil: unauthenticated stream
	hdr     [frameHeaderLen + tagLen]byte
	tag     [tagLen]byte
	scratch []byte // records of discarded authenticated bodies
}

func newFrameReader(r io.Reader, max int, op *opener) *frameReader {
	fr := &frameReader{r: r, max: max, op: op}
	fr.br, _ = r.(*bufio.Reader)
	return fr
}

// newConnReader is newFrameReader over a read buffer of size bufSize on
// nc, with large authenticated bodies read straight from nc.
func newConnReader(nc io.Reader, bufSize, max int, op *opener) *frameReader {
	fr := newFrameReader(bufio.NewReaderSize(nc, bufSize), max, op)
	fr.under = nc
	return fr
}

// readExact fills p: first from what the read buffer holds, then straight
// from the connection with reads that never go past p, so the buffer stays
// empty and no byte is copied twice.
func (fr *frameReader) readExact(p []byte) error {
	if fr.under == nil {
		_, err := io.ReadFull(fr.r, p)
		return unexpectedEOF(err)
	}
	for len(p) > 0 && fr.br.Buffered() > 0 {
		n, _ := fr.br.Read(p) // served from the buffer, no system call
		p = p[n:]
	}
	if len(p) == 0 {
		return nil
	}
	_, err := io.ReadFull(fr.under, p)
	return unexpectedEOF(err)
}

// header reads, checks and parses the next frame header.
func (fr *frameReader) header() (frameHeader, error) {
	n := frameHeaderLen
	if fr.op != nil {
		n += tagLen
	}
	if _, err := io.ReadFull(fr.r, fr.hdr[:n]); err != nil {
		return frameHeader{}, err
	}
	if fr.op != nil {
		if err := fr.op.check(fr.hdr[:frameHeaderLen], fr.hdr[frameHeaderLen:n]); err != nil {
			return frameHeader{}, err
		}
	}
	return parseHeader(fr.hdr[:frameHeaderLen], fr.max)
}

// onWire is the number of stream bytes a body of wireLen bytes occupies.
func (fr *frameReader) onWire(wireLen int) int {
	if fr.op == nil {
		return wireLen
	}
	return authWireLen(wireLen)
}

// buffered reports whether a body of wireLen bytes is already read ahead,
// so reading it cannot block.
func (fr *frameReader) buffered(wireLen int) bool {
	return fr.br != nil && fr.br.Buffered() >= fr.onWire(wireLen)
}

// wire reads len(dst) body bytes into dst, checking their tags.
func (fr *frameReader) wire(dst []byte) error {
	if fr.op == nil {
		_, err := io.ReadFull(fr.r, dst)
		return unexpectedEOF(err)
	}
	for len(dst) > 0 {
		rl := min(len(dst), authRecordLen)
		rec := dst[:rl]
		if len(dst) >= rl+tagLen {
			// A record follows with room for a tag: read this record's
			// tag with it, into the start of that room, and move it out.
			if err := fr.readExact(dst[:rl+tagLen]); err != nil {
				return err
			}
			copy(fr.tag[:], dst[rl:rl+tagLen])
		} else {
			if err := fr.readExact(rec); err != nil {
				return err
			}
			// The tag through the buffer, which reads ahead what
			// follows with it.
			if _, err := io.ReadFull(fr.r, fr.tag[:]); err != nil {
				return unexpectedEOF(err)
			}
		}
		if err := fr.op.check(rec, fr.tag[:]); err != nil {
			return err
		}
		dst = dst[rl:]
	}
	return nil
}

// discard skips a body of wireLen bytes (still checking its tags).
func (fr *frameReader) discard(wireLen int) error {
	if fr.op == nil {
		if fr.br != nil {
			_, err := fr.br.Discard(wireLen)
			return unexpectedEOF(err)
		}
		_, err := io.CopyN(io.Discard, fr.r, int64(wireLen))
		return unexpectedEOF(err)
	}
	if fr.scratch == nil && wireLen > 0 {
		fr.scratch = make([]byte, authRecordLen)
	}
	for wireLen > 0 {
		n := min(wireLen, authRecordLen)
		if err := fr.wire(fr.scratch[:n]); err != nil {
			return err
		}
		wireLen -= n
	}
	return nil
}

// readFrame reads one frame from an unauthenticated stream r: the header
// into hdr (frameHeaderLen bytes), then the body, decoded. The body is
// returned in a buffer from the pool (release it with putBuf) unless owned
// is true, in which case it is a fresh slice the caller may keep; ret is
// nil then.
func readFrame(r io.Reader, hdr []byte, maxSize int, owned bool) (h frameHeader, body []byte, ret *[]byte, err error) {
	fr := newFrameReader(r, maxSize, nil)
	if h, err = fr.header(); err != nil {
		return h, nil, nil, err
	}
	copy(hdr, fr.hdr[:frameHeaderLen])
	body, ret, err = fr.body(h, owned)
	return h, body, ret, err
}

// body reads and decodes the body of a frame whose header h was read. The
// body is in a pooled buffer (ret, release it with putBuf) unless owned.
func (fr *frameReader) body(h frameHeader, owned bool) ([]byte, *[]byte, error) {
	if owned {
		b, err := fr.bodyAppend(h, nil)
		return b, nil, err
	}
	if h.codec == CodecNone {
		p := getBuf(h.wireLen)
		if err := fr.wire(*p); err != nil {
			putBuf(p)
			return nil, nil, err
		}
		return *p, p, nil
	}
	wp := getBuf(h.wireLen)
	defer putBuf(wp)
	if err := fr.wire(*wp); err != nil {
		return nil, nil, err
	}
	p := getBuf(h.rawLen)
	b, err := Decompress((*p)[:0], h.codec, *wp, h.rawLen, fr.max)
	if err != nil {
		putBuf(p)
		return nil, nil, err
	}
	*p = b
	return b, p, nil
}

// bodyAppend reads and decodes the body of a frame whose header h was
// read, appending it to dst (growing it if needed; nil dst gives a slice
// of exactly the body's size).
func (fr *frameReader) bodyAppend(h frameHeader, dst []byte) ([]byte, error) {
	if h.codec == CodecNone {
		dst = grow(dst, h.wireLen)
		n := len(dst)
		if err := fr.wire(dst[n : n+h.wireLen]); err != nil {
			return dst, err
		}
		return dst[:n+h.wireLen], nil
	}
	wp := getBuf(h.wireLen)
	defer putBuf(wp)
	if err := fr.wire(*wp); err != nil {
		return dst, err
	}
	return Decompress(dst, h.codec, *wp, h.rawLen, fr.max)
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Buffer pool in power-of-two size classes from 512 B up; bigger requests
// than the last class are allocated and dropped. Pooling keeps the read path
// of large frames from allocating per message.
const (
	minBufClass = 9  // 512 B
	maxBufClass = 27 // 128 MiB
)

var bufPools [maxBufClass + 1]sync.Pool

func bufClass(n int) int {
	if n <= 1<<minBufClass {
		return minBufClass
	}
	return bits.Len(uint(n - 1))
}

// getBuf returns a pooled buffer of length n.
func getBuf(n int) *[]byte {
	k := bufClass(n)
	if k > maxBufClass {
		b := make([]byte, n)
		return &b
	}
	if v := bufPools[k].Get(); v != nil {
		p := v.(*[]byte)
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n, 1<<k)
	return &b
}

// putBuf returns p to the pool; p must not be used afterwards.
func putBuf(p *[]byte) {
	if p == nil {
		return
	}
	c := cap(*p)
	k := bufClass(c)
	if k > maxBufClass || c != 1<<k {
		return
	}
	bufPools[k].Put(p)
}

// Response buffers offered to an AppendHandler. Their sizes follow the
// responses (a handler grows a buffer with append), so they live in one
// pool apart from the size classes above.
var respPool sync.Pool // *[]byte

func getRespBuf() *[]byte {
	if v := respPool.Get(); v != nil {
		return v.(*[]byte)
	}
	return new([]byte)
}

// putRespBuf returns p to the pool once the response resp, which the
// handler built from (*p)[:0], has been written. When the handler outgrew
// the buffer, the grown one is kept instead, unless it is (part of) the
// request buffer req, which goes back to its own pool.
func putRespBuf(p *[]byte, resp, req []byte) {
	if cap(resp) > cap(*p) && !overlaps(resp, req) {
		*p = resp[:0]
	}
	respPool.Put(p)
}

// overlaps reports whether a and b share memory (within their capacities).
func overlaps(a, b []byte) bool {
	if cap(a) == 0 || cap(b) == 0 {
		return false
	}
	a0 := uintptr(unsafe.Pointer(unsafe.SliceData(a)))
	b0 := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return a0 < b0+uintptr(cap(b)) && b0 < a0+uintptr(cap(a))
}
