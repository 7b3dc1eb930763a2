package main

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/internal/study"
)

// table runs the example and returns its output and its rows by policy
// name (the six fields of each table row).
func table(t *testing.T, o options) (string, map[string][]string) {
	t.Helper()
	var out bytes.Buffer
	if err := run(&out, o); err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) == 6 {
			rows[f[0]] = f
		}
	}
	for _, p := range policies {
		if rows[p.name] == nil {
			t.Fatalf("no row for %s in\n%s", p.name, out.String())
		}
	}
	return out.String(), rows
}

// TestRun simulates a short straggler scenario and checks the table: one
// row per policy, the barrier moves no work, EPSP v2 moves some off the
// slow worker.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs five short simulations")
	}
	_, rows := table(t, options{scenario: "straggler", target: 0.5, duration: 500 * time.Millisecond, seeds: 1, first: 1})
	if r := rows["bsp"]; r[5] != "0" {
		t.Errorf("bsp moved work: %v", r)
	}
	if r := rows["epsp-v2"]; r[5] == "0" {
		t.Errorf("epsp-v2 moved no work off a 4x straggler: %v", r)
	}
}

var verdictRE = regexp.MustCompile(`(?m)^verdict: (\S+)(?: \(tied with \S+\))* first \(median (\S+) s\); (\S+) against (\S+), the strongest other: ` +
	`median paired reduction (\S+) \[95% CI (\S+), (\S+)\], a (win|loss|tie), over (\d+) paired seeds\. ` +
	`The whole study: go run \./cmd/falcon-study -study$`)

// TestRun_Verdict runs the default scenario with 2 seeds and a short
// duration and checks the verdict line against the run's own table: the
// policy named first has the lowest median time in the table, EPSP is the
// better of its two schemes there, the other is the best non-EPSP row, the
// seed count is the run's; and a run on other seeds prints another table.
func TestRun_Verdict(t *testing.T) {
	if testing.Short() {
		t.Skip("runs twenty short simulations")
	}
	o := options{scenario: "mixed", target: 0.5, duration: 400 * time.Millisecond, seeds: 2, first: 1}
	out, rows := table(t, o)
	m := verdictRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no verdict line of the expected shape in\n%s", out)
	}
	med := func(name string) float64 {
		if rows[name][1] == "never" {
			return math.Inf(1)
		}
		v, err := strconv.ParseFloat(rows[name][1], 64)
		if err != nil {
			t.Fatalf("row %v: %v", rows[name], err)
		}
		return v
	}
	if m[2] != rows[m[1]][1] {
		t.Errorf("verdict names %s first at %s s, its row says %s", m[1], m[2], rows[m[1]][1])
	}
	for _, p := range policies {
		if med(p.name) < med(m[1]) {
			t.Errorf("%s is faster (%v) than the policy called first, %s (%v)", p.name, med(p.name), m[1], med(m[1]))
		}
		if p.epsp && med(p.name) < med(m[3]) {
			t.Errorf("verdict judges %s, but %s is the better EPSP scheme", m[3], p.name)
		}
		if !p.epsp && med(p.name) < med(m[4]) {
			t.Errorf("verdict compares with %s, but %s is the stronger", m[4], p.name)
		}
	}
	if m[3] != "epsp-v2" && m[3] != "epsp-v2-slack" {
		t.Errorf("judged policy %q is not an EPSP scheme", m[3])
	}
	if m[9] != "2" {
		t.Errorf("verdict over %s seeds, the run had 2", m[9])
	}

	o.first = 3
	other, _ := table(t, o)
	tab := func(s string) string { return s[strings.Index(s, "\n"):] } // without the header naming the seeds
	if tab(other) == tab(out) {
		t.Errorf("seeds 3-4 print the same table and verdict as seeds 1-2:\n%s", out)
	}
}

// TestVerdict checks the verdict's figures against the statistics of
// internal/study for times made up here: the rule picks the faster EPSP
// scheme and the faster baseline, and the reduction is their median paired
// reduction with its bootstrap interval.
func TestVerdict(t *testing.T) {
	inf := math.Inf(1)
	times := map[string][]float64{
		"bsp":           {2, 2.5, 3, inf},
		"consgd":        {1.0, 1.2, 0.9, 1.1},
		"dynsgd":        {0.8, 1.0, 1.0, 0.9},
		"epsp-v2":       {1.5, 1.6, 1.4, 1.5},
		"epsp-v2-slack": {0.6, 1.1, 0.7, 0.95},
	}
	out := make([]outcome, len(policies))
	for i, p := range policies {
		if times[p.name] == nil {
			t.Fatalf("no times for %s", p.name)
		}
		out[i].times = times[p.name]
	}
	got, err := verdict(out, 4)
	if err != nil {
		t.Fatal(err)
	}
	iv, j, err := study.Compare(times["dynsgd"], times["epsp-v2-slack"], study.DefaultBootstrapConfig())
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("verdict: epsp-v2-slack first (median 0.825 s); epsp-v2-slack against dynsgd, the strongest other: median paired reduction %s [95%% CI %s, %s], a %s, over 4 paired seeds.",
		percent(iv.Median), percent(iv.Lo), percent(iv.Hi), j)
	if !strings.HasPrefix(got, want) {
		t.Errorf("verdict\n%s\nwant it to start\n%s", got, want)
	}
	// The paired reductions of these times are 0.25, −0.1, 0.3 and −0.0556, their median 0.0972.
	if math.Abs(iv.Median-0.0972) > 0.001 {
		t.Errorf("median reduction %v, want 0.0972", iv.Median)
	}

	// A tie for first is named: the slack scheme slowed to dynsgd's median.
	out[4].times = []float64{0.8, 1.0, 1.0, 0.9}
	if got, err = verdict(out, 4); err != nil {
		t.Fatal(err)
	}
	if want := "verdict: dynsgd (tied with epsp-v2-slack) first (median 0.950 s);"; !strings.HasPrefix(got, want) {
		t.Errorf("verdict\n%s\nwant it to start\n%s", got, want)
	}
}
