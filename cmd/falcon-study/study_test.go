package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/ps/sim"
	"github.com/falconml/falcon/straggler"
)

func TestParseSeeds(t *testing.T) {
	tests := []struct {
		in   string
		want []uint64
		bad  bool
	}{
		{"3", []uint64{1, 2, 3}, false},
		{"1-5", []uint64{1, 2, 3, 4, 5}, false},
		{"2,4", []uint64{2, 4}, false},
		{"4,2,2", []uint64{2, 4}, false},
		{"1-2,5", []uint64{1, 2, 5}, false},
		{"0", nil, true},
		{"5-1", nil, true},
		{"x", nil, true},
	}
	for _, tt := range tests {
		got, err := parseSeeds(tt.in, 1)
		if (err != nil) != tt.bad || !slices.Equal(got, tt.want) {
			t.Errorf("parseSeeds(%q) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.bad)
		}
	}
}

// The ideal of a static cluster is the closed form M/(M·B/Σr + m)·D.
func TestIdealClocks(t *testing.T) {
	const d = 2 * time.Second
	msg := 2 * time.Millisecond
	for _, name := range []string{"homogeneous", "straggler", "static", "spare-cores"} {
		sc, err := sim.ScenarioByName(name, 1)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := sc.Model()
		h := m.(*straggler.Hetero)
		var sum float64
		for w := range m.NumWorkers() {
			sum += h.Rate(w, m.Cores(m.Host(w))/2, 0)
		}
		n := float64(m.NumWorkers())
		want := n / (n*64/sum + msg.Seconds()) * d.Seconds()
		if got := idealClocks(m, 64, msg, d, 1); math.Abs(got-want) > 1e-6*want {
			t.Errorf("%s: ideal %v, want %v", name, got, want)
		}
	}
	// Spare cores: the ideal counts the idle cores, so it exceeds the
	// control's... no: the control has the same hardware and the same ideal.
	a, _ := sim.ScenarioByName("spare-cores", 1)
	b, _ := sim.ScenarioByName("spare-cores-control", 1)
	ma, _ := a.Model()
	mb, _ := b.Model()
	if x, y := idealClocks(ma, 64, msg, d, 1), idealClocks(mb, 64, msg, d, 1); x != y {
		t.Errorf("spare-cores ideal %v, control %v: same hardware, want equal", x, y)
	}
	// A foreign job and transient slowdowns lower the ideal below the
	// homogeneous cluster's.
	homo, _ := sim.ScenarioByName("homogeneous", 1)
	mh, _ := homo.Model()
	base := idealClocks(mh, 64, msg, 10*time.Second, 1)
	for _, name := range []string{"foreign", "transient"} {
		sc, _ := sim.ScenarioByName(name, 1)
		m, _ := sc.Model()
		if got := idealClocks(m, 64, msg, 10*time.Second, 1); !(got < base && got > 0.7*base) {
			t.Errorf("%s: ideal %v, homogeneous %v", name, got, base)
		}
	}
}

func fakeRun(pol string, meanAcc float64, accs ...float64) *studyRun {
	r := &studyRun{Policy: pol, MeanAcc: meanAcc}
	for i, a := range accs {
		r.Evals = append(r.Evals, sim.EvalPoint{Time: time.Duration(i) * time.Second, Accuracy: a})
	}
	return r
}

func TestSelectTargets(t *testing.T) {
	// Evaluations at 0..9 s of a 10 s run: the plateau is the mean of
	// t >= 8 s.
	low := fakeRun("bsp", 0.5, 0.1, 0.5, 0.6, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7)
	ref := fakeRun("bsp", 0.8, 0.1, 0.6, 0.8, 0.85, 0.88, 0.89, 0.9, 0.9, 0.89, 0.91)
	i, a0, p, steep, high := selectTargets([]*studyRun{low, ref, low}, 10*time.Second)
	if i != 1 || a0 != 0.1 || math.Abs(p-0.9) > 1e-12 {
		t.Fatalf("reference %d, a0 %v, plateau %v; want 1, 0.1, 0.9", i, a0, p)
	}
	// 0.1 + 0.75·0.8 = 0.7; 0.1 + 0.95·0.8 = 0.86.
	if math.Abs(steep-0.7) > 1e-9 || math.Abs(high-0.86) > 1e-9 {
		t.Fatalf("targets %v, %v; want 0.7, 0.86", steep, high)
	}
	if got := floor005(0.8649); math.Abs(got-0.86) > 1e-12 {
		t.Errorf("floor005(0.8649) = %v", got)
	}
	// A tie in mean accuracy keeps the smaller lr (the first).
	if i, _, _, _, _ := selectTargets([]*studyRun{ref, ref}, 10*time.Second); i != 0 {
		t.Errorf("tie: reference %d, want 0", i)
	}
}

func TestSelectLR(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name        string
		times, ties [][]float64
		want        int
	}{
		{"fastest median", [][]float64{{3, 3}, {1, 2}, {2, 2}, {inf, inf}}, [][]float64{{1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1},
		{"tie broken by the steep target", [][]float64{{2}, {2}, {3}, {4}}, [][]float64{{1}, {0.5}, {1}, {1}}, 1},
		{"full tie keeps the smaller lr", [][]float64{{2}, {2}, {2}, {2}}, [][]float64{{1}, {1}, {1}, {1}}, 0},
		{"a member that never reaches", [][]float64{{1, inf, inf}, {2, 2, inf}, {inf, inf, inf}, {inf, inf, inf}}, [][]float64{{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}}, 1},
	}
	for _, tt := range tests {
		if got, _, _ := selectLR(tt.times, tt.ties); got != tt.want {
			t.Errorf("%s: lr index %d, want %d", tt.name, got, tt.want)
		}
	}
}

func syntheticCache(t *testing.T) *dataCache {
	train, test, err := model.Synthetic(model.SyntheticConfig{Train: 1200, Test: 300, Dim: 20, Classes: 5, Separation: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &dataCache{train: train, test: test, nTrain: 1200, nTest: 300, bySeed: map[uint64][2]*model.Dataset{}}
}

// TestStudy_Synthetic runs the study harness end to end on a small
// synthetic setup: two policies, two scenarios, two seeds, two jobs at
// once; it checks the files, their columns and the paired comparison.
func TestStudy_Synthetic(t *testing.T) {
	if testing.Short() {
		t.Skip("runs eight short simulations")
	}
	dir := t.TempDir()
	var out bytes.Buffer
	o := options{out: dir, jobs: 2, stdout: &out, policies: "bsp,epsp-v1", scenario: "straggler,foreign"}
	specs, _ := selectPolicies(o.policies)
	wl := workload{Name: "softmax", Model: "softmax", Duration: 300 * time.Millisecond, Steep: 0.4, High: 0.6,
		LR: map[family]float64{averagedSync: 1, dampedAsync: 1, undampedAsync: 1}}
	scs, err := selectScenarios(o.scenario)
	if err != nil {
		t.Fatal(err)
	}
	if err := studyWith(o, syntheticCache(t), []workload{wl}, scs, []uint64{1, 2}, specs); err != nil {
		t.Fatal(err)
	}
	read := func(name string) []string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	runs := read("runs.csv")
	if runs[0] != runsHeader || len(runs) != 1+8 {
		t.Fatalf("runs.csv: %d lines, header %q", len(runs), runs[0])
	}
	cols := strings.Split(runsHeader, ",")
	for _, l := range runs[1:] {
		if f := strings.Split(l, ","); len(f) != len(cols) {
			t.Fatalf("runs.csv row %q has %d fields, want %d", l, len(f), len(cols))
		}
	}
	// epsp-v1 against bsp, per scenario and target: 2 x 2 rows, each
	// over both seeds.
	cmp := read("compare.csv")
	if len(cmp) != 1+4 {
		t.Fatalf("compare.csv: %v", cmp)
	}
	for _, l := range cmp[1:] {
		if !strings.Contains(l, ",epsp-v1,bsp,2,") {
			t.Errorf("compare row %q: want epsp-v1 vs bsp over 2 seeds", l)
		}
	}
	if s := read("summary.csv"); len(s) != 1+4 {
		t.Errorf("summary.csv: %d lines", len(s))
	}
	if e := read("evals.csv"); len(e) < 1+8*6 {
		t.Errorf("evals.csv: %d lines", len(e))
	}
	md := strings.Join(read("study.md"), "\n")
	t.Log(md)
	for _, want := range []string{"Subset of the full study", "Median time to the steep target", "% of ideal", "epsp-v1: median paired reduction"} {
		if !strings.Contains(md, want) {
			t.Errorf("study.md lacks %q", want)
		}
	}
}

func TestRunStudy_RefusesWithoutSelection(t *testing.T) {
	o := options{study: true, policies: "bsp", workloads: "all", jobs: 1, out: t.TempDir(), stdout: &bytes.Buffer{}}
	saved := studyWorkloads
	defer func() { studyWorkloads = saved }()
	studyWorkloads = []workload{{Name: "softmax", Model: "softmax", Duration: time.Second}}
	err := runStudy(o)
	if err == nil || !strings.Contains(err.Error(), "lr-select") {
		t.Fatalf("runStudy without selected learning rates: err = %v", err)
	}
}

func TestLRSelect_Synthetic(t *testing.T) {
	if testing.Short() {
		t.Skip("runs eight short simulations")
	}
	dir := t.TempDir()
	var out bytes.Buffer
	o := options{out: dir, jobs: 2, stdout: &out}
	specs, _ := selectPolicies("bsp,dynsgd")
	wl := workload{Name: "softmax", Model: "softmax", Duration: 300 * time.Millisecond}
	if err := lrSelectWith(o, syntheticCache(t), []workload{wl}, specs); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"BSP reference run", "averaged-synchronous", "damped-asynchronous", "For studyWorkloads"} {
		if !strings.Contains(text, want) {
			t.Errorf("lr output lacks %q:\n%s", want, text)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "lr.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 1+2*len(lrGrid) {
		t.Errorf("lr.csv has %d lines, want %d", n, 1+2*len(lrGrid))
	}
}

// A study's runs.csv renders the same comparison again with -from, and
// a subset of it narrows the tables.
func TestStudy_RenderFrom(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four short simulations")
	}
	dir := t.TempDir()
	o := options{out: dir, jobs: 1, stdout: &bytes.Buffer{}, policies: "bsp,epsp-v1"}
	specs, _ := selectPolicies(o.policies)
	wl := workload{Name: "softmax", Model: "softmax", Duration: 300 * time.Millisecond, Steep: 0.4, High: 0.6,
		LR: map[family]float64{averagedSync: 1, dampedAsync: 1, undampedAsync: 1}}
	if err := studyWith(o, syntheticCache(t), []workload{wl}, []string{"straggler"}, []uint64{1, 2}, specs); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(dir, "compare.csv"))
	runs, err := readRunsCSV(filepath.Join(dir, "runs.csv"))
	if err != nil || len(runs) != 4 {
		t.Fatalf("readRunsCSV: %d runs, %v", len(runs), err)
	}
	saved := studyWorkloads
	defer func() { studyWorkloads = saved }()
	studyWorkloads = []workload{wl}
	dir2 := t.TempDir()
	o2 := options{study: true, seed: 1, out: dir2, jobs: 1, stdout: &bytes.Buffer{}, policies: "bsp,epsp-v1", scenario: "straggler",
		seedList: "1,2", from: filepath.Join(dir, "runs.csv")}
	if err := runStudy(o2); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir2, "compare.csv"))
	if !bytes.Equal(got, want) {
		t.Fatalf("rendered compare.csv differs:\n%s\nwant\n%s", got, want)
	}
	o2.seedList, o2.out = "1", t.TempDir()
	if err := runStudy(o2); err != nil {
		t.Fatal(err)
	}
	one, _ := os.ReadFile(filepath.Join(o2.out, "compare.csv"))
	if !strings.Contains(string(one), ",epsp-v1,bsp,1,") {
		t.Errorf("subset of one seed:\n%s", one)
	}
	if _, err := readRunsCSV(filepath.Join(dir, "compare.csv")); err == nil {
		t.Error("readRunsCSV accepted a compare.csv")
	}
}

// The per-policy, per-scenario selection (amendment 7) writes one chosen
// rate per pair, the fastest of its runs, and a study run with -lr-from
// uses exactly those rates.
func TestLRTune_Synthetic(t *testing.T) {
	if testing.Short() {
		t.Skip("runs fourteen short simulations")
	}
	dir := t.TempDir()
	o := options{out: dir, jobs: 2, stdout: &bytes.Buffer{}}
	specs, _ := selectPolicies("bsp,dynsgd")
	wl := workload{Name: "softmax", Model: "softmax", Duration: 300 * time.Millisecond, Steep: 0.6, High: 0.85,
		LR: map[family]float64{averagedSync: 1, dampedAsync: 1, undampedAsync: 1}}
	data := syntheticCache(t)
	if err := tuneLRWith(o, data, []workload{wl}, []string{"straggler"}, specs); err != nil {
		t.Fatal(err)
	}
	runs, err := readRunsCSV(filepath.Join(dir, "lrtune_runs.csv"))
	if err != nil || len(runs) != 2*len(tuneGrid) {
		t.Fatalf("lrtune_runs.csv: %d runs, %v", len(runs), err)
	}
	wls := []workload{wl}
	if err := readTuned(filepath.Join(dir, "lrtune.csv"), wls, []string{"straggler"}, specs); err != nil {
		t.Fatal(err)
	}
	for _, sp := range specs {
		lr, ok := wls[0].Tuned[tuneKey{"straggler", sp.Name}]
		if !ok {
			t.Fatalf("no tuned rate for %s", sp.Name)
		}
		var best *studyRun
		for _, r := range runs {
			if r.Policy != sp.Name {
				continue
			}
			if r.LR == lr {
				best = r
			}
		}
		for _, r := range runs {
			if r.Policy == sp.Name && (r.THigh < best.THigh || (r.THigh == best.THigh && r.TSteep < best.TSteep)) {
				t.Errorf("%s: chose lr %g (high %v, steep %v), but lr %g reached high %v, steep %v", sp.Name, lr, best.THigh, best.TSteep, r.LR, r.THigh, r.TSteep)
			}
		}
	}
	dir2 := t.TempDir()
	o.out = dir2
	if err := studyWith(o, data, wls, []string{"straggler"}, []uint64{1}, specs); err != nil {
		t.Fatal(err)
	}
	got, err := readRunsCSV(filepath.Join(dir2, "runs.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		if want := wls[0].Tuned[tuneKey{"straggler", r.Policy}]; r.LR != want {
			t.Errorf("%s ran at lr %g, tuned %g", r.Policy, r.LR, want)
		}
	}
	// a pair without a tuned rate is refused, not run at its family's
	if err := readTuned(filepath.Join(dir, "lrtune.csv"), []workload{wl}, []string{"straggler", "static"}, specs); err == nil {
		t.Error("readTuned accepted a file without rates for static")
	}
}

func TestPickRate(t *testing.T) {
	inf := math.Inf(1)
	run := func(lr, high, steep float64) *studyRun { return &studyRun{LR: lr, THigh: high, TSteep: steep} }
	for _, c := range []struct {
		name string
		rs   []*studyRun
		want float64
	}{
		{"fastest to high", []*studyRun{run(0.3, 2, 1), run(1, 0.8, 0.5), run(3, 0.9, 0.2)}, 1},
		{"tie on high, steep decides", []*studyRun{run(0.3, 0.8, 0.6), run(1, 0.8, 0.4), run(3, 0.8, 0.5)}, 1},
		{"full tie, smaller rate", []*studyRun{run(0.3, 0.8, 0.4), run(1, 0.8, 0.4)}, 0.3},
		{"never reaching loses", []*studyRun{run(0.3, inf, 0.4), run(1, 4, 2), run(5, inf, inf)}, 1},
		{"none reaches high", []*studyRun{run(0.3, inf, 0.9), run(1, inf, 0.5)}, 1},
	} {
		if got := pickRate(c.rs); got != c.want {
			t.Errorf("%s: pickRate = %g, want %g", c.name, got, c.want)
		}
	}
}

// TestFastestSkipsMissingCells: a row with a missing cell (NaN median)
// still has a fastest cell; a row with none reached has none (+Inf).
func TestFastestSkipsMissingCells(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range []struct {
		ts   []float64
		want float64
	}{
		{[]float64{1.5, nan, 0.8}, 0.8},
		{[]float64{nan, 2}, 2},
		{[]float64{inf, nan}, inf},
		{nil, inf},
	} {
		if got := fastest(c.ts); got != c.want {
			t.Errorf("fastest(%v) = %v, want %v", c.ts, got, c.want)
		}
	}
}
