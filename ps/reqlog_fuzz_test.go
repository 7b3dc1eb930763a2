package ps

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/falconml/falcon/ps/internal/wire"
)

// framedLog returns a request log (format 3) whose records are the
// chunks of b: each a length byte (0 read as 1) and that many bytes,
// each given a valid header, so that the fuzzer reaches the replay of
// the requests past the checksums.
func framedLog(b []byte) []byte {
	out := logHeader(0)
	for len(b) > 0 {
		n := max(int(b[0]), 1)
		b = b[1:]
		body := b[:min(n, len(b))]
		b = b[len(body):]
		if len(body) == 0 {
			break
		}
		out = appendLogRecord(out, logSeed(0), body, nil)
	}
	return out
}

// frames is the inverse of framedLog for seeds: bodies of at most 255
// bytes as chunks.
func frames(bodies ...[]byte) []byte {
	var out []byte
	for _, b := range bodies {
		out = append(append(out, byte(len(b))), b...)
	}
	return out
}

// FuzzRequestLogReplay: arbitrary bytes as a server's request log — raw
// (first byte even), or cut into records with valid checksums (odd) —
// make NewServer either start or refuse with ErrCorruptCheckpoint, never
// panic, and allocate no record larger than the file; a log it started
// from is left valid: a second start replays it to the same state. The
// seeds (a valid log, one with the bit-20 flip of issue 25, a torn tail,
// a format-1 log, framed init/push/accumulate/flush requests, a
// Deterministic server's sender-tagged accumulates) run in every normal
// test run.
func FuzzRequestLogReplay(f *testing.F) {
	_, path := loggedServer(f)
	good, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[logHeaderLen+recHeaderLen+int(binary.LittleEndian.Uint32(good[logHeaderLen:]))+2] ^= 1 << 4
	acc := &Client{}
	pa := pushArgs{mode: wire.ModeAccumulate, clock: 3, scale: 1, weight: 2, rid: reqID{9, 1}}
	accumulate := acc.encode(nil, wire.OpPush, []piece{{key: 1, n: 1}}, 1, []float32{0.5}, pa)
	flush := wire.NewMsg(nil, wire.OpFlush)
	flush.I64(3)
	flush.F64(-1)
	for _, seed := range [][]byte{good, flipped, good[:len(good)-3], good[logHeaderLen:], good[:7]} {
		f.Add(append([]byte{0}, seed...))
	}
	f.Add(append([]byte{1}, frames(initN(2, 1), pushN(5, 1, 1, 1), accumulate, flush.B, pushN(5, 1, 1, 1))...))
	// a Deterministic server's log (first byte's bit 1): accumulates
	// naming their senders, a tag cut short, a tag with no request
	pa.rid = reqID{9, 2}
	accumulate2 := acc.encode(nil, wire.OpPush, []piece{{key: 1, n: 1}}, 1, []float32{0.25}, pa)
	tagged := func(sender string, req []byte) []byte { return append(fromTag(nil, sender), req...) }
	f.Add(append([]byte{3}, frames(initN(2, 1), tagged("worker-1", accumulate), tagged("worker-0", accumulate2), flush.B)...))
	f.Add(append([]byte{3}, frames(initN(2, 1), []byte{logFromTag, 200, 'w'}, tagged("", nil), flush.B)...))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		b := in[1:]
		if in[0]&1 == 1 {
			b = framedLog(b)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "s.log.0"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		// a fixed run: the snapshots compared name it
		cfg := ServerConfig{Store: StoreConfig{Optimizer: Adam{LR: 0.1}, Deterministic: in[0]&2 != 0}, Durable: DurableConfig{Dir: dir, Log: true, RunID: "fuzz"}}
		quiet := WithLogger(slog.New(slog.DiscardHandler)) // skipped records are logged
		s, err := NewServer("s", cfg, quiet)
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) {
				t.Fatalf("refused without ErrCorruptCheckpoint: %v", err)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, "s.log.0")); !bytes.Equal(got, b) {
				t.Fatal("a refused log was changed")
			}
			return
		}
		first := EncodeCheckpoint(nil, s.Snapshot())
		s.Close()
		r, err := NewServer("s", cfg, quiet)
		if err != nil {
			t.Fatalf("the log a start left is refused by the next: %v", err)
		}
		defer r.Close()
		if again := EncodeCheckpoint(nil, r.Snapshot()); !bytes.Equal(again, first) {
			t.Fatal("a second start from the same log restored another state")
		}
	})
}
