package sim

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/falconml/falcon/straggler"
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

func TestStudyScenarios(t *testing.T) {
	want := []string{"homogeneous", "static", "straggler", "transient", "mixed", "several-stragglers", "spare-cores", "spare-cores-control", "foreign", "mixed-36"}
	scs := StudyScenarios(3)
	if len(scs) != len(want) {
		t.Fatalf("%d study scenarios, want %d", len(scs), len(want))
	}
	for i, sc := range scs {
		if sc.Name != want[i] || sc.Why == "" {
			t.Fatalf("scenario %d = %q (why %q), want %q", i, sc.Name, sc.Why, want[i])
		}
		m, err := sc.Model()
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		if m.NumWorkers() != sc.NumWorkers() {
			t.Fatalf("%s: %d workers, scenario says %d", sc.Name, m.NumWorkers(), sc.NumWorkers())
		}
		if _, err := sc.Speed(); (err != nil) != sc.Foreign.Enabled() {
			t.Errorf("%s: Speed err = %v with a foreign job %v", sc.Name, err, sc.Foreign.Enabled())
		}
		got, err := ScenarioByName(sc.Name, 3)
		if err != nil || got.Name != sc.Name {
			t.Errorf("ScenarioByName(%q) = %q, %v", sc.Name, got.Name, err)
		}
	}
	// Several stragglers: more than Sync-opt's single backup.
	if n := len(scs[5].Hetero.Persistent); n < 2 {
		t.Errorf("several-stragglers has %d stragglers", n)
	}
	// Spare cores: some host has more cores than its workers' default
	// goroutines, and the control gives every worker cores/2 of it.
	sp, _ := scs[6].Model()
	spare := 0
	for h := range sp.NumHosts() {
		spare = max(spare, sp.Cores(h)-2*scs[6].Parallelism)
	}
	if spare <= 0 || scs[7].Parallelism != 16/2 {
		t.Errorf("spare cores %d, control p %d", spare, scs[7].Parallelism)
	}
	if scs[9].NumWorkers() != WideWorkers {
		t.Errorf("mixed-36 has %d workers", scs[9].NumWorkers())
	}
}

func TestForeign(t *testing.T) {
	base, err := straggler.NewHetero(straggler.HeteroConfig{NumWorkers: 4, Hosts: []int{0, 0, 1, 1}, DefaultCores: 8, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := ForeignConfig{Hosts: []int{1}, Threads: 8, On: time.Second, Off: 2 * time.Second, Seed: 7}
	f, err := NewForeign(base, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ps := []int{4, 4, 4, 4}
	var on, off time.Duration
	const step = 10 * time.Millisecond
	for at := time.Duration(0); at < 30*time.Second; at += step {
		r := f.RateAll(ps, at, nil)
		free := base.RateAll(ps, at, nil)
		if r[0] != free[0] || r[1] != free[1] {
			t.Fatalf("t=%v: host 0 has no foreign job but rates %v, want %v", at, r[:2], free[:2])
		}
		if f.Running(1, at) {
			on += step
			// 8 worker goroutines + 8 foreign threads on 8 cores:
			// each worker computes as with 4·8/16 = 2 goroutines.
			want := base.Rate(2, 2, at)
			if math.Abs(r[2]-want) > 1e-9 || math.Abs(r[3]-want) > 1e-9 {
				t.Fatalf("t=%v: rates %v while the foreign job runs, want %v", at, r[2:], want)
			}
			// Alone on the host: 4 + 8 threads on 8 cores.
			if single := f.Rate(2, 4, at); math.Abs(single-rateFrac(base, 2, 4*8.0/12, at)) > 1e-9 {
				t.Fatalf("t=%v: Rate alone = %v", at, single)
			}
		} else {
			off += step
			if r[2] != free[2] {
				t.Fatalf("t=%v: foreign job absent but rate %v, want %v", at, r[2], free[2])
			}
		}
		if nc := f.NextChange(2, at); nc <= at {
			t.Fatalf("NextChange(%v) = %v, not after now", at, nc)
		}
	}
	// On 1 s of every 3 s.
	if frac := on.Seconds() / (on + off).Seconds(); math.Abs(frac-1.0/3) > 0.01 {
		t.Errorf("foreign job runs %.3f of the time, want 1/3", frac)
	}
	// NextChange lands exactly on the switches.
	for at := time.Duration(0); at < 10*time.Second; {
		nc := f.NextChange(2, at)
		if f.Running(1, nc-1) == f.Running(1, nc) {
			t.Fatalf("NextChange(%v) = %v is no switch", at, nc)
		}
		at = nc
	}
	if _, err := NewForeign(base, ForeignConfig{Hosts: []int{5}, Threads: 1, On: 1, Off: 1}); !errors.Is(err, ErrConfig) {
		t.Errorf("foreign job on a missing host: err = %v", err)
	}
	if _, err := NewForeign(base, ForeignConfig{Hosts: []int{0}, Threads: 0, On: 1, Off: 1}); !errors.Is(err, ErrConfig) {
		t.Errorf("no threads: err = %v", err)
	}
}

// rateFrac is base's rate of worker w at a fractional parallelism pe.
func rateFrac(base *straggler.Hetero, w int, pe float64, at time.Duration) float64 {
	c := base.Curve(w)
	return base.Rate(w, 1, at) * c.Speedup(pe) / c.Speedup(1)
}
