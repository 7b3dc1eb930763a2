package ps

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/falconml/falcon/ps/internal/codec"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/ps/layout"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
	"golang.org/x/sync/errgroup"
)

// # Overview: the key-value API
//
// (This part of the package documentation sits beside the code it
// describes; the package doc in doc.go is the map.)
//
// Keys are uint64, values float32. Every call takes keys sorted and unique
// (ErrUnsortedKeys otherwise) and their values back to back; lens gives
// each key's value length, or nil for the client's fixed Width:
//
//	cl.Push(ctx, keys, grads, lens)           // one optimizer step per key, on its server
//	cl.Pull(ctx, keys, vals, lens)            // fills the caller's buffer
//	cl.PushPull(ctx, keys, grads, vals, lens) // both, one round trip per server
//
// Servers own keys chosen by a Partitioner (Modulo by default: key mod
// the number of servers; KeyRange cuts the key space into ranges as
// ps-lite does; Hash mixes the keys first); a value longer than MaxSegment
// is split across servers (ps-lite#156). The Client fans a request out to the
// servers with errgroup and merges the replies. It validates a request
// completely before sending anything — every key known (Init creates keys;
// keys created by other clients are learned from the servers) with the right
// length — and every server validates its part again before applying it, so
// a refused request changes nothing. (A server that dies in the middle of a
// multi-server push can still leave the other servers' parts applied.)
// Errors are sentinels: ErrUnknownKey, ErrLengthMismatch, ErrUnsortedKeys,
// ErrServerUnavailable (naming the server and wrapping the transport error);
// a cancelled context returns ctx.Err().

// ClientConfig configures a Client.
type ClientConfig struct {
	// Servers names the server nodes; index i is server i of the
	// Partitioner. Required.
	Servers []transport.NodeID
	// Width is the value length of every key in calls with lens == nil;
	// zero means 1.
	Width int
	// Partitioner places keys on servers; nil means Modulo (key mod the
	// number of servers, so dense small keys spread over every server) with
	// DefaultMaxSegment. Every client of a cluster must use the same
	// partitioner.
	Partitioner Partitioner
	// RequestTimeout bounds each request to a server, so that a server
	// that accepted a request and hangs cannot block the caller forever
	// (the caller's ctx still applies). Zero means 30 s; negative means no
	// bound beyond ctx.
	RequestTimeout time.Duration
	// Retry is how long a request a server did not answer (a server
	// restarting from its checkpoint) is resent; zero means never. With
	// it pushes carry request ids, so a resent push is applied once.
	Retry time.Duration
}

// DefaultClientConfig returns a config with width 1 and the default
// partitioner; Servers must still be filled in.
func DefaultClientConfig() ClientConfig {
	return ClientConfig{Width: 1, RequestTimeout: 30 * time.Second}
}

// Validate checks the configuration.
func (c *ClientConfig) Validate() error {
	if len(c.Servers) == 0 {
		return errors.New("ps: ClientConfig.Servers is empty")
	}
	if c.Width < 0 {
		return fmt.Errorf("ps: ClientConfig.Width = %d, want >= 0", c.Width)
	}
	seen := make(map[transport.NodeID]bool, len(c.Servers))
	for _, s := range c.Servers {
		if seen[s] {
			return fmt.Errorf("ps: server %q listed twice", s)
		}
		seen[s] = true
	}
	if kr, ok := c.Partitioner.(KeyRange); ok {
		if err := kr.Validate(); err != nil {
			return err
		}
		if kr.Servers != len(c.Servers) {
			return fmt.Errorf("ps: KeyRange for %d servers, config lists %d", kr.Servers, len(c.Servers))
		}
	}
	return nil
}

// Client is the key-value API of a parameter server, in ps-lite's
// vocabulary: Push, Pull and PushPull over sorted unique uint64 keys and
// float32 values laid out back to back, with optional per-key lengths.
//
// A request is validated completely on the client (keys sorted and unique,
// every key known with the right length) before anything is sent, and again
// by every server before it applies anything, so a refused request changes
// nothing. (A server that dies in the middle of a multi-server push can
// still leave the other servers' parts applied.) Keys are known once
// initialised (Init); the client learns keys initialised by other clients
// from the servers on first use.
//
// A Client is safe for concurrent use.
type Client struct {
	tr      transport.Transport
	servers []transport.NodeID
	width   int
	part    Partitioner
	timeout time.Duration
	retry   retryState

	mu        sync.RWMutex
	known     []uint64
	knownLens []int

	plans sync.Pool // *plan
}

// NewClient returns a client sending over tr.
func NewClient(tr transport.Transport, cfg ClientConfig) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Width == 0 {
		cfg.Width = 1
	}
	if cfg.Partitioner == nil {
		cfg.Partitioner = Modulo{Servers: len(cfg.Servers), MaxSegment: DefaultMaxSegment}
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	c := &Client{tr: tr, servers: append([]transport.NodeID(nil), cfg.Servers...), width: cfg.Width, part: cfg.Partitioner, timeout: cfg.RequestTimeout,
		retry: newRetryState(cfg.Retry)}
	c.plans.New = func() any {
		n := len(c.servers)
		return &plan{per: make([][]piece, n), nvals: make([]int, n), bufs: make([][]byte, n), vec: make([][][]byte, n), resps: make([][]byte, n)}
	}
	return c, nil
}

// Servers returns the server names.
func (c *Client) Servers() []transport.NodeID { return append([]transport.NodeID(nil), c.servers...) }

// Width returns the value length used when lens is nil.
func (c *Client) Width() int { return c.width }

// piece is one segment of a request as seen by one server.
type piece struct {
	key uint64
	n   int
	src int // offset of the segment in the caller's value slice
}

type plan struct {
	per   [][]piece
	nvals []int
	lens  []int
	segs  []Segment
	bufs  [][]byte   // request (or its header) per server, reused
	vec   [][][]byte // request pieces per server, reused
	resps [][]byte   // response per server, reused (transport.RequestAppend)
}

func (c *Client) getPlan() *plan {
	p := c.plans.Get().(*plan)
	for s := range p.per {
		p.per[s] = p.per[s][:0]
		p.nvals[s] = 0
	}
	return p
}

type pushArgs struct {
	mode   uint8
	clock  int
	scale  float64
	weight float64
	rid    reqID // request id (retry.go); zero: none
}

var plainPush = pushArgs{mode: wire.ModeApply, scale: 1, weight: 1}

// Push sends updates for keys: each server runs one optimizer step on each
// of its keys with the pushed values as the gradient. vals holds the values
// of all keys back to back; lens gives each key's length (nil: every key has
// Width values).
func (c *Client) Push(ctx context.Context, keys []uint64, vals []float32, lens []int) error {
	return c.do(ctx, wire.OpPush, keys, vals, nil, lens, plainPush)
}

// Pull fills vals with the current values of keys (laid out as in Push).
// The values are received straight into vals where possible, so after an
// error vals may have been partly overwritten.
func (c *Client) Pull(ctx context.Context, keys []uint64, vals []float32, lens []int) error {
	return c.do(ctx, wire.OpPull, keys, nil, vals, lens, pushArgs{})
}

// PushPull pushes vals and then pulls the updated values of the same keys
// into out, in one round trip per server. vals and out may be the same
// slice. After an error out may have been partly overwritten.
func (c *Client) PushPull(ctx context.Context, keys []uint64, vals, out []float32, lens []int) error {
	return c.do(ctx, wire.OpPushPull, keys, vals, out, lens, plainPush)
}

// Init creates keys on their servers with the values vals (laid out as in
// Push). Keys that already exist with the same length keep their current
// values, so every worker may run the same Init; a different length is an
// ErrLengthMismatch.
func (c *Client) Init(ctx context.Context, keys []uint64, vals []float32, lens []int) error {
	return c.do(ctx, wire.OpInit, keys, vals, nil, lens, pushArgs{})
}

// InitWith is Init with values drawn from init.
func (c *Client) InitWith(ctx context.Context, keys []uint64, lens []int, init Initializer) error {
	total := len(keys) * c.width
	if lens != nil {
		if len(lens) != len(keys) {
			return fmt.Errorf("%w: %d lens for %d keys", ErrLengthMismatch, len(lens), len(keys))
		}
		total = 0
		for _, l := range lens {
			total += l
		}
	}
	vals := make([]float32, total)
	off := 0
	for i, k := range keys {
		n := c.width
		if lens != nil {
			n = lens[i]
		}
		if n > 0 {
			init.Init(k, 0, vals[off:off+n])
		}
		off += n
	}
	return c.Init(ctx, keys, vals, lens)
}

// Flush asks every server to apply its buffered gradients of clock, scaled
// by scale, and waits for all of them.
func (c *Client) Flush(ctx context.Context, clock int, scale float64) error {
	_, err := c.flushWeights(ctx, clock, scale, nil)
	return err
}

// flushWeights is Flush leaving out the pushes of the senders in except
// (servers with StoreConfig.Deterministic only), returning each server's
// weight of the clock before it flushed (Store.ClockWeight without them;
// NaN for a server whose answer carried none).
func (c *Client) flushWeights(ctx context.Context, clock int, scale float64, except []string) ([]float64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	weights := make([]float64, len(c.servers))
	g, gctx := errgroup.WithContext(ctx)
	for s := range c.servers {
		g.Go(func() error {
			e := wire.NewMsg(make([]byte, 0, 18), wire.OpFlush)
			e.I64(int64(clock))
			e.F64(scale)
			if len(except) > 0 {
				e.U32(uint32(len(except)))
				for _, n := range except {
					e.Str(n)
				}
			}
			resp, err := c.call(gctx, s, e.B)
			weights[s] = math.NaN()
			if d := (decoder{B: resp}); err == nil && len(resp) == 8 {
				weights[s] = d.F64()
			}
			return err
		})
	}
	return weights, c.ctxErr(ctx, g.Wait())
}

// Ping checks that server s answers.
func (c *Client) Ping(ctx context.Context, s int) error {
	_, err := c.call(ctx, s, []byte{wire.Version, byte(wire.OpPing)})
	return err
}

// call sends one request to server s and parses the response.
func (c *Client) call(ctx context.Context, s int, req []byte) (payload []byte, err error) {
	err = c.retry.retrying(ctx, func() error {
		payload, err = c.call1(ctx, s, req)
		return err
	})
	return payload, err
}

func (c *Client) call1(ctx context.Context, s int, req []byte) ([]byte, error) {
	resp, err := request(ctx, c.tr, c.servers[s], req, c.timeout)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrServerUnavailable, c.servers[s], err)
	}
	return wire.ParseResponse(resp, string(c.servers[s]))
}

// callAppend is call with the response read into dst (reused; see
// transport.RequestAppend). It returns the whole response buffer, for
// reuse, and its payload.
// values says that req asks for a values-only response (pull, pushpull).
// reqs, when not nil, is the request in pieces (req is then unused).
func (c *Client) callAppend(ctx context.Context, s int, dst, req []byte, reqs [][]byte, values bool) (buf, payload []byte, err error) {
	buf, err = requestAppend(ctx, c.tr, dst, c.servers[s], req, reqs, c.timeout)
	if err != nil {
		if ctx.Err() != nil {
			return buf, nil, ctx.Err()
		}
		if values {
			if rerr := wire.RemoteValuesError(err, string(c.servers[s])); rerr != nil {
				return buf, nil, rerr
			}
		}
		return buf, nil, fmt.Errorf("%w: %s: %w", ErrServerUnavailable, c.servers[s], err)
	}
	if values {
		return buf, buf[len(dst):], nil
	}
	payload, err = wire.ParseResponse(buf[len(dst):], string(c.servers[s]))
	return buf, payload, err
}

// errNoAnswer is the transport-level error of a request that timed out.
var errNoAnswer = errors.New("no answer")

// request is tr.Request bounded by timeout (≤ 0: ctx only). A timeout is
// reported as errNoAnswer, distinct from the caller's ctx.Err().
func request(ctx context.Context, tr transport.Transport, to transport.NodeID, req []byte, timeout time.Duration) ([]byte, error) {
	if timeout <= 0 {
		return tr.Request(ctx, to, req)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := tr.Request(rctx, to, req)
	if err != nil && ctx.Err() == nil && rctx.Err() != nil {
		return nil, fmt.Errorf("%w within %v", errNoAnswer, timeout)
	}
	return resp, err
}

// requestAppend is request with the response appended to dst; reqs, when
// not nil, is the request in pieces instead of req.
func requestAppend(ctx context.Context, tr transport.Transport, dst []byte, to transport.NodeID, req []byte, reqs [][]byte, timeout time.Duration) ([]byte, error) {
	send := func(ctx context.Context) ([]byte, error) {
		if reqs != nil {
			return transport.RequestAppendV(ctx, tr, dst, to, reqs)
		}
		return transport.RequestAppend(ctx, tr, dst, to, req)
	}
	if timeout <= 0 {
		return send(ctx)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := send(rctx)
	if err != nil && ctx.Err() == nil && rctx.Err() != nil {
		return dst, fmt.Errorf("%w within %v", errNoAnswer, timeout)
	}
	return resp, err
}

func (c *Client) ctxErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// checkShape validates the caller's arguments without looking at the
// servers and returns the total value count.
func (c *Client) checkShape(keys []uint64, lens []int) (int, error) {
	if err := store.CheckSorted(keys); err != nil {
		return 0, err
	}
	if lens == nil {
		return len(keys) * c.width, nil
	}
	if len(lens) != len(keys) {
		return 0, fmt.Errorf("%w: %d lens for %d keys", ErrLengthMismatch, len(lens), len(keys))
	}
	total := 0
	for i, l := range lens {
		if l <= 0 {
			return 0, fmt.Errorf("%w: key %d has length %d", ErrLengthMismatch, keys[i], l)
		}
		total += l
	}
	return total, nil
}

func (c *Client) do(ctx context.Context, o op, keys []uint64, vals, out []float32, lens []int, pa pushArgs) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	total, err := c.checkShape(keys, lens)
	if err != nil {
		return err
	}
	if o != wire.OpPull && len(vals) != total {
		return fmt.Errorf("%w: %d values for lengths summing to %d", ErrLengthMismatch, len(vals), total)
	}
	if (o == wire.OpPull || o == wire.OpPushPull) && len(out) != total {
		return fmt.Errorf("%w: output of %d values for lengths summing to %d", ErrLengthMismatch, len(out), total)
	}
	if o == wire.OpPush || o == wire.OpPushPull {
		pa = c.retry.stamp(pa) // one id for every server's part
	}
	pl := c.getPlan()
	defer c.plans.Put(pl)
	pl.lens = resizeInts(pl.lens, len(keys))
	if o == wire.OpInit {
		if err := c.checkInit(ctx, keys, lens, pl.lens); err != nil {
			return err
		}
	} else if err := c.resolve(ctx, keys, lens, pl.lens); err != nil {
		return err
	}
	// Plan: split each key into segments, group them by server.
	src := 0
	for i, k := range keys {
		n := pl.lens[i]
		pl.segs = c.part.Locate(pl.segs[:0], k, n)
		if err := layout.CheckSegments(pl.segs, k, n, len(c.servers)); err != nil {
			return err
		}
		for _, sg := range pl.segs {
			pl.per[sg.Server] = append(pl.per[sg.Server], piece{key: k, n: sg.Len, src: src + sg.Off})
			pl.nvals[sg.Server] += sg.Len
		}
		src += n
	}
	active := 0
	last := -1
	for s := range pl.per {
		if len(pl.per[s]) > 0 {
			active++
			last = s
		}
	}
	send := func(ctx context.Context, s int) error {
		// When this server's share of vals is one stretch, the request is
		// sent in two pieces, the header and a byte view of that stretch
		// (little-endian hosts): the in-process server applies it from the
		// caller's memory, TCP writes it from there, nothing is encoded.
		// Not when out overlaps vals (PushPull in place), since the reply
		// is received into out.
		var reqs [][]byte
		if o != wire.OpPull && codec.Bulk {
			if v, ok := contiguous(pl.per[s], vals); ok && (out == nil || !overlapF32(v, out)) {
				pl.bufs[s] = c.encode(pl.bufs[s], o, pl.per[s], 0, nil, pa)
				reqs = append(pl.vec[s][:0], pl.bufs[s], codec.AsBytes(v))
				pl.vec[s] = reqs
			}
		}
		if reqs == nil {
			pl.bufs[s] = c.encode(pl.bufs[s], o, pl.per[s], pl.nvals[s], vals, pa)
		}
		values := o == wire.OpPull || o == wire.OpPushPull
		// When this server's values fill one stretch of out, they are
		// received straight into it (through a byte view of out, on
		// little-endian hosts): the transport or the in-process server
		// writes them there, and nothing is copied here.
		dst := pl.resps[s][:0]
		direct := false
		if values && codec.Bulk {
			if v, ok := contiguous(pl.per[s], out); ok {
				dst, direct = codec.AsBytes(v)[:0], true
			}
		}
		var buf, resp []byte
		err := c.retry.retrying(ctx, func() (err error) {
			buf, resp, err = c.callAppend(ctx, s, dst, pl.bufs[s], reqs, values)
			return err
		})
		clear(pl.vec[s]) // drop the view of vals
		if !direct {
			pl.resps[s] = buf
		}
		if err != nil {
			return err
		}
		if values {
			if len(resp) != 4*pl.nvals[s] {
				return fmt.Errorf("%w: %s answered %d bytes for %d values", ErrMalformed, c.servers[s], len(resp), pl.nvals[s])
			}
			if direct && len(resp) > 0 && &resp[0] == &dst[:1][0] {
				return nil // already in out
			}
			off := 0
			for _, p := range pl.per[s] {
				codec.Get(out[p.src:p.src+p.n], resp[4*off:])
				off += p.n
			}
		}
		return nil
	}
	switch active {
	case 0:
		return nil
	case 1:
		err = send(ctx, last)
	default:
		g, gctx := errgroup.WithContext(ctx)
		for s := range pl.per {
			if len(pl.per[s]) > 0 {
				g.Go(func() error { return send(gctx, s) })
			}
		}
		err = g.Wait()
	}
	if err != nil {
		return c.ctxErr(ctx, err)
	}
	if o == wire.OpInit {
		c.learn(keys, pl.lens)
	}
	return nil
}

// contiguous returns the stretch of out that pieces ps cover when they
// follow each other in out.
func contiguous(ps []piece, out []float32) ([]float32, bool) {
	if len(ps) == 0 {
		return nil, false
	}
	end := ps[0].src
	for _, p := range ps {
		if p.src != end {
			return nil, false
		}
		end += p.n
	}
	return out[ps[0].src:end], true
}

// overlapF32 reports whether a and b share memory.
func overlapF32(a, b []float32) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+4*uintptr(len(b)) && b0 < a0+4*uintptr(len(a))
}

// encode writes the request for one server into buf: with nvals = 0 and
// vals nil, only its header (padded), for a request sent in pieces.
func (c *Client) encode(buf []byte, o op, ps []piece, nvals int, vals []float32, pa pushArgs) []byte {
	size := 2 + 16 + 29 + 4 + wire.SegBytes*len(ps) + 3 + 4*nvals
	if cap(buf) < size {
		buf = make([]byte, 0, size)
	}
	e := wire.NewMsg(buf, wireOp(o, pa))
	if pa.rid.client != 0 {
		e.U64(pa.rid.client)
		e.U64(pa.rid.seq)
	}
	if o == wire.OpPush || o == wire.OpPushPull {
		e.U8(pa.mode)
		e.I64(int64(pa.clock))
		e.F64(pa.scale)
		e.F64(pa.weight)
	}
	e.U32(uint32(len(ps)))
	for _, p := range ps {
		e.U64(p.key)
		e.U32(uint32(p.n))
	}
	if o != wire.OpPull {
		e.Pad4()
		if vals == nil {
			return e.B // the values travel as a piece of their own
		}
		n := len(e.B)
		e.B = e.B[:n+4*nvals]
		off := n
		for _, p := range ps {
			codec.Put(e.B[off:], vals[p.src:p.src+p.n])
			off += 4 * p.n
		}
	}
	return e.B
}

// validate checks a push of nvals values for keys without sending it.
func (c *Client) validate(ctx context.Context, keys []uint64, lens []int, nvals int) error {
	total, err := c.checkShape(keys, lens)
	if err != nil {
		return err
	}
	if nvals != total {
		return fmt.Errorf("%w: %d values for lengths summing to %d", ErrLengthMismatch, nvals, total)
	}
	return c.resolve(ctx, keys, lens, make([]int, len(keys)))
}

// resolve fills dst with the length of each key from the cache, fetching
// the servers' layouts once if a key is not cached.
func (c *Client) resolve(ctx context.Context, keys []uint64, lens []int, dst []int) error {
	c.mu.RLock()
	miss, err := c.lookup(keys, lens, dst)
	c.mu.RUnlock()
	if err != nil || miss < 0 {
		return err
	}
	if err := c.refresh(ctx); err != nil {
		return err
	}
	c.mu.RLock()
	miss, err = c.lookup(keys, lens, dst)
	c.mu.RUnlock()
	if err != nil {
		return err
	}
	if miss >= 0 {
		return fmt.Errorf("%w: %d", ErrUnknownKey, keys[miss])
	}
	return nil
}

// checkInit fills dst with the requested lengths after checking them
// against keys already known.
func (c *Client) checkInit(ctx context.Context, keys []uint64, lens []int, dst []int) error {
	for i := range dst {
		if lens != nil {
			dst[i] = lens[i]
		} else {
			dst[i] = c.width
		}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	j := 0
	for i, k := range keys {
		j = gallop(c.known, j, k)
		if j < len(c.known) && c.known[j] == k && c.knownLens[j] != dst[i] {
			return fmt.Errorf("%w: key %d has length %d, init gives %d", ErrLengthMismatch, k, c.knownLens[j], dst[i])
		}
	}
	return nil
}

// lookup resolves lengths from the cache; it returns the index of the first
// unknown key, or -1.
func (c *Client) lookup(keys []uint64, lens []int, dst []int) (int, error) {
	j := 0
	for i, k := range keys {
		j = gallop(c.known, j, k)
		if j == len(c.known) || c.known[j] != k {
			return i, nil
		}
		n := c.knownLens[j]
		want := c.width
		if lens != nil {
			want = lens[i]
		}
		if want != n {
			return -1, fmt.Errorf("%w: key %d has length %d, request gives %d", ErrLengthMismatch, k, n, want)
		}
		dst[i] = n
	}
	return -1, nil
}

// gallop returns the first index ≥ j with a[index] ≥ k (a sorted).
func gallop(a []uint64, j int, k uint64) int {
	if j >= len(a) || a[j] >= k {
		return j
	}
	step := 1
	lo := j
	for j+step < len(a) && a[j+step] < k {
		lo = j + step
		step *= 2
	}
	hi := min(j+step, len(a))
	return lo + sort.Search(hi-lo, func(i int) bool { return a[lo+i] >= k })
}

// learn merges initialised keys into the cache.
func (c *Client) learn(keys []uint64, lens []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.known, c.knownLens = mergeLayout(c.known, c.knownLens, keys, lens)
}

func mergeLayout(ak []uint64, al []int, bk []uint64, bl []int) ([]uint64, []int) {
	ok := make([]uint64, 0, len(ak)+len(bk))
	ol := make([]int, 0, len(ak)+len(bk))
	i, j := 0, 0
	for i < len(ak) || j < len(bk) {
		switch {
		case j == len(bk) || (i < len(ak) && ak[i] < bk[j]):
			ok, ol = append(ok, ak[i]), append(ol, al[i])
			i++
		case i == len(ak) || bk[j] < ak[i]:
			ok, ol = append(ok, bk[j]), append(ol, bl[j])
			j++
		default: // equal: keep the known length
			ok, ol = append(ok, ak[i]), append(ol, al[i])
			i++
			j++
		}
	}
	return ok, ol
}

// refresh rebuilds the cache from every server's layout: a key's length is
// the sum of its segments' lengths.
func (c *Client) refresh(ctx context.Context) error {
	layouts := make([]map[uint64]int, len(c.servers))
	g, gctx := errgroup.WithContext(ctx)
	for s := range c.servers {
		g.Go(func() error {
			resp, err := c.call(gctx, s, []byte{wire.Version, byte(wire.OpLayout)})
			if err != nil {
				return err
			}
			m, err := decodeLayout(resp, string(c.servers[s]))
			layouts[s] = m
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return c.ctxErr(ctx, err)
	}
	total := make(map[uint64]int)
	for _, m := range layouts {
		for k, l := range m {
			total[k] += l
		}
	}
	keys := make([]uint64, 0, len(total))
	for k := range total {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	lens := make([]int, len(keys))
	for i, k := range keys {
		lens[i] = total[k]
	}
	c.mu.Lock()
	c.known, c.knownLens = mergeLayout(keys, lens, c.known, c.knownLens)
	c.mu.Unlock()
	return nil
}

// decodeLayout decodes a layout response's payload: key → length.
func decodeLayout(resp []byte, from string) (map[uint64]int, error) {
	d := decoder{B: resp}
	n := int(d.U32())
	if d.Err == nil && n > len(d.B)/wire.SegBytes {
		return nil, fmt.Errorf("%w: layout of %d keys in %d bytes from %s", ErrMalformed, n, len(d.B), from)
	}
	m := make(map[uint64]int, n)
	for range n {
		k := d.U64()
		m[k] = int(d.U32())
	}
	if err := d.End(); err != nil {
		return nil, err
	}
	return m, nil
}

func resizeInts(v []int, n int) []int {
	if cap(v) < n {
		return make([]int, n)
	}
	return v[:n]
}

// ClientHandler is the transport.Handler of a node that only runs Clients:
// it refuses requests and ignores messages.
type ClientHandler struct{}

var _ transport.Handler = ClientHandler{}

// HandleRequest refuses the request.
func (ClientHandler) HandleRequest(context.Context, transport.NodeID, []byte) ([]byte, error) {
	return wire.ErrResponse(fmt.Errorf("%w: a client node serves no requests", ErrMalformed)), nil
}

// HandleMessage ignores the message.
func (ClientHandler) HandleMessage(transport.NodeID, []byte) {}
