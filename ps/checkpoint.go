package ps

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"slices"
)

// Checkpoint is one server's durable state: the key layout (every key, its
// length and its version, the number of optimizer steps it received), the
// values, the optimizer state, the gradient buffers of clocks not yet
// flushed, the last flushed clock and the request ids already applied
// (so a push retried across a restart is not applied twice).
//
// Encoded form, version 1 (little-endian):
//
//	magic "FLCNPSCK" | version u32 = 1 | optimizer name: n u32, n bytes |
//	slots u32 | flushed i64 | log generation u64 |
//	keys u32 | keys × (key u64, len u32, steps i64) |
//	values: Σlen × f32 | state: slots·Σlen × f32 |
//	pending u32 | pending × (clock i64, touched u32, touched × (entry u32, weight f64), Σ touched len × f32) |
//	clients u32 | clients × (client u64, max seq u64, window u64) |
//	CRC-32C (Castagnoli) of every byte before it, u32
//
// The decoder checks every count against the bytes that remain before it
// allocates, and the checksum before it builds anything, so a truncated or
// bit-flipped file is refused with ErrCorruptCheckpoint (CRC-32C detects
// every burst of up to 32 flipped bits).
type Checkpoint struct {
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
// weighted sum Σ w_i·g_i (in Sum, back to back in Entries order).
type PendingClock struct {
	Clock   int
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

// ErrCorruptCheckpoint: a checkpoint could not be decoded (truncated, a
// checksum mismatch, inconsistent sizes) or does not fit the server.
var ErrCorruptCheckpoint = errors.New("ps: corrupt checkpoint")

const (
	checkpointMagic   = "FLCNPSCK"
	CheckpointVersion = 1 // the version EncodeCheckpoint writes and DecodeCheckpoint reads
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checkpoint returns a deep copy of the store's state (the dedup windows
// are the server's; none here).
func (s *Store) Checkpoint() *Checkpoint {
	ck := &Checkpoint{Optimizer: s.opt.Name(), Slots: s.slots, Flushed: -1,
		Values: slices.Clone(s.vals), State: slices.Clone(s.state)}
	ck.Keys = make([]CheckpointKey, len(s.ents))
	for i, e := range s.ents {
		ck.Keys[i] = CheckpointKey{Key: e.key, Len: e.n, Steps: e.step}
	}
	ck.Flushed = s.flushed
	for _, c := range s.Pending() {
		b := s.bufs[c]
		rows := slices.SortedFunc(slices.Values(b.rows), func(x, y accRow) int { return int(x.ent) - int(y.ent) })
		pc := PendingClock{Clock: c}
		for _, r := range rows {
			pc.Entries = append(pc.Entries, PendingEntry{Index: int(r.ent), Weight: r.weight})
			pc.Sum = append(pc.Sum, b.sum[r.off:r.off+s.ents[r.ent].n]...)
		}
		ck.Pending = append(ck.Pending, pc)
	}
	return ck
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
	if err := ck.check(); err != nil {
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
	for _, pc := range ck.Pending {
		b := &accBuf{at: make(map[int32]int32, len(pc.Entries))}
		off := 0
		for _, pe := range pc.Entries {
			n := s.ents[pe.Index].n
			r := b.row(int32(pe.Index), n)
			sum := b.sum[r.off : r.off+n]
			copy(sum, pc.Sum[off:off+n])
			r.weight = pe.Weight
			m, _ := exactMags(sum, nil, 0)
			r.mag = m[0]
			off += n
		}
		s.bufs[pc.Clock] = b
	}
	return nil
}

// check validates the sizes of a checkpoint built in memory or decoded.
func (ck *Checkpoint) check() error {
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
	clocks := make(map[int]bool)
	for _, pc := range ck.Pending {
		if clocks[pc.Clock] {
			return fmt.Errorf("%w: clock %d buffered twice", ErrCorruptCheckpoint, pc.Clock)
		}
		clocks[pc.Clock] = true
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
	e := encoder{append(dst, checkpointMagic...)}
	start := len(dst)
	e.u32(CheckpointVersion)
	e.str(ck.Optimizer)
	e.u32(uint32(ck.Slots))
	e.i64(int64(ck.Flushed))
	e.u64(ck.LogGen)
	e.u32(uint32(len(ck.Keys)))
	for _, k := range ck.Keys {
		e.u64(k.Key)
		e.u32(uint32(k.Len))
		e.i64(k.Steps)
	}
	e.f32s(ck.Values)
	e.f32s(ck.State)
	e.u32(uint32(len(ck.Pending)))
	for _, pc := range ck.Pending {
		e.i64(int64(pc.Clock))
		e.u32(uint32(len(pc.Entries)))
		for _, pe := range pc.Entries {
			e.u32(uint32(pe.Index))
			e.f64(pe.Weight)
		}
		e.f32s(pc.Sum)
	}
	e.u32(uint32(len(ck.Clients)))
	for _, c := range ck.Clients {
		e.u64(c.Client)
		e.u64(c.Max)
		e.u64(c.Window)
	}
	e.u32(crc32.Checksum(e.b[start:], castagnoli))
	return e.b
}

// maxCheckpointSlots bounds the optimizer slots a checkpoint may declare
// (Adam has 2).
const maxCheckpointSlots = 16

// DecodeCheckpoint decodes a checkpoint written by EncodeCheckpoint.
// Errors wrap ErrCorruptCheckpoint (or ErrWireVersion for another format
// version) and say what is wrong.
func DecodeCheckpoint(b []byte) (*Checkpoint, error) {
	if len(b) < len(checkpointMagic)+4+4 || string(b[:len(checkpointMagic)]) != checkpointMagic {
		return nil, fmt.Errorf("%w: no checkpoint magic (%d bytes)", ErrCorruptCheckpoint, len(b))
	}
	body := b[len(checkpointMagic) : len(b)-4]
	if v := binary.LittleEndian.Uint32(body); v != CheckpointVersion {
		return nil, fmt.Errorf("%w: checkpoint version %d, this build reads %d", ErrWireVersion, v, CheckpointVersion)
	}
	if got, want := binary.LittleEndian.Uint32(b[len(b)-4:]), crc32.Checksum(b[:len(b)-4], castagnoli); got != want {
		return nil, fmt.Errorf("%w: checksum %08x, computed %08x (truncated or damaged)", ErrCorruptCheckpoint, got, want)
	}
	d := decoder{b: body[4:]}
	ck := &Checkpoint{}
	ck.Optimizer = d.str()
	ck.Slots = int(d.u32())
	ck.Flushed = d.int(-1, 1<<62, "flushed clock")
	ck.LogGen = d.u64()
	if d.err == nil && ck.Slots > maxCheckpointSlots {
		return nil, fmt.Errorf("%w: %d optimizer slots", ErrCorruptCheckpoint, ck.Slots)
	}
	nk := int(d.u32())
	if d.err == nil && nk > len(d.b)/20 {
		return nil, fmt.Errorf("%w: %d keys in %d bytes", ErrCorruptCheckpoint, nk, len(d.b))
	}
	total := 0
	ck.Keys = make([]CheckpointKey, 0, nk)
	for range nk {
		k := CheckpointKey{Key: d.u64(), Len: int(d.u32()), Steps: d.i64()}
		if d.err != nil {
			break
		}
		if k.Len <= 0 || k.Len > len(d.b)/4-total {
			return nil, fmt.Errorf("%w: key %d with length %d exceeds the file", ErrCorruptCheckpoint, k.Key, k.Len)
		}
		total += k.Len
		ck.Keys = append(ck.Keys, k)
	}
	if d.err == nil && total*(1+ck.Slots) > len(d.b)/4 {
		return nil, fmt.Errorf("%w: %d values and %d slots exceed the file", ErrCorruptCheckpoint, total, ck.Slots)
	}
	ck.Values = readF32s(&d, total)
	ck.State = readF32s(&d, total*ck.Slots)
	np := int(d.u32())
	if d.err == nil && np > len(d.b)/12 {
		return nil, fmt.Errorf("%w: %d pending clocks in %d bytes", ErrCorruptCheckpoint, np, len(d.b))
	}
	for range np {
		if d.err != nil {
			break
		}
		pc := PendingClock{Clock: d.int(-1<<62, 1<<62, "clock")}
		ne := int(d.u32())
		if d.err == nil && (ne > len(d.b)/12 || ne > len(ck.Keys)) {
			return nil, fmt.Errorf("%w: clock %d with %d entries", ErrCorruptCheckpoint, pc.Clock, ne)
		}
		n := 0
		for range ne {
			pe := PendingEntry{Index: int(d.u32()), Weight: d.f64()}
			if d.err != nil {
				break
			}
			if pe.Index >= len(ck.Keys) {
				return nil, fmt.Errorf("%w: clock %d: entry %d of %d keys", ErrCorruptCheckpoint, pc.Clock, pe.Index, len(ck.Keys))
			}
			n += ck.Keys[pe.Index].Len
			pc.Entries = append(pc.Entries, pe)
		}
		if d.err == nil && n > len(d.b)/4 {
			return nil, fmt.Errorf("%w: clock %d: %d sums exceed the file", ErrCorruptCheckpoint, pc.Clock, n)
		}
		pc.Sum = readF32s(&d, n)
		ck.Pending = append(ck.Pending, pc)
	}
	nc := int(d.u32())
	if d.err == nil && nc > len(d.b)/24 {
		return nil, fmt.Errorf("%w: %d clients in %d bytes", ErrCorruptCheckpoint, nc, len(d.b))
	}
	for range nc {
		c := ClientWindow{Client: d.u64(), Max: d.u64(), Window: d.u64()}
		if d.err != nil {
			break
		}
		ck.Clients = append(ck.Clients, c)
	}
	if err := d.end(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptCheckpoint, err)
	}
	if err := ck.check(); err != nil {
		return nil, err
	}
	return ck, nil
}

// readF32s reads n float32s (the caller has checked that they fit).
func readF32s(d *decoder, n int) []float32 {
	b := d.bytes(4 * n)
	if b == nil || n == 0 {
		return nil
	}
	v := make([]float32, n)
	getF32s(v, b)
	return v
}

// WriteCheckpointFile writes ck to path atomically (WriteFileAtomic): a
// crash during the write leaves the previous checkpoint in place.
func WriteCheckpointFile(path string, ck *Checkpoint) error {
	b := EncodeCheckpoint(nil, ck)
	return WriteFileAtomic(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
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
