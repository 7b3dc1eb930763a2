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

// Reference: Chen et al. (baselines-params.md §2): "as soon as the
// parameter servers receive gradients from any N workers, they stop
// waiting and update their parameters using the N gradients". With b
// backups among M workers, each step aggregates the first M − b gradients
// to arrive and drops the b slowest, whatever the order of arrival.
func TestSyncOpt_DropsBSlowestPerStep(t *testing.T) {
	const m, steps = 6, 4
	for _, b := range []int{1, 2, 3, 5} {
		so, err := epsp.NewSyncOpt(epsp.SyncOptConfig{Backup: b})
		if err != nil {
			t.Fatal(err)
		}
		d, err := epsptest.NewDriver(epsp.Config{NumWorkers: m, Batch: 4}, so)
		if err != nil {
			t.Fatal(err)
		}
		for step := range steps {
			// Arrival order: a rotation, so a different worker is slowest
			// at each step.
			order := make([]epsp.WorkerID, m)
			for i := range order {
				order[i] = epsp.WorkerID((i + step) % m)
			}
			for i, w := range order {
				dec, err := d.PushOwn(w)
				if err != nil {
					t.Fatal(err)
				}
				wantDrop := i >= m-b
				if got := dec.Action == epsp.Drop; got != wantDrop {
					t.Fatalf("b=%d step %d: push %d of the step (worker %d): %+v, want drop %v", b, step, i+1, w, dec, wantDrop)
				}
			}
			// The N accepted clock first: the last one flushes the step and
			// releases them; the backups clock after and start on the new
			// step.
			for _, w := range order {
				if _, err := d.Clock(w); err != nil {
					t.Fatal(err)
				}
			}
			if v := d.View().Version(); v != uint64(step+1) {
				t.Fatalf("b=%d: version %d after step %d, want %d", b, v, step, step+1)
			}
		}
		if st := so.Stats(); st.Steps != steps || st.Late != b*steps || st.Stale != 0 || st.Accepted != (m-b)*steps {
			t.Errorf("b=%d: stats %+v, want %d steps, %d late, %d accepted", b, st, steps, b*steps, (m-b)*steps)
		}
	}
}

// Issue 27 item 2: b is chosen like the learning rate, over b ∈ {1, 2, 3,
// number of stragglers}, each at most M − 1.
func TestSyncOptBackupCandidates(t *testing.T) {
	for _, tc := range []struct {
		m, stragglers int
		want          []int
	}{
		{8, 1, []int{1, 2, 3}},
		{8, 3, []int{1, 2, 3}},
		{8, 4, []int{1, 2, 3, 4}},
		{36, 9, []int{1, 2, 3, 9}},
		{3, 5, []int{1, 2}},
		{2, 0, []int{1}},
		{8, 0, []int{1, 2, 3}},
	} {
		if got := epsp.SyncOptBackupCandidates(tc.m, tc.stragglers); !slices.Equal(got, tc.want) {
			t.Errorf("SyncOptBackupCandidates(%d, %d) = %v, want %v", tc.m, tc.stragglers, got, tc.want)
		}
	}
}
