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
	timesMatch int    // coflows whose start, finish and duration match
	linesMatch int    // coflows whose whole line matches
	sumMatch   bool   // last line
	first      string // first coflow whose times differ
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
		g, w := strings.Fields(got[i]), strings.Fields(want[i])
		if len(g) != 10 || len(w) != 10 {
			t.Fatalf("%s %s line %d: want 10 fields: got %q want %q", trace, sched, i+1, got[i], want[i])
		}
		if g[0] == w[0] && g[1] == w[1] && g[2] == w[2] && g[7] == w[7] {
			d.timesMatch++
		} else if d.first == "" {
			d.first = fmt.Sprintf("line %d: got %q, want %q", i+1, got[i], want[i])
		}
		if got[i] == want[i] {
			d.linesMatch++
		}
	}
	return d
}

// exactSchedulers are reproduced coflow by coflow, every column and the sum
// line included. The others are reconstructions whose match counts the test
// reports when it skips.
var exactSchedulers = map[string]bool{"FAIR": true, "DARK": true}

// matchFloor is, for the reconstructed schedulers, how many coflows of
// synth-a and synth-b have their start, finish and duration reproduced
// today (see doc.go for the rules and RESEARCH.md for how they were
// found): a change to the rules that loses any of them fails the test
// instead of going unnoticed. A floor equal to the trace's coflow count
// means that every line, reducer sums and the sum line included, matches,
// and is asserted so.
var matchFloor = map[string][2]int{
	"FIFO": {120, 200},
	"SCF":  {120, 200},
	"NCF":  {120, 200},
	"LCF":  {120, 185},
	"SEBF": {120, 200},
	"DARK": {120, 200}, // exact now (exactSchedulers)
	"PFP":  {120, 200},
}

// TestFixtures replays the synthetic traces under every scheduler and
// compares with coflowsim's output.
// Reference: shared/data/coflowsim-fixtures/README.md (coflowsim, Varys/Aalo authors).
func TestFixtures(t *testing.T) {
	dir := coflowtest.SharedDir(t, "coflowsim-fixtures")
	for _, sched := range Schedulers() {
		for ti, trace := range []string{"synth-a", "synth-b"} {
			t.Run(sched+"/"+trace, func(t *testing.T) {
				d := diffFixture(t, dir, trace, sched)
				floor := matchFloor[sched][ti]
				if exactSchedulers[sched] || floor == d.total {
					if d.linesMatch != d.total || !d.sumMatch {
						t.Fatalf("%d/%d lines match, sum line match %v; first mismatch %s", d.linesMatch, d.total, d.sumMatch, d.first)
					}
					return
				}
				if d.timesMatch < floor {
					t.Fatalf("start/finish/duration match for %d/%d coflows, fewer than the %d reproduced before; first mismatch %s",
						d.timesMatch, d.total, floor, d.first)
				}
				t.Skipf("not reproduced yet: start/finish/duration match for %d/%d coflows (%d full lines); first mismatch %s",
					d.timesMatch, d.total, d.linesMatch, d.first)
			})
		}
	}
}
