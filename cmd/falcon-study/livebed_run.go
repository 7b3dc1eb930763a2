package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/falconml/falcon/internal/study"
	"github.com/falconml/falcon/model/mnist"
	"github.com/falconml/falcon/ps/sim"
	"github.com/falconml/falcon/straggler"
)

// runLiveBedMain dispatches the live bed's modes (bedFlags).
func runLiveBedMain(o options, f bedFlags, seeds string, set map[string]bool) error {
	if !set["out"] {
		o.out = "livebed-out"
	}
	if !set["scenario"] {
		o.scenario = "straggler"
	}
	if !set["policies"] {
		o.policies = "epsp-v2,epsp-v2-slack-ungated,dynsgd,consgd,sync-opt,lb-bsp,bsp"
	}
	switch {
	case f.report:
		return bedReport(o)
	case f.twin:
		return bedTwins(o, seeds)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := mnist.Locate()
	if err != nil {
		return fmt.Errorf("the live bed needs MNIST: %w", err)
	}
	undo, err := ctlGroup()
	if err != nil {
		return fmt.Errorf("control cgroup: %w", err)
	}
	defer undo()
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	if f.sel {
		return bedSelect(ctx, o, exe, dir, f)
	}
	if !(bedHigh > 0) {
		return fmt.Errorf("no targets recorded: run -live-bed-select first and record them (PROTOCOL-live.md §3)")
	}
	sc, specs, seedList, err := bedInputs(o, seeds)
	if err != nil {
		return err
	}
	d := bedDuration
	if f.duration > 0 {
		d = f.duration
	}
	fmt.Fprintf(o.stdout, "live bed: scenario %s, quotas %v cores, links %v bit/s, policies %s, seeds %v, targets steep %.3f high %.3f, cap %v\ncommand: %s\n",
		sc.Name, sc.Cores, sc.RateBits, o.policies, seedList, bedSteep, bedHigh, d, commandLine())
	path := filepath.Join(o.out, "live-runs.csv")
	for _, seed := range seedList {
		for _, spec := range specs {
			spec = bedSpec(spec)
			t0 := time.Now()
			r, err := runBedOne(ctx, exe, dir, sc, spec, seed, bedHigh, d)
			if err != nil {
				return fmt.Errorf("%s/%s seed %d: %w", sc.Name, spec.Name, seed, err)
			}
			if err := appendCSV(path, bedRunHeader, r.record()); err != nil {
				return err
			}
			printBedRun(o.stdout, r, time.Since(t0))
		}
	}
	return nil
}

func printBedRun(w io.Writer, r *bedRun, wall time.Duration) {
	nw := len(r.Samples)
	got, rate := make([]float64, nw), make([]float64, nw)
	for k := range nw {
		got[k], rate[k] = r.coresGot(k), r.rate(k)
	}
	fmt.Fprintf(w, "policy=%s scenario=%s mode=bed seed=%d t_steep_s=%s t_high_s=%s end_s=%.2f final_acc=%.4f clocks=%v samples=%v cores_got=%s rate_sps=%s load1=%.2f wall=%.0fs note=%q\n",
		r.Policy, r.Scenario, r.Seed, fmtT(r.TSteep), fmtT(r.THigh), r.End, r.FinalAcc, r.Clocks, r.Samples, joinF(got, 3), joinF(rate, 0), r.Load1, wall.Seconds(), r.Note)
}

// bedSelect is PROTOCOL-live.md §3: BSP on the homogeneous bed, seed 0,
// bedSelectDuration, not stopped; it prints a₀, the plateau P (mean of the
// evaluations at t ≥ 0.8 D), the targets, each worker's compute rate and
// the communication share.
func bedSelect(ctx context.Context, o options, exe, dir string, f bedFlags) error {
	sc, _ := bedScenarioByName("homogeneous")
	specs, err := selectPolicies("bsp")
	if err != nil {
		return err
	}
	d := bedSelectDuration
	if f.duration > 0 {
		d = f.duration
	}
	r, err := runBedOne(ctx, exe, dir, sc, specs[0], 0, 0, d)
	if err != nil {
		return err
	}
	if err := appendCSV(filepath.Join(o.out, "live-select.csv"), bedRunHeader, r.record()); err != nil {
		return err
	}
	printBedRun(o.stdout, r, 0)
	if len(r.Evals) == 0 {
		return fmt.Errorf("no evaluations")
	}
	a0 := r.Evals[0]
	var sum float64
	var n int
	for i, a := range r.Evals {
		if float64(i)*bedEvery.Seconds() >= 0.8*r.End {
			sum += a
			n++
		}
	}
	p := sum / float64(n)
	steep, high := floor005(a0+0.95*(p-a0)), floor005(p-v3HighGap)
	var rates, shares []float64
	for w := range r.Samples {
		rates = append(rates, r.rate(w))
		shares = append(shares, 1-r.Compute[w]/r.Wall[w])
	}
	fmt.Fprintf(o.stdout, "selection: a0 %.4f, plateau %.4f (%d evaluations at t >= 0.8 D): steep %.3f, high %.3f\n", a0, p, n, steep, high)
	fmt.Fprintf(o.stdout, "compute rate per worker (samples per s inside Gradient) %s: median %.1f; share of each worker's span outside Gradient (communication, barrier, coordinator) %s\n",
		joinF(rates, 1), median(rates), joinF(shares, 3))
	fmt.Fprintf(o.stdout, "record: bedSteep, bedHigh, bedSampleRate = %g, %g, %.1f\n", steep, high, median(rates))
	return nil
}

// ---------------------------------------------------------------------
// The simulated twin.

var bedSimHeader = []string{"scenario", "policy", "seed", "lr", "t_steep_s", "t_high_s", "end_s", "final_acc", "clocks", "cpu_s"}

// bedTwinConfig is the simulator's configuration of the bed scenario sc
// (PROTOCOL-live.md §5): per worker a one-core host at bedSampleRate ×
// its quota / bedBaseCores, its tbf rate as its link (full duplex: tbf
// limits each direction), the server's unlimited link as 10 Gbit/s,
// LeNet-5's tensor list, study v3's latency, noise and apply cost.
func bedTwinConfig(sc bedScenario, seed uint64, lr float64) (sim.Config, straggler.Model, error) {
	nw := sc.workers()
	hc := straggler.DefaultHeteroConfig(nw)
	hc.DefaultCores = 1
	hc.BaseRate = bedSampleRate
	hc.Speed = make([]float64, nw)
	for w, c := range sc.Cores {
		hc.Speed[w] = c / bedBaseCores
	}
	speed, err := straggler.NewHetero(hc)
	if err != nil {
		return sim.Config{}, nil, err
	}
	tensors, _, err := tensorsFor("cnn", nil)
	if err != nil {
		return sim.Config{}, nil, err
	}
	slow := map[int]float64{}
	for w, r := range sc.RateBits {
		if r < bedRate {
			slow[w] = r / bedRate
		}
	}
	cfg := sim.DefaultConfig()
	cfg.Workers, cfg.Batch, cfg.Chunk, cfg.Parallelism = nw, bedBatch, bedChunk, 1
	cfg.ComputeNoise = simNoise
	cfg.Network = sim.Network{Latency: simLatency, Bandwidth: studyBandwidth}
	cfg.LR = float32(lr)
	cfg.Duration, cfg.EvalEvery, cfg.EvalSamples = bedDuration, bedEvery, bedTest
	cfg.Target, cfg.TargetWindow, cfg.StopAtTarget = bedHigh, studyWindow, true
	cfg.Seed = seed
	cfg.Cost = sim.CostModel{Tensors: tensors, Servers: 1, ServerBandwidth: 10 * sim.Gbit, WorkerBandwidth: bedRate / 8,
		SlowLink: slow, FullDuplex: true, ApplyPerValue: sim.DefaultApplyPerValue}
	return cfg, speed, nil
}

func bedTwins(o options, seeds string) error {
	if !(bedHigh > 0 && bedSampleRate > 0) {
		return fmt.Errorf("no targets or rate recorded: run -live-bed-select first")
	}
	sc, specs, seedList, err := bedInputs(o, seeds)
	if err != nil {
		return err
	}
	dir, err := mnist.Locate()
	if err != nil {
		return err
	}
	path := filepath.Join(o.out, "sim-runs.csv")
	for _, seed := range seedList {
		train, test, err := bedData(dir, seed)
		if err != nil {
			return err
		}
		for _, spec := range specs {
			spec = bedSpec(spec)
			lr := bedPolicyLR(spec)
			cfg, speed, err := bedTwinConfig(sc, seed, lr)
			if err != nil {
				return err
			}
			topo, err := bedTopology(sc.workers())
			if err != nil {
				return err
			}
			pol, err := spec.New(topo, sc.workers())
			if err != nil {
				return err
			}
			m, err := newCNN(train)
			if err != nil {
				return err
			}
			cpu, t0 := threadCPU(), time.Now()
			res, err := sim.Run(cfg, sim.Job{Model: m, Train: train, Test: test, Speed: speed, Policy: pol})
			if err != nil {
				return fmt.Errorf("twin %s/%s seed %d: %w", sc.Name, spec.Name, seed, err)
			}
			clocks := totalClocks(res)
			ts, th := targetSeconds(res.Evals, bedSteep), targetSeconds(res.Evals, bedHigh)
			rec := []string{sc.Name, spec.Name, fmt.Sprint(seed), csvF(lr), csvF(ts), csvF(th), csvF(res.End.Seconds()), csvF(res.FinalAccuracy), fmt.Sprint(clocks), csvF((threadCPU() - cpu).Seconds())}
			if err := appendCSV(path, bedSimHeader, rec); err != nil {
				return err
			}
			fmt.Fprintf(o.stdout, "policy=%s scenario=%s mode=twin seed=%d t_steep_s=%s t_high_s=%s end_s=%.2f clocks=%d final_acc=%.4f wall=%.0fs\n",
				spec.Name, sc.Name, seed, fmtT(ts), fmtT(th), res.End.Seconds(), clocks, res.FinalAccuracy, time.Since(t0).Seconds())
		}
	}
	return nil
}

// ---------------------------------------------------------------------
// The report: live against simulated.

// bedReport prints, for -scenario, every live run, then per policy the
// median live and simulated times to the high target, their ratio and
// ranks, the Spearman correlation of the medians, and the paired
// reductions of the EPSP schemes against every other policy, live and
// simulated (median with its 95 % bootstrap interval; a win only where it
// excludes 0).
func bedReport(o options) error {
	lrows, err := readCSV(filepath.Join(o.out, "live-runs.csv"))
	if err != nil {
		return err
	}
	srows, _ := readCSV(filepath.Join(o.out, "sim-runs.csv"))
	type key struct {
		policy string
		seed   uint64
	}
	live := map[key]*bedRun{}
	simT := map[key][2]float64{}
	var policies []string
	var seeds []uint64
	var runs []*bedRun
	for _, rec := range lrows {
		r, err := parseBedRun(rec)
		if err != nil {
			return err
		}
		if r.Scenario != o.scenario {
			continue
		}
		live[key{r.Policy, r.Seed}] = r
		runs = append(runs, r)
		if !slices.Contains(policies, r.Policy) {
			policies = append(policies, r.Policy)
		}
		if !slices.Contains(seeds, r.Seed) {
			seeds = append(seeds, r.Seed)
		}
	}
	for _, rec := range srows {
		if len(rec) != len(bedSimHeader) || rec[0] != o.scenario {
			continue
		}
		var seed uint64
		fmt.Sscan(rec[2], &seed)
		simT[key{rec[1], seed}] = [2]float64{parseF(rec[4]), parseF(rec[5])}
	}
	slices.Sort(seeds)
	p := func(format string, a ...any) { fmt.Fprintf(o.stdout, format, a...) }
	p("### Live bed, scenario %s\n\n", o.scenario)
	p("Every run (times in s from the workers' start; inf = not reached within the cap; per worker: clocks, samples computed, cores got = process CPU / training span, compute rate = samples / s inside Gradient):\n\n")
	p("| policy | seed | t_steep | t_high | end | final acc | clocks | samples | cores got | rate (samples/s) | load1 | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		nw := len(r.Samples)
		got, rate := make([]float64, nw), make([]float64, nw)
		for k := range nw {
			got[k], rate[k] = r.coresGot(k), r.rate(k)
		}
		p("| %s | %d | %s | %s | %.1f | %.3f | %s | %s | %s | %s | %.1f | %s |\n", r.Policy, r.Seed, fmtT(r.TSteep), fmtT(r.THigh), r.End, r.FinalAcc,
			joinI(r.Clocks), joinI(r.Samples), joinF(got, 3), joinF(rate, 0), r.Load1, r.Note)
	}
	// the seeds every policy has, live and simulated
	var paired []uint64
	for _, s := range seeds {
		ok := true
		for _, pol := range policies {
			_, l := live[key{pol, s}]
			_, t := simT[key{pol, s}]
			ok = ok && l && t
		}
		if ok {
			paired = append(paired, s)
		}
	}
	p("\nPaired seeds (a live and a simulated run of every policy): %v\n\n", paired)
	if len(paired) == 0 {
		return nil
	}
	lt := func(pol string, high bool) []float64 {
		var out []float64
		for _, s := range paired {
			r := live[key{pol, s}]
			out = append(out, map[bool]float64{false: r.TSteep, true: r.THigh}[high])
		}
		return out
	}
	st := func(pol string, high bool) []float64 {
		var out []float64
		for _, s := range paired {
			v := simT[key{pol, s}]
			out = append(out, map[bool]float64{false: v[0], true: v[1]}[high])
		}
		return out
	}
	for _, high := range []bool{true, false} {
		name := map[bool]string{true: fmt.Sprintf("high target %.3f", bedHigh), false: fmt.Sprintf("steep target %.3f", bedSteep)}[high]
		lm, sm := make([]float64, len(policies)), make([]float64, len(policies))
		for i, pol := range policies {
			lm[i], sm[i] = study.Median(lt(pol, high)), study.Median(st(pol, high))
		}
		lr, sr := ranks(lm), ranks(sm)
		p("Median time to the %s (s), live and simulated twin:\n\n| policy | live | sim | live/sim | live rank | sim rank |\n|---|---|---|---|---|---|\n", name)
		for i, pol := range policies {
			ratio := "—"
			if !math.IsInf(lm[i], 0) && !math.IsInf(sm[i], 0) {
				ratio = fmt.Sprintf("%.2f", lm[i]/sm[i])
			}
			p("| %s | %s | %s | %s | %g | %g |\n", pol, fmtT(lm[i]), fmtT(sm[i]), ratio, lr[i], sr[i])
		}
		p("\nSpearman correlation of the policies' medians, live against simulated: %.2f\n\n", spearman(lr, sr))
		p("Paired reductions of time to the %s (median over seeds, 95 %% bootstrap interval; win only where it excludes 0):\n\n| candidate | baseline | live | live verdict | sim | sim verdict |\n|---|---|---|---|---|---|\n", name)
		for _, cand := range []string{"epsp-v2", "epsp-v2-slack-ungated"} {
			if !slices.Contains(policies, cand) {
				continue
			}
			for _, base := range policies {
				if base == cand {
					continue
				}
				liv, lv, err1 := study.Compare(lt(base, high), lt(cand, high), study.DefaultBootstrapConfig())
				siv, sv, err2 := study.Compare(st(base, high), st(cand, high), study.DefaultBootstrapConfig())
				p("| %s | %s | %s | %s | %s | %s |\n", cand, base, fmtIv(liv, err1), lv, fmtIv(siv, err2), sv)
			}
		}
		p("\n")
	}
	return nil
}

func parseF(s string) float64 {
	x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return math.NaN()
	}
	return x
}

func fmtIv(iv study.Interval, err error) string {
	if err != nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f %% [%.1f, %.1f]", 100*iv.Median, 100*iv.Lo, 100*iv.Hi)
}

// bedInputs parses what a live-bed run and its twins share: -scenario,
// -policies and the seeds (1-5 when none are given).
func bedInputs(o options, seeds string) (bedScenario, []policySpec, []uint64, error) {
	sc, err := bedScenarioByName(o.scenario)
	if err != nil {
		return bedScenario{}, nil, nil, err
	}
	specs, err := selectPolicies(o.policies)
	if err != nil {
		return bedScenario{}, nil, nil, err
	}
	if seeds == "" {
		seeds = "1-5"
	}
	seedList, err := parseSeeds(seeds, 1)
	if err != nil {
		return bedScenario{}, nil, nil, err
	}
	return sc, specs, seedList, nil
}
