package ps

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"

	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/transport"
)

// wireStore is one server with the given optimizer and a client to it over
// an in-process network, for tests that go through the wire.
type wireStore struct {
	srv *Server
	cl  *Client
}

func newWireStore(t *testing.T, opt Optimizer) wireStore {
	t.Helper()
	net := transport.NewInmemNetwork()
	t.Cleanup(func() { net.Close() })
	cfg := DefaultServerConfig()
	cfg.Store.Optimizer = opt
	srv, err := NewServer("server-0", cfg)
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
	return wireStore{srv: srv, cl: cl}
}

// state is the server's whole state (values, optimizer state, steps,
// gradient buffers) as checkpoint bytes.
func (w wireStore) state() []byte { return EncodeCheckpoint(nil, w.srv.Snapshot()) }

func (w wireStore) push(g []float32, scale float64) error {
	return w.cl.do(context.Background(), wire.OpPush, ovKeys, g, nil, ovLens, pushArgs{mode: wire.ModeApply, scale: scale, weight: 1})
}

func (w wireStore) acc(clock int, g []float32, weight float64) error {
	return w.cl.do(context.Background(), wire.OpPush, ovKeys, g, nil, ovLens, pushArgs{mode: wire.ModeAccumulate, clock: clock, scale: 1, weight: weight})
}

func (w wireStore) flush(clock int, scale float64) error {
	return w.cl.Flush(context.Background(), clock, scale)
}

// doubler is an optimizer the store cannot bound (not SGD, Momentum or
// Adam): w ← 2·scale·w + g.
type doubler struct{}

func (doubler) Name() string { return "doubler" }
func (doubler) Slots() int   { return 0 }
func (doubler) Update(w, g []float32, scale float32, _ [][]float32, _ int64) {
	for i := range w {
		w[i] = 2*scale*w[i] + g[i]
	}
}

// Two keys per request: key 1 always benign, key 2 carries the case, so a
// refusal must also leave key 1 alone (no partial update).
var ovKeys, ovLens = []uint64{1, 2}, []int{3, 5}

// g2 is a gradient whose key-1 part is small and whose key-2 part is x.
func g2(x float32) []float32 { return []float32{0.5, -0.5, 1, x, x, x, 0, x} }

// TestServer_OverflowRefused (issue 25, finding 1): a push, an accumulate
// or a flush whose numbers are all finite but whose arithmetic would
// store a NaN or ±Inf (a value, an optimizer state, a gradient buffer) is
// refused with ErrNonFinite and changes nothing, on both keys it names;
// the legitimate request of the same shape is accepted and leaves every
// value finite. Before the fix each bad request was accepted and stored
// NaN or ±Inf.
func TestServer_OverflowRefused(t *testing.T) {
	const big = 3e38
	for _, tc := range []struct {
		name  string
		opt   Optimizer
		init  float32                 // key 2's initial value
		setup func(w wireStore) error // before the request (accepted)
		bad   func(w wireStore) error
		good  func(w wireStore) error
	}{
		{name: "push scale 1e300, zero gradient", opt: SGD{LR: 0.1},
			bad:  func(w wireStore) error { return w.push(g2(0), 1e300) },
			good: func(w wireStore) error { return w.push(g2(0), 1e30) }},
		{name: "push scale 1e30 overflows the step", opt: SGD{LR: 0.1},
			bad:  func(w wireStore) error { return w.push(g2(1e10), 1e30) },
			good: func(w wireStore) error { return w.push(g2(1e10), 1) }},
		{name: "momentum: velocity overflows", opt: Momentum{LR: 0.1, Mu: 0.9},
			bad:  func(w wireStore) error { return w.push(g2(big), 10) },
			good: func(w wireStore) error { return w.push(g2(big), 0.1) }},
		{name: "adam: g² overflows the second moment", opt: Adam{LR: 0.01},
			bad:  func(w wireStore) error { return w.push(g2(1e21), 1) },
			good: func(w wireStore) error { return w.push(g2(1e18), 1) }},
		{name: "push near float32's range (exact path)", opt: SGD{LR: 1}, init: 3.3e38,
			bad:  func(w wireStore) error { return w.push(g2(-2e37), 1) },
			good: func(w wireStore) error { return w.push(g2(1e37), 1) }},
		{name: "optimizer without a bound", opt: doubler{}, init: 2e38,
			bad:  func(w wireStore) error { return w.push(g2(0), 1) },
			good: func(w wireStore) error { return w.push(g2(0), 0.25) }},
		{name: "accumulate weight 1e300", opt: SGD{LR: 0.1},
			bad:  func(w wireStore) error { return w.acc(0, g2(0), 1e300) },
			good: func(w wireStore) error { return w.acc(0, g2(0), 1e30) }},
		{name: "two accumulates near 3e38", opt: SGD{LR: 0.1},
			setup: func(w wireStore) error { return w.acc(0, g2(-big), 1) },
			bad:   func(w wireStore) error { return w.acc(0, g2(-big), 1) },
			good:  func(w wireStore) error { return w.acc(0, g2(big), 1) }},
		{name: "flush scale 1e300", opt: SGD{LR: 0.1},
			setup: func(w wireStore) error { return w.acc(0, g2(1), 1) },
			bad:   func(w wireStore) error { return w.flush(0, 1e300) },
			good:  func(w wireStore) error { return w.flush(0, 1e30) }},
		{name: "flush step overflows", opt: Momentum{LR: 0.1, Mu: 0.9},
			setup: func(w wireStore) error { return w.acc(0, g2(1e30), 2) },
			bad:   func(w wireStore) error { return w.flush(0, 1e10) },
			good:  func(w wireStore) error { return w.flush(0, 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWireStore(t, tc.opt)
			init := g2(tc.init)
			if err := w.cl.Init(context.Background(), ovKeys, init, ovLens); err != nil {
				t.Fatal(err)
			}
			if tc.setup != nil {
				if err := tc.setup(w); err != nil {
					t.Fatalf("setup: %v", err)
				}
			}
			before := w.state()
			if err := tc.bad(w); !errors.Is(err, ErrNonFinite) {
				t.Errorf("bad request: err %v, want ErrNonFinite", err)
			}
			if !bytes.Equal(before, w.state()) {
				t.Errorf("bad request changed the server's state")
			}
			assertFinite(t, w.srv)
			if err := tc.good(w); err != nil {
				t.Fatalf("legitimate request: %v", err)
			}
			if bytes.Equal(before, w.state()) {
				t.Errorf("legitimate request changed nothing")
			}
			assertFinite(t, w.srv)
		})
	}
}

// assertFinite fails t unless every value, state and buffered sum of srv
// is finite.
func assertFinite(t *testing.T, srv *Server) {
	t.Helper()
	ck := srv.Snapshot()
	all := append(append([]float32(nil), ck.Values...), ck.State...)
	for _, pc := range ck.Pending {
		all = append(all, pc.Sum...)
	}
	for i, x := range all {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("non-finite number %v stored (index %d of values, state, sums)", x, i)
		}
	}
}
