package main

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Pooled intervals (PROTOCOL-v3 §8): a statement over several trace kinds
// (the three synthetic loads) bootstraps their paired per-seed ratios
// together, 5 per directory. pool reads the runs.csv each matrix output
// directory wrote and writes pooled.md under out.

// pooledRun is one run's line of runs.csv, as pool needs it.
type pooledRun struct {
	src       int // index of the directory
	seed      string
	cct, jct  float64
	cell      string // sched/compression[@predictor]
	groupName string // rule/setting
}

// readRuns parses dir/runs.csv (the header writeRuns writes).
func readRuns(dir string, src int) ([]pooledRun, error) {
	f, err := os.Open(filepath.Join(dir, "runs.csv"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%s: empty runs.csv", dir)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, h := range []string{"sched", "compression", "resched", "gbps", "cores", "seed", "mean_cct_s", "mean_jct_s", "predictor"} {
		if _, ok := col[h]; !ok {
			return nil, fmt.Errorf("%s: runs.csv has no column %q", dir, h)
		}
	}
	var out []pooledRun
	for n, r := range recs[1:] {
		if len(r) != len(recs[0]) {
			return nil, fmt.Errorf("%s: line %d: %d fields, want %d", dir, n+2, len(r), len(recs[0]))
		}
		cct, err1 := strconv.ParseFloat(r[col["mean_cct_s"]], 64)
		jct, err2 := strconv.ParseFloat(r[col["mean_jct_s"]], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: line %d: bad mean CCT or JCT", dir, n+2)
		}
		cell := r[col["sched"]] + "/" + r[col["compression"]]
		if p := r[col["predictor"]]; p != "" && p != "oracle" {
			cell += "@" + p
		}
		out = append(out, pooledRun{src: src, seed: r[col["seed"]], cct: cct, jct: jct, cell: cell,
			groupName: fmt.Sprintf("%sG-%sc/%s", r[col["gbps"]], r[col["cores"]], r[col["resched"]])})
	}
	return out, nil
}

// pooledRatios pairs base's runs with fvdf's by (directory, seed) and
// returns the ratios base/FVDF of mean CCT and of mean JCT.
func pooledRatios(fvdf, base []pooledRun) (cct, jct []float64) {
	type key struct {
		src  int
		seed string
	}
	f := map[key]pooledRun{}
	for _, r := range fvdf {
		f[key{r.src, r.seed}] = r
	}
	for _, b := range base {
		if r, ok := f[key{b.src, b.seed}]; ok && r.cct > 0 && r.jct > 0 {
			cct = append(cct, b.cct/r.cct)
			jct = append(jct, b.jct/r.jct)
		}
	}
	return cct, jct
}

// pool writes out/pooled.md: per rule and setting, FVDF against every
// other cell over the runs of every directory in dirs, paired by
// (directory, seed); the strongest baseline is chosen as §9 does on the
// pooled runs (smallest median mean CCT among the non-FVDF cells but
// sebf-order/fvdf and compress-at-write, ties by median mean JCT).
func pool(dirs []string, out string) error {
	var all []pooledRun
	for i, d := range dirs {
		rs, err := readRuns(d, i)
		if err != nil {
			return err
		}
		all = append(all, rs...)
	}
	byGroup := map[string]map[string][]pooledRun{}
	var groups []string
	for _, r := range all {
		if byGroup[r.groupName] == nil {
			byGroup[r.groupName] = map[string][]pooledRun{}
			groups = append(groups, r.groupName)
		}
		byGroup[r.groupName][r.cell] = append(byGroup[r.groupName][r.cell], r)
	}
	slices.Sort(groups)
	var b strings.Builder
	fmt.Fprintf(&b, "# Pooled intervals (PROTOCOL-v3 §8)\n\nRuns of %s, paired by (directory, seed); ratio baseline/FVDF of mean CCT and mean JCT, median over the pooled pairs with its 95 %% percentile-bootstrap interval (%d draws); win/loss only where the interval excludes 1.\n\n",
		strings.Join(dirs, ", "), BootstrapDraws)
	b.WriteString("| setting/rule | cell | pairs | CCT ratio | verdict | JCT ratio | verdict |\n|---|---|---|---|---|---|---|\n")
	for _, g := range groups {
		cells := byGroup[g]
		fr := cells["fvdf/fvdf"]
		if len(fr) == 0 {
			continue
		}
		names := make([]string, 0, len(cells))
		for c := range cells {
			if c != "fvdf/fvdf" {
				names = append(names, c)
			}
		}
		slices.Sort(names)
		medOf := func(rs []pooledRun, jct bool) float64 {
			x := make([]float64, len(rs))
			for i, r := range rs {
				x[i] = r.cct
				if jct {
					x[i] = r.jct
				}
			}
			return median(x)
		}
		strongest, v, vj := "", math.Inf(1), math.Inf(1)
		for _, c := range names {
			if strings.HasSuffix(c, "/fvdf") || strings.Contains(c, "/write-") {
				continue
			}
			if x, xj := medOf(cells[c], false), medOf(cells[c], true); x < v || x == v && xj < vj {
				strongest, v, vj = c, x, xj
			}
		}
		for _, c := range names {
			cct, jct := pooledRatios(fr, cells[c])
			if len(cct) == 0 {
				continue
			}
			ci, ji := bootstrap(cct), bootstrap(jct)
			tag := ""
			if c == strongest {
				tag = " (strongest, §9 on the pooled runs)"
			}
			fmt.Fprintf(&b, "| %s | %s%s | %d | %s | %s | %s | %s |\n", g, c, tag, len(cct), ivs(ci), ci.excludes1(), ivs(ji), ji.excludes1())
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "pooled.md"), []byte(b.String()), 0o644)
}
