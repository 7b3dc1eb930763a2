package model

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func TestSynthetic_Deterministic(t *testing.T) {
	a1, b1, err := Synthetic(SyntheticConfig{Train: 100, Test: 20, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	a2, b2, _ := Synthetic(SyntheticConfig{Train: 100, Test: 20, Seed: 4})
	a3, _, _ := Synthetic(SyntheticConfig{Train: 100, Test: 20, Seed: 5})
	for i := range a1.X {
		if a1.X[i] != a2.X[i] {
			t.Fatalf("same seed, X[%d] differs", i)
		}
	}
	if b1.N != 20 || b2.N != 20 || a1.N != 100 || a1.D != 20 || a1.Classes != 10 {
		t.Fatalf("shapes: train %dx%d/%d test %d", a1.N, a1.D, a1.Classes, b1.N)
	}
	same := true
	for i := range a1.X {
		if a1.X[i] != a3.X[i] {
			same = false
			break
		}
	}
	if same {
		t.Errorf("different seeds gave identical data")
	}
}

func TestSyntheticConfig_Validate(t *testing.T) {
	tests := []struct {
		name string
		cfg  SyntheticConfig
		ok   bool
	}{
		{"zero", SyntheticConfig{}, true},
		{"default", DefaultSyntheticConfig(), true},
		{"neg-train", SyntheticConfig{Train: -1}, false},
		{"one-class", SyntheticConfig{Classes: 1}, false},
		{"many-classes", SyntheticConfig{Classes: 300}, false},
		{"neg-sep", SyntheticConfig{Separation: -1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrConfig) {
				t.Errorf("error %v is not ErrConfig", err)
			}
		})
	}
}

func TestNewDataset(t *testing.T) {
	tests := []struct {
		name string
		x    []float32
		y    []uint8
		d, c int
		ok   bool
	}{
		{"ok", make([]float32, 6), []uint8{0, 1}, 3, 2, true},
		{"short-x", make([]float32, 5), []uint8{0, 1}, 3, 2, false},
		{"label", make([]float32, 6), []uint8{0, 2}, 3, 2, false},
		{"dim", make([]float32, 6), []uint8{0, 1}, 0, 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewDataset(tc.x, tc.y, tc.d, tc.c)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrShape) {
				t.Errorf("error %v is not ErrShape", err)
			}
		})
	}
}

func TestDataset_HeadShuffled(t *testing.T) {
	tr, _, _ := Synthetic(SyntheticConfig{Train: 30, Test: 1, Dim: 2, Classes: 3})
	h := tr.Head(10)
	if h.N != 10 || len(h.X) != 20 || len(h.Y) != 10 {
		t.Fatalf("Head(10): N=%d len(X)=%d", h.N, len(h.X))
	}
	if tr.Head(0) != tr || tr.Head(100) != tr {
		t.Errorf("Head(0) and Head(>N) should return the dataset itself")
	}
	s := tr.Shuffled(rand.New(rand.NewPCG(1, 1)))
	counts := map[uint8]int{}
	for i := range tr.Y {
		counts[tr.Y[i]]++
		counts[s.Y[i]]--
	}
	for k, v := range counts {
		if v != 0 {
			t.Errorf("label %d count changed by %d after shuffle", k, v)
		}
	}
}

func TestDataset_SubsetSample(t *testing.T) {
	tr, _, _ := Synthetic(SyntheticConfig{Train: 30, Test: 1, Dim: 2, Classes: 3})
	s := tr.Subset([]int{5, 1})
	if s.N != 2 || s.Y[0] != tr.Y[5] || s.X[2] != tr.X[2] || s.X[3] != tr.X[3] {
		t.Fatalf("Subset: %+v", s)
	}
	s.X[0] = 99
	if tr.X[10] == 99 {
		t.Errorf("Subset shares memory with its source")
	}
	a := tr.Sample(10, rand.New(rand.NewPCG(3, 3)))
	b := tr.Sample(10, rand.New(rand.NewPCG(3, 3)))
	if a.N != 10 || a.Y[4] != b.Y[4] || a.X[7] != b.X[7] {
		t.Errorf("Sample is not deterministic for a seed")
	}
	if all := tr.Sample(0, rand.New(rand.NewPCG(1, 1))); all.N != tr.N {
		t.Errorf("Sample(0) has %d rows, want %d", all.N, tr.N)
	}
}
