// Command coflow replays a coflow trace under a few of package coflow's
// schedulers and prints each one's coflow completion times (CCT).
//
//	go run ./examples/coflow                              # a seeded synthetic trace
//	go run ./examples/coflow -trace FB2010-1Hr-150-0.txt  # a coflow-benchmark trace
//
// It is the smallest complete use of the exact simulator: read (or
// generate) a trace, turn it into coflows, build a scheduler by name, run
// coflow.NewSim on the trace's fabric, summarise the result. The replay
// tool with every scheduler, the coflowsim-compatible mode, compression
// (FVDF and its baselines), CSV and coflowsim-format output is
// cmd/falcon-coflow.
package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/falconml/falcon/coflow"
)

func main() {
	trace := flag.String("trace", "", "coflow-benchmark trace file (default: a synthetic trace of 200 coflows on 50 ports)")
	scheds := flag.String("sched", "sebf,sincronia,dclas,fifo", "comma-separated schedulers: "+strings.Join(coflow.SchedulerNames(), ","))
	flag.Parse()
	if err := run(os.Stdout, *trace, strings.Split(*scheds, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "coflow:", err)
		os.Exit(1)
	}
}

// run replays the trace (synthetic when path is empty) under each named
// scheduler and writes a table of CCTs to w.
func run(w io.Writer, path string, scheds []string) error {
	tr, err := loadTrace(path)
	if err != nil {
		return err
	}
	cfs, err := tr.ToCoflows()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%d coflows on %d ports of 1 Gbit/s each way\n\n", len(cfs), tr.Ports)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scheduler\tmean CCT (s)\tmedian (s)\tp95 (s)\t")
	for _, name := range scheds {
		sched, err := coflow.NewScheduler(strings.TrimSpace(name))
		if err != nil {
			return err
		}
		// A Sim may be run again; here each scheduler gets its own.
		sim, err := coflow.NewSim(coflow.DefaultConfig(), tr.Fabric(1e9/8), sched)
		if err != nil {
			return err
		}
		res, err := sim.Run(cfs)
		if err != nil {
			return fmt.Errorf("%s: %w", sched.Name(), err)
		}
		s := coflow.Summarize(res)
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t\n", sched.Name(), s.Mean.Seconds(), s.Median.Seconds(), s.P95.Seconds())
	}
	return tw.Flush()
}

// loadTrace reads a coflow-benchmark trace file, or generates a seeded
// synthetic trace shaped like FB2010 when path is empty.
func loadTrace(path string) (*coflow.Trace, error) {
	if path == "" {
		cfg := coflow.DefaultSynthConfig()
		cfg.Ports, cfg.Coflows = 50, 200
		return coflow.Synthetic(cfg, rand.New(rand.NewPCG(1, 1)))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return coflow.ReadTrace(f)
}
