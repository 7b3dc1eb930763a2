package ps_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/pstest"
)

func TestDirCoordinatorStore(t *testing.T) {
	pstest.TestCoordinatorStore(t, func(t *testing.T) ps.CoordinatorStore {
		return ps.DirCoordinatorStore(filepath.Join(t.TempDir(), "coord")) // created at the first Save
	})
}

// A Save a crash interrupted leaves a temporary file, never the state:
// Load ignores it (and removes it).
func TestDirCoordinatorStore_InterruptedSaveIgnored(t *testing.T) {
	dir := t.TempDir()
	s := ps.DirCoordinatorStore(dir)
	ctx := context.Background()
	if err := s.Save(ctx, []byte("whole")); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".coordinator.state.tmp-123")
	if err := os.WriteFile(tmp, []byte("par"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := s.Load(ctx)
	if err != nil || string(b) != "whole" {
		t.Fatalf("Load = %q, %v; want the whole state", b, err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left: %v", err)
	}
}

// A state file larger than MaxCoordinatorState is refused without being
// read.
func TestDirCoordinatorStore_OversizedRefused(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "coordinator.state"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(ps.MaxCoordinatorState + 1); err != nil { // sparse
		t.Fatal(err)
	}
	f.Close()
	if _, err := ps.DirCoordinatorStore(dir).Load(context.Background()); !errors.Is(err, ps.ErrCoordinatorState) {
		t.Fatalf("Load of an oversized file: %v, want ErrCoordinatorState", err)
	}
	if err := ps.DirCoordinatorStore(dir).Save(context.Background(), make([]byte, ps.MaxCoordinatorState+1)); !errors.Is(err, ps.ErrCoordinatorState) {
		t.Fatalf("Save of an oversized state: %v, want ErrCoordinatorState", err)
	}
}
