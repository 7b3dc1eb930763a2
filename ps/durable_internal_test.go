package ps

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/ps/metrics"
)

// idPush encodes a push of one value to key 1 with request id (client, seq).
func idPush(client, seq uint64, g float32) []byte {
	cl := &Client{}
	pa := plainPush
	pa.rid = reqID{client, seq}
	return cl.encode(nil, wire.OpPush, []piece{{key: 1, n: 1}}, 1, []float32{g}, pa)
}

// TestServer_RequestIDsApplyOnce: a push resent with the same request id
// is answered and not applied again, in any order and across a window of
// 64 sequence numbers; other clients' ids are independent.
func TestServer_RequestIDsApplyOnce(t *testing.T) {
	s, err := NewServer("s", ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.store.InitValues([]uint64{1}, []int{1}, []float32{0}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	send := func(client, seq uint64) {
		resp, err := s.HandleRequest(ctx, "c", idPush(client, seq, -1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wire.ParseResponse(resp, "s"); err != nil {
			t.Fatal(err)
		}
	}
	seqs := []uint64{1, 2, 2, 5, 3, 5, 1, 70, 4, 3, 69, 70, 6, 200, 136, 137, 136}
	applied := map[[2]uint64]bool{}
	highest := map[uint64]uint64{}
	want := float32(0)
	for i, seq := range seqs {
		client := uint64(7)
		if i%5 == 4 {
			client = 8
		}
		send(client, seq)
		k := [2]uint64{client, seq}
		// more than 64 behind the highest is taken as applied (4 after 70)
		if !applied[k] && seq+64 >= highest[client] {
			applied[k] = true
			want++
		}
		highest[client] = max(highest[client], seq)
	}
	// 6 of client 7 arrives after 70: 64 behind, still in the window.
	if want != 11 {
		t.Fatalf("test expects 11 distinct applicable ids, counted %v", want)
	}
	got, _ := s.store.Value(nil, 1)
	if got[0] != want {
		t.Fatalf("value %v, want %v (each distinct id applied once)", got[0], want)
	}
}

// TestServer_TornLogRecordCut: a kill in the middle of writing a log
// record leaves a torn tail; the restart cuts it and restores every
// acknowledged update.
func TestServer_TornLogRecordCut(t *testing.T) {
	dir := t.TempDir()
	cfg := ServerConfig{Store: StoreConfig{Optimizer: Adam{LR: 0.1}}, Durable: DurableConfig{Dir: dir, Log: true}}
	s, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
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
	for seq := range uint64(5) {
		s.HandleRequest(ctx, "c", idPush(3, seq+1, float32(seq)))
	}
	want := slices.Clone(s.store.Checkpoint().Values)
	wantState := slices.Clone(s.store.Checkpoint().State)
	path := filepath.Join(dir, "s.log.0")
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte{40, 0, 0, 0, 1, 2, 3}) // a header and part of a body
	f.Close()
	r, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !slices.Equal(f32Bits(r.store.Checkpoint().Values), f32Bits(want)) || !slices.Equal(f32Bits(r.store.Checkpoint().State), f32Bits(wantState)) || r.store.Steps(1) != 5 {
		t.Fatalf("restored %v (state %v, %d steps), want %v (%v, 5)", r.store.Checkpoint().Values, r.store.Checkpoint().State, r.store.Steps(1), want, wantState)
	}
	// a resent push of the first run is recognised after the restart
	r.HandleRequest(ctx, "c", idPush(3, 5, 100))
	if r.store.Steps(1) != 5 {
		t.Fatal("a push applied before the restart was applied again")
	}
	s.Close()
}

// TestServer_CheckpointPeriod: with CheckpointPeriod (for policies that
// never flush) the first update after the period writes a checkpoint
// holding it, and a restart from it has the same state.
func TestServer_CheckpointPeriod(t *testing.T) {
	dir := t.TempDir()
	cfg := ServerConfig{Store: StoreConfig{Optimizer: Momentum{LR: 0.1, Mu: 0.9}}, Durable: DurableConfig{Dir: dir, CheckpointPeriod: 20 * time.Millisecond}}
	s, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.store.InitValues([]uint64{1}, []int{1}, []float32{1}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.HandleRequest(ctx, "c", idPush(1, 1, 0.5))
	if _, err := os.Stat(filepath.Join(dir, "s.ckpt")); err == nil {
		t.Fatal("checkpoint written before its period")
	}
	time.Sleep(25 * time.Millisecond)
	s.HandleRequest(ctx, "c", idPush(1, 2, 0.25))
	s.dur.ckWG.Wait() // the checkpoint runs in the background
	r, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !slices.Equal(f32Bits(r.store.Checkpoint().Values), f32Bits(s.store.Checkpoint().Values)) || !slices.Equal(f32Bits(r.store.Checkpoint().State), f32Bits(s.store.Checkpoint().State)) || r.store.Steps(1) != 2 {
		t.Fatalf("restored %v %v (%d steps), want %v %v (2)", r.store.Checkpoint().Values, r.store.Checkpoint().State, r.store.Steps(1), s.store.Checkpoint().Values, s.store.Checkpoint().State)
	}
}

// TestServer_CloseCutsQueuedCheckpoint: a background checkpoint queued
// when Close begins finds the server closed and does not run; that is
// not a failed checkpoint, so Close returns nil and no failure is
// metered (TestScrape failed with "checkpoint: server closed" when a 1 ms
// checkpoint period queued one just before its cluster's Close).
func TestServer_CloseCutsQueuedCheckpoint(t *testing.T) {
	rec := &ckRecorder{}
	cfg := ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 0.1}}, Durable: DurableConfig{Dir: t.TempDir(), CheckpointPeriod: time.Millisecond}}
	s, err := NewServer("s", cfg, WithMetrics(rec))
	if err != nil {
		t.Fatal(err)
	}
	// the schedule queued a checkpoint; Close marks the server closed
	// before the checkpoint's goroutine begins it
	s.mu.Lock()
	s.dur.closed = true
	s.dur.ckState = ckQueued
	s.dur.ckWG.Add(1)
	s.mu.Unlock()
	go s.background()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v; want nil (the checkpoint was cut by the close, not failed)", err)
	}
	if n := rec.failed.Load(); n != 0 {
		t.Fatalf("%d failed checkpoints metered, want 0", n)
	}
}

type ckRecorder struct {
	metrics.Nop
	failed atomic.Int64
}

func (r *ckRecorder) Checkpoint(_ string, _ time.Duration, err error) {
	if err != nil {
		r.failed.Add(1)
	}
}
