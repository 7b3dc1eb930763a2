package ps

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/falconml/falcon/ps/store"
)

// withCRC returns b (without its last 4 bytes) followed by a valid CRC-32C,
// so that the fuzzer reaches the decoder past the checksum.
func withCRC(b []byte) []byte {
	b = append([]byte(nil), b[:max(len(b)-4, 0)]...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// FuzzCheckpointDecode: no input makes DecodeCheckpoint panic or allocate
// more than the input can hold; whatever it accepts re-encodes to the
// same bytes, whether appended (EncodeCheckpoint) or streamed to a writer
// (WriteCheckpoint, as files are written), and a streamed write that fails part way returns the error;
// its header is accepted by the server it names and refused, with
// ErrCheckpointMismatch, by any other. The fuzzer's input gets a valid
// checksum half of the time (the first byte chooses), so the field
// checks are reached. The seeds (valid checkpoints with headers, Adam
// state, pending clocks and client windows, a Deterministic store's
// per-sender pending buffers; ones of format versions 1 and 2;
// damaged ones) run in every normal test run.
func FuzzCheckpointDecode(f *testing.F) {
	s := shardedStores(f, 1, KeyRange{Servers: 1}, Adam{LR: 0.01}, ckKeys[:3], ckLens[:3], 2, true)[0]
	ck := s.Checkpoint()
	ck.Clients = []ClientWindow{{Client: 1, Max: 9, Window: 3}}
	ck.RunID, ck.Server, ck.Layout = "0123456789abcdef", "server-0", LayoutHash(Modulo{Servers: 2}, 2)
	good := EncodeCheckpoint(nil, ck)
	v1 := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(v1[len("FLCNPSCK"):], 1)
	empty, _ := NewStore(StoreConfig{})
	// a Deterministic store's pending buffers, one per sender
	det, _ := NewStore(StoreConfig{Deterministic: true})
	det.Init([]uint64{1, 2}, []int{2, 3}, Constant{C: 1})
	det.AccumulateFrom(0, "worker-1", []uint64{1, 2}, nil, []float32{1, 2, 3, 4, 5}, 4)
	det.AccumulateFrom(0, "worker-0", []uint64{2}, nil, []float32{6, 7, 8}, 2)
	v2 := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(v2[len("FLCNPSCK"):], 2)
	for _, seed := range [][]byte{good, good[:len(good)/2], withCRC(v1), withCRC(v2), EncodeCheckpoint(nil, empty.Checkpoint()), EncodeCheckpoint(nil, det.Checkpoint()), []byte("FLCNPSCK")} {
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
		var sw smallWriter
		if err := store.WriteCheckpoint(&sw, ck); err != nil || !bytes.Equal(sw.b, b) {
			t.Fatalf("streamed: %d bytes (%v), want the %d accepted", len(sw.b), err, len(b))
		}
		fail := &smallWriter{fail: len(b) / 2}
		if err := store.WriteCheckpoint(fail, ck); !errors.Is(err, errShortDisk) {
			t.Fatalf("a write failing after %d of %d bytes: err %v", fail.fail, len(b), err)
		}
		own := DurableConfig{RunID: ck.RunID, Layout: ck.Layout}
		if err := checkHeader(ck, ck.Server, own); err != nil {
			t.Fatalf("its own server refuses it: %v", err)
		}
		for _, other := range []DurableConfig{{RunID: ck.RunID + "x"}, {Layout: ck.Layout + 1}} {
			if err := checkHeader(ck, ck.Server, other); !errors.Is(err, ErrCheckpointMismatch) {
				t.Fatalf("run %q layout %x accepted for run %q layout %x: %v", other.RunID, other.Layout, ck.RunID, ck.Layout, err)
			}
		}
		if err := checkHeader(ck, ck.Server+"x", own); !errors.Is(err, ErrCheckpointMismatch) {
			t.Fatalf("server %q's checkpoint accepted by %q: %v", ck.Server, ck.Server+"x", err)
		}
		st, _ := NewStore(StoreConfig{Optimizer: fuzzOpt{ck.Optimizer, ck.Slots}})
		if err := st.Restore(ck); err != nil && !errors.Is(err, ErrCorruptCheckpoint) {
			t.Fatalf("restore: %v", err)
		}
	})
}

// errShortDisk is smallWriter's failure.
var errShortDisk = errors.New("test: disk full")

// smallWriter keeps what it is given; with fail > 0 it takes no more
// than fail bytes and then fails, as a full disk does.
type smallWriter struct {
	b    []byte
	fail int
}

func (w *smallWriter) Write(p []byte) (int, error) {
	if w.fail > 0 && len(w.b)+len(p) > w.fail {
		n := w.fail - len(w.b)
		w.b = append(w.b, p[:n]...)
		return n, errShortDisk
	}
	w.b = append(w.b, p...)
	return len(p), nil
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
