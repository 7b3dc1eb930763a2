// Command coflowmatrix runs the coflow baseline matrix on the FB2010 trace:
// schedulers (SEBF, D-CLAS, Sincronia) × compression (none, always lz4,
// always snappy, the per-flow Policy rule; the always-compress wrappers
// are fvdf.Compressor, work-conserving) plus FVDF and the baselines that
// isolate its mechanism (protocol.go, Isolating: sebf+write-lz4,
// sebf-order+fvdf, sebf-rho), × rescheduling
// (Varys' rule, T/δ timers, every flow completion coalesced) × fabric
// settings × seeds, under the protocol in protocol.go. It prints progress
// on stderr and writes, under -out, runs.csv (one line per run),
// summary.md (medians over seeds with 95 % bootstrap intervals, FVDF
// against every baseline) and PNG plots.
//
// Usage:
//
//	go run ./internal/coflowmatrix -trace /path/to/FB2010-1Hr-150-0.txt -out matrix
//
// The claims study's dimensions (fvdf/PROTOCOL-v3.md, issue 29): -mix
// picks a declared data mix (spark-sql-shuffle, shuffle, ml-ps,
// media-logs); -predictors oracle,last,ewma,lstm runs every cell under the
// codec-speed drift predictor/record recorded (-drift, drift.go) with
// FVDF's cells once per predictor; -synth-load L replaces FB2010 by one
// synthetic trace per seed at offered load L (SynthTrace); -coflows N
// keeps a trace's first N coflows (exploratory slices); -whole-cores runs
// §7's whole-core model (-chunk-overhead, default ChunkOverhead);
// -codec-efficiency η and -completion-delay D set coflow.Config's
// CodecCoreEfficiency and CompletionDelay of every run (amendment v4's
// bed-calibrated model: η 0.5, D 4.2 ms, cmd/falcon-coflow/CALIBRATION.md;
// -planner-eta shows the schedulers η·s instead, exploratory);
// -pool DIR,DIR,... bootstraps the paired ratios of several outputs
// together (pooled.md).
//
// It is deterministic for a given protocol and flags (the run order across
// workers does not change any result). Without the trace file it prints a
// message and exits 0.
package main

import (
	"encoding/gob"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
	"github.com/falconml/falcon/fvdf"
	"github.com/falconml/falcon/fvdf/codecprof"
	"github.com/falconml/falcon/internal/cputime"
	"github.com/falconml/falcon/transport"
)

type options struct {
	trace      string
	out        string
	workers    int
	seeds      int
	settings   []int
	resched    []string
	only       *regexp.Regexp
	coalesce   time.Duration
	noJobs     bool
	shifts     bool
	probe      bool
	plots      bool
	protocol   string
	resume     bool
	reportOnly bool
	// mix is the declared data mix (empty: the protocol's Mix).
	mix string
	// preds, when not empty, runs every cell under the recorded codec-speed
	// drift (drift) and FVDF's cells once per predictor (PROTOCOL-v3).
	preds []string
	drift []float64
	// synthLoad, when positive, replaces the trace by synthetic traces at
	// that offered load (at SynthRefBps), one per seed (SynthTrace).
	synthLoad float64
	// coflows, when positive, keeps the trace's first coflows only (the
	// exploratory slices of PROTOCOL-v3).
	coflows int
	// wholeCores runs PROTOCOL-v3 §7's model: every compressing scheduler
	// on whole codec workers (fvdf.BaselineConfig.WholeCores) and every
	// codec speed with chunkOverhead per ChunkBytes chunk (ChunkSpeed).
	// False: fractional, overhead-free cores (v2's model; the golden
	// hashes).
	wholeCores    bool
	chunkOverhead time.Duration
	// fracOverhead applies chunkOverhead with fractional cores (an
	// exploratory split of §7's model into its two parts).
	fracOverhead bool
	// codecEff and doneDelay are the bed's calibration constants
	// (PROTOCOL-v3 amendment v4, cmd/falcon-coflow/CALIBRATION.md):
	// coflow.Config.CodecCoreEfficiency and CompletionDelay of every run.
	// Zero: the model's overhead-free cores and no delay (the golden
	// hashes).
	codecEff  float64
	doneDelay time.Duration
	// plannerEta, with codecEff, moves η from the simulator into the
	// fabric the schedulers see: codec speeds η·s, the simulator at η = 1.
	// The true stage rates are the same; only the planners' knowledge
	// differs (an exploratory variant of v4: the live coordinator measures
	// speeds per CPU second of the worker thread, which carry no η).
	plannerEta bool
}

// overhead is the per-chunk overhead o's fabrics apply (ChunkSpeed).
func (o *options) overhead() time.Duration {
	if o.wholeCores || o.fracOverhead {
		return o.chunkOverhead
	}
	return 0
}

// model names the core model of o's runs (saved beside them: -resume
// refuses runs of another model).
func (o *options) model() string {
	cores := "fractional cores"
	if o.wholeCores {
		cores = "whole cores"
	}
	if o.overhead() == 0 && !o.wholeCores {
		return cores + ", no per-chunk overhead" + o.calibration()
	}
	return fmt.Sprintf("%s, %v per %d KiB chunk", cores, o.overhead(), ChunkBytes>>10) + o.calibration()
}

// calibration names o's bed constants for model (empty when none is set,
// so the model strings of earlier outputs are unchanged).
func (o *options) calibration() string {
	if o.codecEff == 0 && o.doneDelay == 0 {
		return ""
	}
	s := fmt.Sprintf(", codec core efficiency %g", o.codecEff)
	if o.codecEff == 0 {
		s = ", codec core efficiency 1"
	}
	if o.plannerEta && o.codecEff != 0 {
		s += " known to the planners"
	}
	return s + fmt.Sprintf(", completion delay %v", o.doneDelay)
}

// simEff is the CodecCoreEfficiency the simulator applies: codecEff, or 0
// (none) when the planners' fabric carries it (plannerEta).
func (o *options) simEff() float64 {
	if o.plannerEta {
		return 0
	}
	return o.codecEff
}

func main() {
	var o options
	var settings, resched, only string
	flag.StringVar(&o.trace, "trace", "", "FB2010 trace file (empty: shared/data/coflow-benchmark/"+TraceFile+" found as coflowtest.SharedData does, FALCON_SHARED or an ancestor directory)")
	flag.StringVar(&o.out, "out", "coflowmatrix-out", "output directory")
	flag.IntVar(&o.workers, "j", 2, "parallel runs")
	flag.IntVar(&o.seeds, "seeds", len(Seeds), "use the first n protocol seeds")
	flag.StringVar(&settings, "settings", "", "comma-separated setting indices into the protocol's Settings (empty: all)")
	flag.StringVar(&resched, "resched", "", "comma-separated rescheduling rules (empty: all)")
	flag.StringVar(&only, "only", "", "regexp on Cell keys sched/compression/rescheduling/setting (empty: all)")
	flag.DurationVar(&o.coalesce, "coalesce", CoalesceWindow, "coalescing window of the every-flow-completion rule (0: a call at every flow completion)")
	flag.BoolVar(&o.noJobs, "nojobs", false, "replay the trace's coflows only (no multi-stage job model)")
	flag.BoolVar(&o.shifts, "shifts", true, "run the time-shift perturbations")
	flag.BoolVar(&o.probe, "probe", true, "count how often FVDF's order differs from SEBF's (seed 1, Varys' rule)")
	flag.BoolVar(&o.plots, "plots", true, "write PNG plots")
	flag.StringVar(&o.protocol, "protocol", "full", "full (every cell) or small (SmallProtocol's subset)")
	flag.BoolVar(&o.resume, "resume", false, "reuse the runs already saved under -out/runs (each run is saved when it ends)")
	flag.BoolVar(&o.reportOnly, "report-only", false, "write the report from the saved runs without running the missing ones")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	flag.StringVar(&o.mix, "mix", Mix, "declared data mix (codecprof/mixes.go): spark-sql-shuffle, shuffle, ml-ps, media-logs")
	preds := flag.String("predictors", "", "comma-separated predictors (oracle, last, ewma, lstm, ...): run every cell under the recorded codec-speed drift (-drift) and FVDF's cells once per predictor (empty: exact, constant speeds)")
	driftPath := flag.String("drift", DriftFile, "predictor/record series the drift replays (with -predictors)")
	flag.Float64Var(&o.synthLoad, "synth-load", 0, "run on synthetic traces at this offered load at 1 Gbit/s, one trace per seed (0: the FB2010 trace)")
	flag.IntVar(&o.coflows, "coflows", 0, "keep the trace's first n coflows (0: all)")
	flag.BoolVar(&o.wholeCores, "whole-cores", false, "PROTOCOL-v3 §7: compressed flows on whole codec workers, codec speeds with -chunk-overhead per 64 KiB chunk (false: fractional, overhead-free cores)")
	flag.DurationVar(&o.chunkOverhead, "chunk-overhead", ChunkOverhead, "per-chunk codec overhead of -whole-cores (ChunkSpeed)")
	poolDirs := flag.String("pool", "", "comma-separated matrix output directories: write -out/pooled.md, FVDF's per-seed ratios of all of them bootstrapped together (PROTOCOL-v3 §8), and run nothing")
	flag.BoolVar(&o.fracOverhead, "fractional-overhead", false, "apply -chunk-overhead with fractional cores (exploratory: §7's overhead without its whole cores)")
	flag.Float64Var(&o.codecEff, "codec-efficiency", 0, "coflow.Config.CodecCoreEfficiency η of every run, in [0, 1] (PROTOCOL-v3 amendment v4: 0.5, fitted on the bed, cmd/falcon-coflow/CALIBRATION.md; 0: none)")
	flag.DurationVar(&o.doneDelay, "completion-delay", 0, "coflow.Config.CompletionDelay of every run (amendment v4: 4.2ms, fitted on the bed; 0: none)")
	flag.BoolVar(&o.plannerEta, "planner-eta", false, "with -codec-efficiency: the schedulers see codec speeds η·s and the simulator runs at η = 1 (exploratory: planners that know η)")
	flag.Parse()
	if !(o.codecEff >= 0 && o.codecEff <= 1) {
		fail(fmt.Errorf("-codec-efficiency %v: must be in [0, 1]", o.codecEff))
	}
	if o.doneDelay < 0 {
		fail(fmt.Errorf("-completion-delay %v: must be ≥ 0", o.doneDelay))
	}
	if o.plannerEta && o.codecEff == 0 {
		fail(fmt.Errorf("-planner-eta needs -codec-efficiency"))
	}
	if *poolDirs != "" {
		if err := pool(strings.Split(*poolDirs, ","), o.out); err != nil {
			fail(err)
		}
		return
	}
	if o.chunkOverhead < 0 {
		fail(fmt.Errorf("-chunk-overhead %v: must be ≥ 0", o.chunkOverhead))
	}
	if *preds != "" {
		o.preds = strings.Split(*preds, ",")
		var err error
		if o.drift, err = loadDrift(*driftPath); err != nil {
			fail(err)
		}
	}
	if *cpuprofile != "" {
		pf, err := os.Create(*cpuprofile)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	if settings != "" {
		for _, s := range strings.Split(settings, ",") {
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(Settings) {
				fail(fmt.Errorf("bad setting index %q", s))
			}
			o.settings = append(o.settings, i)
		}
	} else {
		for i := range Settings {
			o.settings = append(o.settings, i)
		}
	}
	o.resched = Rescheduling
	if resched != "" {
		o.resched = strings.Split(resched, ",")
	}
	o.only = regexp.MustCompile(only)
	if o.protocol != "full" && o.protocol != "small" {
		fail(fmt.Errorf("-protocol %q: want full or small", o.protocol))
	}
	if o.seeds < 1 || o.seeds > len(Seeds) {
		fail(fmt.Errorf("-seeds %d not in [1,%d]", o.seeds, len(Seeds)))
	}
	if o.synthLoad > 0 {
		o.trace = "-" // the synthetic traces, drawn per seed in newMatrix
	}
	if o.trace == "" {
		dir, err := coflowtest.SharedData("coflow-benchmark")
		if err != nil {
			fmt.Fprintf(os.Stderr, "coflowmatrix: FB2010 trace not available (%v); skipping the matrix\n", err)
			return
		}
		o.trace = filepath.Join(dir, TraceFile)
	}
	var tr *coflow.Trace
	if o.synthLoad == 0 {
		f, err := os.Open(o.trace)
		if err != nil {
			fmt.Fprintf(os.Stderr, "coflowmatrix: trace %s not available (%v); skipping the matrix\n", o.trace, err)
			return
		}
		tr, err = coflow.ReadTrace(f)
		f.Close()
		if err != nil {
			fail(err)
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		fail(err)
	}
	if err := checkModel(o); err != nil {
		fail(err)
	}
	debug.SetGCPercent(50)
	m, err := newMatrix(tr, o)
	if err != nil {
		fail(err)
	}
	start, cpu0 := time.Now(), cputime.Process()
	if err := m.run(); err != nil {
		fail(err)
	}
	cpu := cputime.Process() - cpu0
	fmt.Fprintf(os.Stderr, "coflowmatrix: %d runs, wall %.1f s, CPU %.1f s (%.1f CPU-min)\n", len(m.results), time.Since(start).Seconds(), cpu.Seconds(), cpu.Minutes())
	if err := m.report(cpu, time.Since(start)); err != nil {
		fail(err)
	}
}

// checkModel refuses to mix runs of two core models under one -out (the
// run files are keyed by cell and seed only) and records o's.
func checkModel(o options) error {
	p := filepath.Join(o.out, "model.txt")
	if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) != o.model() {
		if o.resume || o.reportOnly {
			return fmt.Errorf("%s holds runs of model %q, not %q: use another -out", o.out, strings.TrimSpace(string(b)), o.model())
		}
	}
	return os.WriteFile(p, []byte(o.model()+"\n"), 0o644)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "coflowmatrix:", err)
	os.Exit(1)
}

// Cell is one configuration of the matrix.
type Cell struct {
	Sched, Comp, Resched string
	Set                  Setting
	// Pred, when set, runs the cell under the recorded drift with this
	// predictor (FVDF's cells) or the oracle (the others); see runOne.
	Pred string
}

func (c Cell) key() string {
	k := fmt.Sprintf("%s/%s/%s/%gG-%gc", c.Sched, c.Comp, c.Resched, c.Set.Gbps, c.Set.Cores)
	if c.Pred != "" {
		k += "/" + c.Pred
	}
	return k
}

// label is sched/comp, with "@predictor" for a predictor other than the
// oracle (the drift cells of PROTOCOL-v3).
func (c Cell) label() string {
	if c.Pred != "" && c.Pred != fvdf.PredictorOracle {
		return c.Sched + "/" + c.Comp + "@" + c.Pred
	}
	return c.Sched + "/" + c.Comp
}

// workload is one seed's jobs.
type workload struct {
	seed  uint64
	plan  *fvdf.JobPlan
	class []int // per plan coflow
	bins  []coflow.Bin
}

// result is one run.
type result struct {
	Cell
	seed                 uint64
	cct, jct             []time.Duration
	wire, raw, cpuSec    float64
	maxWait              time.Duration
	calls                int
	runCPU, runWall      time.Duration
	classWire, classRaw  []float64
	probeCalls, probeDif int
	probeHead            int
	probeKendall         float64
	shiftMaxRel          float64 // time-shift runs: max relative CCT change (-1 none)
}

type matrix struct {
	o       options
	tr      *coflow.Trace
	mix     codecprof.NamedMix
	classes []codecprof.Class
	work    []*workload
	cells   []Cell
	mu      sync.Mutex
	results []*result
	shifted []*result
	planned int
	// check, if not nil, is every run's coflow.Config.Check (tests hash
	// every allocation with it).
	check coflow.CheckFunc
}

func newMatrix(tr *coflow.Trace, o options) (*matrix, error) {
	if o.mix == "" {
		o.mix = Mix
	}
	mix, err := codecprof.LookupMix(o.mix)
	if err != nil {
		return nil, err
	}
	m := &matrix{o: o, tr: tr, mix: mix}
	var weights []float64
	for _, w := range mix.Weights {
		m.classes = append(m.classes, w.Class)
		weights = append(weights, w.W)
	}
	for _, seed := range Seeds[:o.seeds] {
		if o.synthLoad > 0 {
			if tr, err = SynthTrace(o.synthLoad, seed); err != nil {
				return nil, err
			}
			m.tr = tr
		}
		if o.coflows > 0 && o.coflows < len(tr.Coflows) {
			sl := *tr
			sl.Coflows = tr.Coflows[:o.coflows]
			tr = &sl
			m.tr = tr
		}
		cfs, err := tr.ToCoflows()
		if err != nil {
			return nil, err
		}
		if err := coflow.AssignClasses(cfs, weights, seed); err != nil {
			return nil, err
		}
		jc := Jobs(seed)
		if o.noJobs {
			jc.StageWeights, jc.DiskBps = []float64{1}, 0
		}
		plan, err := fvdf.PlanJobs(cfs, jc)
		if err != nil {
			return nil, err
		}
		w := &workload{seed: seed, plan: plan}
		for _, c := range plan.Coflows {
			w.class = append(w.class, c.Flows[0].Class)
			w.bins = append(w.bins, coflow.BinOf(c.MaxFlowBytes(), c.Width()))
		}
		m.work = append(m.work, w)
	}
	for _, si := range o.settings {
		set := Settings[si]
		for _, rs := range o.resched {
			for _, s := range Schedulers {
				for _, c := range Compression {
					m.addCell(Cell{s, c, rs, set, m.basePred()})
				}
			}
			if len(o.preds) == 0 {
				m.addCell(Cell{"fvdf", "fvdf", rs, set, ""})
				for _, b := range Isolating {
					m.addCell(Cell{b.Sched, b.Comp, rs, set, ""})
				}
				continue
			}
			// Under drift: FVDF and SEBF's order with FVDF's compression
			// once per predictor, the other baselines with the oracle.
			for _, p := range o.preds {
				m.addCell(Cell{"fvdf", "fvdf", rs, set, p})
			}
			for _, b := range Isolating {
				if b.Comp == "fvdf" {
					for _, p := range o.preds {
						m.addCell(Cell{b.Sched, b.Comp, rs, set, p})
					}
					continue
				}
				m.addCell(Cell{b.Sched, b.Comp, rs, set, fvdf.PredictorOracle})
			}
		}
	}
	return m, nil
}

func (m *matrix) addCell(c Cell) {
	if m.o.only.MatchString(c.key()) && (m.o.protocol == "full" || SmallProtocol(c)) {
		m.cells = append(m.cells, c)
	}
}

// fabCodecs names the fabric's codecs, in fabric order.
var fabCodecs = []string{"lz4", "snappy"}

// fabric builds a setting's fabric: per-port bandwidth, cores and
// background, the mix's reference codec profiles and one class per mix
// class.
func (m *matrix) fabric(set Setting) (*coflow.Fabric, error) {
	return m.fabricEta(set, m.o.plannerEta)
}

// fabricEta is fabric with the codec speeds scaled by codecEff when
// plannerEta (the planners' view under -planner-eta) or not (the true
// speeds, which compress-at-write's tasks run at).
func (m *matrix) fabricEta(set Setting, plannerEta bool) (*coflow.Fabric, error) {
	fab := coflow.NewFabric(m.tr.Ports, set.Gbps*125e6)
	cores := MachinesPerPort * set.Cores
	for i := range fab.Ports {
		fab.Ports[i].Cores = cores
		fab.Ports[i].Background = BackgroundFraction * cores
	}
	ps := codecprof.Defaults()
	codecs := []transport.Codec{transport.CodecLZ4, transport.CodecSnappy}
	if len(fabCodecs) != len(codecs) {
		panic("coflowmatrix: fabCodecs and the fabric's codecs differ")
	}
	prof := func(p codecprof.Profile) coflow.CodecProfile {
		cs, ds := p.CompressBps, p.DecompressBps
		if over := m.o.overhead(); over > 0 {
			cs, ds = ChunkSpeed(cs, over), ChunkSpeed(ds, over)
		}
		if plannerEta && m.o.codecEff > 0 {
			cs, ds = cs*m.o.codecEff, ds*m.o.codecEff
		}
		return coflow.CodecProfile{Name: p.Codec.String(), CompressSpeed: cs, DecompressSpeed: ds, Ratio: min(1, p.Ratio)}
	}
	for _, cd := range codecs {
		p, err := ps.ForMix(cd, m.mix.Mix())
		if err != nil {
			return nil, err
		}
		fab.Codecs = append(fab.Codecs, prof(p))
	}
	for _, k := range m.classes {
		dc := coflow.DataClass{Name: k.String()}
		for _, cd := range codecs {
			p, ok := ps.Lookup(cd, k)
			if !ok {
				return nil, fmt.Errorf("no profile for %s/%s", cd, k)
			}
			dc.Codecs = append(dc.Codecs, prof(p))
		}
		fab.Classes = append(fab.Classes, dc)
	}
	return fab, fab.Validate()
}

// scheduler builds a Cell's scheduler (fvdf.NewBaseline: the one
// cmd/falcon-coflow -sched NAME -resched RULE runs) and, for FVDF with
// probe, the order probe around it.
func (m *matrix) scheduler(c Cell, probe bool, est fvdf.Estimator) (coflow.Scheduler, *orderProbe, error) {
	bc := fvdf.BaselineConfig{Rescheduling: c.Resched, GuardPeriod: GuardPeriod, GuardSlice: GuardSlice,
		Codecs: []transport.Codec{transport.CodecLZ4, transport.CodecSnappy}, PolicyOverhead: PolicyOverhead,
		FVDF: fvdf.DefaultConfig(), Estimator: est, WholeCores: m.o.wholeCores}
	s, err := fvdf.NewBaseline(fvdf.Baseline{Sched: c.Sched, Comp: c.Comp}, bc)
	if err != nil {
		return nil, nil, err
	}
	f, ok := s.(*fvdf.Scheduler)
	if !probe || !ok || c.Sched != "fvdf" {
		return s, nil, nil
	}
	rc := f.Config()
	rc.DisableCompression = true
	raw, err := fvdf.New(rc, nil)
	if err != nil {
		return nil, nil, err
	}
	p := &orderProbe{Scheduler: f, raw: raw}
	return p, p, nil
}

// runOne runs Cell c on workload w, with every first-stage arrival moved by
// shift.
func (m *matrix) runOne(c Cell, w *workload, shift time.Duration, probe bool) (*result, error) {
	fab, err := m.fabric(c.Set)
	if err != nil {
		return nil, err
	}
	plan := w.plan
	var cpuAtWrite float64
	if wc := (fvdf.Baseline{Sched: c.Sched, Comp: c.Comp}).WriteCodec(); wc != "" {
		k := slices.Index(fabCodecs, wc) + 1
		// The map and reduce tasks compress at the true speeds (η is the
		// share of an agent's quota its networking leaves to the codecs;
		// the tasks' codec runs outside it).
		wfab, err := m.fabricEta(c.Set, false)
		if err != nil {
			return nil, err
		}
		if plan, err = plan.CompressAtWrite(wfab, k); err != nil {
			return nil, err
		}
		cpuAtWrite = plan.CodecCPUSeconds
	}
	cfs := plan.Coflows
	if shift != 0 {
		cfs = append([]coflow.Coflow(nil), cfs...)
		for i := range cfs {
			if cfs[i].Parent == 0 {
				cfs[i].Arrival += shift
			}
		}
	}
	var est fvdf.Estimator
	var truth *fvdf.TrueSpeeds
	if c.Pred != "" {
		if est, truth, err = m.drifting(c, w.seed, fab); err != nil {
			return nil, err
		}
	}
	s, pr, err := m.scheduler(c, probe, est)
	if err != nil {
		return nil, err
	}
	wt := &fvdf.WaitTracker{Inner: s}
	cfg := coflow.DefaultConfig()
	if truth != nil {
		cfg.CodecSpeed = truth.CodecSpeed
	}
	if c.Resched == "every" {
		cfg.CoalesceFlowEvents = m.o.coalesce
	}
	cfg.CodecCoreEfficiency, cfg.CompletionDelay = m.o.simEff(), m.o.doneDelay
	cfg.Check = m.check
	sim, err := coflow.NewSim(cfg, fab, wt)
	if err != nil {
		return nil, err
	}
	cpu0, t0 := cputime.Process(), time.Now()
	res, err := sim.Run(cfs)
	if err != nil {
		return nil, fmt.Errorf("%s seed %d: %w", c.key(), w.seed, err)
	}
	r := &result{Cell: c, seed: w.seed, wire: res.WireBytes, raw: res.RawBytes, cpuSec: res.CPUSeconds + cpuAtWrite,
		maxWait: wt.MaxWait(), calls: res.Calls, runWall: time.Since(t0), shiftMaxRel: -1}
	if m.o.workers == 1 {
		r.runCPU = cputime.Process() - cpu0
	}
	r.cct = make([]time.Duration, len(res.Coflows))
	r.classWire = make([]float64, len(m.classes))
	r.classRaw = make([]float64, len(m.classes))
	if plan.Raw != nil {
		r.raw = 0 // the simulator saw the compressed bytes as raw
	}
	for i, cr := range res.Coflows {
		r.cct[i] = cr.CCT
		r.classWire[w.class[i]] += cr.WireBytes
		raw := cr.Bytes
		if plan.Raw != nil {
			raw = plan.Raw[i]
			r.raw += raw
		}
		r.classRaw[w.class[i]] += raw
	}
	r.jct = plan.JCTs(res)
	if pr != nil {
		r.probeCalls, r.probeDif, r.probeHead = pr.calls, pr.differ, pr.headDiffer
		if pr.pairs > 0 {
			r.probeKendall = pr.discordant / pr.pairs
		}
	}
	return r, nil
}

type task struct {
	c     Cell
	w     *workload
	shift time.Duration
	probe bool
}

func (m *matrix) run() error {
	var tasks []task
	for _, c := range m.cells {
		for _, w := range m.work {
			probe := m.o.probe && c.Sched == "fvdf" && c.Resched == "varys" && w.seed == Seeds[0]
			m.planned++
			if r, ok := m.load(c, w.seed, 0); ok && (m.o.resume || m.o.reportOnly) {
				m.results = append(m.results, r)
				continue
			}
			if m.o.reportOnly {
				continue
			}
			tasks = append(tasks, task{c: c, w: w, probe: probe})
		}
	}
	if m.o.shifts {
		for _, c := range m.cells {
			if !ShiftCell(c) {
				continue
			}
			for _, k := range ShiftPeriods {
				m.planned++
				sh := time.Duration(k) * GuardPeriod
				if r, ok := m.load(c, m.work[0].seed, sh); ok && (m.o.resume || m.o.reportOnly) {
					r.shiftMaxRel = sh.Seconds()
					m.shifted = append(m.shifted, r)
					continue
				}
				if m.o.reportOnly {
					continue
				}
				tasks = append(tasks, task{c: c, w: m.work[0], shift: sh})
			}
		}
	}
	// Expensive runs first, so the two workers finish together.
	cost := func(t task) int {
		x := 1
		if t.c.Resched == "every" {
			x *= 4
		}
		if t.c.Sched == "fvdf" || t.c.Sched == "dclas" {
			x *= 3
		}
		return x
	}
	// Whole groups (a rescheduling rule at a setting), Varys' rule first,
	// so that an interrupted run leaves complete groups (-resume continues
	// it); within a group the expensive runs first.
	rank := []string{"varys/0", "varys/1", "varys/3", "varys/2", "varys/4", "every/0", "timers/0", "timers/1"}
	group := func(t task) int {
		g := slices.Index(rank, fmt.Sprintf("%s/%d", t.c.Resched, slices.Index(Settings, t.c.Set)))
		if g < 0 {
			g = len(rank) + slices.Index(Rescheduling, t.c.Resched)*len(Settings) + slices.Index(Settings, t.c.Set)
		}
		return g
	}
	sort.SliceStable(tasks, func(i, j int) bool {
		if gi, gj := group(tasks[i]), group(tasks[j]); gi != gj {
			return gi < gj
		}
		return cost(tasks[i]) > cost(tasks[j])
	})
	// Runs per group, for the budget rule of PROTOCOL-v3 §10 (the CPU
	// after each group).
	left := map[int]int{}
	for _, t := range tasks {
		left[group(t)]++
	}
	groupCPU := cputime.Process()
	ch := make(chan task)
	errc := make(chan error, m.o.workers)
	var wg sync.WaitGroup
	done := 0
	start := time.Now()
	for range m.o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range ch {
				r, err := m.runOne(t.c, t.w, t.shift, t.probe)
				if err == nil {
					err = m.save(r, t.shift)
				}
				if err != nil {
					errc <- err
					return
				}
				m.mu.Lock()
				done++
				if t.shift == 0 {
					m.results = append(m.results, r)
				} else {
					r.shiftMaxRel = t.shift.Seconds() // placeholder: the shift, resolved in report
					m.shifted = append(m.shifted, r)
				}
				fmt.Fprintf(os.Stderr, "[%d/%d] %-36s seed %d shift %-6v %6.1f s  (elapsed %.0f s, CPU %.0f s, heap %d MB)\n",
					done, len(tasks), t.c.key(), t.w.seed, t.shift, r.runWall.Seconds(), time.Since(start).Seconds(),
					cputime.Process().Seconds(), heapMB())
				g := group(t)
				if left[g]--; left[g] == 0 {
					now := cputime.Process()
					fmt.Fprintf(os.Stderr, "coflowmatrix: group %s/%gG-%gc done: CPU %.1f s since the previous group ended (%.1f s in all)\n",
						t.c.Resched, t.c.Set.Gbps, t.c.Set.Cores, (now - groupCPU).Seconds(), now.Seconds())
					groupCPU = now
				}
				m.mu.Unlock()
			}
		}()
	}
	go func() {
		for _, t := range tasks {
			ch <- t
		}
		close(ch)
	}()
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	// Deterministic order regardless of which worker finished first.
	sort.Slice(m.results, func(i, j int) bool {
		if a, b := m.results[i].key(), m.results[j].key(); a != b {
			return a < b
		}
		return m.results[i].seed < m.results[j].seed
	})
	return nil
}

func heapMB() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc >> 20
}

// saved is a result as stored on disk.
type saved struct {
	Cell                 Cell
	Seed                 uint64
	CCT, JCT             []time.Duration
	Wire, Raw, CPUSec    float64
	MaxWait              time.Duration
	Calls                int
	RunWall              time.Duration
	ClassWire, ClassRaw  []float64
	ProbeCalls, ProbeDif int
	ProbeHead            int
	ProbeKendall         float64
}

func (m *matrix) runPath(c Cell, seed uint64, shift time.Duration) string {
	name := strings.NewReplacer("/", "_").Replace(c.key())
	return filepath.Join(m.o.out, "runs", fmt.Sprintf("%s_seed%d_shift%d.gob", name, seed, int64(shift/time.Second)))
}

func (m *matrix) save(r *result, shift time.Duration) error {
	p := m.runPath(r.Cell, r.seed, shift)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.Create(p + ".tmp")
	if err != nil {
		return err
	}
	sv := saved{r.Cell, r.seed, r.cct, r.jct, r.wire, r.raw, r.cpuSec, r.maxWait, r.calls, r.runWall,
		r.classWire, r.classRaw, r.probeCalls, r.probeDif, r.probeHead, r.probeKendall}
	if err := gob.NewEncoder(f).Encode(&sv); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

func (m *matrix) load(c Cell, seed uint64, shift time.Duration) (*result, bool) {
	f, err := os.Open(m.runPath(c, seed, shift))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	var sv saved
	if err := gob.NewDecoder(f).Decode(&sv); err != nil || sv.Cell != c || sv.Seed != seed {
		return nil, false
	}
	return &result{Cell: c, seed: seed, cct: sv.CCT, jct: sv.JCT, wire: sv.Wire, raw: sv.Raw, cpuSec: sv.CPUSec,
		maxWait: sv.MaxWait, calls: sv.Calls, runWall: sv.RunWall, classWire: sv.ClassWire, classRaw: sv.ClassRaw,
		probeCalls: sv.ProbeCalls, probeDif: sv.ProbeDif, probeHead: sv.ProbeHead, probeKendall: sv.ProbeKendall, shiftMaxRel: -1}, true
}
