package main

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/sim"
)

// Study v3's high target lies v3HighGap under BSP's plateau; its steep
// target is study v2's high one.
func TestSelectTargetsV3(t *testing.T) {
	ref := fakeRun("bsp", 0.8, 0.1, 0.6, 0.8, 0.85, 0.88, 0.89, 0.9, 0.9, 0.89, 0.91)
	i, a0, p, steep, high := selectTargetsV3([]*studyRun{ref}, 10*time.Second)
	if i != 0 || a0 != 0.1 || math.Abs(p-0.9) > 1e-12 {
		t.Fatalf("reference %d, a0 %v, plateau %v; want 0, 0.1, 0.9", i, a0, p)
	}
	// 0.1 + 0.95·0.8 = 0.86; 0.9 − 0.01 = 0.89.
	if math.Abs(steep-0.86) > 1e-9 || math.Abs(high-0.89) > 1e-9 {
		t.Fatalf("targets %v, %v; want 0.86, 0.89", steep, high)
	}
}

func TestParseSyncOptB(t *testing.T) {
	got, err := parseSyncOptB("straggler=1, mixed=3")
	if err != nil || len(got) != 2 || got["straggler"] != 1 || got["mixed"] != 3 {
		t.Fatalf("parseSyncOptB = %v, %v", got, err)
	}
	for _, bad := range []string{"straggler", "straggler=0", "mixed=x"} {
		if _, err := parseSyncOptB(bad); err == nil {
			t.Errorf("parseSyncOptB(%q): no error", bad)
		}
	}
	if got, err := parseSyncOptB(""); err != nil || len(got) != 0 {
		t.Errorf("parseSyncOptB(\"\") = %v, %v", got, err)
	}
}

// -syncopt-b replaces Sync-opt's b in its scenario only, and leaves every
// other policy alone.
func TestSpecFor_SyncOptB(t *testing.T) {
	specs, err := selectPolicies("sync-opt,bsp")
	if err != nil {
		t.Fatal(err)
	}
	o := options{syncOptB: map[string]int{"mixed": 3}}
	if s := o.specFor("mixed", specs[0]); !strings.Contains(s.Source, "b=3") || s.Name != "sync-opt" {
		t.Errorf("mixed: %+v", s)
	}
	if s := o.specFor("straggler", specs[0]); s.Source != specs[0].Source {
		t.Errorf("straggler: source %q changed", s.Source)
	}
	if s := o.specFor("mixed", specs[1]); s.Source != specs[1].Source {
		t.Errorf("bsp: source %q changed", s.Source)
	}
	got, err := o.specFor("mixed", specs[0]).New(nil, 12)
	want, _ := epsp.NewSyncOpt(epsp.SyncOptConfig{Backup: 3})
	def, _ := epsp.NewSyncOpt(epsp.DefaultSyncOptConfig())
	if err != nil || !reflect.DeepEqual(got, want) || reflect.DeepEqual(got, def) {
		t.Errorf("built %v, %v; want %v", got, err, want)
	}
}

// -v3 fixes the cost model and refuses to run until its selection is
// recorded.
func TestRunStudyV3_Refuses(t *testing.T) {
	o := options{study: true, v3: true, policies: "bsp", workloads: "all", jobs: 1, out: t.TempDir(), stdout: &bytes.Buffer{}, cost: defaultCostFlags()}
	if v3CNN.selected() {
		t.Skip("study v3's selection is recorded")
	}
	if err := runStudy(o); err == nil || !strings.Contains(err.Error(), "lr-select") {
		t.Errorf("unselected: err = %v", err)
	}
	o.cost.net = "resnet50"
	if err := runStudy(o); err == nil || !strings.Contains(err.Error(), "cost") {
		t.Errorf("cost flags: err = %v", err)
	}
}

// A cell without every seed is left out of study v3's tables and named.
func TestCompleteCells(t *testing.T) {
	byKey := map[string]*studyRun{}
	var order []string
	add := func(pol string, seed uint64) {
		k := fmt.Sprintf("%s/%d", pol, seed)
		byKey[k] = &studyRun{Workload: "cnn", Scenario: "straggler", Policy: pol, Seed: seed}
		order = append(order, k)
	}
	for s := uint64(1); s <= 5; s++ {
		add("dynsgd", s)
	}
	add("consgd", 1)
	add("consgd", 2)
	var w bytes.Buffer
	got := completeCells(order, byKey, 5, &w)
	if len(got) != 5 || !strings.HasPrefix(got[0], "dynsgd/") {
		t.Errorf("kept %v, want the five dynsgd runs", got)
	}
	if !strings.Contains(w.String(), "cnn/straggler/consgd has 2 of 5 seeds") {
		t.Errorf("message %q", w.String())
	}
}

// The time to target is the simulator's own test (a fresh sum of each
// window, as sim.Config.StopAtTarget applies it): here the window ending
// at the sixth evaluation has mean 0.95 summed afresh, and a running sum
// that adds and subtracts reads it a bit under.
func TestTargetSeconds_FreshWindow(t *testing.T) {
	accs := []float64{0.933, 0.952, 0.944, 0.939, 0.948, 0.967, 0.966}
	var ev []sim.EvalPoint
	for i, a := range accs {
		ev = append(ev, sim.EvalPoint{Time: time.Duration(i) * 25 * time.Millisecond, Accuracy: a})
	}
	if got := targetSeconds(ev, 0.95); got != 0.125 {
		t.Errorf("targetSeconds = %v, want 0.125 (the sixth evaluation)", got)
	}
	if got := targetSeconds(ev, 0.99); !math.IsInf(got, 1) {
		t.Errorf("unreachable target: %v", got)
	}
}
