package ps

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// withCRC returns b (without its last 4 bytes) followed by a valid CRC-32C,
// so that the fuzzer reaches the decoder past the checksum.
func withCRC(b []byte) []byte {
	b = append([]byte(nil), b[:max(len(b)-4, 0)]...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// FuzzCheckpointDecode: no input makes DecodeCheckpoint panic or allocate
// more than the input can hold; whatever it accepts re-encodes to the
// same bytes. The fuzzer's input gets a valid checksum half of the time
// (the first byte chooses), so the field checks are reached. The seeds
// (valid checkpoints with Adam state, pending clocks and client windows,
// and damaged ones) run in every normal test run.
func FuzzCheckpointDecode(f *testing.F) {
	s := shardedStores(f, 1, KeyRange{Servers: 1}, Adam{LR: 0.01}, ckKeys[:3], ckLens[:3], 2, true)[0]
	ck := s.Checkpoint()
	ck.Clients = []ClientWindow{{Client: 1, Max: 9, Window: 3}}
	good := EncodeCheckpoint(nil, ck)
	empty, _ := NewStore(StoreConfig{})
	for _, seed := range [][]byte{good, good[:len(good)/2], EncodeCheckpoint(nil, empty.Checkpoint()), []byte(checkpointMagic)} {
		f.Add(append([]byte{0}, seed...))
		f.Add(append([]byte{1}, seed...))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		b := in[1:]
		if in[0]&1 == 1 {
			b = withCRC(b)
		}
		ck, err := DecodeCheckpoint(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) && !errors.Is(err, ErrWireVersion) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		if again := EncodeCheckpoint(nil, ck); !bytes.Equal(again, b) {
			t.Fatalf("accepted %d bytes that re-encode to %d other bytes", len(b), len(again))
		}
		st, _ := NewStore(StoreConfig{Optimizer: fuzzOpt{ck.Optimizer, ck.Slots}})
		if err := st.Restore(ck); err != nil && !errors.Is(err, ErrCorruptCheckpoint) {
			t.Fatalf("restore: %v", err)
		}
	})
}

// fuzzOpt is an optimizer with any name and slot count, so that a decoded
// checkpoint can be restored.
type fuzzOpt struct {
	name  string
	slots int
}

func (o fuzzOpt) Name() string                                           { return o.name }
func (o fuzzOpt) Slots() int                                             { return o.slots }
func (fuzzOpt) Update(w, g []float32, _ float32, _ [][]float32, _ int64) {}
