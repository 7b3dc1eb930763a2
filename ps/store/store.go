package store

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/falconml/falcon/ps/internal/codec"
)

// Config configures a Store.
type Config struct {
	// Optimizer applies updates; nil means SGD{LR: 0.01}.
	Optimizer Optimizer
	// AcceptNonFinite turns off the refusal of NaN and ±Inf gradients,
	// initial values and results (ErrNonFinite; see finite.go). The check
	// is one read pass over a request's values before they are applied
	// and a bound per key; see the package doc, Performance, for what it
	// costs.
	AcceptNonFinite bool
	// AccumulateWindow is the number of clocks open to accumulating
	// pushes: with F the highest clock flushed (−1 before the first
	// flush), an accumulate into clock c is accepted only for
	// F < c ≤ F + AccumulateWindow and refused with ErrClockNotOpen
	// otherwise, before anything is allocated. Every accumulating policy
	// of package epsp (BSP, enforced EPSP, EPSPv2, LB-BSP, SyncOpt) flushes
	// its clocks in order and lets no worker push into clock c before
	// clock c−1 is flushed, so it needs 1; the default leaves room for a
	// policy that pipelines a few clocks. Zero means
	// DefaultAccumulateWindow.
	AccumulateWindow int
	// Deterministic makes a clock's flushed sum independent of the order
	// its pushes arrived in: each sender's accumulates of a clock go to a
	// buffer of their own (AccumulateFrom names the sender), and Flush adds
	// the senders' sums in increasing order of their names. Without it
	// (the zero value) a clock has one buffer summed in arrival order, and
	// float32 addition being not associative, two runs whose pushes
	// arrive in different orders may differ in the last bits. The package
	// doc, Deterministic flushes, says when bit-identity holds and what it
	// costs.
	Deterministic bool
}

// DefaultAccumulateWindow is the default Config.AccumulateWindow.
const DefaultAccumulateWindow = 4

// DefaultConfig returns the default store configuration: SGD with
// learning rate 0.01, non-finite values refused, DefaultAccumulateWindow.
func DefaultConfig() Config {
	return Config{Optimizer: SGD{LR: 0.01}, AccumulateWindow: DefaultAccumulateWindow}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if c.Optimizer != nil && c.Optimizer.Slots() < 0 {
		return errors.New("ps: optimizer with negative Slots")
	}
	if c.AccumulateWindow < 0 {
		return fmt.Errorf("ps: negative StoreConfig.AccumulateWindow %d", c.AccumulateWindow)
	}
	return nil
}

// Store is the parameter shard of one server: keys, their values, the
// optimizer state and the per-clock gradient buffers. It is the pure apply
// step shared by the live Server and the ps/sim simulator: no goroutines,
// no locks, no clocks; not safe for concurrent use (the Server serialises
// calls).
//
// Every mutating call validates the whole request first and changes nothing
// when it returns an error; with the non-finite check on (the default) that
// includes a request whose arithmetic would store a NaN or ±Inf (see
// finite.go for how that is checked).
//
// Gradient buffers (Accumulate/Flush) implement the sample-weighted merge of
// enforced synchronisation: for a clock c and a key k,
//
//	g_k = Σ_i w_i·g_{i,k} / Σ_i w_i
//
// over the pushes i of clock c that carry k, w_i being the push weight
// (its sample count), and Flush applies g_k with one optimizer step.
//
// Buffers exist only for open clocks (Config.AccumulateWindow) and are
// sparse: a clock's buffer holds the keys pushed into it and nothing else,
// and is dropped at its flush. For a clock whose pushes touched K keys of V
// values in all, it takes at most
//
//	8·V + 128·K + 256 bytes
//
// (4 bytes per value and a 32-byte row per key, both doubled at most by
// slice growth, at most 64 bytes per key for its entry in a Go map, and
// 256 for the buffer's headers; accBuf.bytes counts it so); for a shard of N values in E keys, at most
// AccumulateWindow·(8·N + 128·E + 256) bytes for all clocks together while
// flushes come in order (a clock skipped by a later flush keeps its buffer
// until it is flushed), plus one spare: the memory of the last buffer
// flushed, emptied, which the next clock's buffer reuses (so a run does
// not allocate a buffer per clock; it is at most one buffer's size).
// With Config.Deterministic each sender has a buffer per clock: S senders
// take up to S times as much (the package doc, Deterministic flushes).
type Store struct {
	opt     Optimizer
	bnd     bounder // opt, when its steps can be bounded (finite.go)
	slots   int
	index   map[uint64]int32
	ents    []entry
	vals    []float32
	state   []float32
	bufs    map[int]*accBuf
	spare   *accBuf // the last flushed buffer, emptied, for the next clock
	det     bool    // Config.Deterministic: per-sender buffers in dbufs
	dbufs   map[int]map[string]*accBuf
	dspare  []*accBuf // emptied sender buffers of flushed clocks, for reuse
	window  int
	flushed int     // the highest clock flushed, −1 before the first
	idx     []int32 // scratch: entry indices of the request being served
	tmp     []float32
	slot    [][]float32 // scratch: state slices passed to the optimizer
	next    []mags      // scratch: the bounds of the request's keys after it
	rows    []int32     // scratch: the buffer rows of the request's keys

	finite bool // refuse non-finite values (not Config.AcceptNonFinite)

	snap *storeSnap // a snapshot being taken (checkpoint.go): writes call cow first
}

type entry struct {
	key  uint64
	off  int // offset of the value in vals (and of slot 0 in state / slots)
	n    int
	step int64 // updates applied to this key
	mag  mags  // bounds on |value| and |state slot| (finite.go)
}

// accBuf is the gradient buffer of one clock: one row per key pushed into
// it, its weighted sum in sum[row.off : row.off+n].
type accBuf struct {
	at   map[int32]int32 // entry index → row
	rows []accRow
	sum  []float32
}

type accRow struct {
	ent    int32
	off    int
	weight float64 // Σ w_i
	mag    float64 // bound on |sum|
}

// bytes is the buffer's memory, as the Store doc's formula counts it.
func (b *accBuf) bytes() int { return 256 + 4*cap(b.sum) + 32*cap(b.rows) + 64*len(b.at) }

// New returns an empty store.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Optimizer == nil {
		cfg.Optimizer = DefaultConfig().Optimizer
	}
	if cfg.AccumulateWindow == 0 {
		cfg.AccumulateWindow = DefaultAccumulateWindow
	}
	s := &Store{
		opt:     cfg.Optimizer,
		slots:   cfg.Optimizer.Slots(),
		index:   make(map[uint64]int32),
		bufs:    make(map[int]*accBuf),
		window:  cfg.AccumulateWindow,
		flushed: -1,
		finite:  !cfg.AcceptNonFinite,
		det:     cfg.Deterministic,
		dbufs:   make(map[int]map[string]*accBuf),
	}
	if b, ok := cfg.Optimizer.(bounder); ok && s.slots < magMax {
		s.bnd = b
	}
	return s, nil
}

// Deterministic reports Config.Deterministic.
func (s *Store) Deterministic() bool { return s.det }

// Optimizer returns the store's optimizer.
func (s *Store) Optimizer() Optimizer { return s.opt }

// NumKeys is the number of keys held.
func (s *Store) NumKeys() int { return len(s.ents) }

// Size is the number of values held.
func (s *Store) Size() int { return len(s.vals) }

// Keys returns the held keys in increasing order and their lengths.
func (s *Store) Keys() (keys []uint64, lens []int) {
	keys = make([]uint64, 0, len(s.ents))
	for _, e := range s.ents {
		keys = append(keys, e.key)
	}
	slices.Sort(keys)
	lens = make([]int, len(keys))
	for i, k := range keys {
		lens[i] = s.ents[s.index[k]].n
	}
	return keys, lens
}

// Len returns the length of key's value, or false if the key is unknown.
func (s *Store) Len(key uint64) (int, bool) {
	i, ok := s.index[key]
	if !ok {
		return 0, false
	}
	return s.ents[i].n, true
}

// Value appends key's current value to dst.
func (s *Store) Value(dst []float32, key uint64) ([]float32, bool) {
	i, ok := s.index[key]
	if !ok {
		return dst, false
	}
	e := s.ents[i]
	return append(dst, s.vals[e.off:e.off+e.n]...), true
}

// Steps returns how many optimizer updates key has received.
func (s *Store) Steps(key uint64) int64 {
	if i, ok := s.index[key]; ok {
		return s.ents[i].step
	}
	return 0
}

// checkInit validates an initialisation: keys sorted and unique, lens given
// and positive, a key already held must keep its length.
func (s *Store) checkInit(keys []uint64, lens []int, nvals int) error {
	if err := CheckSorted(keys); err != nil {
		return err
	}
	if len(lens) != len(keys) {
		return fmt.Errorf("%w: %d lens for %d keys", ErrLengthMismatch, len(lens), len(keys))
	}
	total := 0
	for i, k := range keys {
		if lens[i] <= 0 {
			return fmt.Errorf("%w: key %d has length %d", ErrLengthMismatch, k, lens[i])
		}
		if j, ok := s.index[k]; ok && s.ents[j].n != lens[i] {
			return fmt.Errorf("%w: key %d has length %d, init gives %d", ErrLengthMismatch, k, s.ents[j].n, lens[i])
		}
		total += lens[i]
	}
	if nvals >= 0 && nvals != total {
		return fmt.Errorf("%w: %d values for lengths summing to %d", ErrLengthMismatch, nvals, total)
	}
	return nil
}

// Init creates the keys that are not yet held, with lengths lens, filled by
// init (nil means Zeros). Keys already held with the same length keep their
// values (so every worker may call Init with the same arguments); a key held
// with a different length is an ErrLengthMismatch.
func (s *Store) Init(keys []uint64, lens []int, init Initializer) error {
	if err := s.checkInit(keys, lens, -1); err != nil {
		return err
	}
	if init == nil {
		init = Zeros{}
	}
	for i, k := range keys {
		if _, ok := s.index[k]; ok {
			continue
		}
		v := s.add(k, lens[i])
		init.Init(k, 0, v)
		s.ents[len(s.ents)-1].mag, _ = exactMags(v, nil, 0)
	}
	return nil
}

// InitValues is Init with explicit values: vals holds the values of all keys
// back to back (len(vals) = Σ lens). Held keys keep their values.
func (s *Store) InitValues(keys []uint64, lens []int, vals []float32) error {
	if err := s.checkInit(keys, lens, len(vals)); err != nil {
		return err
	}
	if _, err := s.checkFinite(keys, lens, vals); err != nil {
		return err
	}
	off := 0
	for i, k := range keys {
		n := lens[i]
		if _, ok := s.index[k]; !ok {
			v := s.add(k, n)
			copy(v, vals[off:off+n])
			s.ents[len(s.ents)-1].mag, _ = exactMags(v, nil, 0)
		}
		off += n
	}
	return nil
}

func (s *Store) add(k uint64, n int) []float32 {
	off := len(s.vals)
	s.index[k] = int32(len(s.ents))
	s.ents = append(s.ents, entry{key: k, off: off, n: n})
	s.vals = slices.Grow(s.vals, n)[:off+n]
	if s.slots > 0 {
		s.state = slices.Grow(s.state, n*s.slots)[:len(s.state)+n*s.slots]
	}
	return s.vals[off : off+n]
}

// resolve validates a request (keys sorted and unique and held, lens match,
// nvals = Σ lens) and leaves the entry indices in s.idx. lens nil means the
// held lengths.
func (s *Store) resolve(keys []uint64, lens []int, nvals int) error {
	idx, err := s.ResolveInto(s.idx[:0], keys, lens, nvals)
	s.idx = idx
	return err
}

// ResolveInto is resolve appending the entry indices to idx; it does not
// modify the store.
func (s *Store) ResolveInto(idx []int32, keys []uint64, lens []int, nvals int) ([]int32, error) {
	if err := CheckSorted(keys); err != nil {
		return idx, err
	}
	if lens != nil && len(lens) != len(keys) {
		return idx, fmt.Errorf("%w: %d lens for %d keys", ErrLengthMismatch, len(lens), len(keys))
	}
	total := 0
	for i, k := range keys {
		j, ok := s.index[k]
		if !ok {
			return idx, fmt.Errorf("%w: %d", ErrUnknownKey, k)
		}
		n := s.ents[j].n
		if lens != nil && lens[i] != n {
			return idx, fmt.Errorf("%w: key %d has length %d, request gives %d", ErrLengthMismatch, k, n, lens[i])
		}
		total += n
		idx = append(idx, j)
	}
	if nvals != total {
		return idx, fmt.Errorf("%w: %d values for lengths summing to %d", ErrLengthMismatch, nvals, total)
	}
	return idx, nil
}

// Apply runs one optimizer step on each key with the gradient in grads
// (all keys' gradients back to back) multiplied by scale:
// w_k ← opt(w_k, scale·g_k).
func (s *Store) Apply(keys []uint64, lens []int, grads []float32, scale float32) error {
	if err := s.resolve(keys, lens, len(grads)); err != nil {
		return err
	}
	g, err := s.checkFinite(keys, nil, grads)
	if err != nil {
		return err
	}
	var sb stepBound
	if s.finite {
		if err := checkScale("push", scale); err != nil {
			return err
		}
		var ok bool
		if sb, ok = s.bounded(g, scale); !ok {
			return s.applyExact(s.idx, grads, scale)
		}
	}
	off := 0
	for _, j := range s.idx {
		e := &s.ents[j]
		s.step(e, grads[off:off+e.n], scale)
		if s.finite {
			e.mag, _ = sb.next(e.mag, g)
		}
		off += e.n
	}
	return nil
}

// checkScale refuses a scale that is not a finite float32.
func checkScale(what string, scale float32) error {
	if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		return fmt.Errorf("%w: %s scale %v", ErrNonFinite, what, scale)
	}
	return nil
}

// bounded reports whether one step of each key of s.idx with gradients
// bounded by g at scale keeps every bound within float32 (finite.go), and
// returns the step's bound for the commit, which updates each key's
// bounds with it (recomputed: a few operations, cheaper than storing
// them). The bound is monotone in the bounds before the step, so one
// check at their largest over the keys clears them all; only when it
// fails are the keys checked one by one.
func (s *Store) bounded(g float64, scale float32) (stepBound, bool) {
	if s.bnd == nil {
		return stepBound{}, false
	}
	sb, ok := s.bnd.stepBound(scale)
	if !ok {
		return sb, false
	}
	var hi mags
	for _, j := range s.idx {
		m := &s.ents[j].mag
		hi[0], hi[1], hi[2] = max(hi[0], m[0]), max(hi[1], m[1]), max(hi[2], m[2])
	}
	if _, ok := sb.next(hi, g); ok {
		return sb, true
	}
	for _, j := range s.idx {
		if _, ok := sb.next(s.ents[j].mag, g); !ok {
			return sb, false
		}
	}
	return sb, true
}

// applyExact is one step on each key of idx with gradients g (back to
// back) computed into scratch: every key's new values and state are
// computed from copies and checked, and copied in only when all are
// finite. It resets the keys' bounds to their results' magnitudes.
func (s *Store) applyExact(idx []int32, g []float32, scale float32) error {
	xw := make([]float32, len(g))
	xs := make([]float32, len(g)*s.slots)
	slot := make([][]float32, s.slots)
	next := s.next[:0]
	off := 0
	for _, j := range idx {
		e := &s.ents[j]
		w := xw[off : off+e.n]
		copy(w, s.vals[e.off:e.off+e.n])
		st := xs[off*s.slots : (off+e.n)*s.slots]
		copy(st, s.state[e.off*s.slots:(e.off+e.n)*s.slots])
		for q := range s.slots {
			slot[q] = st[q*e.n : (q+1)*e.n]
		}
		s.opt.Update(w, g[off:off+e.n], scale, slot, e.step+1)
		m, ok := exactMags(w, st, s.slots)
		if !ok {
			s.next = next
			return fmt.Errorf("%w: the step (scale %g) would make key %d or its optimizer state non-finite; nothing applied", ErrNonFinite, scale, e.key)
		}
		next = append(next, m)
		off += e.n
	}
	s.next = next
	off = 0
	for k, j := range idx {
		if s.snap != nil {
			s.cow(j) // a checkpoint is being taken: keep its copy of j first
		}
		e := &s.ents[j]
		copy(s.vals[e.off:e.off+e.n], xw[off:off+e.n])
		copy(s.state[e.off*s.slots:(e.off+e.n)*s.slots], xs[off*s.slots:(off+e.n)*s.slots])
		e.step++
		e.mag = next[k]
		off += e.n
	}
	return nil
}

func (s *Store) step(e *entry, g []float32, scale float32) {
	if s.snap != nil {
		s.cow(s.index[e.key])
	}
	e.step++
	s.update(e, 0, e.n, g, scale)
}

// update runs the optimizer on elements [a,b) of e's value with gradient g
// (len b−a), at step e.step.
func (s *Store) update(e *entry, a, b int, g []float32, scale float32) {
	// The state of a key is laid out slot after slot over its n values.
	s.slot = s.slot[:0]
	base := e.off * s.slots
	for k := range s.slots {
		s.slot = append(s.slot, s.state[base+k*e.n+a:base+k*e.n+b])
	}
	s.opt.Update(s.vals[e.off+a:e.off+b], g, scale, s.slot, e.step)
}

// chunk is the number of gradient values decoded at a time when applying
// straight from wire bytes: 16 KiB of float32s stays in L1.
const chunk = 4096

// decoded returns the wire bytes gb as float32s: a view when the platform
// allows one, else a copy.
func decoded(gb []byte) []float32 {
	if v, ok := codec.View(gb); ok {
		return v
	}
	v := make([]float32, len(gb)/4)
	codec.Get(v, gb)
	return v
}

// ApplyBytes is Apply with the gradients as little-endian wire bytes
// (len(gb) = 4·Σ lens), decoded in chunks (SGD fused with the decode).
func (s *Store) ApplyBytes(keys []uint64, lens []int, gb []byte, scale float32) error {
	if err := s.resolve(keys, lens, len(gb)/4); err != nil {
		return err
	}
	if len(gb)%4 != 0 {
		return fmt.Errorf("%w: %d gradient bytes", ErrMalformed, len(gb))
	}
	g, err := s.checkFiniteBytes(keys, nil, gb)
	if err != nil {
		return err
	}
	var sb stepBound
	if s.finite {
		if err := checkScale("push", scale); err != nil {
			return err
		}
		var ok bool
		if sb, ok = s.bounded(g, scale); !ok {
			return s.applyExact(s.idx, decoded(gb), scale)
		}
	}
	sgd, isSGD := s.opt.(SGD)
	view, inPlace := codec.View(gb)
	if cap(s.tmp) < chunk {
		s.tmp = make([]float32, chunk)
	}
	off := 0
	for _, j := range s.idx {
		if s.snap != nil {
			s.cow(j)
		}
		e := &s.ents[j]
		e.step++
		switch {
		case isSGD:
			codec.SubScaled(s.vals[e.off:e.off+e.n], gb[4*off:], sgd.LR*scale)
		case inPlace:
			s.update(e, 0, e.n, view[off:off+e.n], scale)
		default:
			for a := 0; a < e.n; a += chunk {
				b := min(a+chunk, e.n)
				g := s.tmp[:b-a]
				codec.Get(g, gb[4*(off+a):])
				s.update(e, a, b, g, scale)
			}
		}
		if s.finite {
			e.mag, _ = sb.next(e.mag, g)
		}
		off += e.n
	}
	return nil
}

// Accumulate adds weight·g_k to the buffer of clock for each key and weight
// to the key's buffered weight; nothing is applied until Flush(clock).
// weight must be a float32 in [2^-126, MaxFloat32] (normally the push's
// sample count): its reciprocal, by which Flush scales, is then finite.
// clock must be open (Config.AccumulateWindow), else ErrClockNotOpen.
// With Config.Deterministic it is AccumulateFrom with sender "".
func (s *Store) Accumulate(clock int, keys []uint64, lens []int, grads []float32, weight float64) error {
	return s.accumulate(clock, "", keys, lens, grads, nil, weight)
}

// AccumulateBytes is Accumulate with the gradients as wire bytes.
func (s *Store) AccumulateBytes(clock int, keys []uint64, lens []int, gb []byte, weight float64) error {
	return s.accumulate(clock, "", keys, lens, nil, gb, weight)
}

// AccumulateFrom is Accumulate of a push sent by sender (in a cluster, the
// worker's node name). With Config.Deterministic the sender's pushes of a
// clock are summed, in the order they come, in a buffer of their own, and
// Flush adds the senders' buffers in increasing order of sender; without
// it sender is ignored.
func (s *Store) AccumulateFrom(clock int, sender string, keys []uint64, lens []int, grads []float32, weight float64) error {
	return s.accumulate(clock, sender, keys, lens, grads, nil, weight)
}

// AccumulateBytesFrom is AccumulateFrom with the gradients as wire bytes.
func (s *Store) AccumulateBytesFrom(clock int, sender string, keys []uint64, lens []int, gb []byte, weight float64) error {
	return s.accumulate(clock, sender, keys, lens, nil, gb, weight)
}

// buf is the buffer of clock that an accumulate from sender adds to: the
// clock's, or with Config.Deterministic the sender's of that clock; nil
// when there is none yet.
func (s *Store) buf(clock int, sender string) *accBuf {
	if !s.det {
		return s.bufs[clock]
	}
	return s.dbufs[clock][sender]
}

// setBuf makes b the buffer of clock (and sender, when deterministic).
func (s *Store) setBuf(clock int, sender string, b *accBuf) {
	if !s.det {
		s.bufs[clock] = b
		return
	}
	m := s.dbufs[clock]
	if m == nil {
		m = make(map[string]*accBuf)
		s.dbufs[clock] = m
	}
	m[sender] = b
}

// detGrowth is the factor by which the rounding of Flush's merge of the
// senders' sums of clock can grow their bound: one rounding (at most
// ×(1+2^-24)) per sender added, bounded by up each, and one more for the
// accumulate being checked.
func (s *Store) detGrowth(clock int) float64 {
	return math.Pow(up, float64(len(s.dbufs[clock])+1))
}

// detTotal is, for entry j, the sum of the bounds of its rows in the
// senders' buffers of clock other than self.
func (s *Store) detTotal(clock int, self *accBuf, j int32) float64 {
	t := 0.0
	for _, b := range s.dbufs[clock] {
		if b == self {
			continue
		}
		if r, ok := b.at[j]; ok {
			t += b.rows[r].mag
		}
	}
	return t
}

// minWeight is the smallest accumulate weight: float32's smallest normal.
const minWeight = 0x1p-126

// checkWeight refuses an accumulate weight outside [minWeight, maxF32].
func checkWeight(weight float64) error {
	if math.IsNaN(weight) || weight <= 0 {
		return fmt.Errorf("%w: accumulate weight %v", ErrMalformed, weight)
	}
	if weight < minWeight || weight > maxF32 {
		return fmt.Errorf("%w: accumulate weight %v outside float32's range [2^-126, %g]", ErrNonFinite, weight, maxF32)
	}
	return nil
}

// open refuses an accumulate into a clock that is not open.
func (s *Store) open(clock int) error {
	if clock <= s.flushed || clock-s.flushed > s.window {
		return fmt.Errorf("%w: accumulate into clock %d; open are %d to %d (last flushed %d, window %d)",
			ErrClockNotOpen, clock, s.flushed+1, s.flushed+s.window, s.flushed, s.window)
	}
	return nil
}

// accumulate is Accumulate with the gradients as float32s (gf) or wire
// bytes (gb, when gf is nil).
func (s *Store) accumulate(clock int, sender string, keys []uint64, lens []int, gf []float32, gb []byte, weight float64) error {
	if err := checkWeight(weight); err != nil {
		return err
	}
	if err := s.open(clock); err != nil {
		return err
	}
	nv := len(gf)
	if gf == nil {
		nv = len(gb) / 4
	}
	if err := s.resolve(keys, lens, nv); err != nil {
		return err
	}
	var g float64
	var err error
	if gf != nil {
		g, err = s.checkFinite(keys, nil, gf)
	} else {
		if len(gb)%4 != 0 {
			return fmt.Errorf("%w: %d gradient bytes", ErrMalformed, len(gb))
		}
		g, err = s.checkFiniteBytes(keys, nil, gb)
	}
	if err != nil {
		return err
	}
	b := s.buf(clock, sender)
	w := float32(weight)
	// rows[k]: the row of key k in b, −1 when it has none yet.
	rows := s.rows[:0]
	for _, j := range s.idx {
		r := int32(-1)
		if b != nil {
			if x, ok := b.at[j]; ok {
				r = x
			}
		}
		rows = append(rows, r)
	}
	s.rows = rows
	// sum' = sum + w·g: bounded per row, as a step is, at the largest
	// bound over the rows.
	wg := float64(w) * g * up
	if s.finite {
		hi := 0.0
		for k, r := range rows {
			m := 0.0
			if r >= 0 {
				m = b.rows[r].mag
			}
			if s.det {
				// Flush adds the other senders' sums to this one.
				m += s.detTotal(clock, b, s.idx[k])
			}
			hi = max(hi, m)
		}
		growth := up
		if s.det {
			growth = s.detGrowth(clock)
		}
		if !((hi+wg)*growth <= maxF32) {
			if gf == nil {
				gf = decoded(gb)
			}
			return s.accumulateExact(clock, sender, gf, w, weight)
		}
	}
	if b == nil {
		b = s.newBuf(len(s.idx))
		s.setBuf(clock, sender, b)
	}
	if cap(s.tmp) < chunk {
		s.tmp = make([]float32, chunk)
	}
	var view []float32
	inPlace := gf != nil
	if inPlace {
		view = gf
	} else {
		view, inPlace = codec.View(gb)
	}
	off := 0
	for k, j := range s.idx {
		n := s.ents[j].n
		ri := rows[k]
		if ri < 0 {
			ri = b.newRow(j, n)
		}
		r := &b.rows[ri]
		r.weight += weight
		if s.finite {
			r.mag = (r.mag + wg) * up
		}
		sum := b.sum[r.off : r.off+n]
		if inPlace {
			// sum += w·g as sum −= (−w)·g: bit for bit the same, since
			// IEEE rounding is symmetric in sign.
			codec.AxpyNeg(sum, view[off:off+n], -w)
		} else {
			for a := 0; a < n; a += chunk {
				end := min(a+chunk, n)
				gc := s.tmp[:end-a]
				codec.Get(gc, gb[4*(off+a):])
				codec.AxpyNeg(sum[a:end], gc, -w)
			}
		}
		off += n
	}
	return nil
}

// row returns the row of entry j (n values), appending a zero one.
func (b *accBuf) row(j int32, n int) *accRow {
	r, ok := b.at[j]
	if !ok {
		r = b.newRow(j, n)
	}
	return &b.rows[r]
}

// newRow appends a zero row for entry j (n values) and returns its index.
func (b *accBuf) newRow(j int32, n int) int32 {
	r := int32(len(b.rows))
	b.at[j] = r
	b.rows = append(b.rows, accRow{ent: j, off: len(b.sum)})
	b.sum = slices.Grow(b.sum, n)[:len(b.sum)+n]
	clear(b.sum[len(b.sum)-n:])
	return r
}

// accumulateExact is the accumulation of g (the keys s.idx back to back)
// with weight w computed into scratch: each key's new sum is computed from
// a copy and checked, and all are stored only when all are finite.
func (s *Store) accumulateExact(clock int, sender string, g []float32, w float32, weight float64) error {
	b := s.buf(clock, sender)
	x := make([]float32, len(g))
	next := s.next[:0]
	off := 0
	for _, j := range s.idx {
		e := s.ents[j]
		sum := x[off : off+e.n]
		if b != nil {
			if r, ok := b.at[j]; ok {
				copy(sum, b.sum[b.rows[r].off:])
			}
		}
		codec.AxpyNeg(sum, g[off:off+e.n], -w)
		h := maxHi(sum)
		if h >= hiNonFinite || (s.det && !s.mergeFinite(clock, sender, j, sum)) {
			s.next = next
			return fmt.Errorf("%w: clock %d: the buffered sum of key %d would overflow float32 (weight %v); nothing accumulated", ErrNonFinite, clock, e.key, weight)
		}
		next = append(next, mags{hiBound(h)})
		off += e.n
	}
	s.next = next
	if b == nil {
		b = s.newBuf(len(s.idx))
		s.setBuf(clock, sender, b)
	}
	off = 0
	for k, j := range s.idx {
		n := s.ents[j].n
		r := b.row(j, n)
		r.weight += weight
		r.mag = next[k][0]
		copy(b.sum[r.off:r.off+n], x[off:off+n])
		off += n
	}
	return nil
}

// mergeFinite reports whether Flush's merge of entry j's sums in clock
// stays finite when sender's sum is mine: it adds the senders' sums in
// Flush's order into scratch.
func (s *Store) mergeFinite(clock int, sender string, j int32, mine []float32) bool {
	by := s.dbufs[clock]
	names := make([]string, 0, len(by)+1)
	for name := range by {
		names = append(names, name)
	}
	if _, ok := by[sender]; !ok {
		names = append(names, sender)
	}
	slices.Sort(names)
	acc := make([]float32, len(mine))
	for _, name := range names {
		part := mine
		if name != sender {
			b := by[name]
			r, ok := b.at[j]
			if !ok {
				continue
			}
			part = b.sum[b.rows[r].off : b.rows[r].off+len(mine)]
		}
		codec.AxpyNeg(acc, part, -1) // acc += part, as flushDet adds
	}
	return !anyNonFinite(acc)
}

// Pending lists the clocks with buffered gradients, in increasing order.
func (s *Store) Pending() []int {
	var cs []int
	for c := range s.bufs {
		cs = append(cs, c)
	}
	for c := range s.dbufs {
		cs = append(cs, c)
	}
	slices.Sort(cs)
	return cs
}

// Flushed returns the highest clock flushed, −1 before the first flush.
func (s *Store) Flushed() int { return s.flushed }

// BufferedBytes is the memory of the gradient buffers of open clocks and
// of the spare, as the Store doc's formula counts it.
func (s *Store) BufferedBytes() (open, spare int) {
	for _, b := range s.bufs {
		open += b.bytes()
	}
	for _, by := range s.dbufs {
		for _, b := range by {
			open += b.bytes()
		}
	}
	if s.spare != nil {
		spare = s.spare.bytes()
	}
	for _, b := range s.dspare {
		spare += b.bytes()
	}
	return open, spare
}

// ClockWeight is the largest weight buffered for one key in clock: Σ w_i
// over the pushes of the key in that clock (with Config.Deterministic,
// over every sender's but those in except), 0 for a clock with no
// buffered gradients. When every push of a clock names every key the
// store holds of it (a dense push, as ps.Worker.Train makes), it is the
// clock's total weight — the samples pushed — so stores holding shards of
// one model can be compared before a flush (package ps reports a partial
// update so).
func (s *Store) ClockWeight(clock int, except ...string) float64 {
	most := 0.0
	if s.det {
		per := map[int32]float64{}
		for name, b := range s.dbufs[clock] {
			if slices.Contains(except, name) {
				continue
			}
			for _, r := range b.rows {
				per[r.ent] += r.weight
			}
		}
		for _, w := range per {
			most = max(most, w)
		}
		return most
	}
	if b := s.bufs[clock]; b != nil {
		for _, r := range b.rows {
			most = max(most, r.weight)
		}
	}
	return most
}

// Flush applies the buffer of clock: for every key pushed in that clock one
// optimizer step with the weighted mean gradient Σ w_i·g_i / Σ w_i
// multiplied by scale, then drops the buffer, and makes clock the last
// flushed if it is later than that (moving the window of open clocks). It
// reports how many keys were updated; a clock with no buffered gradients
// updates nothing. A flush whose steps would make a value or an optimizer
// state non-finite is refused with ErrNonFinite and changes nothing (the
// buffer stays).
func (s *Store) Flush(clock int, scale float32) (int, error) {
	return s.FlushExcept(clock, scale, nil)
}

// FlushExcept is Flush leaving out the pushes of the senders in except:
// they are dropped with the clock's buffers, never applied (package ps
// drops so a lost worker's push that reached some servers only). It needs
// Config.Deterministic, whose buffers keep each sender's pushes apart;
// without it a non-empty except is refused with ErrNotDeterministic.
func (s *Store) FlushExcept(clock int, scale float32, except []string) (int, error) {
	if s.finite {
		if err := checkScale("flush", scale); err != nil {
			return 0, err
		}
	}
	if s.det {
		return s.flushDet(clock, scale, except)
	}
	if len(except) > 0 {
		return 0, fmt.Errorf("%w: a flush of clock %d leaving out %q", ErrNotDeterministic, clock, except)
	}
	b := s.bufs[clock]
	if b == nil {
		s.flushed = max(s.flushed, clock)
		return 0, nil
	}
	if err := s.flushBuf(b, scale); err != nil {
		return 0, fmt.Errorf("clock %d: %w", clock, err)
	}
	delete(s.bufs, clock)
	s.flushed = max(s.flushed, clock)
	n := len(b.rows)
	clear(b.at)
	b.rows, b.sum = b.rows[:0], b.sum[:0]
	s.spare = b
	return n, nil
}

// flushDet is Flush with Config.Deterministic: the senders' buffers of
// clock are added into one, sender after sender in increasing order of
// their names, and that one is flushed. A refused flush keeps the senders'
// buffers as they were.
func (s *Store) flushDet(clock int, scale float32, except []string) (int, error) {
	by := s.dbufs[clock]
	if len(by) == 0 {
		delete(s.dbufs, clock)
		s.flushed = max(s.flushed, clock)
		return 0, nil
	}
	names := make([]string, 0, len(by))
	for name := range by {
		names = append(names, name)
	}
	slices.Sort(names)
	m := s.newBuf(0)
	for _, name := range names {
		if slices.Contains(except, name) {
			continue
		}
		sb := by[name]
		for _, r := range sb.rows {
			n := s.ents[r.ent].n
			mr := m.row(r.ent, n)
			mr.weight += r.weight
			// sum += part as sum −= (−1)·part: the same bits, with SSE.
			codec.AxpyNeg(m.sum[mr.off:mr.off+n], sb.sum[r.off:r.off+n], -1)
		}
	}
	var err error
	for i := range m.rows {
		r := &m.rows[i]
		h := maxHi(m.sum[r.off : r.off+s.ents[r.ent].n])
		if s.finite && h >= hiNonFinite {
			err = fmt.Errorf("%w: the buffered sum of key %d overflows float32", ErrNonFinite, s.ents[r.ent].key)
			break
		}
		r.mag = hiBound(h)
	}
	if err == nil {
		err = s.flushBuf(m, scale)
	}
	n := len(m.rows)
	clear(m.at)
	m.rows, m.sum = m.rows[:0], m.sum[:0]
	s.spare = m
	if err != nil {
		return 0, fmt.Errorf("clock %d: %w", clock, err)
	}
	delete(s.dbufs, clock)
	s.flushed = max(s.flushed, clock)
	// Keep as many emptied sender buffers as this clock had senders.
	for _, name := range names {
		b := by[name]
		clear(b.at)
		b.rows, b.sum = b.rows[:0], b.sum[:0]
		s.dspare = append(s.dspare, b)
	}
	if len(s.dspare) > len(names) {
		clear(s.dspare[len(names):])
		s.dspare = s.dspare[:len(names)]
	}
	return n, nil
}

// flushBuf applies b's mean gradients (the step of Flush). A refused
// flush changes nothing and leaves b as it was.
func (s *Store) flushBuf(b *accBuf, scale float32) error {
	// entry order: deterministic
	slices.SortFunc(b.rows, func(x, y accRow) int { return int(x.ent) - int(y.ent) })
	sb, ok := s.flushBounded(b, scale)
	if s.finite && !ok {
		if err := s.flushExact(b, scale); err != nil {
			for r, row := range b.rows {
				b.at[row.ent] = int32(r)
			}
			return err
		}
		return nil
	}
	for _, row := range b.rows {
		e := &s.ents[row.ent]
		sum := b.sum[row.off : row.off+e.n]
		inv := float32(1 / row.weight)
		for i := range sum {
			sum[i] *= inv
		}
		s.step(e, sum, scale)
		if s.finite {
			e.mag, _ = sb.next(e.mag, row.mag*float64(inv)*up)
		}
	}
	return nil
}

// newBuf returns an empty buffer for about keys keys: the spare left by
// the last flush, or a new one.
func (s *Store) newBuf(keys int) *accBuf {
	if s.det && keys > 0 && len(s.dspare) > 0 {
		b := s.dspare[len(s.dspare)-1]
		s.dspare[len(s.dspare)-1] = nil
		s.dspare = s.dspare[:len(s.dspare)-1]
		return b
	}
	if b := s.spare; b != nil {
		s.spare = nil
		return b
	}
	return &accBuf{at: make(map[int32]int32, keys)}
}

// flushBounded is bounded for a flush: each row's mean gradient is
// bounded by its sum's bound over its weight. False without the check
// (s.finite false), when no bounds are kept.
func (s *Store) flushBounded(b *accBuf, scale float32) (stepBound, bool) {
	if s.bnd == nil || !s.finite {
		return stepBound{}, false
	}
	sb, ok := s.bnd.stepBound(scale)
	if !ok {
		return sb, false
	}
	var hi mags
	hg := 0.0
	for _, row := range b.rows {
		m := &s.ents[row.ent].mag
		hi[0], hi[1], hi[2] = max(hi[0], m[0]), max(hi[1], m[1]), max(hi[2], m[2])
		hg = max(hg, row.mag*float64(float32(1/row.weight))*up)
	}
	if _, ok := sb.next(hi, hg); ok && hg <= maxF32 {
		return sb, true
	}
	for _, row := range b.rows {
		g := row.mag * float64(float32(1/row.weight)) * up
		if _, ok := sb.next(s.ents[row.ent].mag, g); !ok || !(g <= maxF32) {
			return sb, false
		}
	}
	return sb, true
}

// flushExact is a flush computed into scratch (applyExact), the mean
// gradients too.
func (s *Store) flushExact(b *accBuf, scale float32) error {
	idx := make([]int32, 0, len(b.rows))
	var g []float32
	for _, row := range b.rows {
		n := s.ents[row.ent].n
		inv := float32(1 / row.weight)
		at := len(g)
		g = append(g, b.sum[row.off:row.off+n]...)
		mean := g[at:]
		for i := range mean {
			mean[i] *= inv
		}
		if anyNonFinite(mean) {
			return fmt.Errorf("%w: the mean gradient of key %d overflows float32", ErrNonFinite, s.ents[row.ent].key)
		}
		idx = append(idx, row.ent)
	}
	return s.applyExact(idx, g, scale)
}

// Pull copies the values of keys, back to back, into out
// (len(out) must be Σ lens). Pull does not modify the store, so concurrent
// Pulls are safe with each other (not with updates).
func (s *Store) Pull(keys []uint64, lens []int, out []float32) error {
	idx, err := s.ResolveInto(nil, keys, lens, len(out))
	if err != nil {
		return err
	}
	off := 0
	for _, j := range idx {
		e := s.ents[j]
		copy(out[off:off+e.n], s.vals[e.off:e.off+e.n])
		off += e.n
	}
	return nil
}

// PullBytes is Pull encoding straight into wire bytes (len(dst) = 4·Σ lens).
// idx is scratch space; it returns it (grown) for reuse.
func (s *Store) PullBytes(idx []int32, keys []uint64, lens []int, dst []byte) ([]int32, error) {
	idx, err := s.ResolveInto(idx[:0], keys, lens, len(dst)/4)
	if err != nil {
		return idx, err
	}
	s.PutEntries(dst, idx)
	return idx, nil
}

// PutEntries writes the values of the entries idx (from ResolveInto) into
// dst, back to back, as little-endian bytes.
func (s *Store) PutEntries(dst []byte, idx []int32) {
	off := 0
	for _, j := range idx {
		e := s.ents[j]
		codec.Put(dst[4*off:], s.vals[e.off:e.off+e.n])
		off += e.n
	}
}

// checkSorted reports ErrUnsortedKeys unless keys are strictly increasing.
func CheckSorted(keys []uint64) error {
	for i := 1; i < len(keys); i++ {
		if keys[i] <= keys[i-1] {
			return fmt.Errorf("%w: key %d at index %d follows %d", ErrUnsortedKeys, keys[i], i, keys[i-1])
		}
	}
	return nil
}
