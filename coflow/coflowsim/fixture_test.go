package coflowsim

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconml/falcon/coflow/coflowtest"
)

// fixtureDiff compares our reference-format output with coflowsim's.
type fixtureDiff struct {
	total      int    // coflows
	linesMatch int    // coflows whose whole line matches
	sumMatch   bool   // last line
	first      string // first coflow line that differs
}

func diffFixture(t *testing.T, dir, trace, sched string) fixtureDiff {
	t.Helper()
	res, err := Run(coflowtest.ReadTraceFile(t, filepath.Join(dir, trace+".txt")), sched, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteReference(&buf, res); err != nil {
		t.Fatal(err)
	}
	wantB, err := os.ReadFile(filepath.Join(dir, trace+"."+sched+".out"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	want := strings.Split(strings.TrimRight(string(wantB), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("%s %s: %d lines, reference has %d", trace, sched, len(got), len(want))
	}
	d := fixtureDiff{total: len(want) - 1, sumMatch: got[len(got)-1] == want[len(want)-1]}
	for i := range d.total {
		if got[i] == want[i] {
			d.linesMatch++
		} else if d.first == "" {
			d.first = fmt.Sprintf("line %d: got %q, want %q", i+1, got[i], want[i])
		}
	}
	return d
}

// TestFixtures replays the synthetic traces under every scheduler and
// requires coflowsim's output line for line: every coflow's start, finish,
// duration, deadline and reducer sums, and the sum line. The rules that
// make this hold are in doc.go; RESEARCH.md has how they were found.
// Reference: shared/data/coflowsim-fixtures/README.md (coflowsim, Varys/Aalo authors).
func TestFixtures(t *testing.T) {
	dir := coflowtest.SharedDir(t, "coflowsim-fixtures")
	for _, sched := range Schedulers() {
		for _, trace := range []string{"synth-a", "synth-b"} {
			t.Run(sched+"/"+trace, func(t *testing.T) {
				d := diffFixture(t, dir, trace, sched)
				if d.linesMatch != d.total || !d.sumMatch {
					t.Fatalf("%d/%d coflow lines match, sum line match %v; first mismatch %s", d.linesMatch, d.total, d.sumMatch, d.first)
				}
			})
		}
	}
}
