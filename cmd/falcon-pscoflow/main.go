// Command falcon-pscoflow measures parameter-server jobs that share a
// machine's link, their traffic carried as coflows of the live coflow
// runtime under a scheduler or on the plain transport with a per-message
// compression policy alone (package internal/pscoflowlab; the protocol
// is ps/coflowtr/PROTOCOL.md). It prints one line per run and then, per
// arm and job, the median time per clock over the repetitions and the
// paired difference to the reference arm with its 95 % bootstrap
// interval.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/falconml/falcon/internal/pscoflowlab"
	"github.com/falconml/falcon/internal/study"
)

type options struct {
	arms    []string
	refs    []string
	reps    int
	seed    uint64
	cfg     pscoflowlab.Config
	timeout time.Duration
}

func parseJobs(s string) ([]pscoflowlab.JobConfig, error) {
	var out []pscoflowlab.JobConfig
	for _, f := range strings.Split(s, ",") {
		p := strings.Split(f, ":")
		if len(p) != 4 {
			return nil, fmt.Errorf("job %q: want NAME:WORKERS:PARAMS:CLOCKS", f)
		}
		var n [3]int
		for i := range n {
			v, err := strconv.Atoi(p[i+1])
			if err != nil {
				return nil, fmt.Errorf("job %q: %w", f, err)
			}
			n[i] = v
		}
		out = append(out, pscoflowlab.JobConfig{Name: p[0], Workers: n[0], Params: n[1], Clocks: n[2]})
	}
	return out, nil
}

func parse(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("falcon-pscoflow", flag.ContinueOnError)
	fs.SetOutput(stderr)
	arms := fs.String("arms", "live:sebf,live:fvdf,live:sebf+lz4,plain:none,plain:lz4,plain:fvdf", "arms, comma-separated: live:SCHED or plain:POLICY")
	ref := fs.String("ref", "plain:none,plain:lz4", "the arms the others are paired against, comma-separated")
	reps := fs.Int("reps", 5, "repetitions (seeds seed..seed+reps-1); each runs every arm, in an order rotated by one per repetition")
	seed := fs.Uint64("seed", 1, "first seed")
	rate := fs.Float64("rate", 25e6, "each port's rate each way, bytes/s")
	cores := fs.Float64("cores", 1, "each port's cores in the live fabric")
	density := fs.Float64("density", 0.1, "fraction of parameters with gradient (1 = dense)")
	compute := fs.Duration("compute", 100*time.Millisecond, "emulated compute time of one worker's batch")
	jobs := fs.String("jobs", "A:2:500000:14,B:2:1000000:8", "jobs, comma-separated NAME:WORKERS:PARAMS:CLOCKS")
	inmem := fs.Bool("inmem", false, "live agents on an in-process network instead of TCP on loopback")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound on one run")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	js, err := parseJobs(*jobs)
	if err != nil {
		return options{}, err
	}
	o := options{arms: strings.Split(*arms, ","), refs: strings.Split(*ref, ","), reps: *reps, seed: *seed, timeout: *timeout,
		cfg: pscoflowlab.Config{Rate: *rate, Cores: *cores, Density: *density, Compute: *compute, Jobs: js, Inmem: *inmem}}
	if o.reps < 1 {
		return options{}, errors.New("-reps must be at least 1")
	}
	for _, a := range o.arms {
		c := o.cfg
		c.Arm = a
		if err := c.Validate(); err != nil {
			return options{}, err
		}
	}
	return o, nil
}

func run(o options, w io.Writer) error {
	// per arm, per job: time per clock (ms) by repetition
	got := map[string][][]float64{}
	for r := range o.reps {
		for k := range o.arms {
			arm := o.arms[(k+r)%len(o.arms)]
			c := o.cfg
			c.Arm, c.Seed = arm, o.seed+uint64(r)
			ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
			res, err := pscoflowlab.Run(ctx, c)
			cancel()
			if err != nil {
				return fmt.Errorf("rep %d arm %s: %w", r, arm, err)
			}
			fmt.Fprintf(w, "rep=%d seed=%d %s\n", r, c.Seed, res.Line())
			if got[arm] == nil {
				got[arm] = make([][]float64, len(res.Jobs))
			}
			for j, jr := range res.Jobs {
				got[arm][j] = append(got[arm][j], float64(jr.PerClock)/1e6)
			}
		}
	}
	fmt.Fprintf(w, "\nrate=%.0f B/s per port each way, density=%g, compute=%v, reps=%d; median ms per clock, and paired differences (median, 95%% bootstrap interval)\n",
		o.cfg.Rate, o.cfg.Density, o.cfg.Compute, o.reps)
	for _, arm := range o.arms {
		for j, job := range o.cfg.Jobs {
			xs := got[arm][j]
			line := fmt.Sprintf("arm=%-14s job=%s median_ms_per_clock=%.1f", arm, job.Name, study.Median(xs))
			for _, r := range o.refs {
				ref := got[r]
				if ref == nil || arm == r {
					continue
				}
				d := make([]float64, len(xs))
				for i := range xs {
					d[i] = xs[i] - ref[j][i]
				}
				bc := study.DefaultBootstrapConfig()
				bc.Seed = o.seed
				iv, err := study.BootstrapMedian(d, bc)
				if err != nil {
					return err
				}
				med, lo, hi := iv.Median, iv.Lo, iv.Hi
				verdict := "tie"
				if hi < 0 {
					verdict = "faster"
				} else if lo > 0 {
					verdict = "slower"
				}
				line += fmt.Sprintf(" vs_%s=%+.1f[%+.1f,%+.1f]%s", r, med, lo, hi, verdict)
			}
			fmt.Fprintln(w, line)
		}
	}
	return nil
}

func main() {
	o, err := parse(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "falcon-pscoflow:", err)
		os.Exit(2)
	}
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "falcon-pscoflow:", err)
		os.Exit(1)
	}
}
