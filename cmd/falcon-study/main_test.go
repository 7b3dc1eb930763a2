package main

import (
	"bytes"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
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
	if m := median([]float64{4, 2}); m != 3 {
		t.Errorf("even median = %v, want the mean of the middle values, 3", m)
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

func TestInversions(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name      string
		a, b      []float64
		inv       [][2]int
		separated int
	}{
		{"same order", []float64{1, 2, 3}, []float64{1.5, 2.5, 3.5}, nil, 3},
		{"swap beyond tolerance", []float64{1, 2}, []float64{2, 1}, [][2]int{{0, 1}}, 1},
		{"live tie is no inversion", []float64{1, 2}, []float64{1.55, 1.5}, nil, 1},
		{"sim tie is not compared", []float64{1, 1.05}, []float64{2, 1}, nil, 0},
		{"inf sorts last", []float64{inf, 1}, []float64{1, inf}, [][2]int{{0, 1}}, 1},
		{"both inf tie", []float64{inf, inf}, []float64{1, 2}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, sep := inversions(tt.a, tt.b, 0.1)
			if !slices.Equal(inv, tt.inv) || sep != tt.separated {
				t.Fatalf("inversions = %v, %d; want %v, %d", inv, sep, tt.inv, tt.separated)
			}
		})
	}
}

func TestAgreement(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name         string
		sim, live    []float64
		reps         [][]float64
		reproducible []int
		separated    int
		opposite     [][2]int
	}{
		{"same order", []float64{1, 2, 3}, []float64{1, 2, 3}, [][]float64{{1, 1}, {2, 2}, {3, 3}}, []int{0, 1, 2}, 3, nil},
		{"opposite among reproducible", []float64{1, 2}, []float64{2, 1}, [][]float64{{2, 2.1}, {1, 1.2}}, []int{0, 1}, 1, [][2]int{{0, 1}}},
		{"an unreproducible policy is left out", []float64{1, 2, 3}, []float64{1, 2, 0.5}, [][]float64{{1, 1}, {2, 2}, {0.2, 4}}, []int{0, 1}, 1, nil},
		{"repeats just within tolerance", []float64{1, 2}, []float64{2, 1}, [][]float64{{2, 2.2}, {1, 1}}, []int{0, 1}, 1, [][2]int{{0, 1}}},
		{"repeats just beyond tolerance", []float64{1, 2}, []float64{2, 1}, [][]float64{{2, 2.25}, {1, 1}}, []int{1}, 0, nil},
		{"inf reproduces only inf", []float64{inf, 1, 2}, []float64{inf, 2, 1}, [][]float64{{inf, inf}, {2, inf}, {1, 1}}, []int{0, 2}, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := agreement(tt.sim, tt.live, tt.reps, 0.1)
			if !slices.Equal(a.reproducible, tt.reproducible) || a.separated != tt.separated || !slices.Equal(a.opposite, tt.opposite) {
				t.Fatalf("agreement = %+v; want reproducible %v, separated %d, opposite %v", a, tt.reproducible, tt.separated, tt.opposite)
			}
		})
	}
}

func TestMedian_Even(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{1, 2, inf, inf}, inf}, {[]float64{2, 2, 5, 1}, 2}, {nil, inf}} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}

// TestRun_LiveShort runs the live comparison end to end for two policies
// and two seeds on a small synthetic setup: real goroutines, the
// in-process transport and paced compute.
func TestRun_LiveShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs eight short live trainings")
	}
	var out bytes.Buffer
	o := options{
		scenario: "straggler", policies: "bsp,epsp-enforced", data: "synthetic", modelName: "softmax",
		train: 2000, test: 300, batch: 16, lr: 1.0, target: 0.5, window: 1,
		duration: 300 * time.Millisecond, evalEvery: 50 * time.Millisecond, seed: 1, seeds: 2,
		out: t.TempDir(), live: true, liveScale: 1, repeats: 2, quiet: true, stdout: &out,
	}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	lines := regexp.MustCompile(`(?m)^policy=(\S+) scenario=straggler mode=live seed=(\d) repeat=(\d) time_to_target_s=\S+ final_acc=\S+ blocked_frac=\S+ transfers=(\d+)$`).FindAllStringSubmatch(text, -1)
	if len(lines) != 8 {
		t.Fatalf("%d live policy lines, want 8 (2 policies x 2 seeds x 2 repeats):\n%s", len(lines), text)
	}
	ratios := regexp.MustCompile(`(?m)^steps/s live/sim \(straggler, (\S+)\): median \S+ \[\S+, \S+\] over 4 runs, per run( \d+\.\d+){4}; (not )?within 10 % \(2 seeds: fewer than the protocol's 5\)$`).FindAllStringSubmatch(text, -1)
	if len(ratios) != 2 || ratios[0][1] != "bsp" || ratios[1][1] != "epsp-v1" {
		t.Errorf("steps/s ratio lines %q, want one per policy over 2 seeds x 2 repeats:\n%s", ratios, text)
	}
	for _, want := range []string{"Spearman rank correlation sim vs live (straggler)", "the simulator separates", "medians over 2 seeds", "live repeat 1 vs repeat 2", "reproducible live (straggler)", "agreement (straggler)"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}
