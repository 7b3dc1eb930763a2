package predictor

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSaveFile_Atomic: SaveFile replaces a model whole; a save that fails
// (an invalid network) or a crash that leaves a half-written temporary
// file behind leaves the previous model loadable and bit-identical.
func TestSaveFile_Atomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.flcn")
	p, err := NewRNN(smallRNN(CellGRU))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Fit(regimeSeries(200, 1)); err != nil {
		t.Fatal(err)
	}
	good := p.Network()
	if err := good.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	bad := *good
	bad.Params = bad.Params[:3] // inconsistent with its sizes: Save refuses it
	if err := bad.SaveFile(path); err == nil {
		t.Fatal("invalid network saved")
	}
	// a crash in the middle of a write leaves only a temporary file
	b, _ := good.MarshalBinary()
	if err := os.WriteFile(filepath.Join(dir, ".model.flcn.tmp-123"), b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(n.Params, good.Params) {
		t.Fatal("loaded model differs from the saved one")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 { // the model and the simulated crash's leftover
		t.Fatalf("%d directory entries, want 2", len(ents))
	}
}
