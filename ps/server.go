package ps

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/internal/codec"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/transport"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Store configures the server's shard (its optimizer).
	Store StoreConfig
	// Durable keeps the server's state on disk (see durable.go).
	Durable DurableConfig
	// Access is the server's role checks (see Access); the zero value
	// has none. A Cluster sets ClusterAccess.
	Access Access
}

// DefaultServerConfig returns the default: SGD with learning rate 0.01.
func DefaultServerConfig() ServerConfig { return ServerConfig{Store: DefaultStoreConfig()} }

// Validate checks the configuration.
func (c *ServerConfig) Validate() error {
	if err := c.Durable.Validate(); err != nil {
		return err
	}
	return c.Store.Validate()
}

// Server is the server role: a thin concurrent shell around one Store. It
// implements transport.Handler; join it to a transport under its node name
// (it never sends anything itself). Requests are served concurrently; pulls
// share a read lock, updates take the write lock, and each request is
// validated completely before anything is applied.
type Server struct {
	opts   options
	name   string
	access Access
	mu     sync.RWMutex
	store  *Store
	pool   sync.Pool // *scratch
	dur    *durable  // guarded by mu
}

var _ transport.VectorHandler = (*Server)(nil)

type scratch struct {
	keys []uint64
	lens []int
	vals []float32
	idx  []int32
}

// NewServer returns a server with an empty store. name is used in events.
func NewServer(name string, cfg ServerConfig, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st, err := NewStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: buildOptions(opts), name: name, store: st, access: cfg.Access}
	s.pool.New = func() any { return new(scratch) }
	if err := s.openDurable(cfg.Durable); err != nil {
		return nil, err
	}
	return s, nil
}

// View calls f with the store under the server's read lock (for tests and
// inspection). f must not keep the store.
func (s *Server) View(f func(*Store)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	f(s.store)
}

// HandleMessage ignores one-way messages: servers only serve requests.
func (s *Server) HandleMessage(transport.NodeID, []byte) {}

// HandleRequest serves one ps request. Errors travel in the response as
// codes, except for pull and pushpull, whose successful responses are the
// bare values: their errors are returned as a transport-level error whose
// text carries the code (the client decodes it).
func (s *Server) HandleRequest(ctx context.Context, from transport.NodeID, req []byte) ([]byte, error) {
	return s.HandleRequestAppend(ctx, from, req, nil)
}

// HandleRequestAppend is HandleRequest with the response appended to dst
// (see transport.AppendHandler): a pull writes the values straight into
// the buffer the transport offers, the caller's own on an in-process
// transport. req is only read.
func (s *Server) HandleRequestAppend(_ context.Context, from transport.NodeID, req, dst []byte) (resp []byte, err error) {
	defer s.opts.served("server", s.name, s.opts.now(), req, nil, &resp)
	return s.handleAppend(from, req, dst)
}

func (s *Server) handleAppend(from transport.NodeID, req, dst []byte) (resp []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = answer(req, nil, s.opts.recovered(s.name, from, r))
		}
	}()
	resp, err = s.serve(from, req, nil, dst[:0])
	return answer(req, resp, err)
}

// HandleRequestV is HandleRequestAppend with the request in pieces (see
// transport.VectorHandler): a push or init whose values come as a piece of
// their own is applied straight from that piece, so a client in the same
// process never copies its gradients. Any other split is joined first.
func (s *Server) HandleRequestV(_ context.Context, from transport.NodeID, reqs [][]byte, dst []byte) (resp []byte, err error) {
	defer s.opts.servedPieces(s.name, s.opts.now(), reqs, &resp)
	if len(reqs) == 2 {
		defer func() {
			if r := recover(); r != nil {
				resp, err = answer(reqs[0], nil, s.opts.recovered(s.name, from, r))
			}
		}()
		resp, err := s.serve(from, reqs[0], reqs[1], dst[:0])
		// A malformed header may just be a different split: the joined
		// request decides (nothing was applied, serve validates first).
		if !errors.Is(err, errSplit) && !errors.Is(err, ErrMalformed) {
			return answer(reqs[0], resp, err)
		}
	}
	var joined []byte
	for _, r := range reqs {
		joined = append(joined, r...)
	}
	return s.handleAppend(from, joined, dst)
}

// errSplit reports a request in pieces not split where serve expects.
var errSplit = errors.New("ps: request split elsewhere than before its values")

// answer turns serve's result into a handler's.
func answer(req, resp []byte, err error) ([]byte, error) {
	if err != nil {
		if wire.ReturnsValues(req) {
			return nil, wire.NewValuesError(err)
		}
		return wire.ErrResponse(err), nil
	}
	return resp, nil
}

// values returns the value block of a push or init whose header d has read
// up to the padding: the rest of req, or tail when the values came as a
// piece of their own (then nothing may follow the padding in req).
func values(d *decoder, req, tail []byte, total int) []byte {
	d.Pad4(len(req))
	if tail == nil {
		return d.Bytes(4 * total)
	}
	if d.Err == nil && (len(d.B) != 0 || len(tail) != 4*total) {
		d.Err = errSplit
	}
	return tail
}

// serve answers req with a response appended to dst (empty). tail, when
// not nil, is the value block of a push or init sent as a piece of its
// own: the request is req followed by tail. Role checks (s.access) come
// first: a request from from that its role may not send is refused before
// anything else is read.
func (s *Server) serve(from transport.NodeID, req, tail, dst []byte) ([]byte, error) {
	o, body, err := wire.Header(req)
	if err != nil {
		return nil, err
	}
	if err := s.access.check(s.name, from, o); err != nil {
		return nil, err
	}
	if tail != nil && o != wire.OpInit && o != wire.OpPush && o != wire.OpPushPull && o != wire.OpPushID && o != wire.OpPushPullID {
		return nil, errSplit
	}
	d := decoder{B: body}
	switch o {
	case wire.OpPing:
		return wire.OKResponse(dst), d.End()
	case wire.OpLayout:
		if err := d.End(); err != nil {
			return nil, err
		}
		s.mu.RLock()
		keys, lens := s.store.Keys()
		s.mu.RUnlock()
		e := encoder{B: wire.OKResponse(dst)}
		e.U32(uint32(len(keys)))
		for i, k := range keys {
			e.U64(k)
			e.U32(uint32(lens[i]))
		}
		return e.B, nil
	case wire.OpFlush:
		clock := d.Int(-1<<62, 1<<62, "clock")
		scale := d.F64()
		var except []string // senders whose pushes the flush leaves out
		if d.Err == nil && len(d.B) > 0 {
			n := int(d.U32())
			if n > len(d.B)/4 {
				return nil, fmt.Errorf("%w: flush leaving out %d senders in %d bytes", ErrMalformed, n, len(d.B))
			}
			for range n {
				except = append(except, d.Str())
			}
		}
		if err := d.End(); err != nil {
			return nil, err
		}
		if math.IsNaN(scale) || math.IsInf(scale, 0) {
			return nil, fmt.Errorf("%w: flush scale %v", ErrMalformed, scale)
		}
		if math.Abs(scale) > math.MaxFloat32 {
			return nil, fmt.Errorf("%w: flush scale %v outside float32's range", ErrNonFinite, scale)
		}
		n, weight, out, err := s.flush(req, clock, float32(scale), except)
		if err != nil {
			return nil, err
		}
		if out > 0 {
			s.opts.emit(event.Event{Kind: event.LeftOut, Node: s.name, Clock: clock, Samples: int(out)})
		}
		s.opts.emit(event.Event{Kind: event.Flushed, Node: s.name, Clock: clock, Samples: n})
		// the answer carries the clock's weight, so the coordinator can
		// tell a partial update (partial.go)
		e := codec.Encoder{B: wire.OKResponse(dst)}
		e.F64(weight)
		return e.B, nil
	case wire.OpInit, wire.OpPull:
		sc := s.pool.Get().(*scratch)
		defer s.pool.Put(sc)
		if o == wire.OpPull {
			// A pull carries no values: what it may ask for is bounded by
			// what the store holds, checked before anything is allocated.
			s.mu.RLock()
			held := s.store.Size()
			s.mu.RUnlock()
			total, err := readSegs(&d, sc, held, ErrLengthMismatch)
			if err != nil {
				return nil, err
			}
			if err := d.End(); err != nil {
				return nil, err
			}
			return s.pull(sc, total, dst)
		}
		total, err := readSegs(&d, sc, valueRoom(&d, tail), ErrMalformed)
		if err != nil {
			return nil, err
		}
		vb := values(&d, req, tail, total)
		if err := d.End(); err != nil {
			return nil, err
		}
		sc.vals = resize(sc.vals, total)
		codec.Get(sc.vals, vb)
		s.mu.Lock()
		mark, err := s.logAhead(req, tail) // write-ahead (durable.go)
		if err == nil {
			err = s.settle(mark, reqID{}, s.store.InitValues(sc.keys, sc.lens, sc.vals))
		}
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return wire.OKResponse(dst), nil
	case wire.OpPush, wire.OpPushPull, wire.OpPushID, wire.OpPushPullID:
		var rid reqID
		o, rid = readReqID(&d, o)
		mode := d.U8()
		clock := d.Int(-1<<62, 1<<62, "clock")
		scale := d.F64()
		weight := d.F64()
		sc := s.pool.Get().(*scratch)
		defer s.pool.Put(sc)
		total, err := readSegs(&d, sc, valueRoom(&d, tail), ErrMalformed)
		if err != nil {
			return nil, err
		}
		vb := values(&d, req, tail, total)
		if err := d.End(); err != nil {
			return nil, err
		}
		if mode != wire.ModeApply && mode != wire.ModeAccumulate {
			return nil, fmt.Errorf("%w: push mode %d", ErrMalformed, mode)
		}
		if math.IsNaN(scale) || math.IsInf(scale, 0) || !(weight > 0) || math.IsInf(weight, 0) {
			return nil, fmt.Errorf("%w: push scale %v, weight %v", ErrMalformed, scale, weight)
		}
		// Both travel as float64 and are used as float32: a finite
		// float64 beyond float32's range would become ±Inf (see
		// finite.go; Store.Accumulate checks the weight's range).
		if math.Abs(scale) > math.MaxFloat32 || weight > math.MaxFloat32 {
			return nil, fmt.Errorf("%w: push scale %v, weight %v outside float32's range", ErrNonFinite, scale, weight)
		}
		// Requests are read-only (the transport may lend the caller's
		// buffer): a pushpull writes its values into dst. Apply and read
		// happen under one lock, so the reply shows exactly this push's
		// result.
		resp := wire.OKResponse(dst)
		if o == wire.OpPushPull {
			resp = codec.GrowLen(dst, 4*total)
		}
		s.mu.Lock()
		// Write-ahead (durable.go): a push applied before a retry is
		// answered and not applied; any other is logged, then applied,
		// then marked; one refused changed nothing and is not marked.
		dup := s.duplicate(rid)
		if !dup {
			// A deterministic store sums each sender's pushes apart
			// (StoreConfig.Deterministic); its log names the sender, so
			// a replay puts them back where they were.
			sender := ""
			if mode == wire.ModeAccumulate && s.store.Deterministic() {
				sender = string(from)
			}
			var mark int64
			mark, err = s.logAheadFrom(sender, req, tail)
			if err == nil {
				if mode == wire.ModeApply {
					err = s.store.ApplyBytes(sc.keys, sc.lens, vb, float32(scale))
				} else {
					err = s.store.AccumulateBytesFrom(clock, sender, sc.keys, sc.lens, vb, weight)
				}
				err = s.settle(mark, rid, err)
			}
		}
		if err == nil && o == wire.OpPushPull {
			sc.idx, err = s.store.PullBytes(sc.idx, sc.keys, sc.lens, resp)
		}
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		act := epsp.ApplyNow
		if mode == wire.ModeAccumulate {
			act = epsp.Accumulate
		}
		if dup {
			return resp, nil
		}
		s.opts.emit(event.Event{Kind: event.Applied, Node: s.name, Clock: clock, Samples: int(weight), Decision: epsp.PushDecision{Action: act, Scale: scale, Clock: clock}})
		return resp, nil
	}
	return nil, fmt.Errorf("%w: unknown server op %d", ErrMalformed, o)
}

// pull answers a pull whose segments are in sc. The keys and lengths are
// resolved against the store before the response is grown, so a request
// for keys or lengths the store does not hold allocates nothing.
func (s *Server) pull(sc *scratch, total int, dst []byte) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var err error
	sc.idx, err = s.store.ResolveInto(sc.idx[:0], sc.keys, sc.lens, total)
	if err != nil {
		return nil, err
	}
	resp := codec.GrowLen(dst, 4*total)
	s.store.PutEntries(resp[len(dst):], sc.idx)
	return resp, nil
}

// valueRoom is the most float32 values a push or init can carry: what is
// left of its header's piece after the segments, or its separate value
// piece (tail).
func valueRoom(d *decoder, tail []byte) int {
	if tail != nil {
		return len(tail) / 4
	}
	return len(d.B) / 4
}

// readSegs decodes a (key, len) list into sc and returns Σ len. The running
// sum may not exceed limit (what the request can carry, or what the store
// holds): past it readSegs stops with limitErr, so no size derived from the
// lengths can overflow or make a caller allocate more than exists.
func readSegs(d *decoder, sc *scratch, limit int, limitErr error) (int, error) {
	n := int(d.U32())
	if d.Err == nil && n > len(d.B)/wire.SegBytes {
		return 0, fmt.Errorf("%w: %d segments in %d bytes", ErrMalformed, n, len(d.B))
	}
	sc.keys = sc.keys[:0]
	sc.lens = sc.lens[:0]
	total := 0
	for range n {
		k := d.U64()
		l := int(d.U32())
		if d.Err != nil {
			break
		}
		if l <= 0 {
			return 0, fmt.Errorf("%w: key %d with length %d", ErrMalformed, k, l)
		}
		if l > limit-total {
			return 0, fmt.Errorf("%w: key %d with length %d exceeds the %d values the request can name", limitErr, k, l, limit)
		}
		sc.keys = append(sc.keys, k)
		sc.lens = append(sc.lens, l)
		total += l
	}
	return total, d.Err
}

func resize(v []float32, n int) []float32 {
	if cap(v) < n {
		return make([]float32, n)
	}
	return v[:n]
}
