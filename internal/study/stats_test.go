package study

import (
	"errors"
	"math"
	"testing"
)

var inf = math.Inf(1)

func TestReduction(t *testing.T) {
	tests := []struct {
		name       string
		base, cand float64
		want       float64
	}{
		{"candidate twice as fast", 2, 1, 0.5},
		{"candidate twice as slow", 1, 2, -1},
		{"equal", 3, 3, 0},
		{"only the candidate reaches", inf, 1, 1},
		{"only the baseline reaches", 1, inf, math.Inf(-1)},
		{"neither reaches", inf, inf, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Reduction(tt.base, tt.cand); got != tt.want {
				t.Fatalf("Reduction(%v, %v) = %v, want %v", tt.base, tt.cand, got, tt.want)
			}
		})
	}
	for _, bad := range [][2]float64{{0, 1}, {1, 0}, {-1, 1}, {math.NaN(), 1}, {1, math.NaN()}} {
		if got := Reduction(bad[0], bad[1]); !math.IsNaN(got) {
			t.Errorf("Reduction(%v, %v) = %v, want NaN", bad[0], bad[1], got)
		}
	}
}

func TestReductions(t *testing.T) {
	r, err := Reductions([]float64{2, 4, inf}, []float64{1, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0.5, 0.75, 1}
	for i := range want {
		if r[i] != want[i] {
			t.Fatalf("Reductions = %v, want %v", r, want)
		}
	}
	for _, c := range [][2][]float64{{{1}, {1, 2}}, {nil, nil}, {{0}, {1}}} {
		if _, err := Reductions(c[0], c[1]); !errors.Is(err, ErrInput) {
			t.Errorf("Reductions(%v, %v): err = %v, want ErrInput", c[0], c[1], err)
		}
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{1, inf, 3}, 3},
		{[]float64{1, 2, inf, inf}, inf},
		{[]float64{math.Inf(-1), math.Inf(-1), 0.2, 0.5}, math.Inf(-1)},
		{[]float64{2, 2, 5, 1}, 2},
		{[]float64{7}, 7},
	}
	for _, tt := range tests {
		if got := Median(tt.xs); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
	if got := Median(nil); !math.IsNaN(got) {
		t.Errorf("Median(nil) = %v, want NaN", got)
	}
}

func TestBootstrapMedian(t *testing.T) {
	cfg := DefaultBootstrapConfig()
	tests := []struct {
		name           string
		xs             []float64
		med, lo, hi    float64
		verdict        Verdict
		checkEndpoints bool
	}{
		// n = 5: P(resampled median <= min) = 0.058 > 0.025, so the 95 %
		// interval is [min, max] (package doc).
		{"five positive", []float64{0.1, 0.3, 0.2, 0.5, 0.4}, 0.3, 0.1, 0.5, Win, true},
		{"one negative seed", []float64{-0.1, 0.3, 0.2, 0.5, 0.4}, 0.3, -0.1, 0.5, Tie, true},
		{"five negative", []float64{-0.1, -0.3, -0.2, -0.5, -0.4}, -0.3, -0.5, -0.1, Loss, true},
		{"a never-reached candidate", []float64{0.1, 0.3, 0.2, 0.5, math.Inf(-1)}, 0.2, math.Inf(-1), 0.5, Tie, true},
		{"constant", []float64{0.25, 0.25, 0.25}, 0.25, 0.25, 0.25, Win, true},
		{"ties at zero", []float64{0, 0, 0, 0, 0}, 0, 0, 0, Tie, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iv, err := BootstrapMedian(tt.xs, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if iv.Median != tt.med || iv.N != len(tt.xs) {
				t.Fatalf("median %v n %d, want %v n %d", iv.Median, iv.N, tt.med, len(tt.xs))
			}
			if tt.checkEndpoints && (iv.Lo != tt.lo || iv.Hi != tt.hi) {
				t.Fatalf("interval [%v, %v], want [%v, %v]", iv.Lo, iv.Hi, tt.lo, tt.hi)
			}
			if v := Judge(iv); v != tt.verdict {
				t.Fatalf("verdict %v, want %v", v, tt.verdict)
			}
		})
	}
}

// With many values the interval narrows around the median and is
// reproducible from the seed.
func TestBootstrapMedian_LargeSample(t *testing.T) {
	xs := make([]float64, 101)
	for i := range xs {
		xs[i] = float64(i) / 100 // 0 .. 1, median 0.5
	}
	cfg := DefaultBootstrapConfig()
	a, err := BootstrapMedian(xs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := BootstrapMedian(xs, cfg)
	if a != b {
		t.Fatalf("same seed, different intervals: %+v %+v", a, b)
	}
	// The median of 101 uniform points has a standard error of about
	// 1.2533·0.29/√101 ≈ 0.036: a 95 % interval about ±0.07 wide.
	if !(a.Lo < 0.5 && a.Hi > 0.5 && a.Lo > 0.35 && a.Hi < 0.65) {
		t.Fatalf("interval [%v, %v] around 0.5", a.Lo, a.Hi)
	}
	cfg.Seed++
	if c, _ := BootstrapMedian(xs, cfg); c == a {
		t.Logf("another seed gave the same interval %+v (possible, but unlikely)", c)
	}
}

func TestBootstrapMedian_Errors(t *testing.T) {
	for _, cfg := range []BootstrapConfig{{Resamples: 0, Level: 0.95}, {Resamples: 10, Level: 1}, {Resamples: 10, Level: 0}} {
		if _, err := BootstrapMedian([]float64{1}, cfg); !errors.Is(err, ErrInput) {
			t.Errorf("%+v: err = %v, want ErrInput", cfg, err)
		}
	}
	if _, err := BootstrapMedian(nil, DefaultBootstrapConfig()); !errors.Is(err, ErrInput) {
		t.Errorf("no values: err = %v", err)
	}
	if _, err := BootstrapMedian([]float64{1, math.NaN()}, DefaultBootstrapConfig()); !errors.Is(err, ErrInput) {
		t.Errorf("NaN: err = %v", err)
	}
}

func TestCompare(t *testing.T) {
	base := []float64{2, 2, 2, 2, 2}
	cand := []float64{1, 1.5, 1, 1.2, 1.8}
	iv, v, err := Compare(base, cand, DefaultBootstrapConfig())
	if err != nil {
		t.Fatal(err)
	}
	if v != Win || iv.Median != 0.4 || math.Abs(iv.Lo-0.1) > 1e-12 || iv.Hi != 0.5 {
		t.Fatalf("Compare = %+v %v, want median 0.4 in [0.1, 0.5], win", iv, v)
	}
	if _, _, err := Compare(base, cand[:2], DefaultBootstrapConfig()); !errors.Is(err, ErrInput) {
		t.Fatalf("mismatched: err = %v", err)
	}
	if Win.String() != "win" || Loss.String() != "loss" || Tie.String() != "tie" {
		t.Fatal("verdict names")
	}
}
