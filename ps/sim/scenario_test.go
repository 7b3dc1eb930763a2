package sim

import (
	"errors"
	"testing"
	"time"
)

func TestScenarios(t *testing.T) {
	seen := map[string]bool{}
	for _, sc := range Scenarios(1) {
		t.Run(sc.Name, func(t *testing.T) {
			if seen[sc.Name] {
				t.Fatalf("duplicate scenario name")
			}
			seen[sc.Name] = true
			sp, err := sc.Speed()
			if err != nil {
				t.Fatal(err)
			}
			if sp.NumWorkers() != SuiteWorkers || sc.Why == "" || sc.Parallelism < 1 {
				t.Fatalf("workers %d, why %q, p %d", sp.NumWorkers(), sc.Why, sc.Parallelism)
			}
			ps := make([]int, SuiteWorkers)
			for i := range ps {
				ps[i] = sc.Parallelism
			}
			rates := sp.RateAll(ps, 0, nil)
			lo, hi := rates[0], rates[0]
			for _, r := range rates {
				lo, hi = min(lo, r), max(hi, r)
			}
			homogeneous := sc.Name == "homogeneous" || sc.Name == "transient"
			if homogeneous != (lo == hi) {
				t.Errorf("rates at t=0 range %.0f..%.0f", lo, hi)
			}
			slowed := false
			for w := range SuiteWorkers {
				for at := time.Duration(0); at < 20*time.Second; at += 100 * time.Millisecond {
					slowed = slowed || sp.Slowed(w, at)
				}
			}
			if wantSlow := sc.Name == "transient" || sc.Name == "mixed"; slowed != wantSlow {
				t.Errorf("transient slowdowns present = %v, want %v", slowed, wantSlow)
			}
		})
	}
	if _, err := ScenarioByName("nope", 1); !errors.Is(err, ErrConfig) {
		t.Errorf("unknown scenario: err = %v", err)
	}
	if sc, err := ScenarioByName("mixed", 1); err != nil || sc.Name != "mixed" {
		t.Errorf("ScenarioByName(mixed) = %v, %v", sc.Name, err)
	}
}
