package ps

import (
	"bytes"
	"context"
	"errors"
	"github.com/falconml/falcon/ps/internal/codec"
	"math"
	"testing"

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
	return w.cl.do(context.Background(), opPush, ovKeys, g, nil, ovLens, pushArgs{mode: modeApply, scale: scale, weight: 1})
}

func (w wireStore) acc(clock int, g []float32, weight float64) error {
	return w.cl.do(context.Background(), opPush, ovKeys, g, nil, ovLens, pushArgs{mode: modeAccumulate, clock: clock, scale: 1, weight: weight})
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

// TestStore_OverflowRefusedSlices: the float32-slice entry points (the
// simulator's) refuse the same arithmetic as the wire's: an apply whose
// scale is ±Inf or whose step overflows, an accumulate weight beyond
// float32, a buffer sum that overflows; each legitimate twin passes.
func TestStore_OverflowRefusedSlices(t *testing.T) {
	s, err := NewStore(StoreConfig{Optimizer: SGD{LR: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InitValues(ovKeys, ovLens, g2(1)); err != nil {
		t.Fatal(err)
	}
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		name      string
		bad, good func() error
	}{
		{"apply scale +Inf", func() error { return s.Apply(ovKeys, nil, g2(0), inf) }, func() error { return s.Apply(ovKeys, nil, g2(0), 1) }},
		{"apply step overflows", func() error { return s.Apply(ovKeys, nil, g2(3e38), 1e3) }, func() error { return s.Apply(ovKeys, nil, g2(3e38), 1e-3) }},
		{"accumulate weight 1e300", func() error { return s.Accumulate(0, ovKeys, nil, g2(1), 1e300) }, func() error { return s.Accumulate(0, ovKeys, nil, g2(1), 1) }},
		{"accumulate sum overflows", func() error { return s.Accumulate(0, ovKeys, nil, g2(3e38), 2) }, func() error { return s.Accumulate(0, ovKeys, nil, g2(3e38), 1) }},
	} {
		vals, steps, pend := append([]float32(nil), s.vals...), s.Steps(2), s.Pending()
		var sums []float32
		if b := s.bufs[0]; b != nil {
			sums = append(sums, b.sum...)
		}
		if err := c.bad(); !errors.Is(err, ErrNonFinite) {
			t.Errorf("%s: err %v, want ErrNonFinite", c.name, err)
		}
		if b := s.bufs[0]; !equalBits(vals, s.vals) || s.Steps(2) != steps || len(s.Pending()) != len(pend) || (b != nil && !equalBits(sums, b.sum)) {
			t.Errorf("%s: the refused request changed the store", c.name)
		}
		if err := c.good(); err != nil {
			t.Errorf("%s: legitimate twin: %v", c.name, err)
		}
	}
}

func equalBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestMaxHi_Kernel: the SSE maxHi agrees with the portable one and the
// byte form on every length up to 70, every offset of a largest value,
// and random bit patterns; hiBound bounds every finite value it covers.
func TestMaxHi_Kernel(t *testing.T) {
	rng := uint64(1)
	next := func() uint32 { rng = rng*6364136223846793005 + 1442695040888963407; return uint32(rng >> 32) }
	for n := range 71 {
		v := make([]float32, n+1)[1:]
		for at := range n {
			for _, b := range []uint32{0x7f7fffff, 0xff7fffff, 0x3f800000, 0x80000001, 0x7f800000, 0xffc00000} {
				for i := range v {
					v[i] = math.Float32frombits(next() & 0x3fffffff) // below 2
				}
				v[at] = math.Float32frombits(b)
				want := maxHiGo(v)
				if got := maxHi(v); got != want {
					t.Fatalf("n=%d at=%d bits=%#x: kernel %#x, want %#x", n, at, b, got, want)
				}
				if got := maxHiBytes(codec.AsBytes(v)); got != want {
					t.Fatalf("n=%d at=%d bits=%#x: bytes %#x, want %#x", n, at, b, got, want)
				}
				if want < hiNonFinite {
					for _, x := range v {
						if !(math.Abs(float64(x)) < hiBound(want)) {
							t.Fatalf("|%v| not below hiBound %v", x, hiBound(want))
						}
					}
				}
			}
		}
	}
}

// TestStepBound_Sound: for each optimizer with a bound, random values,
// states and gradients at or near their bounds (magnitudes spread from
// 1e-30 to float32's maximum) are stepped in float32, and whenever the
// bound passes, every result is finite and within the bound it gives. A
// bound that missed a rounding or an intermediate would let an overflow
// through.
func TestStepBound_Sound(t *testing.T) {
	rng := uint64(7)
	u := func() float64 {
		rng = rng*6364136223846793005 + 1442695040888963407
		return float64(rng>>11) / (1 << 53)
	}
	// mag: a magnitude up to ≈ 4e38, some past float32's range; at: a
	// float32 of magnitude at most b, often exactly at it.
	mag := func() float64 { return math.Pow(10, -30+u()*68.6) }
	at := func(b float64) float32 {
		x := float32(b)
		if float64(x) > b || math.IsInf(float64(x), 0) {
			x = math.Nextafter32(x, 0)
		}
		if u() < 0.5 {
			x *= float32(u())
		}
		if u() < 0.5 {
			x = -x
		}
		return x
	}
	passed := 0
	for _, opt := range []Optimizer{SGD{LR: 0.01}, SGD{LR: 3}, Momentum{LR: 0.1, Mu: 0.9}, Momentum{LR: 2, Mu: 0.99}, Adam{LR: 0.001}, Adam{LR: 0.5, Beta1: 0.5, Beta2: 0.6, Eps: 1e-3}} {
		bd := opt.(bounder)
		for range 20000 {
			m := mags{mag(), mag(), mag()}
			g := mag()
			scale := float32(math.Pow(10, -5+u()*10))
			step := int64(1 + u()*5)
			sb, ok := bd.stepBound(scale)
			if !ok {
				continue
			}
			next, ok := sb.next(m, g)
			if !ok {
				continue
			}
			passed++
			const n = 8
			w, gs := make([]float32, n), make([]float32, n)
			st := [][]float32{make([]float32, n), make([]float32, n)}
			for i := range n {
				w[i], gs[i] = at(m[0]), at(g)
				st[0][i], st[1][i] = at(m[1]), float32(math.Abs(float64(at(m[2]))))
			}
			opt.Update(w, gs, scale, st[:opt.Slots()], step)
			for i := range n {
				got := []float32{w[i], st[0][i], st[1][i]}
				for q := range 1 + opt.Slots() {
					if x := math.Abs(float64(got[q])); !(x <= next[q]) {
						t.Fatalf("%s: bounds %v, g %v, scale %v, step %d: result %d[%d] = %v beyond its bound %v", opt.Name(), m, g, scale, step, q, i, got[q], next[q])
					}
				}
			}
		}
	}
	if passed < 10000 {
		t.Fatalf("only %d bounds passed: the test checks little", passed)
	}
}
