package ps

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// headerServer starts server name over dir with cfg's durable settings,
// and, when key is not zero, gives it key with value v and checkpoints it.
func headerServer(t *testing.T, name string, cfg DurableConfig, key uint64, v float32) (*Server, error) {
	t.Helper()
	s, err := NewServer(name, ServerConfig{Store: DefaultStoreConfig(), Durable: cfg})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Close() })
	if key != 0 {
		if err := s.store.InitValues([]uint64{key}, []int{1}, []float32{v}); err != nil {
			t.Fatal(err)
		}
		if err := s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	return s, nil
}

// TestCheckpoint_CopiedFileRefused (finding 10): server-1's checkpoint
// copied as server-0's is refused, the error naming both servers; the
// server's own file is accepted and restores its own key.
func TestCheckpoint_CopiedFileRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := DurableConfig{Dir: dir}
	for i, name := range []string{"server-0", "server-1"} {
		s, err := headerServer(t, name, cfg, uint64(10+i), float32(i+1))
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	own, _ := os.ReadFile(filepath.Join(dir, "server-0.ckpt"))
	other, _ := os.ReadFile(filepath.Join(dir, "server-1.ckpt"))
	os.WriteFile(filepath.Join(dir, "server-0.ckpt"), other, 0o644)
	_, err := headerServer(t, "server-0", cfg, 0, 0)
	if !errors.Is(err, ErrCheckpointMismatch) || !strings.Contains(err.Error(), `"server-1"`) || !strings.Contains(err.Error(), `"server-0"`) {
		t.Fatalf("server-1's checkpoint restored as server-0's: err %v, want ErrCheckpointMismatch naming both servers", err)
	}
	os.WriteFile(filepath.Join(dir, "server-0.ckpt"), own, 0o644)
	s, err := headerServer(t, "server-0", cfg, 0, 0)
	if err != nil {
		t.Fatalf("server-0's own checkpoint: %v", err)
	}
	if v, ok := s.store.Value(nil, 10); !ok || v[0] != 1 {
		t.Fatalf("server-0 restored key 10 = %v (held %v), want 1", v, ok)
	}
}

// headerCluster starts an in-process cluster of servers only over dir
// with run id run ("": NewCluster picks one).
func headerCluster(dir, run string) (*Cluster, error) {
	cfg := DefaultClusterConfig()
	cfg.Workers, cfg.Servers = 0, 2
	cfg.Durable = DurableConfig{Dir: dir, RunID: run}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return NewCluster(context.Background(), cfg)
}

// TestCheckpoint_StaleRunRefused (finding 10): a new cluster over the
// checkpoints an earlier run left refuses them, the error naming both run
// ids; a restart of the same run (its id given back) resumes them.
func TestCheckpoint_StaleRunRefused(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	c, err := headerCluster(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	first := c.ServerConfig().Durable.RunID
	if first == "" {
		t.Fatal("NewCluster picked no run id")
	}
	if err := c.Client().Init(ctx, []uint64{0, 1}, []float32{3, 4}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := c.Server(i).Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()

	c2, err := headerCluster(dir, "")
	if err == nil {
		c2.Close()
		t.Fatal("a new run over the first run's checkpoints started silently")
	}
	if !errors.Is(err, ErrCheckpointMismatch) || !strings.Contains(err.Error(), fmt.Sprintf("of run %q", first)) {
		t.Fatalf("err %v, want ErrCheckpointMismatch naming the old run %q", err, first)
	}
	// the new run's id is named too: a server with an explicit one
	_, err = headerServer(t, "server-0", DurableConfig{Dir: dir, RunID: "run-b"}, 0, 0)
	if !errors.Is(err, ErrCheckpointMismatch) || !strings.Contains(err.Error(), `"run-b"`) || !strings.Contains(err.Error(), strconv.Quote(first)) {
		t.Fatalf("err %v, want ErrCheckpointMismatch naming runs %q and \"run-b\"", err, first)
	}

	c3, err := headerCluster(dir, first)
	if err != nil {
		t.Fatalf("the restart of run %s: %v", first, err)
	}
	defer c3.Close()
	got := make([]float32, 2)
	if err := c3.Client().Pull(ctx, []uint64{0, 1}, got, nil); err != nil || got[0] != 3 || got[1] != 4 {
		t.Fatalf("resumed run pulls %v (%v), want [3 4]", got, err)
	}
}

// TestCheckpoint_OldVersionRefused: a checkpoint of format version 1
// (no header) or 2 (pending buffers without their sender) is refused
// naming both versions.
func TestCheckpoint_OldVersionRefused(t *testing.T) {
	for _, v := range []uint32{1, 2} {
		dir := t.TempDir()
		if _, err := headerServer(t, "server-0", DurableConfig{Dir: dir}, 10, 1); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "server-0.ckpt")
		b, _ := os.ReadFile(path)
		binary.LittleEndian.PutUint32(b[len("FLCNPSCK"):], v)
		os.WriteFile(path, withCRC(b), 0o644)
		_, err := headerServer(t, "server-0", DurableConfig{Dir: dir}, 0, 0)
		if !errors.Is(err, ErrCheckpointMismatch) || !errors.Is(err, ErrWireVersion) ||
			!strings.Contains(err.Error(), fmt.Sprintf("version %d", v)) || !strings.Contains(err.Error(), fmt.Sprintf("version %d", CheckpointVersion)) {
			t.Fatalf("err %v, want ErrCheckpointMismatch naming versions %d and %d", err, v, CheckpointVersion)
		}
	}
}

// TestCheckpoint_LayoutAndReshard: a server refuses a checkpoint taken
// under another layout, naming both layouts; the same state moved with
// Reshard into the new layout restores, value for value.
func TestCheckpoint_LayoutAndReshard(t *testing.T) {
	from, to := Modulo{Servers: 3}, Modulo{Servers: 2}
	if LayoutHash(from, 3) == LayoutHash(to, 2) || LayoutHash(KeyRange{Servers: 2}, 2) == LayoutHash(to, 2) ||
		LayoutHash(Modulo{Servers: 2, MaxSegment: 16}, 2) == LayoutHash(to, 2) {
		t.Fatal("LayoutHash does not tell the layouts apart")
	}
	if LayoutHash(Modulo{Servers: 2}, 2) != LayoutHash(to, 2) {
		t.Fatal("LayoutHash differs for one layout")
	}
	old, dir := t.TempDir(), t.TempDir()
	var cks []*Checkpoint
	for i := range 3 {
		s, err := headerServer(t, string(ServerNode(i)), DurableConfig{Dir: old, RunID: "r", Layout: LayoutHash(from, 3)}, []uint64{3, 1, 2}[i], float32(10*(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		cks = append(cks, s.Snapshot())
	}
	newCfg := DurableConfig{Dir: dir, RunID: "r", Layout: LayoutHash(to, 2)}
	b, _ := os.ReadFile(filepath.Join(old, "server-0.ckpt"))
	os.WriteFile(filepath.Join(dir, "server-0.ckpt"), b, 0o644)
	_, err := headerServer(t, "server-0", newCfg, 0, 0)
	if !errors.Is(err, ErrCheckpointMismatch) || !strings.Contains(err.Error(), fmt.Sprintf("%016x", LayoutHash(from, 3))) || !strings.Contains(err.Error(), fmt.Sprintf("%016x", LayoutHash(to, 2))) {
		t.Fatalf("err %v, want ErrCheckpointMismatch naming both layouts", err)
	}
	re, err := Reshard(cks, from, to, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, ck := range re {
		if err := WriteCheckpointFile(filepath.Join(dir, string(ServerNode(i))+".ckpt"), ck); err != nil {
			t.Fatal(err)
		}
	}
	want := map[uint64]float32{3: 10, 1: 20, 2: 30} // Modulo: key k on server k mod 3
	for i := range 2 {
		s, err := headerServer(t, string(ServerNode(i)), newCfg, 0, 0)
		if err != nil {
			t.Fatalf("resharded server-%d: %v", i, err)
		}
		for k, v := range want {
			if to.Locate(nil, k, 1)[0].Server != i {
				continue
			}
			if got, ok := s.store.Value(nil, k); !ok || got[0] != v {
				t.Fatalf("server-%d: key %d = %v (%v), want %v", i, k, got, ok, v)
			}
		}
	}
	// a checkpoint handed to Reshard in the wrong place is refused
	if _, err := Reshard([]*Checkpoint{cks[1], cks[0], cks[2]}, from, to, 2); !errors.Is(err, ErrCheckpointMismatch) {
		t.Fatalf("reshard of server-1's checkpoint as server 0's: %v", err)
	}
}
