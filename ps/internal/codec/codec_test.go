package codec

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// f32Modes runs f with the bulk float32 paths on (where the host allows
// them) and forced off (the portable fallback a big-endian host runs).
func f32Modes(t *testing.T, f func(t *testing.T)) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "bulk", false: "portable"}[on], func(t *testing.T) {
			old := Bulk
			Bulk = on && HostLE
			defer func() { Bulk = old }()
			f(t)
		})
	}
}

func TestHostLE(t *testing.T) {
	var b [4]byte
	x := uint32(0x01020304)
	copy(b[:], unsafe.Slice((*byte)(unsafe.Pointer(&x)), 4))
	if want := binary.LittleEndian.Uint32(b[:]) == x; HostLE != want {
		t.Fatalf("HostLE = %v, want %v", HostLE, want)
	}
}

func TestF32sRoundTrip(t *testing.T) {
	f32Modes(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		for _, n := range []int{0, 1, 7, 8, 9, 31, 1000} {
			for _, shift := range []int{0, 1, 2, 4} { // aligned and misaligned wire bytes
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(rng.NormFloat64())
				}
				b := make([]byte, 4*n+shift)[shift:]
				Put(b, v)
				for i := range v { // little-endian IEEE bits, element by element
					if got := uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24; got != math.Float32bits(v[i]) {
						t.Fatalf("n=%d shift=%d: element %d encoded as %08x", n, shift, i, got)
					}
				}
				got := make([]float32, n)
				Get(got, b)
				for i := range v {
					if got[i] != v[i] {
						t.Fatalf("n=%d shift=%d: element %d decoded %v, want %v", n, shift, i, got[i], v[i])
					}
				}
				w := make([]float32, n)
				copy(w, v)
				SubScaled(w, b, 0.5)
				for i := range w {
					if w[i] != v[i]-0.5*v[i] {
						t.Fatalf("n=%d shift=%d: fused SGD element %d = %v", n, shift, i, w[i])
					}
				}
				_, view := View(b)
				if wantView := Bulk && (shift%4 == 0 || n == 0); view != wantView {
					t.Fatalf("n=%d shift=%d: View = %v, want %v", n, shift, view, wantView)
				}
			}
		}
	})
}

// TestAxpyNeg: the vector kernel matches the scalar loop bit for bit, for
// every tail length and for sub-slices starting at any element.
func TestAxpyNeg(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{0, 1, 3, 4, 5, 15, 16, 17, 31, 33, 64, 1001} {
		for _, start := range []int{0, 1, 2, 3} {
			w := make([]float32, start+n)
			g := make([]float32, start+n+1)
			for i := range w {
				w[i] = float32(rng.NormFloat64())
			}
			for i := range g {
				g[i] = float32(rng.NormFloat64() * 1e3)
			}
			a := float32(rng.NormFloat64())
			want := slices.Clone(w)
			axpyNegGo(want[start:], g[start:], a)
			AxpyNeg(w[start:], g[start:], a)
			for i := range w {
				if math.Float32bits(w[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n=%d start=%d: element %d = %v, want %v", n, start, i, w[i], want[i])
				}
			}
		}
	}
}
