package coflow_test

import (
	"errors"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
)

// TestGuard: inside [k·T, k·T+δ) the guard shares max-min fairly (both
// coflows run), outside it the inner SEBF serves the smaller coflow
// alone; its timer names the next slice boundary; bad periods are refused.
func TestGuard(t *testing.T) {
	fab := coflow.NewFabric(2, 1e6)
	st := coflowtest.NewState(fab).Coflow(1, 0, coflowtest.F(0, 1, 1e6)).Coflow(2, 0, coflowtest.F(0, 1, 4e6)).State()
	sebf, err := coflow.NewSEBF(coflow.DefaultOrderedConfig())
	if err != nil {
		t.Fatal(err)
	}
	g, err := coflow.NewGuard(sebf, 10*time.Second, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !g.OnlyOnArrivalsAndCompletions() || g.Name() != "sebf" {
		t.Fatalf("guard forwards name %q, event-driven %v", g.Name(), g.OnlyOnArrivalsAndCompletions())
	}
	for _, tc := range []struct {
		now     time.Duration
		running int
		wake    time.Duration
	}{
		{0, 2, 200 * time.Millisecond},
		{100 * time.Millisecond, 2, 200 * time.Millisecond},
		{200 * time.Millisecond, 1, 10 * time.Second},
		{5 * time.Second, 1, 10 * time.Second},
		{20*time.Second + time.Millisecond, 2, 20*time.Second + 200*time.Millisecond},
	} {
		al := g.Schedule(tc.now, st)
		n := 0
		for _, a := range al {
			if a.Rate > 0 {
				n++
			}
		}
		if n != tc.running {
			t.Errorf("at %v: %d flows running, want %d", tc.now, n, tc.running)
		}
		if at, ok := g.NextWakeup(tc.now); !ok || at != tc.wake {
			t.Errorf("at %v: wake-up %v %v, want %v", tc.now, at, ok, tc.wake)
		}
	}
	for _, bad := range [][2]time.Duration{{0, 0}, {time.Second, time.Second}, {time.Second, 0}, {time.Second, -1}} {
		if _, err := coflow.NewGuard(sebf, bad[0], bad[1]); !errors.Is(err, coflow.ErrInvalidConfig) {
			t.Errorf("NewGuard(%v, %v): %v, want ErrInvalidConfig", bad[0], bad[1], err)
		}
	}
	if _, err := coflow.NewGuard(nil, time.Second, time.Millisecond); !errors.Is(err, coflow.ErrInvalidConfig) {
		t.Errorf("NewGuard(nil): %v", err)
	}
}
