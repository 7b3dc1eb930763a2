package sim

import (
	"math"
	"testing"

	"github.com/falconml/falcon/straggler"
)

// TestContended_CurveAndOversubscription: the ground truth differs from
// the controller's Amdahl 0.1 (USL σ 0.05, κ 0.01 at 4 goroutines: 3.15
// against 3.08) and falls past its peak, and oversubscribing a host
// (two workers of 8 goroutines on 8 cores) makes each slower than at its
// fair share of 4 goroutines, by 1/(1 + 0.25·(16/8 − 1)); the Hetero alone
// prices both the same.
func TestContended_CurveAndOversubscription(t *testing.T) {
	hc := straggler.HeteroConfig{NumWorkers: 2, BaseRate: 1000, Hosts: []int{0, 0}, DefaultCores: 8}
	h, err := straggler.NewHetero(hc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewContended(h, DefaultContention)
	if err != nil {
		t.Fatal(err)
	}
	usl4 := 4 / (1 + 0.05*3 + 0.01*4*3)
	if got := c.Rate(0, 4, 0); math.Abs(got-1000*usl4) > 1e-9 {
		t.Fatalf("Rate(p=4) = %v, want %v", got, 1000*usl4)
	}
	if a := h.Rate(0, 4, 0); math.Abs(a-c.Rate(0, 4, 0)) < 1 {
		t.Fatalf("USL rate %v equals the Amdahl rate %v", c.Rate(0, 4, 0), a)
	}
	if u := (USL{0.05, 0.01}); u.Speedup(20) >= u.Speedup(10) {
		t.Fatalf("USL does not fall past its peak: S(20) %v, S(10) %v", u.Speedup(20), u.Speedup(10))
	}
	fair := c.RateAll([]int{4, 4}, 0, nil)
	over := c.RateAll([]int{8, 8}, 0, nil)
	for w := range 2 {
		if want := fair[w] / 1.25; math.Abs(over[w]-want) > 1e-9 {
			t.Errorf("worker %d oversubscribed: %v, want %v (fair share %v / 1.25)", w, over[w], want, fair[w])
		}
	}
	hf, ho := h.RateAll([]int{4, 4}, 0, nil), h.RateAll([]int{8, 8}, 0, nil)
	if hf[0] != ho[0] {
		t.Fatalf("Hetero prices oversubscription: %v vs %v", hf[0], ho[0])
	}
	if err := (ContentionConfig{Oversub: -1}).Validate(); err == nil {
		t.Fatal("negative Oversub accepted")
	}
}
