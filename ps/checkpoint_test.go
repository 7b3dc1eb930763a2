package ps

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// shardedStores builds the stores of a cluster of n servers placed by
// part: keys of lengths lens, initial values and a few steps of opt (so
// the optimizer state is not zero), and, if pending, a buffered clock.
func shardedStores(t testing.TB, n int, part Partitioner, opt Optimizer, keys []uint64, lens []int, steps int, pending bool) []*Store {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	stores := make([]*Store, n)
	for i := range stores {
		s, err := NewStore(StoreConfig{Optimizer: opt})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	full := func() [][]float32 {
		out := make([][]float32, len(keys))
		for i := range keys {
			out[i] = make([]float32, lens[i])
			for j := range out[i] {
				out[i][j] = rng.Float32()*2 - 1
			}
		}
		return out
	}
	apply := func(vals [][]float32, do func(s *Store, k uint64, v []float32) error) {
		for i, k := range keys {
			for _, sg := range part.Locate(nil, k, lens[i]) {
				if err := do(stores[sg.Server], k, vals[i][sg.Off:sg.Off+sg.Len]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	apply(full(), func(s *Store, k uint64, v []float32) error { return s.InitValues([]uint64{k}, []int{len(v)}, v) })
	for range steps {
		apply(full(), func(s *Store, k uint64, v []float32) error { return s.Apply([]uint64{k}, nil, v, 1) })
	}
	if pending {
		apply(full(), func(s *Store, k uint64, v []float32) error { return s.Accumulate(2, []uint64{k}, nil, v, 3) })
	}
	return stores
}

var ckKeys, ckLens = []uint64{1, 5, 1 << 62, 3 << 62, 1<<64 - 1}, []int{3, 40, 17, 1, 64}

// TestCheckpoint_RoundTrip: encode, decode and restore give back the
// store bit for bit, including optimizer state, steps and buffered
// clocks; the restored store then evolves exactly as the original.
func TestCheckpoint_RoundTrip(t *testing.T) {
	for _, opt := range []Optimizer{SGD{LR: 0.1}, Momentum{LR: 0.1, Mu: 0.9}, Adam{LR: 0.01}} {
		s := shardedStores(t, 1, KeyRange{Servers: 1}, opt, ckKeys, ckLens, 3, true)[0]
		ck := s.Checkpoint()
		ck.Flushed, ck.LogGen, ck.Clients = 4, 9, []ClientWindow{{Client: 3, Max: 70, Window: 0xf0}}
		dec, err := DecodeCheckpoint(EncodeCheckpoint(nil, ck))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(dec, ck) {
			t.Fatalf("%s: decoded checkpoint differs", opt.Name())
		}
		r, _ := NewStore(StoreConfig{Optimizer: opt})
		if err := r.Restore(dec); err != nil {
			t.Fatal(err)
		}
		for _, st := range []*Store{s, r} {
			st.Flush(2, 1)
			if err := st.Apply([]uint64{5}, nil, make([]float32, 40), 1); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(f32Bits(s.Checkpoint().Values), f32Bits(r.Checkpoint().Values)) || !slices.Equal(f32Bits(s.Checkpoint().State), f32Bits(r.Checkpoint().State)) || s.Steps(5) != r.Steps(5) {
			t.Fatalf("%s: restored store diverges", opt.Name())
		}
		wrong, _ := NewStore(StoreConfig{Optimizer: SGD{LR: 0.5}})
		if err := wrong.Restore(dec); opt != (SGD{LR: 0.5}) && !errors.Is(err, ErrCorruptCheckpoint) {
			t.Fatalf("restore with another optimizer: %v", err)
		}
	}
}

// TestCheckpoint_DamageRefused: every truncation and every single-bit
// flip of a checkpoint is refused with ErrCorruptCheckpoint (or
// ErrWireVersion for a flip in the version), never accepted or a panic.
func TestCheckpoint_DamageRefused(t *testing.T) {
	s := shardedStores(t, 1, KeyRange{Servers: 1}, Adam{LR: 0.01}, ckKeys[:3], ckLens[:3], 2, true)[0]
	b := EncodeCheckpoint(nil, s.Checkpoint())
	for n := range len(b) {
		if _, err := DecodeCheckpoint(b[:n]); !errors.Is(err, ErrCorruptCheckpoint) {
			t.Fatalf("truncated to %d of %d bytes: err %v", n, len(b), err)
		}
	}
	for bit := range 8 * len(b) {
		c := slices.Clone(b)
		c[bit/8] ^= 1 << (bit % 8)
		if _, err := DecodeCheckpoint(c); !errors.Is(err, ErrCorruptCheckpoint) && !errors.Is(err, ErrWireVersion) {
			t.Fatalf("bit %d flipped: err %v", bit, err)
		}
	}
}

// TestCheckpoint_File: the file form round-trips; a crash in the middle
// of writing the next checkpoint (a torn temporary file) leaves the last
// one readable; a damaged file is refused naming it.
func TestCheckpoint_File(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "server-0.ckpt")
	s := shardedStores(t, 1, KeyRange{Servers: 1}, SGD{LR: 0.1}, ckKeys, ckLens, 1, false)[0]
	ck := s.Checkpoint()
	if err := WriteCheckpointFile(path, ck); err != nil {
		t.Fatal(err)
	}
	b := EncodeCheckpoint(nil, ck)
	os.WriteFile(filepath.Join(dir, ".server-0.ckpt.tmp-1"), b[:len(b)/2], 0o644)
	got, err := ReadCheckpointFile(path)
	if err != nil || !reflect.DeepEqual(got, ck) {
		t.Fatalf("read back: %v", err)
	}
	b[len(b)/2] ^= 0x10
	os.WriteFile(path, b, 0o644)
	if _, err := ReadCheckpointFile(path); !errors.Is(err, ErrCorruptCheckpoint) || !contains(err.Error(), "server-0.ckpt") {
		t.Fatalf("damaged file: err %v", err)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub))
}

// TestReshard_BitForBit: checkpoints of 3 servers, with keys split across
// servers (MaxSegment 16) and Adam state, restore onto 2 and onto 4
// servers with every value, state element and step equal, and the
// resharded clusters take the next step exactly as the original.
func TestReshard_BitForBit(t *testing.T) {
	from := KeyRange{Servers: 3, MaxSegment: 16}
	opt := Adam{LR: 0.01}
	old := shardedStores(t, 3, from, opt, ckKeys, ckLens, 3, false)
	var cks []*Checkpoint
	for _, s := range old {
		cks = append(cks, s.Checkpoint())
	}
	fullOf := func(stores []*Store, part Partitioner) (vals, state [][]float32, steps []int64) {
		for i, k := range ckKeys {
			n := ckLens[i]
			v := make([]float32, n)
			st := make([]float32, n*opt.Slots())
			var step int64
			for _, sg := range part.Locate(nil, k, n) {
				ck := stores[sg.Server].Checkpoint()
				off := 0 // the key's values start after those of the keys before it
				for _, ek := range ck.Keys {
					if ek.Key == k {
						copy(v[sg.Off:], ck.Values[off:off+ek.Len])
						for sl := range opt.Slots() {
							copy(st[sl*n+sg.Off:], ck.State[off*opt.Slots()+sl*ek.Len:][:ek.Len])
						}
						step = ek.Steps
						break
					}
					off += ek.Len
				}
			}
			vals, state, steps = append(vals, v), append(state, st), append(steps, step)
		}
		return
	}
	step := func(stores []*Store, part Partitioner) {
		for i, k := range ckKeys {
			g := make([]float32, ckLens[i])
			for j := range g {
				g[j] = float32(j%5) - 2
			}
			for _, sg := range part.Locate(nil, k, ckLens[i]) {
				if err := stores[sg.Server].Apply([]uint64{k}, nil, g[sg.Off:sg.Off+sg.Len], 1); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	wantV, wantS, wantSteps := fullOf(old, from)
	step(old, from)
	nextV, _, _ := fullOf(old, from)
	for _, n := range []int{2, 4} {
		to := KeyRange{Servers: n, MaxSegment: 16}
		// through the encoded form, as a restart would
		var enc []*Checkpoint
		for _, ck := range cks {
			d, err := DecodeCheckpoint(EncodeCheckpoint(nil, ck))
			if err != nil {
				t.Fatal(err)
			}
			enc = append(enc, d)
		}
		re, err := Reshard(enc, from, to, n)
		if err != nil {
			t.Fatal(err)
		}
		stores := make([]*Store, n)
		for i, ck := range re {
			stores[i], _ = NewStore(StoreConfig{Optimizer: opt})
			if err := stores[i].Restore(ck); err != nil {
				t.Fatal(err)
			}
		}
		gotV, gotS, gotSteps := fullOf(stores, to)
		for i := range ckKeys {
			if !slices.Equal(f32Bits(gotV[i]), f32Bits(wantV[i])) || !slices.Equal(f32Bits(gotS[i]), f32Bits(wantS[i])) || gotSteps[i] != wantSteps[i] {
				t.Fatalf("3→%d servers: key %d differs", n, ckKeys[i])
			}
		}
		step(stores, to)
		gotNext, _, _ := fullOf(stores, to)
		for i := range ckKeys {
			if !slices.Equal(f32Bits(gotNext[i]), f32Bits(nextV[i])) {
				t.Fatalf("3→%d servers: key %d diverges after a step", n, ckKeys[i])
			}
		}
	}
	pend := shardedStores(t, 3, from, opt, ckKeys, ckLens, 1, true)
	if _, err := Reshard([]*Checkpoint{pend[0].Checkpoint(), pend[1].Checkpoint(), pend[2].Checkpoint()}, from, KeyRange{Servers: 2}, 2); err == nil {
		t.Fatal("resharded a checkpoint with pending gradients")
	}
}

// TestCheckpoint_StreamedLarge: a checkpoint of many buffers' worth
// (WriteCheckpoint writes through a 64 KiB buffer) round-trips through
// a file bit for bit, the checksum running across every piece.
func TestCheckpoint_StreamedLarge(t *testing.T) {
	s := shardedStores(t, 1, KeyRange{Servers: 1}, Adam{LR: 0.01}, []uint64{1, 2, 3}, []int{100003, 7, 65536}, 2, true)[0]
	ck := s.Checkpoint()
	ck.RunID, ck.Server = "r", "server-0"
	path := filepath.Join(t.TempDir(), "server-0.ckpt")
	if err := WriteCheckpointFile(path, ck); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCheckpointFile(path)
	if err != nil || !reflect.DeepEqual(got, ck) {
		t.Fatalf("read back: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Size() < 16<<16 /* sixteen of the writer's 64 KiB buffers */ {
		t.Fatalf("a %d-byte file tests no streaming", fi.Size())
	}
}
