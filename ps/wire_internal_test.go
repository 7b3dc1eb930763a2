package ps

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func rawPush(keys []uint64, lens []int, vals []float32) []byte {
	c := &Client{}
	ps := make([]piece, len(keys))
	off := 0
	for i, k := range keys {
		ps[i] = piece{key: k, n: lens[i], src: off}
		off += lens[i]
	}
	return c.encode(nil, opPush, ps, off, vals, plainPush)
}

// withScale overwrites the scale field of a raw push.
func withScale(req []byte, scale float64) []byte {
	binary.LittleEndian.PutUint64(req[2+1+8:], math.Float64bits(scale))
	return req
}

// TestServer_ValidatesBeforeApplying sends a raw push (no client-side
// checks) naming a known key and then an unknown one: the server refuses
// it with the unknown-key code and applies nothing.
func TestServer_ValidatesBeforeApplying(t *testing.T) {
	s, err := NewServer("s", ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	s.store.InitValues([]uint64{5}, []int{2}, []float32{1, 2})
	tests := []struct {
		name string
		req  []byte
		want error
	}{
		{"unknown key", rawPush([]uint64{5, 6}, []int{2, 1}, []float32{1, 1, 1}), ErrUnknownKey},
		{"wrong length", rawPush([]uint64{5}, []int{1}, []float32{1}), ErrLengthMismatch},
		{"unsorted", rawPush([]uint64{5, 5}, []int{2, 2}, []float32{1, 1, 1, 1}), ErrUnsortedKeys},
		{"truncated", rawPush([]uint64{5}, []int{2}, []float32{1, 1})[:20], ErrMalformed},
		{"bad version", append([]byte{9}, rawPush([]uint64{5}, []int{2}, []float32{1, 1})[1:]...), ErrWireVersion},
		{"nan scale", withScale(rawPush([]uint64{5}, []int{2}, []float32{1, 1}), math.NaN()), ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := s.HandleRequest(context.Background(), "c", tt.req)
			if err != nil {
				t.Fatal(err)
			}
			_, err = parseResponse(resp, "s")
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if v, _ := s.store.Value(nil, 5); v[0] != 1 || v[1] != 2 || s.store.Steps(5) != 0 {
				t.Errorf("refused push changed key 5 to %v", v)
			}
		})
	}
}

// TestServer_GarbageNeverPanics feeds random and mutated messages to every
// role's handler.
func TestServer_GarbageNeverPanics(t *testing.T) {
	s, _ := NewServer("s", DefaultServerConfig())
	s.store.InitValues([]uint64{5}, []int{2}, []float32{1, 2})
	rng := rand.New(rand.NewPCG(3, 4))
	good := rawPush([]uint64{5}, []int{2}, []float32{1, 1})
	for i := range 5000 {
		var msg []byte
		if i%2 == 0 {
			msg = make([]byte, rng.IntN(64))
			for j := range msg {
				msg[j] = byte(rng.UintN(256))
			}
			if len(msg) > 1 {
				msg[0] = wireVersion
				msg[1] = byte(1 + rng.IntN(int(opTransferTask)))
			}
		} else {
			msg = append([]byte(nil), good...)
			msg[rng.IntN(len(msg))] = byte(rng.UintN(256))
			msg = msg[:rng.IntN(len(msg)+1)]
		}
		resp, err := s.HandleRequest(context.Background(), "c", msg)
		if err != nil || len(resp) < 2 {
			t.Fatalf("bad response %v %v", resp, err)
		}
	}
}

func TestErrorCodesRoundTrip(t *testing.T) {
	for _, e := range []error{ErrUnknownKey, ErrLengthMismatch, ErrUnsortedKeys, ErrMalformed, ErrWireVersion, ErrRejected, ErrClosed, ErrAborted, ErrServerUnavailable, ErrStartTimeout} {
		_, err := parseResponse(errResponse(e), "peer")
		if !errors.Is(err, e) {
			t.Errorf("%v came back as %v", e, err)
		}
	}
	_, err := parseResponse(errResponse(errors.New("boom")), "peer")
	if !errors.Is(err, ErrRemote) {
		t.Errorf("unknown error came back as %v", err)
	}
}

func TestF32sRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 7, 8, 9, 31, 1000} {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		b := make([]byte, 4*n)
		putF32s(b, v)
		for i := range v { // little-endian IEEE bits, element by element
			if got := uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24; got != math.Float32bits(v[i]) {
				t.Fatalf("n=%d: element %d encoded as %08x", n, i, got)
			}
		}
		got := make([]float32, n)
		getF32s(got, b)
		for i := range v {
			if got[i] != v[i] {
				t.Fatalf("n=%d: element %d decoded %v, want %v", n, i, got[i], v[i])
			}
		}
		w := make([]float32, n)
		copy(w, v)
		subF32s(w, b, 0.5)
		for i := range w {
			if w[i] != v[i]-0.5*v[i] {
				t.Fatalf("n=%d: fused SGD element %d = %v", n, i, w[i])
			}
		}
	}
}

// TestStore_BytesPathsMatch: the wire-byte apply/accumulate paths (chunked,
// fused for SGD) give bit-identical results to the float32 API, for keys
// longer than one chunk.
func TestStore_BytesPathsMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	keys := []uint64{1, 2, 3}
	lens := []int{3*chunk + 5, 17, chunk}
	total := 0
	for _, l := range lens {
		total += l
	}
	init := make([]float32, total)
	g := make([]float32, total)
	for i := range init {
		init[i], g[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	gb := make([]byte, 4*total)
	putF32s(gb, g)
	for _, opt := range []Optimizer{SGD{LR: 0.1}, Momentum{LR: 0.1, Mu: 0.9}, Adam{LR: 0.01}} {
		a, _ := NewStore(StoreConfig{Optimizer: opt})
		b, _ := NewStore(StoreConfig{Optimizer: opt})
		a.InitValues(keys, lens, init)
		b.InitValues(keys, lens, init)
		for range 3 {
			if err := a.Apply(keys, nil, g, 0.7); err != nil {
				t.Fatal(err)
			}
			if err := b.applyBytes(keys, nil, gb, 0.7); err != nil {
				t.Fatal(err)
			}
		}
		a.Accumulate(4, keys, nil, g, 3)
		b.accumulateBytes(4, keys, nil, gb, 3)
		a.Flush(4, 1)
		b.Flush(4, 1)
		va, vb := make([]float32, total), make([]float32, total)
		a.Pull(keys, nil, va)
		b.Pull(keys, nil, vb)
		for i := range va {
			if va[i] != vb[i] {
				t.Fatalf("%s: value %d: %v (floats) vs %v (bytes)", opt.Name(), i, va[i], vb[i])
			}
		}
	}
}
