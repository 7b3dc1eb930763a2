package epsp_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/epsp/epsptest"
)

// Reference: baselines-params.md §2 (Chen et al.: 96 workers + 4 backups
// for 100 machines): b = max(1, round(0.04·(N+b))).
func TestSyncOptBackup(t *testing.T) {
	for _, tc := range []struct{ m, want int }{{4, 1}, {8, 1}, {16, 1}, {37, 1}, {38, 2}, {50, 2}, {100, 4}} {
		if got := epsp.SyncOptBackup(tc.m); got != tc.want {
			t.Errorf("SyncOptBackup(%d) = %d, want %d", tc.m, got, tc.want)
		}
	}
}

// polRecorder wraps a policy and records every admission.
type polRecorder struct {
	epsp.Policy
	admits []polAdmit
}

type polAdmit struct {
	p       epsp.Push
	version uint64
	d       epsp.PushDecision
}

func (r *polRecorder) Admit(now time.Duration, v epsp.View, p epsp.Push) epsp.PushDecision {
	d := r.Policy.Admit(now, v, p)
	r.admits = append(r.admits, polAdmit{p, v.Version(), d})
	return d
}

// Reference: baselines-params.md §2 / TF SyncReplicasOptimizer: "The
// accumulator will drop all stale gradients"; the first N gradients of a
// step are applied, the b late ones dropped. Property over seeds: no
// gradient computed on an older step is ever aggregated, every step
// aggregates exactly N, and late gradients are dropped and counted.
func TestSyncOpt_NeverAppliesStaleGradient(t *testing.T) {
	for seed := range uint64(20) {
		m := polModel(t, 8, seed, false)
		so, err := epsp.NewSyncOpt(epsp.SyncOptConfig{Backup: 2})
		if err != nil {
			t.Fatal(err)
		}
		rec := &polRecorder{Policy: so}
		res, err := epsptest.RunLoop(epsptest.LoopConfig{Model: m, Batch: 32, Clocks: 10}, rec)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		perStep := map[int]int{}
		for _, a := range rec.admits {
			if a.d.Action == epsp.Drop {
				continue
			}
			if a.d.Action != epsp.Accumulate || a.p.BaseVersion != a.version || a.d.Clock != int(a.version) {
				t.Fatalf("seed %d: push %+v at version %d got %+v: a gradient of an older step was kept", seed, a.p, a.version, a.d)
			}
			perStep[a.d.Clock]++
		}
		st := so.Stats()
		for step := range st.Steps {
			if perStep[step] != 6 {
				t.Fatalf("seed %d: step %d aggregated %d gradients, want N = 6", seed, step, perStep[step])
			}
		}
		if st.Late+st.Stale == 0 || res.Stats.Dropped != st.Late+st.Stale {
			t.Fatalf("seed %d: stats %+v, coordinator dropped %d", seed, st, res.Stats.Dropped)
		}
		if res.Stats.Flushes != st.Steps {
			t.Fatalf("seed %d: %d flushes, %d steps", seed, res.Stats.Flushes, st.Steps)
		}
	}
}

func TestSyncOpt_Script(t *testing.T) {
	so, _ := epsp.NewSyncOpt(epsp.DefaultSyncOptConfig()) // 4 workers: N = 3, b = 1
	d, err := epsptest.NewDriver(epsp.Config{NumWorkers: 4, Batch: 8}, so)
	if err != nil {
		t.Fatal(err)
	}
	err = d.Run(`
		push w=2
		clock w=2
		push w=0
		clock w=0
		push w=1       # the N-th gradient: accepted
		push w=3       # the backup arrives late: dropped
		clock w=3      # released at once onto step 0
		clock w=1      # all N stored: flush step 0, release 0 1 2
		push w=3       # computed on step 0, now step 1: stale, dropped
		clock w=3
	`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"@0s push w=2 clock=0 base=0 samples=8/8 -> accumulate clock=0",
		"@0s clock w=2 c=0 -> -",
		"@0s push w=0 clock=0 base=0 samples=8/8 -> accumulate clock=0",
		"@0s clock w=0 c=0 -> -",
		"@0s push w=1 clock=0 base=0 samples=8/8 -> accumulate clock=0",
		"@0s push w=3 clock=0 base=0 samples=8/8 -> drop",
		"@0s clock w=3 c=0 -> release[3]",
		"@0s clock w=1 c=0 -> flush[0] release[0 1 2]",
		"@0s push w=3 clock=1 base=0 samples=8/8 -> drop",
		"@0s clock w=3 c=1 -> release[3]",
	}
	if got := splitLines(d.Trace()); !slices.Equal(got, want) {
		t.Fatalf("trace:\n%s", d.Trace())
	}
	if st := so.Stats(); st.Late != 1 || st.Stale != 1 || st.Steps != 1 || so.Name() != "sync-opt(N=3,b=1)" {
		t.Fatalf("stats %+v name %q", st, so.Name())
	}
}

func splitLines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

// Workers that have run all their clocks leave; the step then needs only
// the pushes of the workers still training, so the last one is not left
// waiting for a quorum that can no longer form.
func TestSyncOpt_LeaveLowersQuorum(t *testing.T) {
	so, _ := epsp.NewSyncOpt(epsp.DefaultSyncOptConfig()) // 4 workers: N = 3, b = 1
	d, err := epsptest.NewDriver(epsp.Config{NumWorkers: 4, Batch: 8}, so)
	if err != nil {
		t.Fatal(err)
	}
	err = d.Run(`
		push w=0
		push w=1
		clock w=0
		clock w=1
		leave w=2      # still 3 workers training: N = 3 stays, nothing happens
		push w=3       # the third accepted push
		leave w=1      # quorum min(3, 4-2) = 2, but w=3's push is not stored yet
		clock w=3      # all three accepted pushes stored: flush, release 0 1 3
	`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"@0s push w=0 clock=0 base=0 samples=8/8 -> accumulate clock=0",
		"@0s push w=1 clock=0 base=0 samples=8/8 -> accumulate clock=0",
		"@0s clock w=0 c=0 -> -",
		"@0s clock w=1 c=0 -> -",
		"@0s leave w=2 -> -",
		"@0s push w=3 clock=0 base=0 samples=8/8 -> accumulate clock=0",
		"@0s leave w=1 -> -",
		"@0s clock w=3 c=0 -> flush[0] release[0 3]",
	}
	if got := splitLines(d.Trace()); !slices.Equal(got, want) {
		t.Fatalf("trace:\n%s", d.Trace())
	}
	// A worker that left cannot push its own batch or clock again.
	if err := d.Run("push w=1"); err == nil {
		t.Fatal("own push after leaving accepted")
	}
	if err := d.Run("leave w=1"); err == nil {
		t.Fatal("second leave accepted")
	}
}
