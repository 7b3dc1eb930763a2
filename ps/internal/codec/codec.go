package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// ErrMalformed: bytes could not be decoded (a short read, a count out of
// range, trailing bytes). Package ps re-exports it as ps.ErrMalformed.
var ErrMalformed = errors.New("ps: malformed message")

// ErrWireVersion: a message or a file carries a format version this build
// does not read. Package ps re-exports it as ps.ErrWireVersion.
var ErrWireVersion = errors.New("ps: unsupported wire version")

// Encoder appends little-endian values to B. Its zero value is ready (B
// nil grows on the first append).
type Encoder struct{ B []byte }

// U8, U32, U64, I64, F64 append one little-endian value; Str appends a
// u32 length and the string's bytes.
func (e *Encoder) U8(v uint8)    { e.B = append(e.B, v) }
func (e *Encoder) U32(v uint32)  { e.B = binary.LittleEndian.AppendUint32(e.B, v) }
func (e *Encoder) U64(v uint64)  { e.B = binary.LittleEndian.AppendUint64(e.B, v) }
func (e *Encoder) I64(v int64)   { e.U64(uint64(v)) }
func (e *Encoder) F64(v float64) { e.U64(math.Float64bits(v)) }
func (e *Encoder) Str(s string)  { e.U32(uint32(len(s))); e.B = append(e.B, s...) }

// F32s appends vals as little-endian float32 bits.
func (e *Encoder) F32s(vals []float32) {
	n := len(e.B)
	e.B = GrowLen(e.B, 4*len(vals))
	Put(e.B[n:], vals)
}

// Pad4 appends zero bytes until the message length is a multiple of 4, so
// that a float32 block written next starts 4-byte aligned in any buffer
// that is itself aligned (every Go allocation of 4 bytes or more is).
func (e *Encoder) Pad4() {
	for len(e.B)%4 != 0 {
		e.B = append(e.B, 0)
	}
}

// GrowLen extends b by n bytes (contents of the new bytes undefined).
func GrowLen(b []byte, n int) []byte {
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
// them when they are 4-byte aligned (the wire pads for it, see Encoder.Pad4). On a
// big-endian host, or for misaligned bytes, the portable loops below do the
// same work value by value.
var (
	// HostLE reports whether this host stores a uint32 little-endian,
	// probed once at init.
	HostLE = func() bool {
		x := uint32(0x01020304)
		return *(*byte)(unsafe.Pointer(&x)) == 0x04
	}()
	// Bulk enables the bulk paths; tests clear it to run the portable
	// fallback on little-endian hosts.
	Bulk = HostLE
)

// AsBytes views v's memory as bytes (always legal: bytes need no
// alignment).
func AsBytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// View views b (len(b) a multiple of 4) as float32 values when the bulk
// paths are enabled and b is 4-byte aligned; otherwise it reports false.
func View(b []byte) ([]float32, bool) {
	if !Bulk || len(b)%4 != 0 {
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

// Put writes vals into b (len(b) ≥ 4·len(vals)) as little-endian bits.
func Put(b []byte, vals []float32) {
	b = b[:4*len(vals)]
	if Bulk {
		copy(b, AsBytes(vals))
		return
	}
	putF32sLoop(b, vals)
}

// putF32sLoop is the portable Put: eight values per iteration as four
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

// Get reads len(dst) float32s from b (len(b) ≥ 4·len(dst)).
func Get(dst []float32, b []byte) {
	b = b[:4*len(dst)]
	if Bulk {
		copy(AsBytes(dst), b)
		return
	}
	getF32sLoop(dst, b)
}

// getF32sLoop is the portable Get: eight values per iteration from four
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

// SubScaled computes w[i] −= a·g[i] with g read from little-endian bytes
// (len(b) ≥ 4·len(w)): the SGD step fused with the decode, through a
// []float32 view of b when View allows one.
func SubScaled(w []float32, b []byte, a float32) {
	b = b[:4*len(w)]
	if g, ok := View(b); ok {
		AxpyNeg(w, g, a)
		return
	}
	subF32sLoop(w, b, a)
}

// axpyNegGo computes w[i] −= a·g[i] (len(g) ≥ len(w)): the portable form
// of AxpyNeg.
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

// subF32sLoop is the portable SubScaled.
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

// Decoder reads a message; the first short read sets err and every later
// read returns zero, so callers check Err once at the end. A zero
// Decoder has nothing to read; set B to the bytes.
type Decoder struct {
	B   []byte // the bytes not yet read
	Err error  // the first error; every read after it returns zero
}

// Need reports whether n more bytes remain; if not it sets Err (wrapping
// ErrMalformed).
func (d *Decoder) Need(n int) bool {
	if d.Err != nil {
		return false
	}
	if n < 0 || len(d.B) < n {
		d.Err = fmt.Errorf("%w: truncated (need %d bytes, have %d)", ErrMalformed, n, len(d.B))
		return false
	}
	return true
}

// U8, U32, U64, I64, F64 and Str read what the Encoder methods of the
// same names wrote; after a short read they return zero.
func (d *Decoder) U8() uint8 {
	if !d.Need(1) {
		return 0
	}
	v := d.B[0]
	d.B = d.B[1:]
	return v
}

func (d *Decoder) U32() uint32 {
	if !d.Need(4) {
		return 0
	}
	v := binary.LittleEndian.Uint32(d.B)
	d.B = d.B[4:]
	return v
}

func (d *Decoder) U64() uint64 {
	if !d.Need(8) {
		return 0
	}
	v := binary.LittleEndian.Uint64(d.B)
	d.B = d.B[8:]
	return v
}

func (d *Decoder) I64() int64   { return int64(d.U64()) }
func (d *Decoder) F64() float64 { return math.Float64frombits(d.U64()) }

func (d *Decoder) Str() string {
	n := d.U32()
	if !d.Need(int(n)) {
		return ""
	}
	s := string(d.B[:n])
	d.B = d.B[n:]
	return s
}

// Bytes takes the next n bytes.
func (d *Decoder) Bytes(n int) []byte {
	if !d.Need(n) {
		return nil
	}
	v := d.B[:n]
	d.B = d.B[n:]
	return v
}

// Pad4 skips the zero bytes Encoder.Pad4 wrote; msgLen is the length of
// the whole message d reads the tail of.
func (d *Decoder) Pad4(msgLen int) {
	for d.Err == nil && (msgLen-len(d.B))%4 != 0 {
		if d.U8() != 0 && d.Err == nil {
			d.Err = fmt.Errorf("%w: nonzero padding", ErrMalformed)
		}
	}
}

// Int reads an i64 that must fit an int in [lo, hi].
func (d *Decoder) Int(lo, hi int64, what string) int {
	v := d.I64()
	if d.Err == nil && (v < lo || v > hi) {
		d.Err = fmt.Errorf("%w: %s %d out of range [%d,%d]", ErrMalformed, what, v, lo, hi)
	}
	return int(v)
}

// End reports trailing bytes as malformed.
func (d *Decoder) End() error {
	if d.Err == nil && len(d.B) != 0 {
		d.Err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.B))
	}
	return d.Err
}

// Mix64 is the SplitMix64 finaliser (Steele, Lea, Flood 2014).
func Mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
