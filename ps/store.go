package ps

import (
	"errors"
	"fmt"
	"slices"
)

// StoreConfig configures a Store.
type StoreConfig struct {
	// Optimizer applies updates; nil means SGD{LR: 0.01}.
	Optimizer Optimizer
	// AcceptNonFinite turns off the refusal of NaN and ±Inf gradients and
	// initial values (ErrNonFinite). The check is one read pass over a
	// request's values before they are applied; see the package doc,
	// Performance, for what it costs.
	AcceptNonFinite bool
}

// DefaultStoreConfig returns the default store configuration: SGD with
// learning rate 0.01.
func DefaultStoreConfig() StoreConfig { return StoreConfig{Optimizer: SGD{LR: 0.01}} }

// Validate checks the configuration.
func (c *StoreConfig) Validate() error {
	if c.Optimizer != nil && c.Optimizer.Slots() < 0 {
		return errors.New("ps: optimizer with negative Slots")
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
// when it returns an error.
//
// Gradient buffers (Accumulate/Flush) implement the sample-weighted merge of
// enforced synchronisation: for a clock c and a key k,
//
//	g_k = Σ_i w_i·g_{i,k} / Σ_i w_i
//
// over the pushes i of clock c that carry k, w_i being the push weight
// (its sample count), and Flush applies g_k with one optimizer step.
type Store struct {
	opt   Optimizer
	slots int
	index map[uint64]int32
	ents  []entry
	vals  []float32
	state []float32
	bufs  map[int]*accBuf
	free  []*accBuf
	idx   []int32 // scratch: entry indices of the request being served
	tmp   []float32
	slot  [][]float32 // scratch: state slices passed to the optimizer

	finite bool // refuse non-finite values (not StoreConfig.AcceptNonFinite)

	snap *storeSnap // a snapshot being taken (checkpoint.go): writes call cow first
}

type entry struct {
	key  uint64
	off  int // offset of the value in vals (and of slot 0 in state / slots)
	n    int
	step int64 // updates applied to this key
}

type accBuf struct {
	sum     []float32 // indexed like vals
	weight  []float64 // per entry; 0 means untouched
	touched []int32
}

// NewStore returns an empty store.
func NewStore(cfg StoreConfig) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Optimizer == nil {
		cfg.Optimizer = DefaultStoreConfig().Optimizer
	}
	return &Store{
		opt:    cfg.Optimizer,
		slots:  cfg.Optimizer.Slots(),
		index:  make(map[uint64]int32),
		bufs:   make(map[int]*accBuf),
		finite: !cfg.AcceptNonFinite,
	}, nil
}

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
	if err := checkSorted(keys); err != nil {
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
	}
	return nil
}

// InitValues is Init with explicit values: vals holds the values of all keys
// back to back (len(vals) = Σ lens). Held keys keep their values.
func (s *Store) InitValues(keys []uint64, lens []int, vals []float32) error {
	if err := s.checkInit(keys, lens, len(vals)); err != nil {
		return err
	}
	if err := s.checkFinite(keys, lens, vals); err != nil {
		return err
	}
	off := 0
	for i, k := range keys {
		n := lens[i]
		if _, ok := s.index[k]; !ok {
			copy(s.add(k, n), vals[off:off+n])
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
	for _, b := range s.bufs {
		b.grow(len(s.vals), len(s.ents))
	}
	for _, b := range s.free {
		b.grow(len(s.vals), len(s.ents))
	}
	return s.vals[off : off+n]
}

func (b *accBuf) grow(nvals, nents int) {
	b.sum = append(b.sum, make([]float32, nvals-len(b.sum))...)
	b.weight = append(b.weight, make([]float64, nents-len(b.weight))...)
}

// resolve validates a request (keys sorted and unique and held, lens match,
// nvals = Σ lens) and leaves the entry indices in s.idx. lens nil means the
// held lengths.
func (s *Store) resolve(keys []uint64, lens []int, nvals int) error {
	idx, err := s.resolveInto(s.idx[:0], keys, lens, nvals)
	s.idx = idx
	return err
}

// resolveInto is resolve appending the entry indices to idx; it does not
// modify the store.
func (s *Store) resolveInto(idx []int32, keys []uint64, lens []int, nvals int) ([]int32, error) {
	if err := checkSorted(keys); err != nil {
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
	if err := s.checkFinite(keys, nil, grads); err != nil {
		return err
	}
	off := 0
	for _, j := range s.idx {
		e := &s.ents[j]
		s.step(e, grads[off:off+e.n], scale)
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

// applyBytes is Apply with the gradients as little-endian wire bytes
// (len(gb) = 4·Σ lens), decoded in chunks (SGD fused with the decode).
func (s *Store) applyBytes(keys []uint64, lens []int, gb []byte, scale float32) error {
	if err := s.resolve(keys, lens, len(gb)/4); err != nil {
		return err
	}
	if len(gb)%4 != 0 {
		return fmt.Errorf("%w: %d gradient bytes", ErrMalformed, len(gb))
	}
	if err := s.checkFiniteBytes(keys, nil, gb); err != nil {
		return err
	}
	sgd, isSGD := s.opt.(SGD)
	view, inPlace := asF32s(gb)
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
			subF32s(s.vals[e.off:e.off+e.n], gb[4*off:], sgd.LR*scale)
		case inPlace:
			s.update(e, 0, e.n, view[off:off+e.n], scale)
		default:
			for a := 0; a < e.n; a += chunk {
				b := min(a+chunk, e.n)
				g := s.tmp[:b-a]
				getF32s(g, gb[4*(off+a):])
				s.update(e, a, b, g, scale)
			}
		}
		off += e.n
	}
	return nil
}

// accumulateBytes is Accumulate with the gradients as wire bytes.
func (s *Store) accumulateBytes(clock int, keys []uint64, lens []int, gb []byte, weight float64) error {
	if !(weight > 0) {
		return fmt.Errorf("%w: accumulate weight %v", ErrMalformed, weight)
	}
	if err := s.resolve(keys, lens, len(gb)/4); err != nil {
		return err
	}
	if len(gb)%4 != 0 {
		return fmt.Errorf("%w: %d gradient bytes", ErrMalformed, len(gb))
	}
	if err := s.checkFiniteBytes(keys, nil, gb); err != nil {
		return err
	}
	b := s.bufs[clock]
	if b == nil {
		b = s.newBuf()
		s.bufs[clock] = b
	}
	if cap(s.tmp) < chunk {
		s.tmp = make([]float32, chunk)
	}
	w := float32(weight)
	view, inPlace := asF32s(gb)
	off := 0
	for _, j := range s.idx {
		e := s.ents[j]
		if b.weight[j] == 0 {
			b.touched = append(b.touched, j)
		}
		b.weight[j] += weight
		if inPlace {
			// sum += w·g as sum −= (−w)·g: bit for bit the same, since
			// IEEE rounding is symmetric in sign.
			axpyNeg(b.sum[e.off:e.off+e.n], view[off:off+e.n], -w)
			off += e.n
			continue
		}
		for a := 0; a < e.n; a += chunk {
			end := min(a+chunk, e.n)
			g := s.tmp[:end-a]
			getF32s(g, gb[4*(off+a):])
			sum := b.sum[e.off+a : e.off+end]
			for i := range sum {
				sum[i] += w * g[i]
			}
		}
		off += e.n
	}
	return nil
}

// Accumulate adds weight·g_k to the buffer of clock for each key and weight
// to the key's buffered weight; nothing is applied until Flush(clock).
// weight must be positive (normally the push's sample count).
func (s *Store) Accumulate(clock int, keys []uint64, lens []int, grads []float32, weight float64) error {
	if !(weight > 0) {
		return fmt.Errorf("%w: accumulate weight %v", ErrMalformed, weight)
	}
	if err := s.resolve(keys, lens, len(grads)); err != nil {
		return err
	}
	if err := s.checkFinite(keys, nil, grads); err != nil {
		return err
	}
	b := s.bufs[clock]
	if b == nil {
		b = s.newBuf()
		s.bufs[clock] = b
	}
	w := float32(weight)
	off := 0
	for _, j := range s.idx {
		e := s.ents[j]
		if b.weight[j] == 0 {
			b.touched = append(b.touched, j)
		}
		b.weight[j] += weight
		sum := b.sum[e.off : e.off+e.n]
		g := grads[off : off+e.n]
		for i := range sum {
			sum[i] += w * g[i]
		}
		off += e.n
	}
	return nil
}

func (s *Store) newBuf() *accBuf {
	if n := len(s.free); n > 0 {
		b := s.free[n-1]
		s.free = s.free[:n-1]
		return b
	}
	return &accBuf{sum: make([]float32, len(s.vals)), weight: make([]float64, len(s.ents))}
}

// Pending lists the clocks with buffered gradients, in increasing order.
func (s *Store) Pending() []int {
	var cs []int
	for c := range s.bufs {
		cs = append(cs, c)
	}
	slices.Sort(cs)
	return cs
}

// Flush applies the buffer of clock: for every key pushed in that clock one
// optimizer step with the weighted mean gradient Σ w_i·g_i / Σ w_i
// multiplied by scale. It reports how many keys were updated; a clock with
// no buffered gradients updates nothing.
func (s *Store) Flush(clock int, scale float32) int {
	b := s.bufs[clock]
	if b == nil {
		return 0
	}
	delete(s.bufs, clock)
	slices.Sort(b.touched) // entry order: deterministic
	for _, j := range b.touched {
		e := &s.ents[j]
		sum := b.sum[e.off : e.off+e.n]
		inv := float32(1 / b.weight[j])
		for i := range sum {
			sum[i] *= inv
		}
		s.step(e, sum, scale)
		clear(sum)
		b.weight[j] = 0
	}
	n := len(b.touched)
	b.touched = b.touched[:0]
	s.free = append(s.free, b)
	return n
}

// Pull copies the values of keys, back to back, into out
// (len(out) must be Σ lens). Pull does not modify the store, so concurrent
// Pulls are safe with each other (not with updates).
func (s *Store) Pull(keys []uint64, lens []int, out []float32) error {
	idx, err := s.resolveInto(nil, keys, lens, len(out))
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

// pullBytes is Pull encoding straight into wire bytes (len(dst) = 4·Σ lens).
// idx is scratch space; it returns it (grown) for reuse.
func (s *Store) pullBytes(idx []int32, keys []uint64, lens []int, dst []byte) ([]int32, error) {
	idx, err := s.resolveInto(idx[:0], keys, lens, len(dst)/4)
	if err != nil {
		return idx, err
	}
	s.putEntries(dst, idx)
	return idx, nil
}

// putEntries writes the values of the entries idx (from resolveInto) into
// dst, back to back, as little-endian bytes.
func (s *Store) putEntries(dst []byte, idx []int32) {
	off := 0
	for _, j := range idx {
		e := s.ents[j]
		putF32s(dst[4*off:], s.vals[e.off:e.off+e.n])
		off += e.n
	}
}

// checkSorted reports ErrUnsortedKeys unless keys are strictly increasing.
func checkSorted(keys []uint64) error {
	for i := 1; i < len(keys); i++ {
		if keys[i] <= keys[i-1] {
			return fmt.Errorf("%w: key %d at index %d follows %d", ErrUnsortedKeys, keys[i], i, keys[i-1])
		}
	}
	return nil
}
