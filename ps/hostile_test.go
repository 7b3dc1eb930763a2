package ps

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/transport"
)

// rawPull encodes a pull of the given (key, len) segments with no
// client-side checks.
func rawPull(keys []uint64, lens []uint32) []byte {
	e := wire.NewMsg(nil, wire.OpPull)
	e.U32(uint32(len(keys)))
	for i, k := range keys {
		e.U64(k)
		e.U32(lens[i])
	}
	return e.B
}

// allocDuring returns the bytes allocated while f ran.
func allocDuring(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestServer_CraftedPullsRefused replays the two pulls of the hardening
// audit: an 18-byte pull of one segment of length 0xFFFFFFFF (it made the
// server allocate 17 GB before checking the key: fatal out of memory) and a
// 196 KB pull of 16,400 such segments (makeslice panic, process exit). Both
// must come back as errors, with the server's allocations bounded by a
// small multiple of the request.
func TestServer_CraftedPullsRefused(t *testing.T) {
	s, err := NewServer("s", DefaultServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.store.InitValues([]uint64{5}, []int{2}, []float32{1, 2}); err != nil {
		t.Fatal(err)
	}
	many := make([]uint64, 16400)
	manyLens := make([]uint32, len(many))
	for i := range many {
		many[i] = uint64(i)
		manyLens[i] = 0xFFFFFFFF
	}
	tests := []struct {
		name string
		req  []byte
		want error
	}{
		{"one huge segment", rawPull([]uint64{5}, []uint32{0xFFFFFFFF}), ErrLengthMismatch},
		{"one huge unknown segment", rawPull([]uint64{7}, []uint32{0xFFFFFFFF}), ErrLengthMismatch},
		{"unknown key", rawPull([]uint64{7}, []uint32{2}), ErrUnknownKey},
		{"16400 huge segments", rawPull(many, manyLens), ErrLengthMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var herr error
			alloc := allocDuring(func() { _, herr = s.HandleRequest(context.Background(), "c", tt.req) })
			err := wire.RemoteValuesError(&transport.RemoteError{Node: "s", Msg: herr.Error()}, "s")
			if err == nil {
				t.Fatalf("handler error %v is not a values error", herr)
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if limit := uint64(16*len(tt.req) + 1<<20); alloc > limit {
				t.Fatalf("allocated %d bytes for a %d-byte request (limit %d)", alloc, len(tt.req), limit)
			}
		})
	}
	// the pushpull and init paths with a huge declared length and no values
	for _, o := range []op{wire.OpInit, wire.OpPushPull, wire.OpPush} {
		e := wire.NewMsg(nil, o)
		if o != wire.OpInit {
			e.U8(wire.ModeApply)
			e.I64(0)
			e.F64(1)
			e.F64(1)
		}
		e.U32(1)
		e.U64(5)
		e.U32(0xFFFFFFFF)
		e.Pad4()
		var resp []byte
		var herr error
		alloc := allocDuring(func() { resp, herr = s.HandleRequest(context.Background(), "c", e.B) })
		if herr == nil {
			_, herr = wire.ParseResponse(resp, "s")
		}
		if herr == nil {
			t.Fatalf("op %d with a 4 GiB declared length and no values accepted", o)
		}
		if alloc > 1<<20 {
			t.Fatalf("op %d: allocated %d bytes", o, alloc)
		}
	}
	if v, _ := s.store.Value(nil, 5); v[0] != 1 || v[1] != 2 {
		t.Fatalf("key 5 changed to %v", v)
	}
}

// TestReadSegs_TotalBounded: the running Σ len stops at the caller's limit,
// so no later size computation can overflow or allocate past it.
func TestReadSegs_TotalBounded(t *testing.T) {
	e := encoder{}
	e.U32(3)
	for k := range 3 {
		e.U64(uint64(k))
		e.U32(0xFFFFFFFF)
	}
	for _, limit := range []int{0, 10, 1 << 31} {
		d := decoder{B: e.B}
		var sc scratch
		if _, err := readSegs(&d, &sc, limit, ErrLengthMismatch); !errors.Is(err, ErrLengthMismatch) {
			t.Fatalf("limit %d: err = %v, want ErrLengthMismatch", limit, err)
		}
	}
	d := decoder{B: e.B}
	var sc scratch
	total, err := readSegs(&d, &sc, 3*0xFFFFFFFF, ErrLengthMismatch)
	if err != nil || total != 3*0xFFFFFFFF {
		t.Fatalf("at the limit: total %d, err %v", total, err)
	}
}

// panickyPolicy is BSP whose Admit panics: a policy's bug.
type panickyPolicy struct{ epsp.Policy }

func (panickyPolicy) Admit(time.Duration, epsp.View, epsp.Push) epsp.PushDecision {
	panic("policy bug")
}

// TestCoordinator_PanicBecomesError: a panic while serving a request (here
// a policy's) is answered as an error, logged once, and aborts the run with
// an error that names it; the process goes on.
func TestCoordinator_PanicBecomesError(t *testing.T) {
	pc := &panicCounter{}
	net := transport.NewInmemNetwork()
	defer net.Close()
	srv, _ := NewServer("s0", DefaultServerConfig())
	st, _ := net.Join("s0", srv)
	defer st.Close()
	cfg := DefaultCoordinatorConfig()
	cfg.EPSP.NumWorkers = 1
	cfg.Servers = []transport.NodeID{"s0"}
	cfg.Workers = []transport.NodeID{"w0"}
	c, err := NewCoordinator(cfg, panickyPolicy{epsp.NewBSP()}, WithLogger(slog.New(pc)))
	if err != nil {
		t.Fatal(err)
	}
	ct, _ := net.Join("coordinator", c)
	defer ct.Close()
	if err := c.Start(context.Background(), ct); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	e := wire.NewMsg(nil, wire.OpAdmit)
	encodePush(&e, epsp.Push{Worker: 0, Owner: 0, Clock: 0, Samples: 8, BatchSamples: 8})
	resp, err := c.HandleRequest(context.Background(), "w0", e.B)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wire.ParseResponse(resp, "coordinator"); !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "policy bug") {
		t.Fatalf("err = %v, want ErrRemote naming the panic", err)
	}
	if n := pc.n.Load(); n != 1 {
		t.Fatalf("%d panic log lines, want 1", n)
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "policy bug") {
		t.Fatalf("coordinator error %v, want the panic", err)
	}
}
