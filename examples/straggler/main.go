// Command straggler trains a softmax classifier on a simulated 12-worker
// cluster with one worker four times slower than the rest, once per
// synchronization policy, and prints how long (in virtual seconds) each
// needed to reach a target test accuracy.
//
//	go run ./examples/straggler
//	go run ./examples/straggler -scenario mixed -target 0.85
//
// It is the smallest complete use of the virtual-time simulator ps/sim
// with the policies of package epsp: pick a scenario, build a policy per
// run, call sim.Run, read the sim.Result. It uses MNIST when its files are
// found (model/mnist.Locate) and a synthetic dataset otherwise. The full
// convergence study (every policy and scenario, seeds, bootstrap
// intervals, CSV and Markdown tables) is the tool cmd/falcon-study.
package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"text/tabwriter"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/model/mnist"
	"github.com/falconml/falcon/ps/sim"
	"github.com/falconml/falcon/straggler"
)

// policy names a synchronization policy and builds a fresh value of it for
// one run; a policy keeps state, so runs never share one.
type policy struct {
	name string
	new  func(topo straggler.Model) (epsp.Policy, error)
}

// policies are the ones this example compares: the barrier, a bounded
// staleness of 3 clocks, ConSGD's damped asynchrony and EPSP v2 with
// elastic parallelism on the scenario's topology.
var policies = []policy{
	{"bsp", func(straggler.Model) (epsp.Policy, error) { return epsp.NewBSP(), nil }},
	{"ssp", func(straggler.Model) (epsp.Policy, error) { return epsp.NewSSP(3), nil }},
	{"consgd", func(straggler.Model) (epsp.Policy, error) { return epsp.NewConSGD(epsp.DefaultConSGDConfig()) }},
	{"epsp-v2", func(topo straggler.Model) (epsp.Policy, error) {
		c := epsp.DefaultEPSPv2Config()
		c.Elastic, c.Topology = true, topo
		return epsp.NewEPSPv2(c)
	}},
}

func main() {
	scenario := flag.String("scenario", "straggler", "scenario of ps/sim: homogeneous, static, straggler, transient or mixed")
	target := flag.Float64("target", 0.85, "test accuracy that counts as converged (mean of 5 evaluations)")
	duration := flag.Duration("duration", 5*time.Second, "virtual time simulated per policy")
	seed := flag.Uint64("seed", 1, "seed of the data sample, model and slowdowns")
	flag.Parse()
	if err := run(os.Stdout, *scenario, *target, *duration, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "straggler:", err)
		os.Exit(1)
	}
}

// run simulates the scenario once per policy and writes the table to w.
func run(w io.Writer, scenario string, target float64, duration time.Duration, seed uint64) error {
	train, test, label, err := loadData(seed, 10000, 2000)
	if err != nil {
		return err
	}
	sc, err := sim.ScenarioByName(scenario, seed)
	if err != nil {
		return err
	}
	speed, err := sc.Model()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s; scenario %s, %d workers; target accuracy %.3f within %v virtual\n\n", label, sc.Name, sc.NumWorkers(), target, duration)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\ttime to target (s)\tfinal accuracy\tblocked\ttransfers\t")
	for _, p := range policies {
		pol, err := p.new(speed)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		cfg := sim.DefaultConfig()
		cfg.Workers = sc.NumWorkers()
		cfg.Parallelism = sc.Parallelism
		cfg.Batch = 64
		cfg.LR = 1 // the study's rate for softmax (cmd/falcon-study/PROTOCOL.md §2)
		// The compute-time noise and message latency calibrated on the
		// live runtime (cmd/falcon-study/policies.go).
		cfg.ComputeNoise, cfg.Network.Latency = 0.05, 600*time.Microsecond
		cfg.Duration = duration
		cfg.EvalEvery = 50 * time.Millisecond
		cfg.Target = target
		cfg.TargetWindow = 5
		cfg.Seed = seed
		job := sim.Job{
			Model:  model.NewSoftmax(train.D, train.Classes),
			Train:  train,
			Test:   test,
			Speed:  speed,
			Policy: pol,
		}
		res, err := sim.Run(cfg, job)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		t := "never"
		if res.Reached {
			t = fmt.Sprintf("%.3f", res.TimeToTarget.Seconds())
		}
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.2f\t%d\t\n", p.name, t, res.FinalAccuracy, res.BlockedFraction(), res.AcceptedTransfers())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nblocked: the fraction of worker time spent waiting; transfers: work moved off slow workers.")
	fmt.Fprintln(w, "One seed at one learning rate: the study with seeds and intervals is go run ./cmd/falcon-study -study.")
	return nil
}

// loadData returns a seeded sample of MNIST (nTrain training, nTest test
// rows) when its files are found, else a synthetic dataset of the same
// size, and a label saying which.
func loadData(seed uint64, nTrain, nTest int) (train, test *model.Dataset, label string, err error) {
	if dir, err := mnist.Locate(); err == nil {
		if train, test, err = mnist.Load(dir); err == nil {
			rng := rand.New(rand.NewPCG(seed, 0xd474))
			train, test = train.Sample(nTrain, rng), test.Sample(nTest, rng)
			return train, test, fmt.Sprintf("MNIST (%d train / %d test rows)", train.N, test.N), nil
		}
	}
	train, test, err = model.Synthetic(model.SyntheticConfig{Train: nTrain, Test: nTest, Dim: 50, Classes: 10, Separation: 0.5, Seed: seed})
	if err != nil {
		return nil, nil, "", err
	}
	return train, test, fmt.Sprintf("synthetic clusters, MNIST not found (%d train / %d test rows)", train.N, test.N), nil
}
