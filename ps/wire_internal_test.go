package ps

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/internal/codec"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/transport"
)

func rawPush(keys []uint64, lens []int, vals []float32) []byte {
	c := &Client{}
	ps := make([]piece, len(keys))
	off := 0
	for i, k := range keys {
		ps[i] = piece{key: k, n: lens[i], src: off}
		off += lens[i]
	}
	return c.encode(nil, wire.OpPush, ps, off, vals, plainPush)
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
			_, err = wire.ParseResponse(resp, "s")
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
				msg[0] = wire.Version
				msg[1] = byte(1 + rng.IntN(int(wire.OpTransferTask)))
			}
		} else {
			msg = append([]byte(nil), good...)
			msg[rng.IntN(len(msg))] = byte(rng.UintN(256))
			msg = msg[:rng.IntN(len(msg)+1)]
		}
		resp, err := s.HandleRequest(context.Background(), "c", msg)
		if wire.ReturnsValues(msg) && err != nil {
			// pull, pushpull: failures are transport errors carrying a code
			var ve *wire.ValuesError
			if !errors.As(err, &ve) || wire.RemoteValuesError(&transport.RemoteError{Node: "s", Msg: err.Error()}, "s") == nil {
				t.Fatalf("failed values request answered with %v", err)
			}
			continue
		}
		if err != nil || len(resp) < 2 {
			t.Fatalf("bad response %v %v", resp, err)
		}
	}
}

// f32Modes runs f with the bulk float32 paths on (where the host allows
// them) and forced off (the portable fallback a big-endian host runs).
func f32Modes(t *testing.T, f func(t *testing.T)) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "bulk", false: "portable"}[on], func(t *testing.T) {
			old := codec.Bulk
			codec.Bulk = on && codec.HostLE
			defer func() { codec.Bulk = old }()
			f(t)
		})
	}
}

// TestPushValuesAligned: the values of an encoded push start at a multiple
// of 4 for any number of segments, and the server skips only zero padding.
func TestPushValuesAligned(t *testing.T) {
	for n := 1; n <= 5; n++ {
		keys := make([]uint64, n)
		lens := make([]int, n)
		vals := make([]float32, n)
		for i := range keys {
			keys[i], lens[i], vals[i] = uint64(i), 1, float32(i)+0.5
		}
		req := rawPush(keys, lens, vals)
		if off := len(req) - 4*n; off%4 != 0 {
			t.Fatalf("%d segments: values at offset %d", n, off)
		}
		if got := math.Float32frombits(binary.LittleEndian.Uint32(req[len(req)-4:])); got != vals[n-1] {
			t.Fatalf("%d segments: last value %v", n, got)
		}
	}
	s, _ := NewServer("s", ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}})
	s.store.InitValues([]uint64{5}, []int{1}, []float32{1})
	req := rawPush([]uint64{5}, []int{1}, []float32{1}) // 2+25+4+12 = 43 header bytes: 1 pad byte
	if len(req) != 48 {
		t.Fatalf("push of one value has %d bytes, want 48", len(req))
	}
	req[43] = 1
	resp, _ := s.HandleRequest(context.Background(), "c", req)
	if _, err := wire.ParseResponse(resp, "s"); !errors.Is(err, ErrMalformed) {
		t.Fatalf("nonzero padding: err = %v, want ErrMalformed", err)
	}
}

// TestStore_BytesPathsMatch: the wire-byte apply/accumulate paths (chunked,
// fused for SGD) give bit-identical results to the float32 API, for keys
// longer than one chunk.
func TestStore_BytesPathsMatch(t *testing.T) {
	f32Modes(t, func(t *testing.T) {
		for _, shift := range []int{0, 1} {
			testBytesPathsMatch(t, shift)
		}
	})
}

func testBytesPathsMatch(t *testing.T, shift int) {
	rng := rand.New(rand.NewPCG(8, 9))
	keys := []uint64{1, 2, 3}
	const chunk = 4096 // the store applies a key in pieces of 4096 values (store.go)
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
	gb := make([]byte, 4*total+shift)[shift:]
	codec.Put(gb, g)
	for _, opt := range []Optimizer{SGD{LR: 0.1}, Momentum{LR: 0.1, Mu: 0.9}, Adam{LR: 0.01}} {
		a, _ := NewStore(StoreConfig{Optimizer: opt})
		b, _ := NewStore(StoreConfig{Optimizer: opt})
		a.InitValues(keys, lens, init)
		b.InitValues(keys, lens, init)
		for range 3 {
			if err := a.Apply(keys, nil, g, 0.7); err != nil {
				t.Fatal(err)
			}
			if err := b.ApplyBytes(keys, nil, gb, 0.7); err != nil {
				t.Fatal(err)
			}
		}
		a.Accumulate(4, keys, nil, g, 3)
		b.AccumulateBytes(4, keys, nil, gb, 3)
		a.Flush(4, 1)
		b.Flush(4, 1)
		va, vb := make([]float32, total), make([]float32, total)
		a.Pull(keys, nil, va)
		b.Pull(keys, nil, vb)
		for i := range va {
			if va[i] != vb[i] {
				t.Fatalf("%s shift=%d: value %d: %v (floats) vs %v (bytes)", opt.Name(), shift, i, va[i], vb[i])
			}
		}
	}
}

// TestClient_ValuesPathErrorsAndModes: pulls answered with bare values land
// in the caller's slice (bulk: in place; portable: through a buffer), and
// a pull the server refuses comes back as the server's sentinel error, over
// both transports.
func TestClient_ValuesPathErrorsAndModes(t *testing.T) {
	f32Modes(t, func(t *testing.T) {
		for _, tp := range []string{"inmem", "tcp"} {
			t.Run(tp, func(t *testing.T) {
				srv, err := NewServer("s", ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}})
				if err != nil {
					t.Fatal(err)
				}
				var tr transport.Transport
				switch tp {
				case "inmem":
					n := transport.NewInmemNetwork()
					defer n.Close()
					if _, err := n.Join("s", srv); err != nil {
						t.Fatal(err)
					}
					if tr, err = n.Join("c", ClientHandler{}); err != nil {
						t.Fatal(err)
					}
				case "tcp":
					st, err := transport.NewTCP(transport.TCPConfig{ID: "s"}, srv)
					if err != nil {
						t.Fatal(err)
					}
					defer st.Close()
					ct, err := transport.NewTCP(transport.TCPConfig{ID: "c", Peers: map[transport.NodeID]string{"s": st.Addr().String()}}, ClientHandler{})
					if err != nil {
						t.Fatal(err)
					}
					defer ct.Close()
					tr = ct
				}
				cl, err := NewClient(tr, ClientConfig{Servers: []transport.NodeID{"s"}, Width: 3})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				keys := []uint64{1, 2}
				if err := cl.Init(ctx, keys, []float32{1, 2, 3, 4, 5, 6}, nil); err != nil {
					t.Fatal(err)
				}
				out := make([]float32, 6)
				if err := cl.PushPull(ctx, keys, []float32{1, 1, 1, 1, 1, 1}, out, nil); err != nil {
					t.Fatal(err)
				}
				if want := []float32{0, 1, 2, 3, 4, 5}; !slices.Equal(out, want) {
					t.Fatalf("PushPull out = %v, want %v", out, want)
				}
				// In place (vals = out): the push is encoded, not lent.
				inPlace := []float32{1, 1, 1, 1, 1, 1}
				if err := cl.PushPull(ctx, keys, inPlace, inPlace, nil); err != nil {
					t.Fatal(err)
				}
				if want := []float32{-1, 0, 1, 2, 3, 4}; !slices.Equal(inPlace, want) {
					t.Fatalf("PushPull in place = %v, want %v", inPlace, want)
				}
				// The client believes key 9 exists; the server refuses the pull.
				cl.learn([]uint64{9}, []int{3})
				err = cl.Pull(ctx, []uint64{1, 9}, make([]float32, 6), nil)
				if !errors.Is(err, ErrUnknownKey) || errors.Is(err, ErrServerUnavailable) {
					t.Fatalf("refused pull: err = %v, want ErrUnknownKey", err)
				}
			})
		}
	})
}

// TestServer_RequestInPieces: a request served in pieces, split anywhere,
// has the effect and answer of the joined request.
func TestServer_RequestInPieces(t *testing.T) {
	ctx := context.Background()
	vals := []float32{1, 2, 3, 4, 5}
	req := rawPush([]uint64{5, 7}, []int{2, 3}, vals)
	hdr := len(req) - 4*len(vals)
	for _, cut := range []int{0, 2, 10, hdr - 1, hdr, hdr + 1, len(req) - 4, len(req)} {
		a, _ := NewServer("a", ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}})
		b, _ := NewServer("b", ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}})
		for _, s := range []*Server{a, b} {
			s.store.InitValues([]uint64{5, 7}, []int{2, 3}, []float32{10, 10, 10, 10, 10})
		}
		want, werr := a.HandleRequestAppend(ctx, "c", req, nil)
		got, gerr := b.HandleRequestV(ctx, "c", [][]byte{req[:cut], req[cut:]}, nil)
		if !slices.Equal(got, want) || (werr == nil) != (gerr == nil) {
			t.Fatalf("cut %d: answer %v, %v; joined %v, %v", cut, got, gerr, want, werr)
		}
		va, _ := a.store.Value(nil, 7)
		vb, _ := b.store.Value(nil, 7)
		if !slices.Equal(va, vb) || b.store.Steps(7) != 1 {
			t.Fatalf("cut %d: key 7 = %v after %d steps, want %v after 1", cut, vb, b.store.Steps(7), va)
		}
	}
	// A malformed request in pieces is refused like the joined one.
	s, _ := NewServer("s", DefaultServerConfig())
	resp, err := s.HandleRequestV(ctx, "c", [][]byte{req[:hdr], req[hdr : len(req)-1]}, nil)
	if _, perr := wire.ParseResponse(resp, "s"); err != nil || !errors.Is(perr, ErrMalformed) {
		t.Fatalf("truncated push in pieces: %v %v", perr, err)
	}
}

func TestProgressRoundTrip(t *testing.T) {
	in := epsp.ProgressReport{Worker: 3, Clock: 17, Done: 8, Claimed: 16, Assigned: 60, Parallelism: 4, Elapsed: 2500 * time.Microsecond, Extra: 5, ExtraDone: 2}
	var e encoder
	encodeProgress(&e, in)
	d := decoder{B: e.B}
	out := decodeProgress(&d)
	if d.Err != nil || out != in {
		t.Fatalf("decoded %+v (err %v), want %+v", out, d.Err, in)
	}
	// A truncated report is an error, not a zero Claimed.
	d = decoder{B: e.B[:len(e.B)-1]}
	decodeProgress(&d)
	if !errors.Is(d.Err, ErrMalformed) {
		t.Fatalf("truncated report: err %v, want ErrMalformed", d.Err)
	}
}
