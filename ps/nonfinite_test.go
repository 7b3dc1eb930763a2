package ps

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/transport"
)

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
			return cl.do(ctx, wire.OpPush, keys, bad, nil, lens, pushArgs{mode: wire.ModeAccumulate, clock: 0, scale: 1, weight: 1})
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
