package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/falconml/falcon/internal/testbed"
	"github.com/falconml/falcon/model/mnist"
)

// TestMain lets the test binary serve as a live-bed worker process (the
// bed re-runs the program, as falcon-study's main does).
func TestMain(m *testing.M) {
	if ok, err := bedWorkerMain(); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, "bed worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestLiveBedStraggler runs a tiny live-bed run end to end: two worker
// processes, one under a quarter of the other's quota, DynSGD (no
// barrier, so each computes at its own speed) for at most 30 s. The
// slower one must really compute fewer samples per second (its quota,
// not a sleep, makes it slow: a quarter expected, under 0.6 required),
// and the run must reach its low target or say why it ended.
func TestLiveBedStraggler(t *testing.T) {
	if raceEnabled {
		t.Skip("live bed: not under -race (the detector's CPU cost would swamp the quotas)")
	}
	if os.Geteuid() != 0 {
		t.Skip("live bed: needs root (network namespaces, tc, cgroups)")
	}
	dir, err := mnist.Locate()
	if err != nil {
		t.Skipf("live bed: MNIST not available: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	specs, err := selectPolicies("dynsgd")
	if err != nil {
		t.Fatal(err)
	}
	sc := bedScenario{Name: "test", Cores: []float64{bedBaseCores / 4, bedBaseCores}, RateBits: []float64{bedRate, bedRate}}
	const target, cap = 0.7, 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), cap+90*time.Second)
	defer cancel()
	r, err := runBedOne(ctx, exe, dir, sc, specs[0], 0, target, cap)
	if errors.Is(err, testbed.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("t_target %.2fs, end %.2fs, clocks %v, samples %v, compute %v s, wall %v s, note %q", r.THigh, r.End, r.Clocks, r.Samples, r.Compute, r.Wall, r.Note)
	for w := range r.Samples {
		if r.Samples[w] == 0 || !(r.Wall[w] > 0) {
			t.Fatalf("worker %d computed nothing (samples %d, span %v s): %s", w, r.Samples[w], r.Wall[w], r.Note)
		}
	}
	slow, fast := float64(r.Samples[0])/r.Wall[0], float64(r.Samples[1])/r.Wall[1]
	if !(slow < 0.6*fast) {
		t.Errorf("worker 0 under 1/4 of worker 1's quota computed %.0f samples/s against %.0f (want under 0.6 of it)", slow, fast)
	}
	if math.IsInf(r.THigh, 1) {
		t.Errorf("the run did not reach %.2f in %v (final accuracy %.3f): %s", target, cap, r.FinalAcc, r.Note)
	}
}
