// Command falcon-study is Falcon's convergence study: it trains a classifier
// on MNIST under a heterogeneous cluster scenario with each synchronization
// policy (BSP, ASP, SSP, FlexRR, Sync-opt, ConSGD, DynSGD, LB-BSP, DSSP and
// EPSP in its enforced and slack modes), in the virtual-time simulator
// ps/sim, and reports the time each needs to reach a target test accuracy.
//
//	go run ./cmd/falcon-study                   # the mixed scenario
//	go run ./cmd/falcon-study -scenario all     # the whole suite
//	go run ./cmd/falcon-study -live             # real goroutines
//	go run ./cmd/falcon-study -live -scenario all -seeds 3 -repeats 2   # the sim-vs-live study
//	go run ./cmd/falcon-study -study -lr-select # the study v2's learning-rate and target selection
//	go run ./cmd/falcon-study -study            # the study v2 (PROTOCOL.md): CSV and Markdown in study-out/
//	go run ./cmd/falcon-study -study -workload softmax -scenario straggler,mixed -seeds 1-3 -j 2   # a subset
//
// The live bed (livebed.go, PROTOCOL-live.md; root only) runs the policies
// with workers as processes under CPU quotas and tbf links (package
// internal/testbed), real LeNet-5 compute over TCP, and their simulated
// twins beside them:
//
//	falcon-study -live-bed-select                          # targets and the twin's rate (seed 0)
//	falcon-study -live-bed -scenario straggler -seeds 1-5  # live runs -> livebed-out/live-runs.csv
//	falcon-study -live-bed-sim -scenario straggler -seeds 1-5
//	falcon-study -live-bed-report -scenario straggler
//
// The simulator's timing noise (-noise) and message latency (-latency)
// default to values calibrated on the live runtime (see policies.go).
//
// For each policy it prints one line
//
//	policy=<name> scenario=<name> time_to_target_s=<s|inf> final_acc=<0..1> blocked_frac=<0..1> transfers=<n>
//
// plus a table, and writes one CSV per kind of row,
// <out>/straggler_<scenario>_<kind>.csv for the kinds evals, workers,
// parallelism, transfers, staleness and summary (ps/sim.CSVTables: named
// columns, policy first, every policy's rows in one file), and
// <out>/straggler_<scenario>.png (test accuracy against time).
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/model/mnist"
	"github.com/falconml/falcon/ps/sim"
)

type options struct {
	scenario  string
	policies  string
	data      string
	modelName string
	hidden    int
	train     int
	test      int
	batch     int
	lr        float64
	target    float64
	window    int
	duration  time.Duration
	evalEvery time.Duration
	seed      uint64
	seeds     int
	out       string
	live      bool
	liveScale float64
	repeats   int
	chunk     int
	noise     float64
	latency   time.Duration
	quiet     bool
	stdout    io.Writer // the table and the policy= lines
	cost      costOptions

	// the study v2 (study.go, PROTOCOL.md)
	study     bool
	lrSelect  bool
	lrTune    bool   // -lr-tune: amendment 7's selection
	lrFrom    string // -lr-from: the tuned rates of an lrtune.csv
	workloads string
	seedList  string // -seeds in study mode: "N", "a-b" or "a,b,c"
	jobs      int
	from      string // -from: render the tables of recorded runs.csv files

	// study v3 (PROTOCOL-v3.md)
	syncOptB map[string]int // -syncopt-b: Sync-opt's selected b per scenario
	v3       bool           // -v3: the CNN workload of study v3
	choose   bool           // -choose: study v3's choice of EPSP's scheme and Sync-opt's b
}

func main() {
	if ok, err := bedWorkerMain(); ok { // a live-bed worker process (livebed.go)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bed worker:", err)
			os.Exit(1)
		}
		return
	}
	o := options{stdout: os.Stdout}
	flag.StringVar(&o.scenario, "scenario", "mixed", "scenario name, or \"all\" for the suite (homogeneous, static, straggler, transient, mixed)")
	flag.StringVar(&o.policies, "policies", "all", "comma-separated policies to run")
	flag.StringVar(&o.data, "data", "auto", "mnist, synthetic, or auto (MNIST if its files are found, else synthetic)")
	flag.StringVar(&o.modelName, "model", "softmax", "softmax, mlp or cnn (LeNet-5; needs 28x28 images: MNIST)")
	flag.IntVar(&o.hidden, "hidden", 64, "hidden units of -model mlp")
	flag.IntVar(&o.train, "train", 20000, "training rows used (a seeded sample of MNIST's 60000)")
	flag.IntVar(&o.test, "test", 2000, "test rows used for evaluation")
	flag.IntVar(&o.batch, "batch", 64, "batch size per worker per clock")
	flag.Float64Var(&o.lr, "lr", 1.0, "server-side SGD learning rate (the same for every policy)")
	flag.Float64Var(&o.target, "target", 0.9, "test accuracy that defines convergence")
	flag.IntVar(&o.window, "window", 5, "evaluations averaged for the target test (smoothed accuracy must reach -target)")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "virtual time simulated per run")
	flag.DurationVar(&o.evalEvery, "eval", 50*time.Millisecond, "virtual time between evaluations")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of data order, model init and slowdowns")
	seeds := flag.String("seeds", "", "number of seeds (seed, seed+1, ...; default 1); times are then medians over seeds. With -study also a list or range, e.g. 1-5 or 2,4 (default the study's 1-5)")
	flag.StringVar(&o.out, "out", "straggler-out", "directory for the CSV and PNG files (created; ignored by git)")
	flag.BoolVar(&o.live, "live", false, "run with real goroutines and injected slowdowns on the wall clock instead of the simulator")
	flag.IntVar(&o.repeats, "repeats", 1, "with -live: live runs per policy and seed; with 2 or more the output also judges the agreement on the policies whose live times reproduce")
	flag.Float64Var(&o.liveScale, "live-scale", 1, "with -live: stretch wall time by this factor (rates divided, periods multiplied); times are reported divided by it")
	flag.Float64Var(&o.noise, "noise", simNoise, "simulator only: CV of each compute round's time (sim.Config.ComputeNoise); 0 for none")
	flag.DurationVar(&o.latency, "latency", simLatency, "simulator only: one-way latency of every message (sim.Network.Latency)")
	flag.IntVar(&o.chunk, "chunk", 0, "samples a compute goroutine claims at a time (simulator and live); 0 means batch/(8·initial parallelism)")
	flag.BoolVar(&o.quiet, "q", false, "no progress on stderr")
	flag.BoolVar(&o.study, "study", false, "run the convergence study v2 of PROTOCOL.md (all workloads, scenarios, policies and seeds 1-5 unless narrowed); writes CSV and Markdown into -out (default study-out)")
	flag.BoolVar(&o.lrSelect, "lr-select", false, "with -study: run the learning-rate and target selection (PROTOCOL.md §1-2) instead")
	flag.StringVar(&o.workloads, "workload", "all", "with -study: softmax, mlp or all")
	flag.BoolVar(&o.lrTune, "lr-tune", false, "with -study: choose a learning rate per policy and scenario on seed 0 (PROTOCOL.md amendment 7); writes lrtune.csv")
	flag.StringVar(&o.lrFrom, "lr-from", "", "with -study: run every policy at its rate per scenario from this lrtune.csv instead of its family's")
	flag.IntVar(&o.jobs, "j", 1, "with -study: simulations run at once")
	flag.StringVar(&o.from, "from", "", "with -study: no simulation; render the tables of these runs.csv files (comma-separated), e.g. of an interrupted or split study")
	syncB := flag.String("syncopt-b", "", "with -study: Sync-opt's backup workers per scenario, e.g. straggler=1,mixed=2 (study v3's selection; PROTOCOL-v3.md)")
	flag.BoolVar(&o.v3, "v3", false, "with -study: study v3 (PROTOCOL-v3.md): the CNN workload with its evaluation, stop and cost model")
	flag.BoolVar(&o.choose, "choose", false, "with -study -v3: the selection seed's runs that choose EPSP's scheme and Sync-opt's b per scenario (PROTOCOL-v3.md §5)")
	o.cost.register(flag.CommandLine)
	var bed bedFlags
	bed.register(flag.CommandLine)
	flag.Parse()
	var err error
	if o.syncOptB, err = parseSyncOptB(*syncB); err != nil {
		fmt.Fprintln(os.Stderr, "straggler:", err)
		os.Exit(2)
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if bed.any() {
		if err := runLiveBedMain(o, bed, *seeds, set); err != nil {
			fmt.Fprintln(os.Stderr, "live bed:", err)
			os.Exit(1)
		}
		return
	}
	if o.study {
		o.seedList = *seeds
		if !set["scenario"] {
			o.scenario = "all"
		}
		if !set["out"] {
			o.out = "study-out"
		}
		if err := runStudy(o); err != nil {
			fmt.Fprintln(os.Stderr, "straggler:", err)
			os.Exit(1)
		}
		return
	}
	o.seeds = 1
	if *seeds != "" {
		n, err := strconv.Atoi(*seeds)
		if err != nil {
			fmt.Fprintf(os.Stderr, "straggler: -seeds %q: want a number of seeds (lists need -study)\n", *seeds)
			os.Exit(2)
		}
		o.seeds = n
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "straggler:", err)
		os.Exit(1)
	}
}

// loadData returns the training and test sets and a label for them.
func loadData(o options) (train, test *model.Dataset, label string, err error) {
	rng := rand.New(rand.NewPCG(o.seed, 0xd474))
	if o.data == "mnist" || o.data == "auto" {
		dir, lerr := mnist.Locate()
		if lerr == nil {
			train, test, lerr = mnist.Load(dir)
		}
		if lerr == nil {
			train = train.Sample(o.train, rng)
			test = test.Sample(o.test, rng)
			return train, test, fmt.Sprintf("MNIST (%d train / %d test rows)", train.N, test.N), nil
		}
		if o.data == "mnist" {
			return nil, nil, "", lerr
		}
		fmt.Fprintf(os.Stderr, "straggler: MNIST not available (%v);\n  falling back to the synthetic Gaussian-cluster dataset. Results are NOT MNIST results.\n", lerr)
	} else if o.data != "synthetic" {
		return nil, nil, "", fmt.Errorf("unknown -data %q", o.data)
	}
	train, test, err = model.Synthetic(model.SyntheticConfig{Train: o.train, Test: o.test, Dim: 50, Classes: 10, Separation: 0.5, Seed: o.seed})
	if err != nil {
		return nil, nil, "", err
	}
	return train, test, fmt.Sprintf("synthetic clusters (%d train / %d test rows)", train.N, test.N), nil
}

func newModel(o options, d *model.Dataset) (model.Model, error) {
	switch o.modelName {
	case "softmax":
		return model.NewSoftmax(d.D, d.Classes), nil
	case "mlp":
		return model.NewMLP(d.D, o.hidden, d.Classes), nil
	case "cnn":
		return newCNN(d)
	}
	return nil, fmt.Errorf("unknown -model %q", o.modelName)
}

// forSeed returns the options, data and model of the i-th seed of a run
// (seed o.seed+i).
func forSeed(o options, i int) (so options, train, test *model.Dataset, label string, m model.Model, err error) {
	so = o
	so.seed = o.seed + uint64(i)
	if train, test, label, err = loadData(so); err != nil {
		return
	}
	m, err = newModel(so, train)
	return
}

// scenariosFor returns the named scenario, or the whole suite for "all",
// for a seed.
func scenariosFor(name string, seed uint64) ([]sim.Scenario, error) {
	if name == "all" {
		return sim.Scenarios(seed), nil
	}
	sc, err := sim.ScenarioByName(name, seed)
	return []sim.Scenario{sc}, err
}

func run(o options) error {
	specs, err := selectPolicies(o.policies)
	if err != nil {
		return err
	}
	if o.repeats < 0 {
		return fmt.Errorf("-repeats %d: want >= 1", o.repeats)
	}
	o.repeats = max(o.repeats, 1)
	if !(o.noise >= 0 && o.noise <= 10) {
		return fmt.Errorf("-noise %v: want a CV in [0, 10]", o.noise)
	}
	if o.latency < 0 {
		return fmt.Errorf("-latency %v: want >= 0", o.latency)
	}
	if o.chunk < 0 {
		return fmt.Errorf("-chunk %d: want >= 0", o.chunk)
	}
	if o.seeds < 1 {
		return fmt.Errorf("-seeds %d: want >= 1", o.seeds)
	}
	scenarios, err := scenariosFor(o.scenario, o.seed)
	if err != nil {
		return err
	}
	if o.live {
		return runLive(o, specs)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}

	type row struct {
		scenario string
		spec     policySpec
		seed     uint64
		res      *sim.Result
	}
	var rows []row
	total := o.seeds * len(scenarios) * len(specs)
	k := 0
	for i := range o.seeds {
		so, train, test, dataLabel, m, err := forSeed(o, i)
		if err != nil {
			return err
		}
		if i == 0 {
			fmt.Fprintf(o.stdout, "data: %s; model: %s; %d workers, batch %d/worker, lr %g, target acc %.3f (mean of %d evaluations every %v), %v virtual per run, seeds %d..%d\n",
				dataLabel, m.Name(), sim.SuiteWorkers, o.batch, o.lr, o.target, o.window, o.evalEvery, o.duration, o.seed, o.seed+uint64(o.seeds)-1)
			fmt.Fprintf(o.stdout, "command: %s\n\n", commandLine())
		}
		scs, err := scenariosFor(o.scenario, so.seed)
		if err != nil {
			return err
		}
		for _, sc := range scs {
			if i == 0 {
				if err := printScenarioCost(o, sc, m); err != nil {
					return err
				}
			}
			var results []*sim.Result
			for _, spec := range specs {
				k++
				res, err := runOne(so, sc, spec, m, train, test, k, total)
				if err != nil {
					return fmt.Errorf("seed %d, scenario %s, policy %s: %w", so.seed, sc.Name, spec.Name, err)
				}
				res.Policy = spec.Name
				results = append(results, res)
				rows = append(rows, row{sc.Name, spec, so.seed, res})
			}
			suffix := ""
			if o.seeds > 1 {
				suffix = fmt.Sprintf("_seed%d", so.seed)
			}
			if err := writeOutputs(o, sc, suffix, results); err != nil {
				return err
			}
		}
	}

	// Per scenario and policy: the median time to target over the seeds
	// (+Inf counts as the largest), mean final accuracy, blocked fraction
	// and transfers.
	type agg struct {
		times                    []float64
		acc, blocked, transfers  float64
		clocks                   float64
		firsts                   []float64
		dropped, parChanges, num int
	}
	key := func(sc, pol string) string { return sc + "/" + pol }
	aggs := map[string]*agg{}
	for _, r := range rows {
		a := aggs[key(r.scenario, r.spec.Name)]
		if a == nil {
			a = &agg{}
			aggs[key(r.scenario, r.spec.Name)] = a
		}
		a.times = append(a.times, r.res.TimeToTargetSeconds())
		fc := math.Inf(1)
		if r.res.Crossed {
			fc = r.res.FirstCrossing.Seconds()
		}
		a.firsts = append(a.firsts, fc)
		a.acc += r.res.FinalAccuracy
		a.blocked += r.res.BlockedFraction()
		a.transfers += float64(r.res.AcceptedTransfers())
		a.clocks += float64(totalClocks(r.res))
		a.dropped += r.res.Dropped
		a.parChanges += r.res.Stats.ParallelismChanges
		a.num++
	}
	n := float64(o.seeds)

	// Result lines, one per policy and scenario.
	fmt.Fprintln(o.stdout)
	for _, sc := range scenarios {
		for _, spec := range specs {
			a := aggs[key(sc.Name, spec.Name)]
			fmt.Fprintf(o.stdout, "policy=%s scenario=%s time_to_target_s=%s final_acc=%.4f blocked_frac=%.4f transfers=%d\n",
				spec.Name, sc.Name, fmtT(median(a.times)), a.acc/n, a.blocked/n, int(math.Round(a.transfers/n)))
		}
	}

	// Table with the reduction of EPSP's better mode against each policy.
	fmt.Fprintln(o.stdout)
	tw := tabwriter.NewWriter(o.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "scenario\tpolicy\ttime_to_target_s\tepsp_reduction\tfirst_crossing_s\tfinal_acc\tblocked\ttransfers\tdropped\tp_changes\tclocks\t"
	if o.seeds > 1 {
		head += "per_seed_t2t_s\t"
	}
	fmt.Fprintln(tw, head)
	for _, sc := range scenarios {
		best := math.Inf(1)
		for _, spec := range specs {
			if strings.HasPrefix(spec.Name, "epsp") {
				best = min(best, median(aggs[key(sc.Name, spec.Name)].times))
			}
		}
		for _, spec := range specs {
			a := aggs[key(sc.Name, spec.Name)]
			t := median(a.times)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.4f\t%.3f\t%d\t%d\t%d\t%.0f\t", sc.Name, spec.Name, fmtT(t), reduction(best, t), fmtT(median(a.firsts)),
				a.acc/n, a.blocked/n, int(math.Round(a.transfers/n)), a.dropped/a.num, a.parChanges/a.num, a.clocks/n)
			if o.seeds > 1 {
				var ts []string
				for _, x := range a.times {
					ts = append(ts, fmtT(x))
				}
				fmt.Fprintf(tw, "%s\t", strings.Join(ts, " "))
			}
			fmt.Fprintln(tw)
		}
	}
	tw.Flush()
	fmt.Fprintln(o.stdout, "\nepsp_reduction = (T_policy - T_epsp)/T_policy with T_epsp the faster EPSP mode; negative means EPSP is slower.")
	if o.seeds > 1 {
		fmt.Fprintln(o.stdout, "With several seeds, times are medians over seeds; accuracy, blocked fraction and counts are means.")
	}
	fmt.Fprintf(o.stdout, "\nThis run used %d seed(s) (%d..%d) at one shared learning rate. The study v2 (RESULTS.md, PROTOCOL.md: 2 workloads, 10 scenarios, seeds 1-5, learning rate per update-rule family, paired bootstrap intervals): go run ./cmd/falcon-study -study\n",
		o.seeds, o.seed, o.seed+uint64(o.seeds)-1)
	return nil
}

// median of xs (+Inf sorts last); for an even count the mean of the two
// middle values (+Inf if either is).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.Inf(1)
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 || s[n/2-1] == s[n/2] {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func fmtT(t float64) string {
	if math.IsInf(t, 1) {
		return "inf"
	}
	if math.IsNaN(t) {
		return "—" // no run
	}
	return fmt.Sprintf("%.3f", t)
}

func reduction(epsp, t float64) string {
	switch {
	case math.IsInf(epsp, 1) && math.IsInf(t, 1):
		return "n/a"
	case math.IsInf(t, 1):
		return "100% (policy never)"
	case math.IsInf(epsp, 1):
		return "-inf (epsp never)"
	}
	return fmt.Sprintf("%.2f%%", 100*(t-epsp)/t)
}

func simConfig(o options, sc sim.Scenario) sim.Config {
	c := sim.DefaultConfig()
	c.Workers = sc.NumWorkers()
	c.Batch = o.batch
	c.Chunk = o.chunk
	c.ComputeNoise = o.noise
	c.Network.Latency = o.latency
	c.Parallelism = sc.Parallelism
	c.LR = float32(o.lr)
	c.Duration = o.duration
	c.EvalEvery = o.evalEvery
	c.Target = o.target
	c.TargetWindow = o.window
	c.Seed = o.seed
	return c
}

func runOne(o options, sc sim.Scenario, spec policySpec, m model.Model, train, test *model.Dataset, k, total int) (*sim.Result, error) {
	sc, err := o.cost.withCurve(sc)
	if err != nil {
		return nil, err
	}
	speed, err := sc.Model()
	if err != nil {
		return nil, err
	}
	cfg := simConfig(o, sc)
	if cfg.Cost, _, err = o.cost.costModel(sc, m, speed); err != nil {
		return nil, err
	}
	pol, err := spec.New(speed, sc.NumWorkers())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	job := sim.Job{Model: m.Clone(), Train: train, Test: test, Speed: speed, Policy: pol}
	prefix := fmt.Sprintf("[%d/%d] %-11s %-14s", k, total, sc.Name, spec.Name)
	if !o.quiet && stderrIsTerminal() { // a redrawn bar only on a terminal; log files get the closing line alone
		lastBar := -1
		job.OnEval = func(e sim.EvalPoint) {
			frac := e.Time.Seconds() / o.duration.Seconds()
			bar := int(frac * 30)
			if bar == lastBar {
				return
			}
			lastBar = bar
			fmt.Fprintf(os.Stderr, "\r%s [%-30s] t=%5.1fs acc=%.3f", prefix, strings.Repeat("#", min(bar, 30)), e.Time.Seconds(), e.Accuracy)
		}
	}
	res, err := sim.Run(cfg, job)
	if err != nil {
		if !o.quiet {
			fmt.Fprintln(os.Stderr)
		}
		return nil, err
	}
	if !o.quiet {
		lead, pad := "", ""
		if stderrIsTerminal() {
			lead, pad = "\r", strings.Repeat(" ", 20)
		}
		fmt.Fprintf(os.Stderr, "%s%s time_to_target=%ss final_acc=%.3f (%.1fs wall)%s\n", lead, prefix, fmtT(res.TimeToTargetSeconds()), res.FinalAccuracy, time.Since(start).Seconds(), pad)
	}
	return res, nil
}

func writeOutputs(o options, sc sim.Scenario, suffix string, results []*sim.Result) error {
	base := filepath.Join(o.out, "straggler_"+sc.Name+suffix)
	var names []string
	for _, tab := range sim.CSVTables() {
		name := base + "_" + tab.Name + ".csv"
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		if err := tab.Write(f, results...); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		names = append(names, filepath.Base(name))
	}
	title := fmt.Sprintf("scenario %s: test accuracy vs virtual time", sc.Name)
	if err := plotAccuracy(base+".png", title, o.target, o.window, results); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s.png and, in %s, %s\n", base, filepath.Dir(base), strings.Join(names, " "))
	return nil
}

// stderrIsTerminal reports whether standard error is a character device
// (a terminal), where progress may redraw a line with \r.
func stderrIsTerminal() bool {
	fi, err := os.Stderr.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// commandLine is the command that reproduces this run, as a user types it
// (not the temporary binary go run builds).
func commandLine() string {
	return strings.Join(append([]string{"go run ./cmd/falcon-study"}, os.Args[1:]...), " ")
}
