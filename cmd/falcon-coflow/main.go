// Command falcon-coflow replays a coflow trace under one or more schedulers and
// prints their coflow completion times (CCT).
//
// Usage:
//
//	go run ./cmd/falcon-coflow                                  # built-in synthetic trace
//	go run ./cmd/falcon-coflow -trace FB2010-1Hr-150-0.txt -sched sebf,fifo,dclas
//	go run ./cmd/falcon-coflow -trace t.txt -sched sebf -format coflowsim > sebf.out
//	go run ./cmd/falcon-coflow -trace t.txt -sched sebf -mode coflowsim
//	go run ./cmd/falcon-coflow -trace t.txt -weights t.weights -sched sincronia
//
// -weights names an optional side file of coflow weights, one
// "<coflow id> <weight>" per line ('#' comments allowed; unlisted coflows
// weigh 1), read by coflow.Trace.ReadWeights; the trace file keeps the
// coflow-benchmark format. Weighted schedulers (sincronia) use them.
//
// With -sched fvdf (or sebf-guard, fvdf-raw, or a baseline of
// fvdf.ParseBaseline: sebf+lz4, dclas+lz4, sincronia+lz4 and +snappy,
// +policy, +write-lz4, sebf-order+fvdf, sebf-rho), or any of -bandwidth,
// -cores, -data, -predictor, -resched, the replay models compression
// (package fvdf: per-machine cores, lz4/snappy profiles for a data mix, a
// codec-speed predictor) and prints one line per scheduler:
//
//	sched=<name> mode=exact coflows=<n> avg_cct_ms=<float> p95_cct_ms=<float> avg_jct_ms=<float> wire_bytes=<n> raw_bytes=<n> max_wait_ms=<float> wall_ms=<float>
//
// -resched varys|timers|every runs every scheduler under one rescheduling
// rule (coflow arrivals and completions; plus the 10 s/200 ms T/δ guard;
// every flow completion, coalesced by -coalesce, 100 ms); without it each
// keeps its own (fvdf: arrivals and completions with its guard).
//
// Modes: exact (default) is coflow.Sim, the event-driven fluid simulator;
// coflowsim replays with the coflowsim-compatible semantics of package
// coflow/coflowsim (epoch admission, 8 ms quanta, static SEBF order).
//
// Output: a summary table (stdout; speed-ups are relative to the first
// scheduler listed, as the ratio of mean CCTs and the mean of per-coflow
// ratios), then exactly one line per scheduler:
//
//	sched=<name> mode=<exact|coflowsim> coflows=<n> avg_cct_ms=<float> p95_cct_ms=<float> wall_ms=<float>
//
// With -live (root, Linux) it replays a slice of -trace on a test bed of
// network namespaces (package internal/testbed) running the coflow runtime
// (package coflow/live), and in coflow.Sim, printing one line per
// scheduler:
//
//	sched=<name> live_avg_cct_ms=<float> sim_avg_cct_ms=<float> wire_bytes=<n> raw_bytes=<n>
//
// -refit simulates runs kept by -live-json again under the simulator's
// calibration constants (-sim-*); see README.md and CALIBRATION.md.
//
// -live-matrix (root, Linux) runs the live matrix of LIVE-PROTOCOL.md:
// every scheduler on every slice of -matrix-skips in every cell of
// -matrix-mbit × -matrix-cores, one CSV row per run (-live-csv);
// -matrix-report prints its tables from that CSV (LIVE.md).
//
// With -format coflowsim the table is replaced by coflowsim's per-coflow
// lines "JOB-<id> <start> <finish> <numMappers> <numReducers>
// <totalShuffleBytes> <maxShuffleBytes> <duration> <deadline>
// <individualSums>" and the sum of durations, per scheduler; the
// one-line summaries still follow.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/falconml/falcon/coflow"
)

type options struct {
	trace, weights, scheds, mode, csv, format string
	portBits                                  float64
	synthPorts, synthCoflows                  int
	synthGap                                  time.Duration
	seed                                      uint64
	comp                                      compressionOptions
	live                                      liveOptions
	matrix                                    matrixOptions
	refit, fitSkips                           string
	set                                       map[string]bool // flags given on the command line
}

func main() {
	if helped, err := runHelper(); helped { // an agent process of -live
		if err != nil {
			fmt.Fprintln(os.Stderr, "coflow agent:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(2)
	}
	switch {
	case o.matrix.report != "":
		reportPorts = o.live.ports
		err = runMatrixReport(o.matrix.report, os.Stdout)
	case o.matrix.on:
		err = runLiveMatrix(o, os.Stdout)
	case o.refit != "":
		err = runRefit(o, os.Stdout)
	case o.live.on:
		err = runLive(o, os.Stdout)
	default:
		err = run(o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "coflow:", err)
		os.Exit(1)
	}
}

// parseFlags parses the command line into options (errors and -h usage go
// to errOut).
func parseFlags(args []string, errOut io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("falcon-coflow", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&o.trace, "trace", "", "coflow-benchmark trace file (default: a built-in synthetic trace)")
	fs.StringVar(&o.weights, "weights", "", "optional weights side file for the trace: lines \"<coflow id> <weight>\" (default: every weight 1)")
	fs.StringVar(&o.scheds, "sched", "sebf,fifo,dclas", "comma-separated schedulers: "+strings.Join(coflow.SchedulerNames(), ",")+", or all")
	fs.StringVar(&o.mode, "mode", "exact", "simulator: exact or coflowsim")
	fs.StringVar(&o.csv, "csv", "", "write per-coflow results to this CSV file (one block per scheduler, with a sched column)")
	fs.StringVar(&o.format, "format", "table", "output format: table or coflowsim")
	fs.Float64Var(&o.portBits, "port-bps", 1024*1048576, "port capacity each way in bit/s (default: coflowsim's 1024·1048576)")
	fs.IntVar(&o.synthPorts, "synth-ports", 50, "ports of the built-in synthetic trace")
	fs.IntVar(&o.synthCoflows, "synth-coflows", 200, "coflows of the built-in synthetic trace")
	fs.DurationVar(&o.synthGap, "synth-gap", time.Second, "mean inter-arrival of the built-in synthetic trace")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the built-in synthetic trace (and of the codec-speed drift and job model with compression)")
	fs.Float64Var(&o.comp.bandwidthGbps, "bandwidth", 0, "with compression: port bandwidth in Gbit/s (default: -port-bps)")
	fs.Float64Var(&o.comp.cores, "cores", 4, "with compression: cores per machine usable by codecs")
	fs.StringVar(&o.comp.data, "data", "shuffle", "with compression: data mix: shuffle, a class (float32, sparse, int8, text, random) or class=w,...")
	fs.StringVar(&o.comp.predictor, "predictor", "ewma", "with compression: codec-speed predictor: oracle, last, ewma, ar, lstm, gru")
	fs.StringVar(&o.comp.resched, "resched", "", "with compression: rescheduling rule of every scheduler: varys (coflow arrivals and completions), timers (plus the T/δ starvation guard, 10 s/200 ms), every (every flow completion, coalesced by -coalesce); empty: each scheduler's own (fvdf: varys with its guard; sebf and the baselines: varys)")
	fs.DurationVar(&o.comp.coalesce, "coalesce", 100*time.Millisecond, "with -resched every: flow completions within this window of the last call share one call (0: a call at each)")
	liveFlags(fs, &o.live)
	matrixFlags(fs, &o.matrix)
	fs.StringVar(&o.refit, "refit", "", "simulate the live runs kept by -live-json in this file again, before and after the -sim-* calibration constants, and print the calibration table (no root needed)")
	fs.StringVar(&o.fitSkips, "fit-skips", "0,100", "with -refit: the slices (by -skip) the constants were fitted on; the others are validation")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments %q", fs.Args())
		fmt.Fprintln(errOut, err)
		return options{}, err
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	return o, nil
}

func loadTrace(o options) (*coflow.Trace, string, error) {
	tr, label, err := readTrace(o)
	if err != nil || o.weights == "" {
		return tr, label, err
	}
	f, err := os.Open(o.weights)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	if err := tr.ReadWeights(f); err != nil {
		return nil, "", fmt.Errorf("%s: %w", o.weights, err)
	}
	return tr, label + " weights=" + o.weights, nil
}

func readTrace(o options) (*coflow.Trace, string, error) {
	if o.trace == "" {
		cfg := coflow.DefaultSynthConfig()
		cfg.Ports, cfg.Coflows, cfg.MeanInterArrival = o.synthPorts, o.synthCoflows, o.synthGap
		tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(o.seed, o.seed)))
		return tr, fmt.Sprintf("synthetic(ports=%d coflows=%d gap=%v seed=%d)", cfg.Ports, cfg.Coflows, cfg.MeanInterArrival, o.seed), err
	}
	f, err := os.Open(o.trace)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	tr, err := coflow.ReadTrace(f)
	return tr, o.trace, err
}

// summary is what the one-line report needs from either mode.
type summary struct {
	name   string
	n      int
	cct    coflow.Summary
	bins   *[4]coflow.Summary
	wallMs float64
	res    *coflow.Result
}

func run(o options, w io.Writer) error {
	if o.mode != "exact" && o.mode != "coflowsim" {
		return fmt.Errorf("unknown -mode %q (want exact or coflowsim)", o.mode)
	}
	if o.format != "table" && o.format != "coflowsim" {
		return fmt.Errorf("unknown -format %q (want table or coflowsim)", o.format)
	}
	if !(o.portBits > 0) {
		return fmt.Errorf("-port-bps must be positive")
	}
	names := strings.Split(o.scheds, ",")
	if o.scheds == "all" {
		names = coflow.SchedulerNames()
	}
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	tr, label, err := loadTrace(o)
	if err != nil {
		return err
	}
	if wantsCompression(names, o.comp, o.set) {
		return runCompression(tr, names, o, w)
	}
	var csvOut io.Writer
	if o.csv != "" {
		f, err := os.Create(o.csv)
		if err != nil {
			return err
		}
		defer f.Close()
		csvOut = f
	}
	var sums []summary
	for _, name := range names {
		name = strings.TrimSpace(name)
		var s summary
		var err error
		if o.mode == "exact" {
			s, err = runExact(tr, name, o, w, csvOut)
		} else {
			s, err = runCompat(tr, name, o, w, csvOut)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		sums = append(sums, s)
	}
	if o.format == "table" {
		fmt.Fprintf(w, "trace: %s, %d ports, %d coflows, mode %s, port %.4g bit/s\n", label, tr.Ports, len(tr.Coflows), o.mode, o.portBits)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "sched\tcoflows\tavg s\tmedian s\tp95 s\tp99 s\tSN avg s\tLN avg s\tSW avg s\tLW avg s\tspeedup vs %s\tmean ratio\twall ms\t\n", sums[0].name)
		for _, s := range sums {
			fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t", s.name, s.n, s.cct.Mean.Seconds(), s.cct.Median.Seconds(), s.cct.P95.Seconds(), s.cct.P99.Seconds())
			for b := range 4 {
				if s.bins == nil || s.bins[b].N == 0 {
					fmt.Fprint(tw, "-\t")
				} else {
					fmt.Fprintf(tw, "%.3f\t", s.bins[b].Mean.Seconds())
				}
			}
			if c, err := coflow.Compare(s.res, sums[0].res); err == nil {
				fmt.Fprintf(tw, "%.3f\t%.3f\t", c.RatioOfMeans, c.MeanOfRatios)
			} else {
				fmt.Fprint(tw, "-\t-\t")
			}
			fmt.Fprintf(tw, "%.1f\t\n", s.wallMs)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, s := range sums {
		fmt.Fprintf(w, "sched=%s mode=%s coflows=%d avg_cct_ms=%.3f p95_cct_ms=%.3f wall_ms=%.3f\n",
			s.name, o.mode, s.n, ms(s.cct.Mean), ms(s.cct.P95), s.wallMs)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func runExact(tr *coflow.Trace, name string, o options, w, csvOut io.Writer) (summary, error) {
	sched, err := coflow.NewScheduler(name)
	if err != nil {
		return summary{}, err
	}
	cfs, err := tr.ToCoflows()
	if err != nil {
		return summary{}, err
	}
	cfg := coflow.DefaultConfig()
	cfg.RecordFlows = o.format == "coflowsim"
	sim, err := coflow.NewSim(cfg, tr.Fabric(o.portBits/8), sched)
	if err != nil {
		return summary{}, err
	}
	start := time.Now()
	res, err := sim.Run(cfs)
	wall := time.Since(start)
	if err != nil {
		return summary{}, err
	}
	if o.format == "coflowsim" {
		if err := writeJobs(w, cfs, res); err != nil {
			return summary{}, err
		}
	}
	if csvOut != nil {
		if err := writeCSV(csvOut, sched.Name(), res); err != nil {
			return summary{}, err
		}
	}
	bins := coflow.SummarizeBins(res)
	return summary{name: sched.Name(), n: len(res.Coflows), cct: coflow.Summarize(res), bins: &bins,
		wallMs: float64(wall) / float64(time.Millisecond), res: res}, nil
}

var csvHeaderDone = map[io.Writer]bool{}

// writeCSV appends res to w with a leading sched column.
func writeCSV(w io.Writer, name string, res *coflow.Result) error {
	var b strings.Builder
	if err := coflow.WriteCSV(&b, res); err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if !csvHeaderDone[w] {
		csvHeaderDone[w] = true
		if _, err := fmt.Fprintf(w, "sched,%s\n", lines[0]); err != nil {
			return err
		}
	}
	for _, l := range lines[1:] {
		if _, err := fmt.Fprintf(w, "%s,%s\n", name, l); err != nil {
			return err
		}
	}
	return nil
}

// writeJobs prints the exact simulation in coflowsim's output format. Times
// are milliseconds from the trace start (start = arrival: the exact
// simulator admits coflows on arrival); deadline is 0 (not modelled);
// individualSums is the sum over reducers of (reducer finish − start).
func writeJobs(w io.Writer, cfs []coflow.Coflow, res *coflow.Result) error {
	var sum float64
	for i := range cfs {
		c, r := &cfs[i], &res.Coflows[i]
		nm, nr := len(c.Mappers), len(c.Reducers)
		if nm == 0 || nr == 0 {
			return errors.New("-format coflowsim needs coflows read from a trace")
		}
		var maxRed float64
		for _, mbs := range c.ReducerMB {
			maxRed = max(maxRed, mbs*coflow.MiB)
		}
		redFinish := make([]time.Duration, nr)
		for j, f := range c.Flows {
			red := f.ID / nm
			redFinish[red] = max(redFinish[red], r.FlowFinish[j])
		}
		var indiv float64
		for _, fin := range redFinish {
			if fin > 0 {
				indiv += ms(fin - c.Arrival)
			}
		}
		start, finish := ms(c.Arrival), ms(r.Finish)
		sum += finish - start
		if _, err := fmt.Fprintf(w, "JOB-%d %s %s %d %d %s %s %s %d %s\n", c.ID, javaDouble(start), javaDouble(finish), nm, nr,
			javaDouble(r.Bytes), javaDouble(maxRed), javaDouble(finish-start), 0, javaDouble(indiv)); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, javaDouble(sum))
	return err
}
