package main

import (
	"math"
	"testing"
)

func TestRanks(t *testing.T) {
	inf := math.Inf(1)
	got := ranks([]float64{2, 1, inf, 2, 0.5})
	want := []float64{3.5, 2, 5, 3.5, 1}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ranks = %v, want %v", got, want)
		}
	}
}

func TestSpearman(t *testing.T) {
	const tol = 1e-12
	if r := spearman([]float64{1, 2, 3}, []float64{1, 2, 3}); math.Abs(r-1) > tol {
		t.Errorf("identical ranks: %v, want 1", r)
	}
	if r := spearman([]float64{1, 2, 3}, []float64{3, 2, 1}); math.Abs(r+1) > tol {
		t.Errorf("reversed ranks: %v, want -1", r)
	}
	if r := spearman([]float64{1, 1}, []float64{1, 2}); !math.IsNaN(r) {
		t.Errorf("constant ranks: %v, want NaN", r)
	}
}

func TestMedianReduction(t *testing.T) {
	inf := math.Inf(1)
	if m := median([]float64{3, inf, 1}); m != 3 {
		t.Errorf("median = %v, want 3", m)
	}
	if m := median([]float64{inf, inf, 1}); !math.IsInf(m, 1) {
		t.Errorf("median with two inf = %v, want inf", m)
	}
	if m := median([]float64{4, 2}); m != 2 {
		t.Errorf("even median = %v, want the lower middle 2", m)
	}
	tests := []struct {
		epsp, t float64
		want    string
	}{
		{1, 2, "50.00%"},
		{2, 1, "-100.00%"},
		{1, inf, "100% (policy never)"},
		{inf, 1, "-inf (epsp never)"},
		{inf, inf, "n/a"},
	}
	for _, tc := range tests {
		if got := reduction(tc.epsp, tc.t); got != tc.want {
			t.Errorf("reduction(%v, %v) = %q, want %q", tc.epsp, tc.t, got, tc.want)
		}
	}
}

func TestLiveSampler(t *testing.T) {
	s := newLiveSampler(100, 4, 1)
	a := s.Batch(2, 3, 10)
	b := s.Batch(2, 3, 10)
	seen := map[int]bool{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("Batch is not a pure function")
		}
		seen[a[i]] = true
	}
	for _, id := range s.Batch(0, 3, 25) {
		if seen[id] {
			t.Fatalf("row %d in the shards of workers 0 and 2", id)
		}
	}
}
