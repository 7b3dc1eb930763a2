package store

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math"
	"os"
	"slices"

	"github.com/falconml/falcon/internal/atomicfile"
	"github.com/falconml/falcon/ps/internal/codec"
)

// Checkpoint is one server's durable state: a header naming whose state it
// is (the run, the server, the cluster's layout), the key layout (every
// key, its length and its version, the number of optimizer steps it
// received), the values, the optimizer state, the gradient buffers of
// clocks not yet flushed, the last flushed clock and the request ids
// already applied (so a push retried across a restart is not applied
// twice).
//
// Encoded form, version 3 (little-endian):
//
//	magic "FLCNPSCK" | version u32 = 3 |
//	run id: n u32, n bytes | server: n u32, n bytes | layout u64 |
//	optimizer name: n u32, n bytes |
//	slots u32 | flushed i64 | log generation u64 |
//	keys u32 | keys × (key u64, len u32, steps i64) |
//	values: Σlen × f32 | state: slots·Σlen × f32 |
//	pending u32 | pending × (clock i64, sender: n u32, n bytes, touched u32, touched × (entry u32, weight f64), Σ touched len × f32) |
//	clients u32 | clients × (client u64, max seq u64, window u64) |
//	CRC-32C (Castagnoli) of every byte before it, u32
//
// The decoder checks every count against the bytes that remain before it
// allocates, and the checksum before it builds anything, so a truncated or
// bit-flipped file is refused with ErrCorruptCheckpoint (CRC-32C detects
// every burst of up to 32 flipped bits). Versions 1 and 2 are refused,
// naming both versions: version 1's file names no server and no run, so
// nothing could check that it is this server's; version 2's pending
// buffers name no sender, so a Config.Deterministic store could not
// restore them apart (version 3 added the sender).
//
// A server restores only its own checkpoint (openDurable): RunID, Server
// and Layout must match the server's; a mismatch is refused with
// ErrCheckpointMismatch naming both sides. State moves to another layout
// only through Reshard, which writes the new header.
type Checkpoint struct {
	RunID     string // the run that wrote it (DurableConfig.RunID)
	Server    string // the server that took it (its node name)
	Layout    uint64 // LayoutHash of the run's partitioner and servers; 0: none (a server outside a cluster)
	Optimizer string // the optimizer's Name; a restore must use the same
	Slots     int
	Flushed   int    // the last clock flushed, −1 before the first
	LogGen    uint64 // the generation of the request log that follows this checkpoint
	Keys      []CheckpointKey
	Values    []float32 // the keys' values back to back, in Keys order
	State     []float32 // per key, Slots slices of its length, in Keys order
	Pending   []PendingClock
	Clients   []ClientWindow
}

// CheckpointKey is one key of a Checkpoint.
type CheckpointKey struct {
	Key   uint64
	Len   int
	Steps int64
}

// PendingClock is the gradient buffer of one unflushed clock: for each
// key touched (an index into Checkpoint.Keys) its summed weight and its
// weighted sum Σ w_i·g_i (in Sum, back to back in Entries order). A
// Config.Deterministic store keeps one per clock and sender (Sender, in
// increasing order within a clock); any other store one per clock, of
// Sender "".
type PendingClock struct {
	Clock   int
	Sender  string // the sender whose pushes it sums (Store.AccumulateFrom)
	Entries []PendingEntry
	Sum     []float32
}

// PendingEntry is one key of a PendingClock.
type PendingEntry struct {
	Index  int
	Weight float64
}

// ClientWindow is the dedup state of one client: the highest request
// sequence number applied and a bitmap of the 64 below it.
type ClientWindow struct {
	Client uint64
	Max    uint64
	Window uint64
}

const (
	checkpointMagic   = "FLCNPSCK"
	CheckpointVersion = 3 // the version EncodeCheckpoint writes and DecodeCheckpoint reads
)

// MaxCheckpointName bounds the run id and server name a checkpoint
// carries (bytes).
const MaxCheckpointName = 256

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checkpoint returns a deep copy of the store's state (the dedup windows
// are the server's; none here). It only reads the store.
func (s *Store) Checkpoint() *Checkpoint {
	sn := s.newSnap(nil, nil)
	s.copySlice(sn, len(s.vals)+1)
	return sn.ck
}

// storeSnap is a copy-on-write snapshot of a store being taken: the
// state of every entry as it was at BeginSnapshot, copied into ck
// either by SnapshotSlice, a slice at a time, or by cow just before an
// update first writes the entry, whichever comes first.
type storeSnap struct {
	ck   *Checkpoint
	done []int // per entry of the snapshot, elements [0, done[j]) copied
	next int   // entries before next are copied whole
}

// BeginSnapshot starts a copy-on-write snapshot of the store and returns
// its Checkpoint, whose Values and State are filled as SnapshotSlice and
// the updates' cow calls copy them (vals and state are used as that
// storage when large enough). It copies the keys and the gradient
// buffers now: O(keys + buffered values). While the snapshot runs, every
// write to an entry's value or state goes through cow first; keys added
// meanwhile are not in it.
func (s *Store) BeginSnapshot(vals, state []float32) *Checkpoint {
	s.snap = s.newSnap(vals, state)
	return s.snap.ck
}

// newSnap returns a snapshot of the store with nothing copied yet but the
// keys and the gradient buffers; it only reads the store.
func (s *Store) newSnap(vals, state []float32) *storeSnap {
	n := len(s.vals)
	if n == 0 {
		vals, state = nil, nil
	} else {
		if cap(vals) < n {
			vals = make([]float32, n)
		}
		if cap(state) < n*s.slots {
			state = make([]float32, n*s.slots)
		}
		vals, state = vals[:n], state[:n*s.slots]
		if s.slots == 0 {
			state = nil
		}
	}
	ck := &Checkpoint{Optimizer: s.opt.Name(), Slots: s.slots, Flushed: s.flushed, Values: vals, State: state}
	ck.Keys = make([]CheckpointKey, len(s.ents))
	for i, e := range s.ents {
		ck.Keys[i] = CheckpointKey{Key: e.key, Len: e.n, Steps: e.step}
	}
	ck.Pending = s.pendingCheckpoint()
	return &storeSnap{ck: ck, done: make([]int, len(s.ents))}
}

// SnapshotSlice copies up to budget more values (each with its optimizer
// state) of the snapshot begun by BeginSnapshot and reports whether it is
// complete; then the store has no snapshot any more.
func (s *Store) SnapshotSlice(budget int) bool {
	if !s.copySlice(s.snap, budget) {
		return false
	}
	s.snap = nil
	return true
}

// Snapshotting reports whether a snapshot begun by BeginSnapshot is still
// being copied (SnapshotSlice has not yet reported it complete).
func (s *Store) Snapshotting() bool { return s.snap != nil }

// copySlice copies up to budget more values of sn and reports whether it
// is complete.
func (s *Store) copySlice(sn *storeSnap, budget int) bool {
	for budget > 0 && sn.next < len(sn.done) {
		j := sn.next
		a, n := sn.done[j], s.ents[j].n
		b := min(n, a+budget)
		s.copyEntry(sn, j, a, b)
		sn.done[j] = b
		budget -= b - a
		if b == n {
			sn.next++
		}
	}
	return sn.next == len(sn.done)
}

// cow copies what the snapshot lacks of entry j, before an update writes
// it. Called by every write to a value or its state while s.snap is set.
func (s *Store) cow(j int32) {
	sn := s.snap
	if int(j) >= len(sn.done) {
		return // added after the snapshot began
	}
	if a, n := sn.done[j], s.ents[j].n; a < n {
		s.copyEntry(sn, int(j), a, n)
		sn.done[j] = n
	}
}

// copyEntry copies elements [a, b) of entry j's value and state into the
// snapshot, at the same offsets: entries are laid out in order in both.
func (s *Store) copyEntry(sn *storeSnap, j, a, b int) {
	e := s.ents[j]
	ck := sn.ck
	copy(ck.Values[e.off+a:e.off+b], s.vals[e.off+a:e.off+b])
	base := e.off * s.slots
	for k := range s.slots {
		o := base + k*e.n
		copy(ck.State[o+a:o+b], s.state[o+a:o+b])
	}
}

// pendingCheckpoint copies the gradient buffers of the unflushed clocks.
func (s *Store) pendingCheckpoint() []PendingClock {
	var out []PendingClock
	for _, c := range s.Pending() {
		if b := s.bufs[c]; b != nil {
			out = append(out, s.pendingClock(c, "", b))
		}
		by := s.dbufs[c]
		for _, name := range slices.Sorted(maps.Keys(by)) {
			out = append(out, s.pendingClock(c, name, by[name]))
		}
	}
	return out
}

// pendingClock copies the buffer b of clock and sender.
func (s *Store) pendingClock(c int, sender string, b *accBuf) PendingClock {
	rows := slices.SortedFunc(slices.Values(b.rows), func(x, y accRow) int { return int(x.ent) - int(y.ent) })
	pc := PendingClock{Clock: c, Sender: sender}
	for _, r := range rows {
		pc.Entries = append(pc.Entries, PendingEntry{Index: int(r.ent), Weight: r.weight})
		pc.Sum = append(pc.Sum, b.sum[r.off:r.off+s.ents[r.ent].n]...)
	}
	return pc
}

// Restore loads ck into an empty store whose optimizer has ck's name.
func (s *Store) Restore(ck *Checkpoint) error {
	if len(s.ents) != 0 {
		return fmt.Errorf("ps: restore into a store holding %d keys", len(s.ents))
	}
	if ck.Optimizer != s.opt.Name() || ck.Slots != s.slots {
		return fmt.Errorf("%w: taken with optimizer %s (%d slots), the server runs %s (%d slots)",
			ErrCorruptCheckpoint, ck.Optimizer, ck.Slots, s.opt.Name(), s.slots)
	}
	if err := ck.Validate(); err != nil {
		return err
	}
	for _, k := range ck.Keys {
		if _, dup := s.index[k.Key]; dup {
			return fmt.Errorf("%w: key %d twice", ErrCorruptCheckpoint, k.Key)
		}
		s.add(k.Key, k.Len)
		s.ents[len(s.ents)-1].step = k.Steps
	}
	copy(s.vals, ck.Values)
	copy(s.state, ck.State)
	for i := range s.ents {
		e := &s.ents[i]
		e.mag, _ = exactMags(s.vals[e.off:e.off+e.n], s.state[e.off*s.slots:(e.off+e.n)*s.slots], s.slots)
	}
	s.flushed = max(ck.Flushed, -1)
	// A store that is not deterministic adds a clock's senders (in the
	// checkpoint's order, increasing sender) into one buffer, as its
	// Flush would have had they been one.
	for _, pc := range ck.Pending {
		b := s.buf(pc.Clock, pc.Sender)
		if b == nil {
			b = &accBuf{at: make(map[int32]int32, len(pc.Entries))}
			s.setBuf(pc.Clock, pc.Sender, b)
		}
		off := 0
		for _, pe := range pc.Entries {
			n := s.ents[pe.Index].n
			r := b.row(int32(pe.Index), n)
			sum := b.sum[r.off : r.off+n]
			codec.AxpyNeg(sum, pc.Sum[off:off+n], -1) // sum += the sender's, as Flush adds
			r.weight += pe.Weight
			m, _ := exactMags(sum, nil, 0)
			r.mag = m[0]
			off += n
		}
	}
	return nil
}

// check validates the sizes of a checkpoint built in memory or decoded.
func (ck *Checkpoint) Validate() error {
	total := 0
	seen := make(map[uint64]bool, len(ck.Keys))
	for _, k := range ck.Keys {
		if k.Len <= 0 || k.Len > math.MaxInt32 || k.Steps < 0 || seen[k.Key] {
			return fmt.Errorf("%w: key %d with length %d, %d steps", ErrCorruptCheckpoint, k.Key, k.Len, k.Steps)
		}
		seen[k.Key] = true
		total += k.Len
	}
	if len(ck.Values) != total || len(ck.State) != total*ck.Slots {
		return fmt.Errorf("%w: %d values and %d state for %d keys of %d values", ErrCorruptCheckpoint, len(ck.Values), len(ck.State), len(ck.Keys), total)
	}
	type clockSender struct {
		clock  int
		sender string
	}
	clocks := make(map[clockSender]bool)
	for _, pc := range ck.Pending {
		if clocks[clockSender{pc.Clock, pc.Sender}] || len(pc.Sender) > MaxCheckpointName {
			return fmt.Errorf("%w: clock %d buffered twice for sender %q (or a sender name of %d bytes)", ErrCorruptCheckpoint, pc.Clock, pc.Sender, len(pc.Sender))
		}
		clocks[clockSender{pc.Clock, pc.Sender}] = true
		n, last := 0, -1
		for _, pe := range pc.Entries {
			if pe.Index <= last || pe.Index >= len(ck.Keys) || !(pe.Weight > 0) || math.IsInf(pe.Weight, 0) {
				return fmt.Errorf("%w: clock %d: entry %d weight %v", ErrCorruptCheckpoint, pc.Clock, pe.Index, pe.Weight)
			}
			last = pe.Index
			n += ck.Keys[pe.Index].Len
		}
		if len(pc.Sum) != n {
			return fmt.Errorf("%w: clock %d: %d sums for %d values", ErrCorruptCheckpoint, pc.Clock, len(pc.Sum), n)
		}
	}
	return nil
}

// EncodeCheckpoint appends the encoded form of ck to dst.
func EncodeCheckpoint(dst []byte, ck *Checkpoint) []byte {
	w := &appendWriter{b: dst}
	WriteCheckpoint(w, ck) // an appendWriter never fails
	return w.b
}

// appendWriter is an io.Writer appending to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// ckChunk is the buffer of WriteCheckpoint (bytes).
const ckChunk = 1 << 16

// WriteCheckpoint writes the encoded form of ck to w through one buffer
// of ckChunk bytes, computing the checksum as it goes: a checkpoint of
// any size is written without a second copy of it in memory.
func WriteCheckpoint(w io.Writer, ck *Checkpoint) error {
	cw := ckWriter{w: w, e: codec.Encoder{B: make([]byte, 0, ckChunk+64)}}
	e := &cw.e
	e.B = append(e.B, checkpointMagic...)
	e.U32(CheckpointVersion)
	e.Str(ck.RunID)
	e.Str(ck.Server)
	e.U64(ck.Layout)
	e.Str(ck.Optimizer)
	e.U32(uint32(ck.Slots))
	e.I64(int64(ck.Flushed))
	e.U64(ck.LogGen)
	e.U32(uint32(len(ck.Keys)))
	for _, k := range ck.Keys {
		e.U64(k.Key)
		e.U32(uint32(k.Len))
		e.I64(k.Steps)
		cw.spill()
	}
	cw.f32s(ck.Values)
	cw.f32s(ck.State)
	e.U32(uint32(len(ck.Pending)))
	for _, pc := range ck.Pending {
		e.I64(int64(pc.Clock))
		e.Str(pc.Sender)
		e.U32(uint32(len(pc.Entries)))
		for _, pe := range pc.Entries {
			e.U32(uint32(pe.Index))
			e.F64(pe.Weight)
			cw.spill()
		}
		cw.f32s(pc.Sum)
	}
	e.U32(uint32(len(ck.Clients)))
	for _, c := range ck.Clients {
		e.U64(c.Client)
		e.U64(c.Max)
		e.U64(c.Window)
		cw.spill()
	}
	cw.flush()
	e.U32(cw.crc)
	cw.flush()
	return cw.err
}

// ckWriter buffers WriteCheckpoint's output in e and keeps the running
// CRC-32C of what it wrote.
type ckWriter struct {
	w   io.Writer
	e   codec.Encoder
	crc uint32
	err error
}

// spill writes the buffer out once it holds ckChunk bytes.
func (c *ckWriter) spill() {
	if len(c.e.B) >= ckChunk {
		c.flush()
	}
}

func (c *ckWriter) flush() {
	c.crc = crc32.Update(c.crc, castagnoli, c.e.B)
	if c.err == nil {
		_, c.err = c.w.Write(c.e.B)
	}
	c.e.B = c.e.B[:0]
}

// f32s writes vals as little-endian float32 bits, a buffer at a time.
func (c *ckWriter) f32s(vals []float32) {
	for len(vals) > 0 {
		room := (ckChunk + 64 - len(c.e.B)) / 4
		if room == 0 {
			c.flush()
			continue
		}
		n := min(room, len(vals))
		c.e.F32s(vals[:n])
		vals = vals[n:]
		c.spill()
	}
}

// maxCheckpointSlots bounds the optimizer slots a checkpoint may declare
// (Adam has 2).
const maxCheckpointSlots = 16

// DecodeCheckpoint decodes a checkpoint written by EncodeCheckpoint.
// Errors wrap ErrCorruptCheckpoint, or ErrCheckpointMismatch and
// codec.ErrWireVersion for another format version, and say what is wrong.
func DecodeCheckpoint(b []byte) (*Checkpoint, error) {
	if len(b) < len(checkpointMagic)+4+4 || string(b[:len(checkpointMagic)]) != checkpointMagic {
		return nil, fmt.Errorf("%w: no checkpoint magic (%d bytes)", ErrCorruptCheckpoint, len(b))
	}
	body := b[len(checkpointMagic) : len(b)-4]
	if v := binary.LittleEndian.Uint32(body); v != CheckpointVersion {
		return nil, fmt.Errorf("%w: %w: checkpoint format version %d, this build reads version %d", ErrCheckpointMismatch, codec.ErrWireVersion, v, CheckpointVersion)
	}
	if got, want := binary.LittleEndian.Uint32(b[len(b)-4:]), crc32.Checksum(b[:len(b)-4], castagnoli); got != want {
		return nil, fmt.Errorf("%w: checksum %08x, computed %08x (truncated or damaged)", ErrCorruptCheckpoint, got, want)
	}
	d := codec.Decoder{B: body[4:]}
	ck := &Checkpoint{}
	ck.RunID = d.Str()
	ck.Server = d.Str()
	ck.Layout = d.U64()
	if d.Err == nil && (len(ck.RunID) > MaxCheckpointName || len(ck.Server) > MaxCheckpointName) {
		return nil, fmt.Errorf("%w: run id of %d bytes, server name of %d", ErrCorruptCheckpoint, len(ck.RunID), len(ck.Server))
	}
	ck.Optimizer = d.Str()
	ck.Slots = int(d.U32())
	ck.Flushed = d.Int(-1, 1<<62, "flushed clock")
	ck.LogGen = d.U64()
	if d.Err == nil && ck.Slots > maxCheckpointSlots {
		return nil, fmt.Errorf("%w: %d optimizer slots", ErrCorruptCheckpoint, ck.Slots)
	}
	nk := int(d.U32())
	if d.Err == nil && nk > len(d.B)/20 {
		return nil, fmt.Errorf("%w: %d keys in %d bytes", ErrCorruptCheckpoint, nk, len(d.B))
	}
	total := 0
	ck.Keys = make([]CheckpointKey, 0, nk)
	for range nk {
		k := CheckpointKey{Key: d.U64(), Len: int(d.U32()), Steps: d.I64()}
		if d.Err != nil {
			break
		}
		if k.Len <= 0 || k.Len > len(d.B)/4-total {
			return nil, fmt.Errorf("%w: key %d with length %d exceeds the file", ErrCorruptCheckpoint, k.Key, k.Len)
		}
		total += k.Len
		ck.Keys = append(ck.Keys, k)
	}
	if d.Err == nil && total*(1+ck.Slots) > len(d.B)/4 {
		return nil, fmt.Errorf("%w: %d values and %d slots exceed the file", ErrCorruptCheckpoint, total, ck.Slots)
	}
	ck.Values = readF32s(&d, total)
	ck.State = readF32s(&d, total*ck.Slots)
	np := int(d.U32())
	if d.Err == nil && np > len(d.B)/16 {
		return nil, fmt.Errorf("%w: %d pending clocks in %d bytes", ErrCorruptCheckpoint, np, len(d.B))
	}
	for range np {
		if d.Err != nil {
			break
		}
		pc := PendingClock{Clock: d.Int(-1<<62, 1<<62, "clock"), Sender: d.Str()}
		if d.Err == nil && len(pc.Sender) > MaxCheckpointName {
			return nil, fmt.Errorf("%w: clock %d: sender name of %d bytes", ErrCorruptCheckpoint, pc.Clock, len(pc.Sender))
		}
		ne := int(d.U32())
		if d.Err == nil && (ne > len(d.B)/12 || ne > len(ck.Keys)) {
			return nil, fmt.Errorf("%w: clock %d with %d entries", ErrCorruptCheckpoint, pc.Clock, ne)
		}
		n := 0
		for range ne {
			pe := PendingEntry{Index: int(d.U32()), Weight: d.F64()}
			if d.Err != nil {
				break
			}
			if pe.Index >= len(ck.Keys) {
				return nil, fmt.Errorf("%w: clock %d: entry %d of %d keys", ErrCorruptCheckpoint, pc.Clock, pe.Index, len(ck.Keys))
			}
			n += ck.Keys[pe.Index].Len
			pc.Entries = append(pc.Entries, pe)
		}
		if d.Err == nil && n > len(d.B)/4 {
			return nil, fmt.Errorf("%w: clock %d: %d sums exceed the file", ErrCorruptCheckpoint, pc.Clock, n)
		}
		pc.Sum = readF32s(&d, n)
		ck.Pending = append(ck.Pending, pc)
	}
	nc := int(d.U32())
	if d.Err == nil && nc > len(d.B)/24 {
		return nil, fmt.Errorf("%w: %d clients in %d bytes", ErrCorruptCheckpoint, nc, len(d.B))
	}
	for range nc {
		c := ClientWindow{Client: d.U64(), Max: d.U64(), Window: d.U64()}
		if d.Err != nil {
			break
		}
		ck.Clients = append(ck.Clients, c)
	}
	if err := d.End(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptCheckpoint, err)
	}
	if err := ck.Validate(); err != nil {
		return nil, err
	}
	return ck, nil
}

// readF32s reads n float32s (the caller has checked that they fit).
func readF32s(d *codec.Decoder, n int) []float32 {
	b := d.Bytes(4 * n)
	if b == nil || n == 0 {
		return nil
	}
	v := make([]float32, n)
	codec.Get(v, b)
	return v
}

// WriteCheckpointFile writes ck to path atomically (atomicfile.WriteFile): a
// crash during the write leaves the previous checkpoint in place.
func WriteCheckpointFile(path string, ck *Checkpoint) error {
	return atomicfile.WriteFile(path, 0o644, func(w io.Writer) error { return WriteCheckpoint(w, ck) })
}

// maxCheckpointFile bounds the file ReadCheckpointFile reads (16 GiB).
const maxCheckpointFile = 16 << 30

// ReadCheckpointFile reads and decodes the checkpoint at path.
func ReadCheckpointFile(path string) (*Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxCheckpointFile {
		return nil, fmt.Errorf("%w: %s is %d bytes", ErrCorruptCheckpoint, path, fi.Size())
	}
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("ps: reading %s: %w", path, err)
	}
	ck, err := DecodeCheckpoint(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ck, nil
}
