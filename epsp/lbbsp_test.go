package epsp_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/epsp/epsptest"
	"github.com/falconml/falcon/straggler"
)

func TestProportionalSplit(t *testing.T) {
	for _, tc := range []struct {
		total int
		w     []float64
		want  []int
	}{
		{10, []float64{1, 1, 1}, []int{4, 3, 3}}, // remainder to the lowest index
		{100, []float64{3, 1}, []int{75, 25}},
		{7, []float64{1, 0}, []int{6, 1}}, // at least 1 each
		{5, []float64{1, 0, 0, 0, 0}, []int{1, 1, 1, 1, 1}},
		{4, []float64{100, 1, 1, 1}, []int{1, 1, 1, 1}},
		{3, []float64{1, 1, 1, 1}, []int{1, 1, 1, 1}}, // total < n: the minimum wins
	} {
		t.Run(fmt.Sprint(tc.total, tc.w), func(t *testing.T) {
			if got := epsp.ProportionalSplit(tc.total, tc.w); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// Reference: baselines-params.md §4 (LB-BSP, Chen et al. SoCC'20): batches
// right-sized at every barrier ∝ speed, total fixed, batch-weighted
// average. A worker 4x slower ends up with about a quarter of the batch
// of the others, the total stays 4·64, and the barrier run is shorter
// than BSP's.
func TestLBBSP_ResizesBatchesBySpeed(t *testing.T) {
	hc := straggler.DefaultHeteroConfig(4)
	hc.Persistent = map[int]float64{0: 0.25}
	m, _ := straggler.NewHetero(hc)
	cfg := epsptest.LoopConfig{Model: m, Batch: 64, Clocks: 10}
	bsp, err := epsptest.RunLoop(cfg, epsp.NewBSP())
	if err != nil {
		t.Fatal(err)
	}
	p, err := epsp.NewLBBSP(epsp.DefaultLBBSPConfig())
	if err != nil {
		t.Fatal(err)
	}
	got, err := epsptest.RunLoop(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, b := range got.Batch {
		sum += b
	}
	// 256·0.25/3.25 ≈ 19.7 for the slow worker, 78.8 for the others.
	if sum != 256 || got.Batch[0] < 17 || got.Batch[0] > 22 || got.Batch[1] < 75 {
		t.Fatalf("final batches %v (sum %d), want about [20 79 79 78]", got.Batch, sum)
	}
	if got.End >= bsp.End || got.Stats.Flushes != 10 {
		t.Fatalf("lb-bsp end %v, bsp end %v; flushes %d", got.End, bsp.End, got.Stats.Flushes)
	}
	if _, err := epsp.NewLBBSP(epsp.LBBSPConfig{TotalBatch: -1}); !errors.Is(err, epsp.ErrBadConfig) {
		t.Fatal(err)
	}
}
