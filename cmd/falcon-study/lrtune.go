package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/falconml/falcon/internal/cputime"
)

// tuneGrid is the grid of the per-policy, per-scenario learning-rate
// selection (PROTOCOL.md amendment 7): both sides of every family's §2
// rate.
var tuneGrid = []float64{0.3, 0.5, 1, 2, 3, 5}

// tuneKey names one tuned learning rate: a policy in a scenario.
type tuneKey struct{ Scenario, Policy string }

// lrFor is the learning rate of spec in scenario sc: the tuned one when
// the workload carries tuned rates (-lr-from), else its family's.
func (w workload) lrFor(sc string, spec policySpec) float64 {
	if lr, ok := w.Tuned[tuneKey{sc, spec.Name}]; ok {
		return lr
	}
	return w.LR[spec.Family]
}

// tuneLRWith is -study -lr-tune (PROTOCOL.md amendment 7): for every
// workload, scenario and policy, one run per rate of tuneGrid with the
// selection seed; the chosen rate has the smallest time to the workload's
// high target, ties by the smaller time to the steep target, then the
// smaller rate (selectLR on one-member lists). It writes lrtune_runs.csv
// (growing as runs finish), lrtune.csv (the chosen rates, the input of
// -lr-from) and lrtune.md.
func tuneLRWith(o options, data *dataCache, wls []workload, scs []string, specs []policySpec) error {
	var jobs []studyJob
	for _, wl := range wls {
		for _, sc := range scs {
			for _, spec := range specs {
				for _, lr := range tuneGrid {
					jobs = append(jobs, studyJob{wl: wl, scenario: sc, spec: spec, seed: lrSeed, lr: lr})
				}
			}
		}
	}
	cpu0, t0 := cputime.Process(), time.Now()
	fmt.Fprintf(os.Stderr, "lr-tune: %d simulations (%d workloads x %d scenarios x %d policies x %d learning rates, seed %d), -j %d\n",
		len(jobs), len(wls), len(scs), len(specs), len(tuneGrid), lrSeed, o.jobs)
	runs, err := runJobsRecording(o, data, jobs, "lrtune_runs.csv")
	if err != nil {
		return err
	}
	cpu, wall := cputime.Process()-cpu0, time.Since(t0)
	at := map[string]*studyRun{}
	for _, r := range runs {
		at[fmt.Sprintf("%s/%s/%s/%g", r.Workload, r.Scenario, r.Policy, r.LR)] = r
	}
	chosen := map[string]float64{}
	f, bw, err := createIn(o.out, "lrtune.csv")
	if err != nil {
		return err
	}
	fmt.Fprintln(bw, "workload,scenario,policy,family,lr")
	for _, wl := range wls {
		for _, sc := range scs {
			for _, spec := range specs {
				var rs []*studyRun
				for _, lr := range tuneGrid {
					rs = append(rs, at[fmt.Sprintf("%s/%s/%s/%g", wl.Name, sc, spec.Name, lr)])
				}
				lr := pickRate(rs)
				chosen[wl.Name+"/"+sc+"/"+spec.Name] = lr
				fmt.Fprintf(bw, "%s,%s,%s,%s,%s\n", wl.Name, sc, spec.Name, spec.Family, csvF(lr))
			}
		}
	}
	if err := closeOut(f, bw); err != nil {
		return err
	}
	if f, bw, err = createIn(o.out, "lrtune.md"); err != nil {
		return err
	}
	writeTuneMarkdown(bw, wls, scs, specs, at, chosen, cpu, wall)
	if err := closeOut(f, bw); err != nil {
		return err
	}
	writeTuneMarkdown(o.stdout, wls, scs, specs, at, chosen, cpu, wall)
	fmt.Fprintf(os.Stderr, "lr-tune: wrote lrtune_runs.csv, lrtune.csv and lrtune.md in %s\n", o.out)
	return nil
}

// pickRate chooses among one policy's runs at the grid's rates (in
// increasing order of rate): the smallest time to the high target, ties
// by the smaller time to the steep target, then the smaller rate
// (selectLR on one-member lists).
func pickRate(rs []*studyRun) float64 {
	var times, ties [][]float64
	for _, r := range rs {
		times = append(times, []float64{r.THigh})
		ties = append(ties, []float64{r.TSteep})
	}
	best, _, _ := selectLR(times, ties)
	return rs[best].LR
}

func writeTuneMarkdown(w io.Writer, wls []workload, scs []string, specs []policySpec, at map[string]*studyRun, chosen map[string]float64, cpu, wall time.Duration) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("# Learning rate per policy and scenario (PROTOCOL.md amendment 7)\n\n")
	p("Command: `%s`\n\n", strings.Join(os.Args, " "))
	p("Seed %d, grid %v; chosen: the smallest time to the high target, ties by the steep target, then the smaller rate. %.0f CPU-seconds, %s wall.\n\n",
		lrSeed, tuneGrid, cpu.Seconds(), wall.Round(time.Second))
	for _, wl := range wls {
		p("## %s (targets: steep %.3f, high %.3f; §2's rates: %s)\n\nChosen rate per scenario (rows) and policy (columns):\n\n",
			wl.Name, wl.Steep, wl.High, wl.familyRates())
		cols := []string{"scenario"}
		for _, sp := range specs {
			cols = append(cols, sp.Name)
		}
		mdHeader(w, cols...)
		for _, sc := range scs {
			p("| %s |", sc)
			for _, sp := range specs {
				p(" %g |", chosen[wl.Name+"/"+sc+"/"+sp.Name])
			}
			p("\n")
		}
		for _, sc := range scs {
			p("\n### %s: time to the high target (steep) in s, per rate\n\n", sc)
			mdHeader(w, append([]string{"policy"}, rateCols(tuneGrid)...)...)
			for _, sp := range specs {
				p("| %s |", sp.Name)
				for _, lr := range tuneGrid {
					r := at[fmt.Sprintf("%s/%s/%s/%g", wl.Name, sc, sp.Name, lr)]
					cell := fmt.Sprintf("%s (%s)", fmtT(r.THigh), fmtT(r.TSteep))
					if lr == chosen[wl.Name+"/"+sc+"/"+sp.Name] {
						cell = "**" + cell + "**"
					}
					p(" %s |", cell)
				}
				p("\n")
			}
		}
		p("\n")
	}
}

// readTuned reads an lrtune.csv into the workloads' Tuned maps. Every
// (scenario, policy) pair the study will run must have a rate, so that a
// tuned study never silently falls back to a family's rate.
func readTuned(path string, wls []workload, scs []string, specs []policySpec) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) == 0 || lines[0] != "workload,scenario,policy,family,lr" {
		return fmt.Errorf("%s: not an lrtune.csv", path)
	}
	for i := range wls {
		wls[i].Tuned = map[tuneKey]float64{}
	}
	for n, line := range lines[1:] {
		f := strings.Split(line, ",")
		if len(f) != 5 {
			return fmt.Errorf("%s:%d: want 5 fields, got %d", path, n+2, len(f))
		}
		lr, err := strconv.ParseFloat(f[4], 64)
		if err != nil || !(lr > 0) {
			return fmt.Errorf("%s:%d: learning rate %q", path, n+2, f[4])
		}
		for i := range wls {
			if wls[i].Name == f[0] {
				wls[i].Tuned[tuneKey{f[1], f[2]}] = lr
			}
		}
	}
	for _, wl := range wls {
		for _, sc := range scs {
			for _, sp := range specs {
				if _, ok := wl.Tuned[tuneKey{sc, sp.Name}]; !ok {
					return fmt.Errorf("%s: no tuned learning rate for %s, %s, %s", path, wl.Name, sc, sp.Name)
				}
			}
		}
	}
	return nil
}

// familyRates is "f₁ r₁, f₂ r₂, f₃ r₃": the workload's rate per family,
// in the order of the tables.
func (w workload) familyRates() string {
	var b strings.Builder
	for i, f := range families {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %g", f, w.LR[f])
	}
	return b.String()
}

// rateCols names one column per learning rate: "lr 0.3", "lr 1", ...
func rateCols(grid []float64) []string {
	var cols []string
	for _, lr := range grid {
		cols = append(cols, fmt.Sprintf("lr %g", lr))
	}
	return cols
}

// mdHeader writes a Markdown table's header row and rule.
func mdHeader(w io.Writer, cols ...string) {
	fmt.Fprintf(w, "| %s |\n|", strings.Join(cols, " | "))
	for range cols {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
}
