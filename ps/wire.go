package ps

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/falconml/falcon/transport"
)

// The ps wire format. Every message starts with two bytes: the wire version
// and the operation. Integers and floats are little-endian; float32 values
// travel as their IEEE-754 bits, back to back. Responses start with the wire
// version and an error code (0 = ok); a failed response carries the error
// text after the code.
//
//	push, pushpull: mode u8 | clock i64 | scale f64 | weight f64 | n u32 | n × (key u64, len u32) | pad | values
//	pull:           n u32 | n × (key u64, len u32)
//	init:           n u32 | n × (key u64, len u32) | pad | values
//	flush:          clock i64 | scale f64
//	layout:         (empty); response n u32 | n × (key u64, len u32)
//
// pad is 0 to 3 zero bytes that make the values start at an offset from the
// message's first byte that is a multiple of 4, so a server can read them
// in place as float32s (version 2 added it).
//
// A successful pull or pushpull is answered with the values alone, no
// header, so that a client can have them written straight into its output
// slice (see Client.Pull); the client knows their exact length. A failed
// one is answered with a transport-level error whose text is the version,
// the error code and the message (see valuesError).
const wireVersion = 2

type op uint8

const (
	// server requests
	opPing op = iota + 1
	opInit
	opPush
	opPull
	opPushPull
	opFlush
	opLayout
	// coordinator requests and messages
	opHello
	opAdmit
	opClock
	opProgress
	opTransferResult
	opTransferDone
	opFail // worker → coordinator message: the worker failed (reason)
	// worker messages
	opRelease
	opSetParallelism
	opSetBatch
	opTransferOrder
	opTransferTask
	opAbort // coordinator → worker message: the run is aborted (reason)
	opLeave // worker → coordinator request: the worker has finished training
)

const (
	modeApply      = 0
	modeAccumulate = 1
)

// segBytes is the wire size of one (key, len) pair.
const segBytes = 12

type encoder struct{ b []byte }

func newMsg(b []byte, o op) encoder { return encoder{append(b[:0], wireVersion, byte(o))} }

func (e *encoder) u8(v uint8)    { e.b = append(e.b, v) }
func (e *encoder) u32(v uint32)  { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64)  { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) i64(v int64)   { e.u64(uint64(v)) }
func (e *encoder) f64(v float64) { e.u64(math.Float64bits(v)) }
func (e *encoder) str(s string)  { e.u32(uint32(len(s))); e.b = append(e.b, s...) }

// f32s appends vals as little-endian float32 bits.
func (e *encoder) f32s(vals []float32) {
	n := len(e.b)
	e.b = growLen(e.b, 4*len(vals))
	putF32s(e.b[n:], vals)
}

// pad4 appends zero bytes until the message length is a multiple of 4, so
// that a float32 block written next starts 4-byte aligned in any buffer
// that is itself aligned (every Go allocation of 4 bytes or more is).
func (e *encoder) pad4() {
	for len(e.b)%4 != 0 {
		e.b = append(e.b, 0)
	}
}

// growLen extends b by n bytes (contents of the new bytes undefined).
func growLen(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), 2*cap(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// Bulk float32 paths. The wire carries float32 values little-endian, which
// is their in-memory layout on little-endian hosts (amd64, arm64, ...): there
// a block of values is moved with one copy() of its bytes, and the server
// reads gradients straight from the wire bytes through a []float32 view of
// them when they are 4-byte aligned (the wire pads for it, see pad4). On a
// big-endian host, or for misaligned bytes, the portable loops below do the
// same work value by value.
var (
	// hostLE reports whether this host stores a uint32 little-endian,
	// probed once at init.
	hostLE = func() bool {
		x := uint32(0x01020304)
		return *(*byte)(unsafe.Pointer(&x)) == 0x04
	}()
	// bulkF32 enables the bulk paths; tests clear it to run the portable
	// fallback on little-endian hosts.
	bulkF32 = hostLE
)

// f32Bytes views v's memory as bytes (always legal: bytes need no
// alignment).
func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// asF32s views b (len(b) a multiple of 4) as float32 values when the bulk
// paths are enabled and b is 4-byte aligned; otherwise it reports false.
func asF32s(b []byte) ([]float32, bool) {
	if !bulkF32 || len(b)%4 != 0 {
		return nil, false
	}
	if len(b) == 0 {
		return nil, true
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%unsafe.Alignof(float32(0)) != 0 {
		return nil, false
	}
	return unsafe.Slice((*float32)(p), len(b)/4), true
}

// putF32s writes vals into b (len(b) ≥ 4·len(vals)) as little-endian bits.
func putF32s(b []byte, vals []float32) {
	b = b[:4*len(vals)]
	if bulkF32 {
		copy(b, f32Bytes(vals))
		return
	}
	putF32sLoop(b, vals)
}

// putF32sLoop is the portable putF32s: eight values per iteration as four
// 64-bit little-endian stores.
func putF32sLoop(b []byte, vals []float32) {
	for len(vals) >= 8 && len(b) >= 32 {
		v := vals[:8:8]
		bb := b[:32:32]
		binary.LittleEndian.PutUint64(bb[0:8], uint64(math.Float32bits(v[0]))|uint64(math.Float32bits(v[1]))<<32)
		binary.LittleEndian.PutUint64(bb[8:16], uint64(math.Float32bits(v[2]))|uint64(math.Float32bits(v[3]))<<32)
		binary.LittleEndian.PutUint64(bb[16:24], uint64(math.Float32bits(v[4]))|uint64(math.Float32bits(v[5]))<<32)
		binary.LittleEndian.PutUint64(bb[24:32], uint64(math.Float32bits(v[6]))|uint64(math.Float32bits(v[7]))<<32)
		vals = vals[8:]
		b = b[32:]
	}
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
}

// getF32s reads len(dst) float32s from b (len(b) ≥ 4·len(dst)).
func getF32s(dst []float32, b []byte) {
	b = b[:4*len(dst)]
	if bulkF32 {
		copy(f32Bytes(dst), b)
		return
	}
	getF32sLoop(dst, b)
}

// getF32sLoop is the portable getF32s: eight values per iteration from four
// 64-bit little-endian loads.
func getF32sLoop(dst []float32, b []byte) {
	for len(dst) >= 8 && len(b) >= 32 {
		d := dst[:8:8]
		bb := b[:32:32]
		x0 := binary.LittleEndian.Uint64(bb[0:8])
		x1 := binary.LittleEndian.Uint64(bb[8:16])
		x2 := binary.LittleEndian.Uint64(bb[16:24])
		x3 := binary.LittleEndian.Uint64(bb[24:32])
		d[0] = math.Float32frombits(uint32(x0))
		d[1] = math.Float32frombits(uint32(x0 >> 32))
		d[2] = math.Float32frombits(uint32(x1))
		d[3] = math.Float32frombits(uint32(x1 >> 32))
		d[4] = math.Float32frombits(uint32(x2))
		d[5] = math.Float32frombits(uint32(x2 >> 32))
		d[6] = math.Float32frombits(uint32(x3))
		d[7] = math.Float32frombits(uint32(x3 >> 32))
		dst = dst[8:]
		b = b[32:]
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// subF32s computes w[i] −= a·g[i] with g read from little-endian bytes
// (len(b) ≥ 4·len(w)): the SGD step fused with the decode, through a
// []float32 view of b when asF32s allows one.
func subF32s(w []float32, b []byte, a float32) {
	b = b[:4*len(w)]
	if g, ok := asF32s(b); ok {
		axpyNeg(w, g, a)
		return
	}
	subF32sLoop(w, b, a)
}

// axpyNegGo computes w[i] −= a·g[i] (len(g) ≥ len(w)): the portable form
// of axpyNeg.
func axpyNegGo(w, g []float32, a float32) {
	g = g[:len(w)]
	for len(w) >= 4 {
		ww, gg := w[:4:4], g[:4:4]
		ww[0] -= a * gg[0]
		ww[1] -= a * gg[1]
		ww[2] -= a * gg[2]
		ww[3] -= a * gg[3]
		w, g = w[4:], g[4:]
	}
	for i := range w {
		w[i] -= a * g[i]
	}
}

// subF32sLoop is the portable subF32s.
func subF32sLoop(w []float32, b []byte, a float32) {
	for len(w) >= 8 && len(b) >= 32 {
		d := w[:8:8]
		bb := b[:32:32]
		x0 := binary.LittleEndian.Uint64(bb[0:8])
		x1 := binary.LittleEndian.Uint64(bb[8:16])
		x2 := binary.LittleEndian.Uint64(bb[16:24])
		x3 := binary.LittleEndian.Uint64(bb[24:32])
		d[0] -= a * math.Float32frombits(uint32(x0))
		d[1] -= a * math.Float32frombits(uint32(x0>>32))
		d[2] -= a * math.Float32frombits(uint32(x1))
		d[3] -= a * math.Float32frombits(uint32(x1>>32))
		d[4] -= a * math.Float32frombits(uint32(x2))
		d[5] -= a * math.Float32frombits(uint32(x2>>32))
		d[6] -= a * math.Float32frombits(uint32(x3))
		d[7] -= a * math.Float32frombits(uint32(x3>>32))
		w = w[8:]
		b = b[32:]
	}
	for i := range w {
		w[i] -= a * math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// decoder reads a message; the first short read sets err and every later
// read returns zero, so callers check err once at the end.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) need(n int) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || len(d.b) < n {
		d.err = fmt.Errorf("%w: truncated (need %d bytes, have %d)", ErrMalformed, n, len(d.b))
		return false
	}
	return true
}

func (d *decoder) u8() uint8 {
	if !d.need(1) {
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) u32() uint32 {
	if !d.need(4) {
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *decoder) u64() uint64 {
	if !d.need(8) {
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) i64() int64   { return int64(d.u64()) }
func (d *decoder) f64() float64 { return math.Float64frombits(d.u64()) }

func (d *decoder) str() string {
	n := d.u32()
	if !d.need(int(n)) {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// bytes takes the next n bytes.
func (d *decoder) bytes(n int) []byte {
	if !d.need(n) {
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

// pad4 skips the zero bytes encoder.pad4 wrote; msgLen is the length of
// the whole message d reads the tail of.
func (d *decoder) pad4(msgLen int) {
	for d.err == nil && (msgLen-len(d.b))%4 != 0 {
		if d.u8() != 0 && d.err == nil {
			d.err = fmt.Errorf("%w: nonzero padding", ErrMalformed)
		}
	}
}

// int reads an i64 that must fit an int in [lo, hi].
func (d *decoder) int(lo, hi int64, what string) int {
	v := d.i64()
	if d.err == nil && (v < lo || v > hi) {
		d.err = fmt.Errorf("%w: %s %d out of range [%d,%d]", ErrMalformed, what, v, lo, hi)
	}
	return int(v)
}

// end reports trailing bytes as malformed.
func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.b))
	}
	return d.err
}

// header checks the version and returns the op of a message.
func header(b []byte) (op, []byte, error) {
	if len(b) < 2 {
		return 0, nil, fmt.Errorf("%w: %d-byte message", ErrMalformed, len(b))
	}
	if b[0] != wireVersion {
		return 0, nil, fmt.Errorf("%w: version %d, want %d", ErrWireVersion, b[0], wireVersion)
	}
	return op(b[1]), b[2:], nil
}

// okResponse starts a successful response.
func okResponse(b []byte) []byte { return append(b[:0], wireVersion, byte(codeOK)) }

// errResponse encodes err as a failed response.
func errResponse(err error) []byte {
	return append([]byte{wireVersion, byte(codeOf(err))}, err.Error()...)
}

// returnsValues reports whether req asks for a values-only response (pull,
// pushpull).
func returnsValues(req []byte) bool {
	return len(req) >= 2 && (op(req[1]) == opPull || op(req[1]) == opPushPull || op(req[1]) == opPushPullID)
}

// valuesError is the transport-level error that carries a failed pull or
// pushpull: its text is the wire version, the error code and the message,
// which the client turns back into the matching sentinel (remoteValuesError).
type valuesError struct{ text string }

func (e *valuesError) Error() string { return e.text }

func newValuesError(err error) error {
	return &valuesError{text: string([]byte{wireVersion, byte(codeOf(err))}) + err.Error()}
}

// remoteValuesError decodes the error a server sent for a pull or pushpull,
// or returns nil if err is not one.
func remoteValuesError(err error, from string) error {
	var re *transport.RemoteError
	if !errors.As(err, &re) || len(re.Msg) < 2 || re.Msg[0] != wireVersion {
		return nil
	}
	return errorOf(errCode(re.Msg[1]), from, re.Msg[2:])
}

// parseResponse checks a response's version and code, returning the
// payload or the error it carries (from names the peer).
func parseResponse(b []byte, from string) ([]byte, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d-byte response from %s", ErrMalformed, len(b), from)
	}
	if b[0] != wireVersion {
		return nil, fmt.Errorf("%w: response version %d from %s", ErrWireVersion, b[0], from)
	}
	if c := errCode(b[1]); c != codeOK {
		return nil, errorOf(c, from, string(b[2:]))
	}
	return b[2:], nil
}
