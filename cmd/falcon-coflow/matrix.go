package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/falconml/falcon/internal/study"
)

// matrixOptions are the flags of -live-matrix (LIVE-PROTOCOL.md): the
// slices, the cells (link rate × quota) and the byte scaling; the bed's
// and simulator's other settings come from -live's flags.
type matrixOptions struct {
	on                 bool
	skips, mbit, cores string
	mbPerMbit          float64
	shares             int
	probe              time.Duration
	report             string
}

func matrixFlags(fs *flag.FlagSet, m *matrixOptions) {
	fs.BoolVar(&m.on, "live-matrix", false, "run the live matrix of LIVE-PROTOCOL.md (root, Linux): every -sched on every slice of -matrix-skips in every cell of -matrix-mbit × -matrix-cores, a fresh bed per slice and cell, orders rotated per slice; one CSV row per run to -live-csv")
	fs.StringVar(&m.skips, "matrix-skips", "50,150,250,300,350", "with -live-matrix: the slices, as -skip values")
	fs.StringVar(&m.mbit, "matrix-mbit", "10,40", "with -live-matrix: the link rates, Mbit/s each way per port")
	fs.StringVar(&m.cores, "matrix-cores", "0.06,0.12", "with -live-matrix: the quotas, cores per port (CFS period: 10 ms, or the shortest whole ms that gives at least 1.2 ms of quota)")
	fs.Float64Var(&m.mbPerMbit, "mb-per-mbit", 3.75, "with -live-matrix: a slice's raw MB per Mbit/s of link rate (the same offered load in every cell)")
	fs.IntVar(&m.shares, "bed-shares", 0, "with -live or -live-matrix: cpu.shares of the ports' cgroups (0: the kernel's 1024)")
	fs.DurationVar(&m.probe, "matrix-probe", time.Second, "with -live-matrix: the quota probe's length before each cell's runs (0: none)")
	fs.StringVar(&m.report, "matrix-report", "", "print the live matrix's tables from the CSV -live-matrix wrote (no root needed)")
}

// cell is one bed setting of the matrix.
type cell struct {
	Mbit, Cores float64
}

// period is the CFS period of a cell's quota: 10 ms, or the shortest
// whole millisecond period holding at least 1.2 ms of quota (the kernel
// refuses less than 1 ms).
func (c cell) period() time.Duration {
	p := 10 * time.Millisecond
	if need := time.Duration(math.Ceil(1.2/c.Cores)) * time.Millisecond; need > p {
		p = need
	}
	return p
}

func (c cell) String() string { return fmt.Sprintf("%gMbit/%gcore", c.Mbit, c.Cores) }

// planRun is one run of the matrix: a scheduler on a slice in a cell.
type planRun struct {
	Skip  int
	Cell  cell
	Sched string
	// Pos is the run's place among its slice's runs in its cell (0-based).
	Pos int
}

// plan orders the matrix slice-major: for slice i, the cells rotated by
// i, and within each the schedulers rotated by i, so that load drift and
// position hit every scheduler and cell alike.
func plan(skips []int, cells []cell, scheds []string) []planRun {
	var out []planRun
	for i, s := range skips {
		for j := range cells {
			c := cells[(i+j)%len(cells)]
			for k := range scheds {
				out = append(out, planRun{Skip: s, Cell: c, Sched: scheds[(i+k)%len(scheds)], Pos: k})
			}
		}
	}
	return out
}

func parseFloats(s, what string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s %q: want positive numbers", what, s)
		}
		out = append(out, v)
	}
	return out, nil
}

// matrixPlan checks -live-matrix's options and returns its runs.
func matrixPlan(o options) ([]planRun, error) {
	names, err := liveNames(o)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(names, "fvdf") {
		return nil, errors.New("-live-matrix: -sched must include fvdf (the ratios are to it)")
	}
	if o.live.csv == "" {
		return nil, errors.New("-live-matrix needs -live-csv (one row per run)")
	}
	if !(o.matrix.mbPerMbit > 0) || o.matrix.shares < 0 || o.matrix.probe < 0 || o.matrix.probe > time.Minute {
		return nil, fmt.Errorf("-live-matrix: mb-per-mbit %g, bed-shares %d, matrix-probe %v", o.matrix.mbPerMbit, o.matrix.shares, o.matrix.probe)
	}
	var skips []int
	for _, f := range strings.Split(o.matrix.skips, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 0 || slices.Contains(skips, v) {
			return nil, fmt.Errorf("-matrix-skips %q: want distinct non-negative integers", o.matrix.skips)
		}
		skips = append(skips, v)
	}
	mbit, err := parseFloats(o.matrix.mbit, "-matrix-mbit")
	if err != nil {
		return nil, err
	}
	cores, err := parseFloats(o.matrix.cores, "-matrix-cores")
	if err != nil {
		return nil, err
	}
	var cells []cell
	for _, b := range mbit {
		for _, c := range cores {
			if c > 1 {
				return nil, fmt.Errorf("-matrix-cores %g: at most one core a port", c)
			}
			cells = append(cells, cell{b, c})
		}
	}
	return plan(skips, cells, names), nil
}

// runRow is one run of the matrix as its CSV row holds it.
type runRow struct {
	UTC                string
	Skip               int
	Cell               cell
	PeriodMS           float64
	Sched              string
	Pos, Attempt       int
	Status             string // ok or failed
	LiveMS, SimMS      float64
	Sim0MS             float64 // the uncalibrated simulation (coflow.DefaultConfig)
	CoflowMedian       float64 // per-coflow median of live/sim (calibrated)
	Wire, Raw          float64
	AgentCPU           float64 // seconds, all ports
	Throttled          int64   // CFS periods throttled, all ports
	ProbeMin, ProbeMed float64
	LoadBefore         string
	LoadAfter          string
	WallS              float64
	Err                string
}

var rowHeader = []string{"utc", "skip", "mbit", "cores", "period_ms", "sched", "pos", "attempt", "status",
	"live_avg_ms", "sim_avg_ms", "sim0_avg_ms", "coflow_median_live_sim", "wire_bytes", "raw_bytes",
	"agent_cpu_s", "throttled_periods", "probe_min", "probe_median", "load_before", "load_after", "wall_s", "error"}

func (r runRow) record() []string {
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	return []string{r.UTC, strconv.Itoa(r.Skip), g(r.Cell.Mbit), g(r.Cell.Cores), g(r.PeriodMS), r.Sched,
		strconv.Itoa(r.Pos), strconv.Itoa(r.Attempt), r.Status, g(r.LiveMS), g(r.SimMS), g(r.Sim0MS), g(r.CoflowMedian),
		g(r.Wire), g(r.Raw), g(r.AgentCPU), strconv.FormatInt(r.Throttled, 10), g(r.ProbeMin), g(r.ProbeMed),
		r.LoadBefore, r.LoadAfter, g(r.WallS), r.Err}
}

func parseRow(rec []string) (runRow, error) {
	if len(rec) != len(rowHeader) {
		return runRow{}, fmt.Errorf("%d fields, want %d", len(rec), len(rowHeader))
	}
	var r runRow
	var errs []error
	f := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			errs = append(errs, err)
		}
		return v
	}
	i := func(s string) int64 {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			errs = append(errs, err)
		}
		return v
	}
	r.UTC, r.Skip, r.Cell = rec[0], int(i(rec[1])), cell{f(rec[2]), f(rec[3])}
	r.PeriodMS, r.Sched, r.Pos, r.Attempt, r.Status = f(rec[4]), rec[5], int(i(rec[6])), int(i(rec[7])), rec[8]
	r.LiveMS, r.SimMS, r.Sim0MS, r.CoflowMedian = f(rec[9]), f(rec[10]), f(rec[11]), f(rec[12])
	r.Wire, r.Raw, r.AgentCPU, r.Throttled = f(rec[13]), f(rec[14]), f(rec[15]), i(rec[16])
	r.ProbeMin, r.ProbeMed, r.LoadBefore, r.LoadAfter, r.WallS, r.Err = f(rec[17]), f(rec[18]), rec[19], rec[20], f(rec[21]), rec[22]
	if r.Status != "ok" && r.Status != "failed" {
		errs = append(errs, fmt.Errorf("status %q", r.Status))
	}
	return r, errors.Join(errs...)
}

// readRows reads a matrix CSV (header first).
func readRows(in io.Reader) ([]runRow, error) {
	cr := csv.NewReader(in)
	cr.FieldsPerRecord = len(rowHeader)
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("matrix CSV: %w", err)
	}
	if !slices.Equal(head, rowHeader) {
		return nil, fmt.Errorf("matrix CSV: header %v, want %v", head, rowHeader)
	}
	var out []runRow
	for n := 2; ; n++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("matrix CSV line %d: %w", n, err)
		}
		r, err := parseRow(rec)
		if err != nil {
			return nil, fmt.Errorf("matrix CSV line %d: %w", n, err)
		}
		out = append(out, r)
	}
}

// cellRuns is one cell's successful runs, paired: for each slice in which
// every scheduler has a successful run (the last one), the runs by
// scheduler.
type cellRuns struct {
	Cell    cell
	Skips   []int
	Runs    map[string][]runRow // by scheduler, in Skips' order
	Failed  []runRow            // every failed attempt
	Missing []int               // slices with some scheduler lacking a successful run
}

// pairRuns groups rows by cell and keeps, per cell, the slices every
// scheduler of scheds completed (their last successful attempt).
func pairRuns(rows []runRow, scheds []string) []cellRuns {
	var cells []cell
	for _, r := range rows {
		if !slices.Contains(cells, r.Cell) {
			cells = append(cells, r.Cell)
		}
	}
	sort.Slice(cells, func(i, j int) bool {
		if cells[i].Mbit != cells[j].Mbit {
			return cells[i].Mbit < cells[j].Mbit
		}
		return cells[i].Cores < cells[j].Cores
	})
	var out []cellRuns
	for _, c := range cells {
		cr := cellRuns{Cell: c, Runs: map[string][]runRow{}}
		ok := map[int]map[string]runRow{}
		var skips []int
		for _, r := range rows {
			if r.Cell != c {
				continue
			}
			if !slices.Contains(skips, r.Skip) {
				skips = append(skips, r.Skip)
			}
			if r.Status != "ok" {
				cr.Failed = append(cr.Failed, r)
				continue
			}
			if ok[r.Skip] == nil {
				ok[r.Skip] = map[string]runRow{}
			}
			ok[r.Skip][r.Sched] = r
		}
		for _, s := range skips {
			complete := true
			for _, n := range scheds {
				if _, has := ok[s][n]; !has {
					complete = false
				}
			}
			if !complete {
				cr.Missing = append(cr.Missing, s)
				continue
			}
			cr.Skips = append(cr.Skips, s)
			for _, n := range scheds {
				cr.Runs[n] = append(cr.Runs[n], ok[s][n])
			}
		}
		out = append(out, cr)
	}
	return out
}

// ports is the bed's port count the rows were run on: the matrix CSV does
// not hold it, so it is read from -ports' value as the report was asked
// (reportPorts), 10 by default.
func ports([]runRow) int { return reportPorts }

// reportPorts is the port count -matrix-report assumes (-ports).
var reportPorts = 10

// throttledShare is the share of the run's CFS periods, over all ports,
// in which a port's cgroup was throttled: Throttled / (WallS / period ·
// ports). The wall time includes the lead, in which the agents start.
func (r runRow) throttledShare(ports int) float64 {
	if !(r.PeriodMS > 0 && r.WallS > 0) {
		return math.NaN()
	}
	return float64(r.Throttled) / (r.WallS * 1e3 / r.PeriodMS * float64(ports))
}

// verdict judges a median ratio baseline/FVDF: FVDF wins where the
// interval lies above 1, loses where it lies below.
func verdict(iv study.Interval) string {
	switch {
	case iv.Lo > 1:
		return "FVDF wins"
	case iv.Hi < 1:
		return "FVDF loses"
	}
	return "tie"
}

func fmtIv(iv study.Interval) string {
	return fmt.Sprintf("%.2f [%.2f, %.2f]", iv.Median, iv.Lo, iv.Hi)
}

// matrixReport prints the matrix's tables from its rows: per cell FVDF
// against each baseline (live and simulated ratios of average CCT, median
// over slices with its 95 % bootstrap interval), the simulator's
// fidelity per scheduler, and every run.
func matrixReport(rows []runRow, w io.Writer) error {
	var scheds []string
	for _, r := range rows {
		if !slices.Contains(scheds, r.Sched) {
			scheds = append(scheds, r.Sched)
		}
	}
	if !slices.Contains(scheds, "fvdf") {
		return errors.New("matrix report: no fvdf runs")
	}
	bc := study.DefaultBootstrapConfig()
	cells := pairRuns(rows, scheds)
	fmt.Fprintln(w, "## FVDF against each baseline: ratio baseline/FVDF of average CCT, median over slices [95 % bootstrap]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| cell | baseline | slices | live ratio | live verdict | simulated ratio | simulated verdict | per-slice live ratios |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, c := range cells {
		if len(c.Skips) == 0 {
			fmt.Fprintf(w, "| %v | (no complete slice) | 0 | | | | | |\n", c.Cell)
			continue
		}
		for _, b := range scheds {
			if b == "fvdf" {
				continue
			}
			var lr, sr []float64
			var per []string
			for i := range c.Skips {
				lr = append(lr, c.Runs[b][i].LiveMS/c.Runs["fvdf"][i].LiveMS)
				sr = append(sr, c.Runs[b][i].SimMS/c.Runs["fvdf"][i].SimMS)
				per = append(per, fmt.Sprintf("%d: %.2f", c.Skips[i], lr[i]))
			}
			ivs, err := intervals(bc, lr, sr)
			if err != nil {
				return err
			}
			li, si := ivs[0], ivs[1]
			fmt.Fprintf(w, "| %v | %s | %d | %s | %s | %s | %s | %s |\n", c.Cell, b, len(c.Skips), fmtIv(li), verdict(li), fmtIv(si), verdict(si), strings.Join(per, ", "))
		}
	}
	if slices.Contains(scheds, "sebf") {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "## Always compressing against raw SEBF: ratio avg CCT(X)/avg CCT(sebf), median over slices [95 % bootstrap] (above 1: compressing every flow is slower)")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| cell | X | slices | live ratio | simulated ratio | uncalibrated simulated ratio | per-slice live / simulated |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
		for _, c := range cells {
			for _, x := range scheds {
				if x == "sebf" || x == "fvdf" || len(c.Skips) == 0 {
					continue
				}
				var lr, sr, s0 []float64
				var per []string
				for i := range c.Skips {
					lr = append(lr, c.Runs[x][i].LiveMS/c.Runs["sebf"][i].LiveMS)
					sr = append(sr, c.Runs[x][i].SimMS/c.Runs["sebf"][i].SimMS)
					s0 = append(s0, c.Runs[x][i].Sim0MS/c.Runs["sebf"][i].Sim0MS)
					per = append(per, fmt.Sprintf("%d: %.2f / %.2f", c.Skips[i], lr[i], sr[i]))
				}
				ivs, err := intervals(bc, lr, sr, s0)
				if err != nil {
					return err
				}
				li, si, ui := ivs[0], ivs[1], ivs[2]
				fmt.Fprintf(w, "| %v | %s | %d | %s | %s | %s | %s |\n", c.Cell, x, len(c.Skips), fmtIv(li), fmtIv(si), fmtIv(ui), strings.Join(per, ", "))
			}
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "## The simulator against live: per run live/sim average CCT (calibrated; uncalibrated) and per-coflow median live/sim, median over slices [95 % bootstrap]; within the goal: average 0.85–1.15, per-coflow median 0.75–1.25")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| cell | scheduler | slices | live avg ms (median) | live/sim avg | within 15 % | per-coflow median live/sim | within 25 % | live/sim avg uncalibrated | agent CPU ms per wire MB (median) | throttled share of periods (median) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, c := range cells {
		for _, n := range scheds {
			runs := c.Runs[n]
			if len(runs) == 0 {
				continue
			}
			var live, avg, med, avg0, cpu, thr []float64
			in15, in25 := 0, 0
			for _, r := range runs {
				live = append(live, r.LiveMS)
				a := r.LiveMS / r.SimMS
				avg, med, avg0 = append(avg, a), append(med, r.CoflowMedian), append(avg0, r.LiveMS/r.Sim0MS)
				cpu = append(cpu, r.AgentCPU/r.Wire*1e9)
				thr = append(thr, r.throttledShare(ports(rows)))
				if a >= 0.85 && a <= 1.15 {
					in15++
				}
				if r.CoflowMedian >= 0.75 && r.CoflowMedian <= 1.25 {
					in25++
				}
			}
			ivs, err := intervals(bc, avg, med, avg0)
			if err != nil {
				return err
			}
			ai, mi, a0 := ivs[0], ivs[1], ivs[2]
			fmt.Fprintf(w, "| %v | %s | %d | %.1f | %s | %d/%d | %s | %d/%d | %s | %.1f | %.2f |\n", c.Cell, n, len(runs), median(live),
				fmtIv(ai), in15, len(runs), fmtIv(mi), in25, len(runs), fmtIv(a0), median(cpu), median(thr))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "## Every run (in order; failed attempts included)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| utc | slice | cell | period ms | scheduler | pos | attempt | status | live avg ms | sim avg ms | sim uncal. ms | live/sim | per-coflow median | wire/raw | agent CPU s | ms per wire MB | throttled periods | probe min/median | load before | load after | wall s | error |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %v | %g | %s | %d | %d | %s | %.1f | %.1f | %.1f | %.2f | %.2f | %.3f | %.2f | %.1f | %d | %.2f/%.2f | %s | %s | %.0f | %s |\n",
			r.UTC, r.Skip, r.Cell, r.PeriodMS, r.Sched, r.Pos, r.Attempt, r.Status, r.LiveMS, r.SimMS, r.Sim0MS, r.LiveMS/r.SimMS, r.CoflowMedian,
			r.Wire/r.Raw, r.AgentCPU, r.AgentCPU/r.Wire*1e9, r.Throttled, r.ProbeMin, r.ProbeMed, r.LoadBefore, r.LoadAfter, r.WallS, strings.ReplaceAll(r.Err, "|", "/"))
	}
	for _, c := range cells {
		if len(c.Missing) > 0 {
			fmt.Fprintf(w, "\n%v: slices %v lack a successful run of some scheduler and are left out of the paired statistics\n", c.Cell, c.Missing)
		}
	}
	return nil
}

// runMatrixReport reads -matrix-report's CSV and prints the tables.
func runMatrixReport(path string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := readRows(f)
	if err != nil {
		return err
	}
	return matrixReport(rows, w)
}

// runLiveMatrix checks the options, refuses without root, and runs the
// matrix.
func runLiveMatrix(o options, w io.Writer) error {
	runs, err := matrixPlan(o)
	if err != nil {
		return err
	}
	if geteuid() != 0 {
		return errNotRoot
	}
	return runMatrix(o, runs, w)
}

// oneLine is s on one line (an agent's error carries its whole output:
// lines joined by " / "), at most 400 bytes.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " / ")), " ")
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}

// intervals bootstraps the median of each series (study.BootstrapMedian).
func intervals(bc study.BootstrapConfig, series ...[]float64) ([]study.Interval, error) {
	out := make([]study.Interval, len(series))
	for i, xs := range series {
		iv, err := study.BootstrapMedian(xs, bc)
		if err != nil {
			return nil, err
		}
		out[i] = iv
	}
	return out, nil
}
