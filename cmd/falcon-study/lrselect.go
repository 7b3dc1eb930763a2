package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/falconml/falcon/internal/cputime"
	"github.com/falconml/falcon/internal/study"
)

// lrSelection is the outcome of PROTOCOL.md §1 (targets) and §2
// (learning rates) for one workload.
type lrSelection struct {
	Workload    string
	RefLR       float64 // BSP's reference run (highest mean accuracy)
	A0, Plateau float64
	Steep, High float64
	LR          map[family]float64
	// Score[f][i] is family f's median time to the high target at
	// lrGrid[i]; Tie[f][i] the median time to the steep target.
	Score, Tie map[family][]float64
}

// floor005 rounds down to a multiple of 0.005.
func floor005(x float64) float64 { return math.Floor(x*200+1e-9) / 200 }

// selectTargets applies PROTOCOL.md §1 to BSP's runs at each grid lr
// (bsp[i] at lrGrid[i]): the reference run has the highest mean accuracy
// (ties: the smaller lr); a₀ is its first evaluation, P the mean of its
// evaluations at t ≥ 0.8·D; steep = a₀ + 0.75(P − a₀) and high =
// a₀ + 0.95(P − a₀), rounded down to 0.005.
func selectTargets(bsp []*studyRun, d time.Duration) (ref int, a0, plateau, steep, high float64) {
	ref = 0
	for i, r := range bsp {
		if r.MeanAcc > bsp[ref].MeanAcc {
			ref = i
		}
	}
	ev := bsp[ref].Evals
	a0 = ev[0].Accuracy
	n := 0
	for _, e := range ev {
		if float64(e.Time) >= 0.8*float64(d) {
			plateau += e.Accuracy
			n++
		}
	}
	plateau /= float64(max(n, 1))
	return ref, a0, plateau, floor005(a0 + 0.75*(plateau-a0)), floor005(a0 + 0.95*(plateau-a0))
}

// selectLR applies PROTOCOL.md §2: times[i][k] are the high-target times
// of the family's k-th member at lrGrid[i], ties[i][k] the steep-target
// times. It returns the index of the chosen lr and the scores.
func selectLR(times, ties [][]float64) (best int, score, tie []float64) {
	for i := range times {
		score = append(score, study.Median(times[i]))
		tie = append(tie, study.Median(ties[i]))
	}
	best = 0
	for i := 1; i < len(score); i++ {
		if score[i] < score[best] || (score[i] == score[best] && tie[i] < tie[best]) {
			best = i
		}
	}
	return best, score, tie
}

// lrSelectWith runs the selection for the given workloads and policies
// on data and writes lr.csv, evals.csv and lr.md.
func lrSelectWith(o options, data *dataCache, wls []workload, specs []policySpec) error {
	if !slices.ContainsFunc(specs, func(s policySpec) bool { return s.Name == "bsp" }) {
		return fmt.Errorf("-lr-select needs bsp among the policies (its curve defines the targets)")
	}
	var jobs []studyJob
	for _, wl := range wls {
		for _, lr := range lrGrid {
			for _, spec := range specs {
				jobs = append(jobs, studyJob{wl: wl, scenario: "homogeneous", spec: spec, seed: lrSeed, lr: lr})
			}
		}
	}
	cpu0, t0 := cputime.Process(), time.Now()
	fmt.Fprintf(os.Stderr, "lr-select: %d simulations (%d workloads x %d learning rates x %d policies, homogeneous, seed %d), -j %d\n", len(jobs), len(wls), len(lrGrid), len(specs), lrSeed, o.jobs)
	runs, err := runJobs(o, data, jobs, os.Stderr)
	if err != nil {
		return err
	}
	cpu, wall := cputime.Process()-cpu0, time.Since(t0)
	var sels []lrSelection
	for _, wl := range wls {
		at := func(pol string, i int) *studyRun {
			for _, r := range runs {
				if r.Workload == wl.Name && r.Policy == pol && r.LR == lrGrid[i] {
					return r
				}
			}
			return nil
		}
		var bsp []*studyRun
		for i := range lrGrid {
			bsp = append(bsp, at("bsp", i))
		}
		ref, a0, plat, steep, high := selectTargets(bsp, wl.Duration)
		sel := lrSelection{Workload: wl.Name, RefLR: lrGrid[ref], A0: a0, Plateau: plat, Steep: steep, High: high,
			LR: map[family]float64{}, Score: map[family][]float64{}, Tie: map[family][]float64{}}
		for _, r := range runs {
			if r.Workload == wl.Name {
				r.Steep, r.High = steep, high
				r.TSteep, r.THigh = targetSeconds(r.Evals, steep), targetSeconds(r.Evals, high)
			}
		}
		for _, f := range families {
			times := make([][]float64, len(lrGrid))
			ties := make([][]float64, len(lrGrid))
			for i := range lrGrid {
				for _, sp := range specs {
					if sp.Family == f {
						r := at(sp.Name, i)
						times[i] = append(times[i], r.THigh)
						ties[i] = append(ties[i], r.TSteep)
					}
				}
			}
			if len(times[0]) == 0 {
				continue
			}
			best, score, tie := selectLR(times, ties)
			sel.LR[f], sel.Score[f], sel.Tie[f] = lrGrid[best], score, tie
		}
		sels = append(sels, sel)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	f, bw, err := createIn(o.out, "lr.csv")
	if err != nil {
		return err
	}
	fmt.Fprintln(bw, "workload,policy,family,lr,t_steep_s,t_high_s,mean_acc,final_acc,steps_per_s,cpu_s")
	for _, r := range runs {
		fmt.Fprintf(bw, "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", r.Workload, r.Policy, r.Family, csvF(r.LR), csvF(r.TSteep), csvF(r.THigh),
			csvF(r.MeanAcc), csvF(r.FinalAcc), csvF(r.stepsPerSec()), csvF(r.CPU))
	}
	if err := closeOut(f, bw); err != nil {
		return err
	}
	if f, bw, err = createIn(o.out, "evals.csv"); err != nil {
		return err
	}
	writeEvalsCSV(bw, runs)
	if err := closeOut(f, bw); err != nil {
		return err
	}
	if f, bw, err = createIn(o.out, "lr.md"); err != nil {
		return err
	}
	writeLRMarkdown(bw, sels, runs, specs, cpu, wall)
	if err := closeOut(f, bw); err != nil {
		return err
	}
	writeLRMarkdown(o.stdout, sels, runs, specs, cpu, wall)
	fmt.Fprintf(os.Stderr, "lr-select: wrote lr.csv, evals.csv and lr.md in %s\n", o.out)
	return nil
}

func writeLRMarkdown(w io.Writer, sels []lrSelection, runs []*studyRun, specs []policySpec, cpu, wall time.Duration) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("# Learning-rate and target selection (PROTOCOL.md §1-2, 2026-12-01)\n\n")
	p("Command: `%s`\n\n", strings.Join(os.Args, " "))
	p("Homogeneous scenario, seed %d, grid %v. %d simulations, %.0f CPU-seconds, %s wall.\n\n", lrSeed, lrGrid, len(runs), cpu.Seconds(), wall.Round(time.Second))
	for _, s := range sels {
		p("## %s\n\n", s.Workload)
		p("BSP reference run: lr %g (highest mean accuracy). a0 = %.4f, plateau P = %.4f (mean at t >= 0.8 D).\n", s.RefLR, s.A0, s.Plateau)
		p("Targets: **steep %.3f**, **high %.3f**.\n\n", s.Steep, s.High)
		p("| family | ")
		for _, lr := range lrGrid {
			p("lr %g: median t_high (t_steep) | ", lr)
		}
		p("chosen |\n|---|")
		for range lrGrid {
			p("---|")
		}
		p("---|\n")
		for _, f := range families {
			if s.Score[f] == nil {
				continue
			}
			p("| %s | ", f)
			for i := range lrGrid {
				p("%s (%s) | ", fmtT(s.Score[f][i]), fmtT(s.Tie[f][i]))
			}
			p("**%g** |\n", s.LR[f])
		}
		p("\nPer policy, time to the high target (steep) in s:\n\n")
		mdHeader(w, append([]string{"policy", "family"}, rateCols(lrGrid)...)...)
		for _, sp := range specs {
			p("| %s | %s |", sp.Name, sp.Family)
			for _, lr := range lrGrid {
				for _, r := range runs {
					if r.Workload == s.Workload && r.Policy == sp.Name && r.LR == lr {
						p(" %s (%s) |", fmtT(r.THigh), fmtT(r.TSteep))
					}
				}
			}
			p("\n")
		}
		p("\nFor studyWorkloads: `Steep: %g, High: %g, LR: map[family]float64{averagedSync: %g, dampedAsync: %g, undampedAsync: %g}`\n\n",
			s.Steep, s.High, s.LR[averagedSync], s.LR[dampedAsync], s.LR[undampedAsync])
	}
}
