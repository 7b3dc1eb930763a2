package ps

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/transport"
)

// The fuzz targets of the ps decoders: every message a server, the
// coordinator, a worker or a client can receive. Handlers recover from
// panics (so no input ends a process); the targets install a logger that
// counts recovered panics and fail on any, so a panic the recovery hides is
// still a bug found. Their seed corpora run in the normal tests; CI fuzzes
// each briefly under a memory limit (see .ci/run).

// panicCounter is a slog.Handler that counts the "handler panic" records.
type panicCounter struct {
	n    atomic.Int64
	mu   sync.Mutex
	last string
}

func (p *panicCounter) Enabled(context.Context, slog.Level) bool { return true }
func (p *panicCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "panic") {
		p.n.Add(1)
		var b strings.Builder
		r.Attrs(func(a slog.Attr) bool { b.WriteString(a.String() + "\n"); return true })
		p.mu.Lock()
		p.last = b.String()
		p.mu.Unlock()
	}
	return nil
}
func (p *panicCounter) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *panicCounter) WithGroup(string) slog.Handler      { return p }

func (p *panicCounter) check(t *testing.T) {
	t.Helper()
	if p.n.Load() != 0 {
		p.mu.Lock()
		defer p.mu.Unlock()
		t.Fatalf("a handler panicked (recovered):\n%s", p.last)
	}
}

// seedRequests are well-formed requests of every server op.
func seedRequests() [][]byte {
	var seeds [][]byte
	seeds = append(seeds, rawPush([]uint64{5, 9}, []int{2, 3}, []float32{1, 2, 3, 4, 5}))
	pp := rawPush([]uint64{5}, []int{2}, []float32{1, 2})
	pp[1] = byte(wire.OpPushPull)
	seeds = append(seeds, pp)
	seeds = append(seeds, rawPull([]uint64{5, 9}, []uint32{2, 3}))
	in := rawPush([]uint64{11}, []int{1}, []float32{7})
	ie := wire.NewMsg(nil, wire.OpInit)
	ie.B = append(ie.B, in[2+1+8+8+8:]...) // init: the push body without mode, clock, scale, weight
	seeds = append(seeds, ie.B)
	fl := wire.NewMsg(nil, wire.OpFlush)
	fl.I64(0)
	fl.F64(1)
	fx := wire.NewMsg(nil, wire.OpFlush) // leaving senders out
	fx.I64(1)
	fx.F64(1)
	fx.U32(2)
	fx.Str("worker-0")
	fx.Str("c")
	seeds = append(seeds, fl.B, fx.B, []byte{wire.Version, byte(wire.OpLayout)}, []byte{wire.Version, byte(wire.OpPing)})
	seeds = append(seeds, rawPull([]uint64{5}, []uint32{0xFFFFFFFF}))
	return seeds
}

func FuzzServerRequest(f *testing.F) {
	for _, s := range seedRequests() {
		f.Add(s, uint16(0))
		f.Add(s, uint16(len(s)/2))
	}
	pc := &panicCounter{}
	srv, err := NewServer("s", DefaultServerConfig(), WithLogger(slog.New(pc)))
	if err != nil {
		f.Fatal(err)
	}
	if err := srv.store.InitValues([]uint64{5, 9}, []int{2, 3}, []float32{1, 2, 3, 4, 5}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, req []byte, split uint16) {
		ctx := context.Background()
		resp, err := srv.HandleRequest(ctx, "c", req)
		checkServerAnswer(t, req, resp, err)
		if int(split) <= len(req) {
			resp, err = srv.HandleRequestV(ctx, "c", [][]byte{req[:split], req[split:]}, nil)
			checkServerAnswer(t, req, resp, err)
		}
		pc.check(t)
		// a store that grows without bound would be a memory leak per request
		var size int
		srv.View(func(s *Store) { size = s.Size() })
		if size > 1<<22 {
			t.Fatalf("store grew to %d values", size)
		}
	})
}

// checkServerAnswer: a values request fails with a valuesError, any other
// with a coded response of at least two bytes.
func checkServerAnswer(t *testing.T, req, resp []byte, err error) {
	t.Helper()
	if err != nil {
		if !wire.ReturnsValues(req) || wire.RemoteValuesError(&transport.RemoteError{Node: "s", Msg: err.Error()}, "s") == nil {
			t.Fatalf("request %x answered with error %v", req, err)
		}
		return
	}
	if !wire.ReturnsValues(req) && len(resp) < 2 {
		t.Fatalf("request %x answered with %x", req, resp)
	}
}

// fuzzCoordinator starts a coordinator for workers w0, w1 and one server on
// an in-process network; the workers are names only, so orders to them
// fail fast.
func fuzzCoordinator(tb testing.TB, pc *panicCounter) (*Coordinator, func()) {
	net := transport.NewInmemNetwork()
	srv, _ := NewServer("s0", DefaultServerConfig())
	st, err := net.Join("s0", srv)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := DefaultCoordinatorConfig()
	cfg.EPSP.NumWorkers = 2
	cfg.Servers = []transport.NodeID{"s0"}
	cfg.Workers = []transport.NodeID{"w0", "w1"}
	cfg.OrderTimeout = 50 * time.Millisecond
	c, err := NewCoordinator(cfg, epsp.NewBSP(), WithLogger(slog.New(pc)))
	if err != nil {
		tb.Fatal(err)
	}
	ct, err := net.Join("coordinator", c)
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.Start(context.Background(), ct); err != nil {
		tb.Fatal(err)
	}
	return c, func() { c.Close(); ct.Close(); st.Close(); net.Close() }
}

// seedCoordinatorMessages are well-formed coordinator requests.
func seedCoordinatorMessages() [][]byte {
	var seeds [][]byte
	seeds = append(seeds, []byte{wire.Version, byte(wire.OpHello), 0, 0, 0, 0, 0, 0, 0, 0})
	e := wire.NewMsg(nil, wire.OpAdmit)
	encodePush(&e, epsp.Push{Worker: 0, Owner: 0, Clock: 0, Samples: 8, BatchSamples: 8})
	seeds = append(seeds, e.B)
	e = wire.NewMsg(nil, wire.OpClock)
	e.I64(0)
	seeds = append(seeds, e.B)
	e = wire.NewMsg(nil, wire.OpProgress)
	encodeProgress(&e, epsp.ProgressReport{Clock: 0, Done: 4, Assigned: 8, Parallelism: 1, Elapsed: time.Millisecond})
	seeds = append(seeds, e.B)
	e = wire.NewMsg(nil, wire.OpTransferResult)
	e.U64(1)
	e.U8(1)
	e.I64(4)
	e.I64(8)
	e.I64(8)
	seeds = append(seeds, e.B)
	e = wire.NewMsg(nil, wire.OpTransferDone)
	e.U64(1)
	seeds = append(seeds, e.B)
	seeds = append(seeds, []byte{wire.Version, byte(wire.OpLeave)})
	seeds = append(seeds, []byte{wire.Version, byte(wire.OpLeave), 1}) // quit mid-run
	e = wire.NewMsg(nil, wire.OpFail)
	e.Str("boom")
	seeds = append(seeds, e.B)
	// a push of several owners (assigned samples) with its busy time
	e = wire.NewMsg(nil, wire.OpAdmit)
	encodePush(&e, epsp.Push{Worker: 0, Owner: 0, Clock: 0, Samples: 11, BatchSamples: 11, Busy: time.Millisecond,
		Parts: []epsp.PushPart{{Owner: 0, Clock: 0, Samples: 8}, {Owner: 1, Clock: 0, Samples: 3}}})
	seeds = append(seeds, e.B)
	e = wire.NewMsg(nil, wire.OpProgress)
	encodeProgress(&e, epsp.ProgressReport{Clock: 0, Done: 4, Assigned: 8, Parallelism: 1, Elapsed: time.Millisecond, Extra: 3, ExtraDone: 1})
	seeds = append(seeds, e.B)
	// heartbeats: bare, and with the worker's reach of the servers
	e = wire.NewMsg(nil, wire.OpHeartbeat)
	e.U64(7)
	seeds = append(seeds, e.B)
	e = wire.NewMsg(nil, wire.OpHeartbeat)
	e.U64(7)
	e.I64(0)
	e.I64(int64(3 * time.Second))
	seeds = append(seeds, e.B)
	return seeds
}

// FuzzCoordinatorRequest sends a sequence of requests and messages (each
// prefixed by a sender byte and a length byte) to a running coordinator.
func FuzzCoordinatorRequest(f *testing.F) {
	seeds := seedCoordinatorMessages()
	for i, s := range seeds {
		f.Add(append([]byte{byte(i % 2), byte(len(s))}, s...))
	}
	var all []byte
	for i, s := range seeds[:7] {
		all = append(all, byte(i%2), byte(len(s)))
		all = append(all, s...)
	}
	f.Add(all)
	pc := &panicCounter{}
	f.Fuzz(func(t *testing.T, seq []byte) {
		c, stop := fuzzCoordinator(t, pc)
		defer stop()
		names := []transport.NodeID{"w0", "w1", "stranger"}
		for len(seq) >= 2 {
			from := names[int(seq[0])%len(names)]
			n := min(int(seq[1]), len(seq)-2)
			msg := seq[2 : 2+n]
			seq = seq[2+n:]
			if seq0 := msg; len(seq0) > 1 && (op(seq0[1]) == wire.OpProgress || op(seq0[1]) == wire.OpFail) {
				c.HandleMessage(from, msg)
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			resp, err := c.HandleRequest(ctx, from, msg)
			cancel()
			if err != nil || len(resp) < 2 {
				t.Fatalf("request %x from %s answered %x, %v", msg, from, resp, err)
			}
		}
		pc.check(t)
	})
}

// seedWorkerMessages are well-formed coordinator → worker messages.
func seedWorkerMessages() [][]byte {
	var seeds [][]byte
	e := wire.NewMsg(nil, wire.OpRelease)
	e.I64(1)
	e.U64(3)
	seeds = append(seeds, e.B)
	// releases naming the worker in assignments: a giver, a taker
	e = wire.NewMsg(nil, wire.OpRelease)
	encodeRelease(&e, 1, 3, &releaseAssign{batch: 16, keep: 10})
	seeds = append(seeds, e.B)
	e = wire.NewMsg(nil, wire.OpRelease)
	encodeRelease(&e, 1, 3, &releaseAssign{batch: 8, keep: 8, pieces: []assignedPiece{{owner: 1, lo: 10, hi: 16, batch: 16}}})
	seeds = append(seeds, e.B)
	e = wire.NewMsg(nil, wire.OpSetParallelism)
	e.I64(4)
	seeds = append(seeds, e.B)
	e = wire.NewMsg(nil, wire.OpSetBatch)
	e.I64(16)
	seeds = append(seeds, e.B)
	e = wire.NewMsg(nil, wire.OpTransferOrder)
	e.U64(1)
	e.I64(1)
	e.I64(0)
	e.I64(4)
	e.I64(8)
	seeds = append(seeds, e.B)
	e = wire.NewMsg(nil, wire.OpTransferTask)
	e.U64(1)
	e.I64(1)
	e.I64(0)
	e.I64(4)
	e.I64(8)
	e.I64(8)
	e.U64(0)
	seeds = append(seeds, e.B)
	e = wire.NewMsg(nil, wire.OpAbort)
	e.Str("stop")
	seeds = append(seeds, e.B)
	e = wire.NewMsg(nil, wire.OpSetBatch)
	e.I64(1 << 40)
	seeds = append(seeds, e.B)
	return seeds
}

// FuzzWorkerMessage sends one message from the coordinator to a worker that
// is not training (transfer orders find no job; a task's push finds no
// server): no message may panic or make the worker allocate past its bound.
func FuzzWorkerMessage(f *testing.F) {
	for _, s := range seedWorkerMessages() {
		f.Add(s)
	}
	pc := &panicCounter{}
	f.Fuzz(func(t *testing.T, msg []byte) {
		cfg := DefaultWorkerConfig()
		cfg.Coordinator = "coordinator"
		cfg.Client.Servers = []transport.NodeID{"s0"}
		cfg.RequestTimeout = 20 * time.Millisecond
		w, err := NewWorker("w0", cfg, WithLogger(slog.New(pc)))
		if err != nil {
			t.Fatal(err)
		}
		// connected as Start leaves it, to a network where nobody else is:
		// answers and pushes fail fast as unreachable
		net := transport.NewInmemNetwork()
		defer net.Close()
		tr, err := net.Join("w0", w)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		cl, err := NewClient(tr, cfg.Client)
		if err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		w.tr, w.client = tr, cl
		w.mu.Unlock()
		w.HandleMessage("coordinator", msg)
		w.HandleMessage("stranger", msg)
		w.Close()
		pc.check(t)
		w.mu.Lock()
		b := w.batch
		w.mu.Unlock()
		if b > maxWireBatch {
			t.Fatalf("batch set to %d", b)
		}
	})
}

// FuzzClientResponse feeds responses to every client-side parser: the coded
// response, a layout, a hello and a push decision, and a values error.
func FuzzClientResponse(f *testing.F) {
	e := encoder{B: wire.OKResponse(nil)}
	e.U32(2)
	e.U64(5)
	e.U32(2)
	e.U64(9)
	e.U32(3)
	f.Add(e.B)
	h := encoder{B: wire.OKResponse(nil)}
	h.I64(0)
	h.U64(0)
	h.I64(8)
	h.I64(1)
	f.Add(append(h.B, 0)) // started with the run
	f.Add(append(h.B, 1)) // joined mid-run
	f.Add(wire.ErrResponse(ErrUnknownKey))
	f.Add([]byte{wire.Version, byte(wire.CodeOK), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, resp []byte) {
		body, err := wire.ParseResponse(resp, "s")
		if err != nil {
			_ = wire.RemoteValuesError(&transport.RemoteError{Node: "s", Msg: string(resp)}, "s")
			return
		}
		// each parser either decodes or errs; none may panic or allocate
		// past what the response holds
		if m, err := decodeLayout(body, "s"); err == nil && len(m) > len(body)/wire.SegBytes {
			t.Fatalf("layout of %d keys from %d bytes", len(m), len(body))
		}
		if h, err := decodeHello(body); err == nil && (h.batch > maxWireBatch || h.par < 1) {
			t.Fatalf("hello accepted %+v", h)
		}
		_, _ = decodeDecision(body)
	})
}
