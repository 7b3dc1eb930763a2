package ps

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/falconml/falcon/ps/internal/wire"
)

// TestCheckpoint_OrphansRemovedAtStart: temporary files that a crash
// during checkpoint writes left (and a log older than the checkpoint)
// are removed when the server starts; the checkpoint itself is
// untouched and restored, and another server's files are left alone.
func TestCheckpoint_OrphansRemovedAtStart(t *testing.T) {
	dir := t.TempDir()
	cfg := DurableConfig{Dir: dir, Log: true}
	s, err := headerServer(t, "server-0", cfg, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := filepath.Join(dir, "server-0.ckpt")
	ck, _ := os.ReadFile(path)
	orphans := []string{".server-0.ckpt.tmp-123", ".server-0.ckpt.tmp-4567", "server-0.log.0"}
	for _, o := range orphans {
		os.WriteFile(filepath.Join(dir, o), ck[:len(ck)/2], 0o644)
	}
	other := filepath.Join(dir, ".server-1.ckpt.tmp-9")
	os.WriteFile(other, ck, 0o644)
	r, err := headerServer(t, "server-0", cfg, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range orphans {
		if _, err := os.Stat(filepath.Join(dir, o)); err == nil {
			t.Errorf("%s is still there after the start", o)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another server's temporary file was removed: %v", err)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, ck) {
		t.Error("the checkpoint changed")
	}
	if v, ok := r.store.Value(nil, 10); !ok || v[0] != 1 {
		t.Errorf("restored key 10 = %v (%v), want 1", v, ok)
	}
}

// TestCheckpoint_LogRotatedBySize: with LogMaxBytes and no other
// schedule, checkpoints keep the request log below LogMaxBytes: after 300
// pushes of ~100-byte records only the current log is on disk, below the
// bound, and the restart has every push. A config with Log and no
// schedule at all gets DefaultLogMaxBytes.
func TestCheckpoint_LogRotatedBySize(t *testing.T) {
	dir := t.TempDir()
	const limit = 1024
	cfg := ServerConfig{Store: StoreConfig{Optimizer: Adam{LR: 0.1}}, Durable: DurableConfig{Dir: dir, Log: true, LogMaxBytes: limit}}
	s, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.store.InitValues([]uint64{1}, []int{1}, []float32{0.5}); err != nil {
		t.Fatal(err)
	}
	const pushes = 300
	for seq := range uint64(pushes) {
		if _, err := s.HandleRequest(ctx, "c", idPush(3, seq+1, float32(seq%7)-3)); err != nil {
			t.Fatal(err)
		}
	}
	s.dur.ckWG.Wait() // no request runs: the background checkpoint ends
	logs, _ := filepath.Glob(filepath.Join(dir, "s.log.*"))
	if s.dur.gen == 0 || len(logs) != 1 || logs[0] != s.logPath(s.dur.gen) {
		t.Fatalf("after %d pushes: log generation %d, logs on disk %v; want the log rotated and only the current one kept", pushes, s.dur.gen, logs)
	}
	if fi, err := os.Stat(logs[0]); err != nil || fi.Size() >= limit {
		t.Fatalf("the current log holds %d bytes (%v), want < %d", fi.Size(), err, limit)
	}
	r, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !slices.Equal(f32Bits(r.store.Checkpoint().Values), f32Bits(s.store.Checkpoint().Values)) || r.store.Steps(1) != pushes {
		t.Fatalf("restart holds %v (%d steps), want %v (%d)", r.store.Checkpoint().Values, r.store.Steps(1), s.store.Checkpoint().Values, pushes)
	}

	d, err := NewServer("d", ServerConfig{Durable: DurableConfig{Dir: dir, Log: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.dur.cfg.LogMaxBytes != DefaultLogMaxBytes {
		t.Fatalf("a log with no schedule is bounded at %d bytes, want DefaultLogMaxBytes", d.dur.cfg.LogMaxBytes)
	}
}

// TestCheckpoint_FailedWriteLosesNothing: a checkpoint that begins (the
// log rotated) but is never written — its write fails, as a crash would
// leave it — loses no update: the restart replays the log it began and
// the one before.
func TestCheckpoint_FailedWriteLosesNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := ServerConfig{Store: StoreConfig{Optimizer: Adam{LR: 0.1}}, Durable: DurableConfig{Dir: dir, Log: true}}
	s, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	e := wire.NewMsg(nil, wire.OpInit)
	e.U32(1)
	e.U64(1)
	e.U32(1)
	e.Pad4()
	e.F32s([]float32{0.5})
	if _, err := s.HandleRequest(ctx, "c", e.B); err != nil {
		t.Fatal(err)
	}
	s.HandleRequest(ctx, "c", idPush(3, 1, 1))
	s.dur.hook = func(stage string) {
		if stage == "copied" { // a directory where the file goes: the rename fails
			os.Mkdir(filepath.Join(dir, "s.ckpt"), 0o755)
		}
	}
	if err := s.Checkpoint(); err == nil {
		t.Fatal("the checkpoint over a directory succeeded")
	}
	s.dur.hook = nil
	os.Remove(filepath.Join(dir, "s.ckpt"))
	s.HandleRequest(ctx, "c", idPush(3, 2, -2)) // into the log the checkpoint began
	if s.dur.gen != 1 {
		t.Fatalf("log generation %d, want 1", s.dur.gen)
	}
	r, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !slices.Equal(f32Bits(r.store.Checkpoint().Values), f32Bits(s.store.Checkpoint().Values)) || r.store.Steps(1) != 2 {
		t.Fatalf("restart holds %v (%d steps), want %v (2)", r.store.Checkpoint().Values, r.store.Steps(1), s.store.Checkpoint().Values)
	}
}

// countHandler counts the log records at warning level and above.
type countHandler struct{ n *atomic.Int64 }

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.n.Add(1)
	}
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// TestCheckpoint_FailingScheduleBacksOff: a scheduled checkpoint that
// cannot begin (its next log cannot be created) is logged once and tried
// again after another LogMaxBytes of log, not at every update; Close
// returns its error. The pushes are all applied and logged meanwhile.
func TestCheckpoint_FailingScheduleBacksOff(t *testing.T) {
	dir := t.TempDir()
	var warned atomic.Int64
	cfg := ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}, Durable: DurableConfig{Dir: dir, Log: true, LogMaxBytes: 1024}}
	s, err := NewServer("s", cfg, WithLogger(slog.New(countHandler{&warned})))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.store.InitValues([]uint64{1}, []int{1}, []float32{0}); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(s.logPath(1), 0o755) // a directory where the next log goes
	ctx := context.Background()
	rec := 0
	for seq := uint64(1); ; seq++ {
		if _, err := s.HandleRequest(ctx, "c", idPush(3, seq, -1)); err != nil {
			t.Fatal(err)
		}
		s.dur.ckWG.Wait() // one push at a time: each sees the last attempt's end
		if rec == 0 && warned.Load() == 1 {
			rec = int(seq) // the first failure
		}
		if rec > 0 && int(seq) == rec+5 {
			break
		}
	}
	if n := warned.Load(); n != 1 {
		t.Fatalf("%d failed attempts logged for 5 pushes after the first, want 1", n)
	}
	if v, _ := s.store.Value(nil, 1); v[0] != float32(rec+5) {
		t.Fatalf("value %v after %d pushes", v[0], rec+5)
	}
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "checkpoint") {
		t.Fatalf("Close: %v, want the failed checkpoint's error", err)
	}
}
