package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPlan: every scheduler runs once on every slice in every cell; a
// slice's runs in one cell are contiguous (one bed); the cell and
// scheduler orders rotate by one per slice, so each scheduler takes each
// position once over as many slices as there are schedulers.
func TestPlan(t *testing.T) {
	skips := []int{50, 150, 250, 300, 350}
	cells := []cell{{10, 0.06}, {10, 0.12}, {40, 0.06}, {40, 0.12}}
	scheds := []string{"sebf", "sebf+lz4", "dclas+lz4", "fvdf"}
	runs := plan(skips, cells, scheds)
	if len(runs) != len(skips)*len(cells)*len(scheds) {
		t.Fatalf("%d runs", len(runs))
	}
	seen := map[string]bool{}
	pos := map[string]map[int]int{}
	for i, r := range runs {
		k := fmt.Sprint(r.Skip, r.Cell, r.Sched)
		if seen[k] {
			t.Fatalf("run %v twice", k)
		}
		seen[k] = true
		if i%len(scheds) != r.Pos {
			t.Fatalf("run %d at position %d", i, r.Pos)
		}
		if r.Pos > 0 && (runs[i-1].Cell != r.Cell || runs[i-1].Skip != r.Skip) {
			t.Fatalf("run %d leaves its block", i)
		}
		if pos[r.Sched] == nil {
			pos[r.Sched] = map[int]int{}
		}
		pos[r.Sched][r.Pos]++
	}
	for _, s := range scheds {
		for p := range scheds {
			if pos[s][p] < len(cells) {
				t.Errorf("%s at position %d in %d blocks, want at least %d", s, p, pos[s][p], len(cells))
			}
		}
	}
	if runs[0].Cell != cells[0] || runs[len(scheds)*len(cells)].Cell != cells[1] || runs[len(scheds)*len(cells)].Sched != scheds[1] {
		t.Errorf("slice 1 starts with %v %s, want the rotated orders", runs[len(scheds)*len(cells)].Cell, runs[len(scheds)*len(cells)].Sched)
	}
}

// TestCellPeriod: 10 ms where the quota holds at least 1.2 ms of it,
// else the shortest whole millisecond period that does (the kernel's
// minimum quota is 1 ms).
func TestCellPeriod(t *testing.T) {
	for _, c := range []struct {
		cores float64
		want  time.Duration
	}{{0.12, 10 * time.Millisecond}, {0.5, 10 * time.Millisecond}, {0.06, 20 * time.Millisecond}, {0.05, 24 * time.Millisecond}} {
		p := cell{40, c.cores}.period()
		if p != c.want {
			t.Errorf("%g core: period %v, want %v", c.cores, p, c.want)
		}
		if q := time.Duration(c.cores * float64(p)); q < time.Millisecond {
			t.Errorf("%g core: quota %v of %v", c.cores, q, p)
		}
	}
}

// TestMatrixPlanFlags: -live-matrix's flags make the protocol's plan, and
// bad ones are refused (fvdf missing, no CSV, a repeated slice, a quota
// above one core).
func TestMatrixPlanFlags(t *testing.T) {
	args := "-live-matrix -trace t.txt -matrix-skips 50,150 -matrix-mbit 10,40 -matrix-cores 0.06,0.12 -sched sebf,fvdf -live-csv m.csv -bed-shares 4096"
	o, err := parseFlags(strings.Fields(args), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := matrixPlan(o)
	if err != nil || len(runs) != 2*4*2 || o.matrix.shares != 4096 || o.matrix.mbPerMbit != 3.75 {
		t.Fatalf("plan %d runs, %v (options %+v)", len(runs), err, o.matrix)
	}
	for _, bad := range []string{
		"-live-matrix -trace t.txt -sched sebf -live-csv m.csv",
		"-live-matrix -trace t.txt -sched sebf,fvdf",
		"-live-matrix -trace t.txt -sched sebf,fvdf -live-csv m.csv -matrix-skips 50,50",
		"-live-matrix -trace t.txt -sched sebf,fvdf -live-csv m.csv -matrix-cores 2",
		"-live-matrix -trace t.txt -sched sebf,fvdf -live-csv m.csv -matrix-mbit 0",
	} {
		o, err := parseFlags(strings.Fields(bad), &bytes.Buffer{})
		if err != nil {
			t.Fatalf("%s: %v", bad, err)
		}
		if _, err := matrixPlan(o); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	defer func(f func() int) { geteuid = f }(geteuid)
	geteuid = func() int { return 1000 }
	if err := runLiveMatrix(o, &bytes.Buffer{}); !errors.Is(err, errNotRoot) {
		t.Errorf("without root: %v", err)
	}
}

// rowsFor makes a matrix's rows: per slice, FVDF at fvdfMS and each
// baseline at ratio × fvdfMS live, simulated at sim × live.
func rowsFor(skips []int, c cell, ratios map[string][]float64, sim float64) []runRow {
	var out []runRow
	for i, s := range skips {
		f := 100 + 10*float64(i)
		out = append(out, runRow{Skip: s, Cell: c, Sched: "fvdf", Status: "ok", LiveMS: f, SimMS: f / sim, Sim0MS: f, CoflowMedian: 1, Wire: 1e6, Raw: 2e6, AgentCPU: 0.05})
		for n, r := range ratios {
			out = append(out, runRow{Skip: s, Cell: c, Sched: n, Status: "ok", LiveMS: f * r[i], SimMS: f * r[i] / sim, Sim0MS: f, CoflowMedian: 1.3, Wire: 1e6, Raw: 1e6, AgentCPU: 0.03})
		}
	}
	return out
}

// TestMatrixReport: the CSV round-trips; FVDF wins where every slice's
// ratio is above 1, ties where they straddle 1; a failed attempt followed
// by a successful one keeps the slice, a slice without a successful run
// of some scheduler leaves the pairs and is named.
func TestMatrixReport(t *testing.T) {
	skips := []int{50, 150, 250, 300, 350}
	win := cell{40, 0.06}
	rows := rowsFor(skips, win, map[string][]float64{"sebf+lz4": {1.5, 1.6, 1.4, 1.7, 1.55}, "sebf": {1, 1, 1, 1, 1}}, 1)
	rows = append(rows, rowsFor(skips, cell{10, 0.12}, map[string][]float64{"sebf+lz4": {0.8, 1.2, 0.9, 1.1, 1.0}, "sebf": {1, 1, 1, 1, 1}}, 1.3)...)
	rows = append(rows, runRow{Skip: 400, Cell: win, Sched: "fvdf", Status: "failed", Attempt: 1, Err: "agent 3: exit status 1"},
		runRow{Skip: 400, Cell: win, Sched: "fvdf", Status: "failed", Attempt: 2, Err: "agent 3: exit status 1"},
		runRow{Skip: 400, Cell: win, Sched: "sebf+lz4", Status: "ok", LiveMS: 1, SimMS: 1, Sim0MS: 1, Wire: 1, Raw: 1},
		runRow{Skip: 400, Cell: win, Sched: "sebf", Status: "ok", LiveMS: 1, SimMS: 1, Sim0MS: 1, Wire: 1, Raw: 1})
	var buf bytes.Buffer
	buf.WriteString(strings.Join(rowHeader, ",") + "\n")
	for _, r := range rows {
		buf.WriteString(strings.Join(r.record(), ",") + "\n")
	}
	back, err := readRows(&buf)
	if err != nil || len(back) != len(rows) {
		t.Fatalf("read back %d rows, %v", len(back), err)
	}
	var out bytes.Buffer
	if err := matrixReport(back, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"| 40Mbit/0.06core | sebf+lz4 | 5 | 1.55 [",
		"| 10Mbit/0.12core | sebf+lz4 | 5 | 1.00 [",
		"| FVDF wins | 1.55 [",
		"| tie | 1.00 [",
		"| 10Mbit/0.12core | fvdf | 5 | 120.0 | 1.30 [1.30, 1.30] | 0/5 |",
		"40Mbit/0.06core: slices [400] lack a successful run",
		"| 40Mbit/0.06core | sebf+lz4 | 5 | 1.55 [1.40, 1.70] | 1.55 [1.40, 1.70] | 1.00 [1.00, 1.00] | 50: 1.50 / 1.50,",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if _, err := readRows(strings.NewReader("utc,skip\n1,2\n")); err == nil {
		t.Error("a foreign CSV was read")
	}
}
