package ps

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFileAtomic: a write that fails half-way (as a crash would)
// leaves the previous file intact and no temporary file behind; a write
// that succeeds replaces it whole.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.bin")
	if err := WriteFileAtomic(path, 0o644, func(w io.Writer) error { _, err := w.Write([]byte("first")); return err }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := WriteFileAtomic(path, 0o644, func(w io.Writer) error {
		w.Write(make([]byte, 1<<20)) // more than the buffer: part reaches the temporary file
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "first" {
		t.Fatalf("previous file damaged: %d bytes", len(b))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d entries left in the directory, want 1", len(ents))
	}
	if err := WriteFileAtomic(path, 0o600, func(w io.Writer) error { _, err := w.Write([]byte("second")); return err }); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	fi, _ := os.Stat(path)
	if string(b) != "second" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("got %q mode %v", b, fi.Mode())
	}
}
