package main

import (
	"bufio"
	"fmt"
	"image/color"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/falconml/falcon/coflow"
)

// stats are one run's scalar metrics.
type stats struct {
	mean, median, p95, p99 float64 // CCT, seconds
	jct                    float64 // mean JCT, seconds
	traffic                float64 // 1 − wire/raw
	cpu                    float64 // codec CPU-seconds
	maxWait                float64
	bins                   [4]float64 // mean CCT per Varys bin
}

func (m *matrix) stats(r *result) stats {
	s := coflow.SummarizeDurations(r.cct)
	j := coflow.SummarizeDurations(r.jct)
	st := stats{mean: s.Mean.Seconds(), median: s.Median.Seconds(), p95: s.P95.Seconds(), p99: s.P99.Seconds(),
		jct: j.Mean.Seconds(), traffic: 1 - r.wire/r.raw, cpu: r.cpuSec, maxWait: r.maxWait.Seconds()}
	w := m.workOf(r.seed)
	var n [4]float64
	for i, c := range r.cct {
		b := w.bins[i]
		st.bins[b] += c.Seconds()
		n[b]++
	}
	for b := range st.bins {
		if n[b] > 0 {
			st.bins[b] /= n[b]
		}
	}
	return st
}

func (m *matrix) workOf(seed uint64) *workload {
	for _, w := range m.work {
		if w.seed == seed {
			return w
		}
	}
	return nil
}

// interval is a median over seeds with its 95 % percentile-bootstrap
// interval.
type interval struct{ med, lo, hi float64 }

func (iv interval) String() string {
	return fmt.Sprintf("%.4g [%.4g, %.4g]", iv.med, iv.lo, iv.hi)
}

// excludes1 reports whether the interval lies entirely above or below 1.
func (iv interval) excludes1() string {
	switch {
	case iv.lo > 1:
		return "win"
	case iv.hi < 1:
		return "loss"
	}
	return "tie"
}

func median(x []float64) float64 {
	y := slices.Clone(x)
	slices.Sort(y)
	n := len(y)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return y[n/2]
	}
	return (y[n/2-1] + y[n/2]) / 2
}

func bootstrap(x []float64) interval {
	iv := interval{med: median(x)}
	if len(x) < 2 {
		iv.lo, iv.hi = iv.med, iv.med
		return iv
	}
	rng := rand.New(rand.NewPCG(BootstrapSeed, uint64(len(x))))
	meds := make([]float64, BootstrapDraws)
	s := make([]float64, len(x))
	for b := range meds {
		for i := range s {
			s[i] = x[rng.IntN(len(x))]
		}
		meds[b] = median(s)
	}
	slices.Sort(meds)
	iv.lo = meds[int(0.025*float64(len(meds)))]
	iv.hi = meds[int(0.975*float64(len(meds)))-1]
	return iv
}

// group is the runs of one setting and rescheduling rule.
type groupKey struct {
	set     Setting
	resched string
}

func (m *matrix) byCell() map[string][]*result {
	out := map[string][]*result{}
	for _, r := range m.results {
		out[r.key()] = append(out[r.key()], r)
	}
	return out
}

// pair holds per-seed comparisons of FVDF against a baseline.
type pair struct {
	cctRoM, cctMoR, jctRoM, jctMoR []float64
	speedups                       []float64 // per coflow, pooled over seeds
}

func compare(f, b []*result) pair {
	var p pair
	for _, rf := range f {
		for _, rb := range b {
			if rb.seed != rf.seed {
				continue
			}
			var sf, sb, mor float64
			n := 0
			for i := range rf.cct {
				sf += rf.cct[i].Seconds()
				sb += rb.cct[i].Seconds()
				if rf.cct[i] > 0 {
					x := rb.cct[i].Seconds() / rf.cct[i].Seconds()
					mor += x
					n++
					p.speedups = append(p.speedups, x)
				}
			}
			p.cctRoM = append(p.cctRoM, sb/sf)
			p.cctMoR = append(p.cctMoR, mor/float64(max(1, n)))
			var jf, jb, jm float64
			for i := range rf.jct {
				jf += rf.jct[i].Seconds()
				jb += rb.jct[i].Seconds()
				jm += rb.jct[i].Seconds() / rf.jct[i].Seconds()
			}
			p.jctRoM = append(p.jctRoM, jb/jf)
			p.jctMoR = append(p.jctMoR, jm/float64(len(rf.jct)))
		}
	}
	return p
}

func (m *matrix) report(cpu, wall time.Duration) error {
	cells := m.byCell()
	if err := m.writeRuns(); err != nil {
		return err
	}
	var b strings.Builder
	trace := TraceFile
	if m.o.synthLoad > 0 {
		trace = fmt.Sprintf("synthetic at load %g (SynthTrace, one per seed)", m.o.synthLoad)
	}
	if m.o.coflows > 0 {
		trace += fmt.Sprintf(", first %d coflows", m.o.coflows)
	}
	if len(m.o.preds) > 0 {
		trace += fmt.Sprintf(", under the recorded drift (%s) with predictors %v", DriftFile, m.o.preds)
	}
	fmt.Fprintf(&b, "# Coflow baseline matrix\n\nTrace %s, mix %s, seeds %v, %d of %d planned runs present (time-shift runs included), this invocation's wall %.0f s, CPU %.1f min.\n",
		trace, m.mix.Name, Seeds[:m.o.seeds], len(m.results)+len(m.shifted), m.planned, wall.Seconds(), cpu.Minutes())
	fmt.Fprintf(&b, "Protocol %s; flags: coalesce %v, jobs %v, settings %v, rescheduling %v, only %q; core model: %s.\n\n", m.o.protocol, m.o.coalesce, !m.o.noJobs, m.o.settings, m.o.resched, m.o.only.String(), m.o.model())
	fmt.Fprintf(&b, "Every figure is the median over seeds with its 95 %% percentile-bootstrap interval over seeds (%d draws). CCT over every coflow of the job plan (later stages included); JCT over jobs.\n\n", BootstrapDraws)
	var groups []groupKey
	seen := map[groupKey]bool{}
	for _, c := range m.cells {
		g := groupKey{c.Set, c.Resched}
		if !seen[g] {
			seen[g] = true
			groups = append(groups, g)
		}
	}
	var verdicts []verdict
	for _, g := range groups {
		fmt.Fprintf(&b, "## %g Gbit/s, %g cores per machine, rescheduling %s\n\n", g.set.Gbps, g.set.Cores, g.resched)
		fmt.Fprintf(&b, "| Cell | mean CCT s | median | p95 | p99 | mean JCT s | traffic −%% | codec CPU s | max wait s | SN | LN | SW | LW |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		var groupCells []Cell
		for _, c := range m.cells {
			if c.Set == g.set && c.Resched == g.resched {
				groupCells = append(groupCells, c)
			}
		}
		medMean, medJCT := map[string]float64{}, map[string]float64{}
		for _, c := range groupCells {
			rs := cells[c.key()]
			if len(rs) == 0 {
				continue
			}
			var col [13][]float64
			for _, r := range rs {
				s := m.stats(r)
				for i, v := range []float64{s.mean, s.median, s.p95, s.p99, s.jct, 100 * s.traffic, s.cpu, s.maxWait, s.bins[0], s.bins[1], s.bins[2], s.bins[3]} {
					col[i] = append(col[i], v)
				}
			}
			medMean[c.label()] = median(col[0])
			medJCT[c.label()] = median(col[4])
			if len(rs) < m.o.seeds {
				fmt.Fprintf(&b, "| %s (only %d seeds) |", c.label(), len(rs))
			} else {
				fmt.Fprintf(&b, "| %s |", c.label())
			}
			for i := 0; i < 12; i++ {
				fmt.Fprintf(&b, " %s |", bootstrap(col[i]))
			}
			b.WriteString("\n")
		}
		// Baselines: SEBF raw, the strongest always-compress Cell (smallest
		// median mean CCT among the always-lz4/snappy cells), the strongest
		// non-FVDF Cell overall. Neither is chosen among FVDF's own
		// mechanism (sebf-order/fvdf: FVDF over it is what the order
		// earns) nor among compress-at-write cells, whose CCT leaves out
		// the codec time they move into the map and reduce stages (compare
		// them by JCT).
		// PROTOCOL-v3 §9: the smallest median over seeds of mean CCT, ties
		// broken by median mean JCT.
		best := func(ok func(c Cell) bool) string {
			name, v, vj := "", math.Inf(1), math.Inf(1)
			for _, c := range groupCells {
				if c.Comp == "fvdf" || strings.HasPrefix(c.Comp, "write-") || !ok(c) {
					continue
				}
				x, have := medMean[c.label()]
				if have && (x < v || x == v && medJCT[c.label()] < vj) {
					name, v, vj = c.label(), x, medJCT[c.label()]
				}
			}
			return name
		}
		// Strongest by JCT (§9): every non-FVDF cell, compress-at-write
		// included.
		byJCT, vj := "", math.Inf(1)
		for _, c := range groupCells {
			if x, have := medJCT[c.label()]; have && c.Comp != "fvdf" && x < vj {
				byJCT, vj = c.label(), x
			}
		}
		always := best(func(c Cell) bool { return c.Comp == "lz4" || c.Comp == "snappy" })
		overall := best(func(c Cell) bool { return true })
		fk := Cell{"fvdf", "fvdf", g.resched, g.set, m.basePred()}.key()
		fr := cells[fk]
		fmt.Fprintf(&b, "\nStrongest always-compress baseline: %s; strongest baseline overall: %s; strongest by JCT: %s.\n\n", always, overall, byJCT)
		if len(fr) == 0 {
			continue
		}
		v := verdict{g: g, strongest: overall, byJCT: byJCT}
		fmt.Fprintf(&b, "| FVDF vs | CCT ratio of means | CCT mean of ratios | JCT ratio of means | JCT mean of ratios | verdict (CCT RoM) |\n|---|---|---|---|---|---|\n")
		var curves []curve
		for _, c := range groupCells {
			if c.Sched == "fvdf" {
				continue
			}
			p := compare(fr, cells[c.key()])
			if len(p.cctRoM) == 0 {
				continue
			}
			rom := bootstrap(p.cctRoM)
			tag := ""
			if len(p.cctRoM) < m.o.seeds {
				tag = fmt.Sprintf(" (only %d paired seeds)", len(p.cctRoM))
			}
			if c.label() == always {
				tag += " (strongest always-compress)"
			}
			if c.label() == overall {
				tag += " (strongest overall)"
			}
			jrom := bootstrap(p.jctRoM)
			fmt.Fprintf(&b, "| %s%s | %s | %s | %s | %s | %s |\n", c.label(), tag, rom, bootstrap(p.cctMoR), jrom, bootstrap(p.jctMoR), rom.excludes1())
			switch c.label() {
			case overall:
				v.cct, v.jct = rom, jrom
			case "sebf-order/fvdf":
				v.order = rom
			case "sebf/write-lz4":
				v.write = jrom
			}
			if c.label() == byJCT {
				v.jctBest = jrom
			}
			if c.label() == "sebf/none" || c.label() == always || c.label() == "dclas/none" || c.label() == "sincronia/none" || c.label() == overall {
				curves = append(curves, curve{name: "over " + c.label(), x: p.speedups})
			}
		}
		verdicts = append(verdicts, v)
		// Per-class traffic reduction of FVDF.
		fmt.Fprintf(&b, "\nFVDF traffic reduction per class (median over seeds):")
		for k, cl := range m.classes {
			var x []float64
			for _, r := range fr {
				if r.classRaw[k] > 0 {
					x = append(x, 1-r.classWire[k]/r.classRaw[k])
				}
			}
			fmt.Fprintf(&b, " %s %.1f %%;", cl, 100*median(x))
		}
		b.WriteString("\n")
		for _, r := range fr {
			if r.probeCalls > 0 {
				fmt.Fprintf(&b, "\nOrder probe (seed %d): FVDF's order differs from SEBF's (FVDF without compression, same state) at %d of %d calls (%.1f %%); head coflow differs at %d (%.1f %%); Kendall distance %.4f.\n",
					r.seed, r.probeDif, r.probeCalls, 100*float64(r.probeDif)/float64(r.probeCalls), r.probeHead, 100*float64(r.probeHead)/float64(r.probeCalls), r.probeKendall)
			}
		}
		b.WriteString("\n")
		if m.o.plots && len(curves) > 0 {
			name := fmt.Sprintf("speedup-cdf-%gG-%gc-%s.png", g.set.Gbps, g.set.Cores, g.resched)
			if err := plotCDF(filepath.Join(m.o.out, name), fmt.Sprintf("FVDF per-coflow speed-up, %g Gbit/s, %g cores, %s", g.set.Gbps, g.set.Cores, g.resched), curves); err != nil {
				return err
			}
			var bars []barSet
			base := cells[Cell{"sebf", "none", g.resched, g.set, m.basePred()}.key()]
			for _, lbl := range uniq([]string{"sebf/none", always, "dclas/none", "sincronia/none", "fvdf/fvdf"}) {
				rs := cells[keyOf(lbl, g, m.basePred())]
				if len(rs) == 0 || len(base) == 0 {
					continue
				}
				var vals [4]float64
				for bi := range vals {
					var x []float64
					for _, r := range rs {
						for _, rb := range base {
							if rb.seed == r.seed {
								sb := m.stats(rb).bins[bi]
								if sb > 0 {
									x = append(x, m.stats(r).bins[bi]/sb)
								}
							}
						}
					}
					vals[bi] = median(x)
				}
				bars = append(bars, barSet{name: lbl, v: vals})
			}
			name = fmt.Sprintf("bins-%gG-%gc-%s.png", g.set.Gbps, g.set.Cores, g.resched)
			if err := plotBins(filepath.Join(m.o.out, name), fmt.Sprintf("avg CCT per Varys bin / SEBF raw, %g Gbit/s, %g cores, %s", g.set.Gbps, g.set.Cores, g.resched), bars); err != nil {
				return err
			}
		}
	}
	if len(verdicts) > 0 {
		b.WriteString("## Verdicts (PROTOCOL-v3 §8–§9, chosen mechanically)\n\n")
		b.WriteString("Ratios baseline/FVDF (above 1 favours FVDF), median over seeds [95 % interval]; win/loss only where the interval excludes 1.\n\n")
		b.WriteString("| setting | rule | strongest (§9) | CCT | verdict | JCT | verdict | strongest by JCT | its JCT | ordering: sebf-order+fvdf CCT | sebf+write-lz4 JCT |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, v := range verdicts {
			fmt.Fprintf(&b, "| %g G, %g c | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", v.g.set.Gbps, v.g.set.Cores, v.g.resched,
				v.strongest, ivs(v.cct), v.cct.excludes1(), ivs(v.jct), v.jct.excludes1(), v.byJCT, ivs(v.jctBest), ivs(v.order), ivs(v.write))
		}
		b.WriteString("\n")
	}
	// Time-shift perturbations.
	if len(m.shifted) > 0 {
		b.WriteString("## Time-shift perturbations\n\nEvery first-stage arrival moved by k·T (T = 10 s); max relative CCT change against the unshifted run (seed 1):\n\n")
		sort.Slice(m.shifted, func(i, j int) bool {
			if a, c := m.shifted[i].key(), m.shifted[j].key(); a != c {
				return a < c
			}
			return m.shifted[i].shiftMaxRel < m.shifted[j].shiftMaxRel
		})
		for _, r := range m.shifted {
			var base *result
			for _, x := range cells[r.key()] {
				if x.seed == r.seed {
					base = x
				}
			}
			if base == nil {
				continue
			}
			worst := 0.0
			for i := range r.cct {
				a, c := r.cct[i].Seconds(), base.cct[i].Seconds()
				if d := math.Abs(a-c) / math.Max(c, 1e-9); d > worst {
					worst = d
				}
			}
			fmt.Fprintf(&b, "- %s shift %.0f s: max relative change %.3g\n", r.key(), r.shiftMaxRel, worst)
		}
	}
	return os.WriteFile(filepath.Join(m.o.out, "summary.md"), []byte(b.String()), 0o644)
}

// ivs prints iv to 4 decimals (a bound of 1.0004 is not shown as 1), or
// "–" for a comparison that was not made.
func ivs(iv interval) string {
	if iv == (interval{}) {
		return "–"
	}
	return fmt.Sprintf("%.4f [%.4f, %.4f]", iv.med, iv.lo, iv.hi)
}

// verdict is one group's line of the Verdicts table.
type verdict struct {
	g                               groupKey
	strongest, byJCT                string
	cct, jct, jctBest, order, write interval
}

// keyOf is the key of the cell labelled label (Cell.label) in group g;
// base is the Pred of a label without one (matrix.basePred).
func keyOf(label string, g groupKey, base string) string {
	s, c, _ := strings.Cut(label, "/")
	c, pred, _ := strings.Cut(c, "@")
	if pred == "" {
		pred = base
	}
	return Cell{s, c, g.resched, g.set, pred}.key()
}

func uniq(x []string) []string {
	var out []string
	for _, s := range x {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (m *matrix) writeRuns() error {
	f, err := os.Create(filepath.Join(m.o.out, "runs.csv"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "sched,compression,resched,gbps,cores,seed,mean_cct_s,median_cct_s,p95_cct_s,p99_cct_s,mean_jct_s,traffic_reduction,codec_cpu_s,max_wait_s,sn_s,ln_s,sw_s,lw_s,calls,wall_s,predictor")
	for _, r := range m.results {
		s := m.stats(r)
		fmt.Fprintf(w, "%s,%s,%s,%g,%g,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.3f,%.3f,%.6f,%.6f,%.6f,%.6f,%d,%.2f,%s\n",
			r.Sched, r.Comp, r.Resched, r.Set.Gbps, r.Set.Cores, r.seed, s.mean, s.median, s.p95, s.p99, s.jct, s.traffic, s.cpu, s.maxWait,
			s.bins[0], s.bins[1], s.bins[2], s.bins[3], r.calls, r.runWall.Seconds(), r.Pred)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {0, 0, 0, 255},
}

type curve struct {
	name string
	x    []float64
}

// plotCDF draws the empirical CDF of each curve's values on a log x axis.
func plotCDF(path, title string, curves []curve) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "per-coflow speed-up CCT(baseline)/CCT(FVDF), log scale"
	p.Y.Label.Text = "fraction of coflows"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = false
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	for i, c := range curves {
		x := slices.Clone(c.x)
		slices.Sort(x)
		var pts plotter.XYs
		n := len(x)
		for j, v := range x {
			if v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				continue
			}
			if j%max(1, n/2000) != 0 && j != n-1 {
				continue
			}
			pts = append(pts, plotter.XY{X: v, Y: float64(j+1) / float64(n)})
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(c.name, l)
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

type barSet struct {
	name string
	v    [4]float64
}

// plotBins draws grouped bars: per Varys bin, one bar per configuration.
func plotBins(path, title string, sets []barSet) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "avg CCT / SEBF raw (median over seeds)"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	w := vg.Points(14)
	for i, s := range sets {
		vals := make(plotter.Values, 4)
		for b := range vals {
			vals[b] = s.v[b]
			if math.IsNaN(vals[b]) {
				vals[b] = 0
			}
		}
		bc, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		bc.Color = palette[i%len(palette)]
		bc.LineStyle.Width = 0
		bc.Offset = w * vg.Length(float64(i)-float64(len(sets)-1)/2)
		p.Add(bc)
		p.Legend.Add(s.name, bc)
	}
	p.NominalX("SN", "LN", "SW", "LW")
	top := 0.0
	for _, s := range sets {
		for _, v := range s.v {
			if !math.IsNaN(v) {
				top = max(top, v)
			}
		}
	}
	p.Y.Min, p.Y.Max = 0, 1.35*top // room for the legend above the bars
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
