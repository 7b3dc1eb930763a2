package ps

import (
	"context"
	"errors"
	"fmt"
	"github.com/falconml/falcon/ps/internal/codec"
	"math"
	"slices"
	"testing"

	"github.com/falconml/falcon/transport"
)

// nonFiniteCases are gradients with one NaN or ±Inf at positions that hit
// the kernels' 16-lane, 4-lane and scalar tails.
func nonFiniteCases(n int) map[string][]float32 {
	out := map[string][]float32{}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for _, at := range []int{0, 5, 17, n - 3, n - 1} {
			g := make([]float32, n)
			for i := range g {
				g[i] = float32(i%7) - 3
			}
			g[at] = bad
			out[fmtCase(bad, at)] = g
		}
	}
	return out
}

func fmtCase(v float32, at int) string { return fmt.Sprintf("%v@%d", v, at) }

// TestStore_NonFiniteRefused: a NaN or Inf gradient or initial value is
// refused with ErrNonFinite by every store entry point and leaves the
// values, the optimizer state, the step counts and the buffers unchanged.
func TestStore_NonFiniteRefused(t *testing.T) {
	const n = 1031
	for _, opt := range []Optimizer{SGD{LR: 0.5}, Momentum{LR: 0.1, Mu: 0.9}, Adam{LR: 0.01}} {
		for name, g := range nonFiniteCases(n) {
			s, err := NewStore(StoreConfig{Optimizer: opt})
			if err != nil {
				t.Fatal(err)
			}
			keys, lens := []uint64{3, 9}, []int{n - 31, 31}
			init := make([]float32, n)
			for i := range init {
				init[i] = float32(i) / n
			}
			if err := s.InitValues(keys, lens, init); err != nil {
				t.Fatal(err)
			}
			ok := make([]float32, n)
			for i := range ok {
				ok[i] = 1
			}
			// one good step so that the optimizer state is not zero
			if err := s.Apply(keys, lens, ok, 1); err != nil {
				t.Fatal(err)
			}
			before := slices.Clone(s.vals)
			state := slices.Clone(s.state)
			steps := []int64{s.Steps(3), s.Steps(9)}
			gb := codec.AsBytes(g)
			calls := map[string]func() error{
				"Apply":           func() error { return s.Apply(keys, lens, g, 1) },
				"applyBytes":      func() error { return s.applyBytes(keys, lens, gb, 1) },
				"Accumulate":      func() error { return s.Accumulate(0, keys, lens, g, 2) },
				"accumulateBytes": func() error { return s.accumulateBytes(0, keys, lens, gb, 2) },
				"InitValues":      func() error { return s.InitValues([]uint64{20, 21}, []int{n - 31, 31}, g) },
			}
			for call, f := range calls {
				if err := f(); !errors.Is(err, ErrNonFinite) {
					t.Fatalf("%s %s %s: err %v, want ErrNonFinite", opt.Name(), name, call, err)
				}
			}
			if !slices.Equal(f32Bits(before), f32Bits(s.vals)) || !slices.Equal(f32Bits(state), f32Bits(s.state)) {
				t.Fatalf("%s %s: values or state changed by a refused request", opt.Name(), name)
			}
			if s.Steps(3) != steps[0] || s.Steps(9) != steps[1] || s.NumKeys() != 2 || len(s.Pending()) != 0 {
				t.Fatalf("%s %s: steps %d,%d keys %d pending %v", opt.Name(), name, s.Steps(3), s.Steps(9), s.NumKeys(), s.Pending())
			}
		}
	}
}

func f32Bits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

// TestServer_NonFinitePushRefused: over the wire (push, pushpull, an
// accumulating push, init) a NaN gradient comes back as ErrNonFinite and
// the key keeps its value; the finding was that a NaN push poisoned the
// key for good.
func TestServer_NonFinitePushRefused(t *testing.T) {
	net := transport.NewInmemNetwork()
	defer net.Close()
	srv, err := NewServer("server-0", DefaultServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := net.Join("server-0", srv); err != nil {
		t.Fatal(err)
	}
	tr, err := net.Join("client", ClientHandler{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := NewClient(tr, ClientConfig{Servers: []transport.NodeID{"server-0"}, Width: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys, lens := []uint64{1}, []int{40}
	init := make([]float32, 40)
	for i := range init {
		init[i] = float32(i)
	}
	if err := cl.Init(ctx, keys, init, lens); err != nil {
		t.Fatal(err)
	}
	bad := make([]float32, 40)
	bad[33] = float32(math.NaN())
	out := make([]float32, 40)
	for name, f := range map[string]func() error{
		"push":     func() error { return cl.Push(ctx, keys, bad, lens) },
		"pushpull": func() error { return cl.PushPull(ctx, keys, bad, out, lens) },
		"accumulate": func() error {
			return cl.do(ctx, opPush, keys, bad, nil, lens, pushArgs{mode: modeAccumulate, clock: 0, scale: 1, weight: 1})
		},
		"init": func() error { return cl.Init(ctx, []uint64{2}, bad, lens) },
	} {
		if err := f(); !errors.Is(err, ErrNonFinite) {
			t.Errorf("%s: err %v, want ErrNonFinite", name, err)
		}
	}
	if err := cl.Flush(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := cl.Pull(ctx, keys, out, lens); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out, init) {
		t.Fatalf("key changed by refused pushes: %v", out)
	}
}

// TestAnyNonFinite_Kernel: the SSE kernel agrees with the per-value test
// on every length up to 70 and every position of one NaN, Inf or
// largest-finite value, and on random bit patterns.
func TestAnyNonFinite_Kernel(t *testing.T) {
	specials := []uint32{0x7fc00000, 0x7f800000, 0xff800000, 0x7f800001, 0xffffffff, 0x7f7fffff, 0xff7fffff, 0x00000001}
	for n := range 71 {
		v := make([]float32, n+1)[1:] // misaligned by one value for the kernel's unaligned loads
		for at := range n {
			for _, b := range specials {
				clear(v)
				v[at] = math.Float32frombits(b)
				want := math.IsNaN(float64(v[at])) || math.IsInf(float64(v[at]), 0)
				if got := anyNonFinite(v); got != want {
					t.Fatalf("n=%d at=%d bits=%#x: kernel %v, want %v", n, at, b, got, want)
				}
				if got := anyNonFiniteGo(v); got != want {
					t.Fatalf("n=%d at=%d bits=%#x: portable %v, want %v", n, at, b, got, want)
				}
				if got := anyNonFiniteBytes(codec.AsBytes(v)[0:]); got != want {
					t.Fatalf("n=%d at=%d bits=%#x: bytes %v, want %v", n, at, b, got, want)
				}
			}
		}
	}
}

// TestStore_AcceptNonFinite: the check can be turned off (a trusted
// cluster saving the read pass); then a NaN is applied as before.
func TestStore_AcceptNonFinite(t *testing.T) {
	s, err := NewStore(StoreConfig{Optimizer: SGD{LR: 1}, AcceptNonFinite: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InitValues([]uint64{1}, []int{2}, []float32{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply([]uint64{1}, nil, []float32{float32(math.NaN()), 1}, 1); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Value(nil, 1); !math.IsNaN(float64(v[0])) || v[1] != 1 {
		t.Fatalf("values %v", v)
	}
}
