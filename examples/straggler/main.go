// Command straggler trains a softmax classifier on a simulated 12-worker
// cluster whose workers differ in cores, speed and transient slowdowns
// (the "mixed" scenario of ps/sim), once per synchronization policy and
// seed, prints how long (in virtual seconds) each policy needed to reach a
// target test accuracy, and ends with one verdict line computed from this
// run's paired seeds.
//
//	go run ./examples/straggler
//	go run ./examples/straggler -seeds 3 -scenario straggler -target 0.8
//
// It is the smallest complete use of the virtual-time simulator ps/sim
// with the policies of package epsp: pick a scenario, build a policy per
// run, call sim.Run, read the sim.Result, pair the seeds. It uses MNIST
// when its files are found (model/mnist.Locate) and a synthetic dataset
// otherwise. The full convergence study (every policy, workload and
// scenario, CSV and Markdown tables) is the tool cmd/falcon-study.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"text/tabwriter"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/internal/study"
	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/model/mnist"
	"github.com/falconml/falcon/ps/sim"
	"github.com/falconml/falcon/straggler"
)

// policy names a synchronization policy and builds a fresh value of it for
// one run; a policy keeps state, so runs never share one. epsp marks the
// two schemes of EPSP v2, of which the verdict judges the better.
type policy struct {
	name string
	epsp bool
	new  func(topo straggler.Model) (epsp.Policy, error)
}

// policies are the ones this example compares: the barrier, the two damped
// asynchronous baselines of Jiang et al. (ConSGD, and DynSGD, the
// strongest baseline of study v2) and EPSP v2 in both schemes (enforced:
// averaged synchronous rounds; slack: bounded staleness with DynSGD's
// damping), each with elastic parallelism on the scenario's topology. All
// of them share the study's softmax learning rate (see run).
var policies = []policy{
	{"bsp", false, func(straggler.Model) (epsp.Policy, error) { return epsp.NewBSP(), nil }},
	{"consgd", false, func(straggler.Model) (epsp.Policy, error) { return epsp.NewConSGD(epsp.DefaultConSGDConfig()) }},
	{"dynsgd", false, func(straggler.Model) (epsp.Policy, error) { return epsp.NewDynSGD(epsp.DefaultDynSGDConfig()) }},
	{"epsp-v2", true, func(topo straggler.Model) (epsp.Policy, error) {
		c := epsp.DefaultEPSPv2Config()
		c.Elastic, c.Topology = true, topo
		return epsp.NewEPSPv2(c)
	}},
	{"epsp-v2-slack", true, func(topo straggler.Model) (epsp.Policy, error) {
		c := epsp.DefaultEPSPv2SlackConfig()
		c.Elastic, c.Topology = true, topo
		return epsp.NewEPSPv2(c)
	}},
}

// defaultSeeds is the number of paired seeds of the default run, chosen to
// fit in about two minutes on a 2-core machine: there (load average about
// 3, MNIST found) 3 seeds of the mixed scenario took 27.6 s of wall time,
// about 1.7 s per simulation of 5 s virtual and 8.7 s per seed of five
// policies, so 12 seeds take about 105 s. It was fixed from that
// measurement, not from any result.
const defaultSeeds = 12

// options are the command's flags.
type options struct {
	scenario string
	target   float64
	duration time.Duration
	seeds    int    // number of paired seeds
	first    uint64 // the first seed; the run uses first, first+1, …
	// progress, when not nil, receives a line per seed done.
	progress io.Writer
}

func main() {
	var o options
	flag.StringVar(&o.scenario, "scenario", "mixed", "scenario of ps/sim: homogeneous, static, straggler, transient or mixed")
	flag.Float64Var(&o.target, "target", 0.85, "test accuracy that counts as converged (mean of 5 evaluations)")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "virtual time simulated per policy and seed")
	flag.IntVar(&o.seeds, "seeds", defaultSeeds, "number of paired seeds (each seeds the data sample, model and slowdowns)")
	flag.Uint64Var(&o.first, "seed", 1, "first seed")
	flag.Parse()
	o.progress = os.Stderr
	if err := run(os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "straggler:", err)
		os.Exit(1)
	}
}

// outcome is one policy's results over the seeds, indexed by seed.
type outcome struct {
	times            []float64 // seconds to target, +Inf when not reached
	acc, blocked     []float64
	reached, transfr int
}

// run simulates the scenario once per seed and policy, writes the table of
// medians over the seeds and the verdict line to w.
func run(w io.Writer, o options) error {
	if o.seeds < 1 {
		return fmt.Errorf("-seeds %d: want at least 1", o.seeds)
	}
	out := make([]outcome, len(policies))
	var label, name string
	var workers int
	start := time.Now()
	for s := range o.seeds {
		seed := o.first + uint64(s)
		train, test, l, err := loadData(seed, 10000, 2000)
		if err != nil {
			return err
		}
		sc, err := sim.ScenarioByName(o.scenario, seed)
		if err != nil {
			return err
		}
		speed, err := sc.Model()
		if err != nil {
			return err
		}
		label, name, workers = l, sc.Name, sc.NumWorkers()
		for i, p := range policies {
			pol, err := p.new(speed)
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			cfg := sim.DefaultConfig()
			cfg.Workers = sc.NumWorkers()
			cfg.Parallelism = sc.Parallelism
			cfg.Batch = 64
			// The study's selected rate for softmax, shared by the averaged
			// synchronous and damped asynchronous families (every policy
			// here; cmd/falcon-study/PROTOCOL.md §2).
			cfg.LR = 1
			// The compute-time noise and message latency calibrated on the
			// live runtime (cmd/falcon-study/policies.go).
			cfg.ComputeNoise, cfg.Network.Latency = 0.05, 600*time.Microsecond
			cfg.Duration = o.duration
			cfg.EvalEvery = 50 * time.Millisecond
			cfg.Target = o.target
			cfg.TargetWindow = 5
			cfg.Seed = seed
			job := sim.Job{Model: model.NewSoftmax(train.D, train.Classes), Train: train, Test: test, Speed: speed, Policy: pol}
			res, err := sim.Run(cfg, job)
			if err != nil {
				return fmt.Errorf("%s seed %d: %w", p.name, seed, err)
			}
			t := math.Inf(1)
			if res.Reached {
				t = res.TimeToTarget.Seconds()
				out[i].reached++
			}
			out[i].times = append(out[i].times, t)
			out[i].acc = append(out[i].acc, res.FinalAccuracy)
			out[i].blocked = append(out[i].blocked, res.BlockedFraction())
			out[i].transfr += res.AcceptedTransfers()
		}
		if o.progress != nil {
			fmt.Fprintf(o.progress, "seed %d done (%d of %d), %v elapsed\n", seed, s+1, o.seeds, time.Since(start).Round(time.Second))
		}
	}
	fmt.Fprintf(w, "%s; scenario %s, %d workers; target accuracy %.3f within %v virtual; seeds %d-%d\n\n",
		label, name, workers, o.target, o.duration, o.first, o.first+uint64(o.seeds)-1)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tmedian time to target (s)\treached\tfinal accuracy\tblocked\ttransfers\t")
	for i, p := range policies {
		r := out[i]
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%.3f\t%.2f\t%d\t\n", p.name, seconds(study.Median(r.times)), r.reached, o.seeds,
			study.Median(r.acc), study.Median(r.blocked), r.transfr)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nMedians over the seeds; blocked: the fraction of worker time spent waiting; transfers: work moved off slow workers (all seeds).")
	v, err := verdict(out, o.seeds)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, v)
	return nil
}

// verdict computes the verdict line from the run's paired times:
//
//   - first: the policy with the lowest median time to target (the
//     earlier in the table on a tie, naming the policies it ties with);
//   - EPSP: the better of its two schemes in this run, by the same rule
//     (lower median time; epsp-v2 on a tie);
//   - against the strongest other policy (lowest median time among the
//     rest), the median over seeds of the paired reduction
//     (t_other − t_epsp)/t_other with its 95 % percentile-bootstrap
//     interval (internal/study.Compare: 10000 resamples, the study's
//     bootstrap seed); a win or loss only where the interval excludes 0.
func verdict(out []outcome, seeds int) (string, error) {
	first, best, other := -1, -1, -1
	lower := func(i, j int) bool { return j < 0 || study.Median(out[i].times) < study.Median(out[j].times) }
	for i, p := range policies {
		if lower(i, first) {
			first = i
		}
		if p.epsp && lower(i, best) {
			best = i
		} else if !p.epsp && lower(i, other) {
			other = i
		}
	}
	iv, judged, err := study.Compare(out[other].times, out[best].times, study.DefaultBootstrapConfig())
	if err != nil {
		return "", err
	}
	firstName := policies[first].name
	for i, p := range policies {
		if i != first && study.Median(out[i].times) == study.Median(out[first].times) {
			firstName += " (tied with " + p.name + ")"
		}
	}
	return fmt.Sprintf("verdict: %s first (median %s s); %s against %s, the strongest other: median paired reduction %s [95%% CI %s, %s], a %s, over %d paired %s. The whole study: go run ./cmd/falcon-study -study",
		firstName, seconds(study.Median(out[first].times)), policies[best].name, policies[other].name,
		percent(iv.Median), percent(iv.Lo), percent(iv.Hi), judged, seeds, plural(seeds, "seed")), nil
}

// plural returns word, with an s unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// seconds formats a time to target; +Inf is "never".
func seconds(t float64) string {
	if math.IsInf(t, 1) {
		return "never"
	}
	return fmt.Sprintf("%.3f", t)
}

// percent formats a reduction; −Inf (EPSP never reached the target where
// the other did) is "-Inf%".
func percent(r float64) string {
	if math.IsInf(r, 0) {
		return fmt.Sprintf("%.0f%%", r)
	}
	return fmt.Sprintf("%+.1f%%", 100*r)
}

// mnistCache holds MNIST once loaded, so each seed only samples it.
var mnistCache struct {
	tried       bool
	train, test *model.Dataset
}

// loadData returns a seeded sample of MNIST (nTrain training, nTest test
// rows) when its files are found, else a synthetic dataset of the same
// size, and a label saying which.
func loadData(seed uint64, nTrain, nTest int) (train, test *model.Dataset, label string, err error) {
	if !mnistCache.tried {
		mnistCache.tried = true
		if dir, err := mnist.Locate(); err == nil {
			mnistCache.train, mnistCache.test, _ = mnist.Load(dir)
		}
	}
	if mnistCache.train != nil && mnistCache.test != nil {
		rng := rand.New(rand.NewPCG(seed, 0xd474))
		train, test = mnistCache.train.Sample(nTrain, rng), mnistCache.test.Sample(nTest, rng)
		return train, test, fmt.Sprintf("MNIST (%d train / %d test rows)", train.N, test.N), nil
	}
	train, test, err = model.Synthetic(model.SyntheticConfig{Train: nTrain, Test: nTest, Dim: 50, Classes: 10, Separation: 0.5, Seed: seed})
	if err != nil {
		return nil, nil, "", err
	}
	return train, test, fmt.Sprintf("synthetic clusters, MNIST not found (%d train / %d test rows)", train.N, test.N), nil
}
