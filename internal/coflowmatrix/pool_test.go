package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPool: runs of two directories are paired by (directory, seed) —
// the same seed in two directories is two traces — and their ratios are
// bootstrapped together; the strongest baseline is chosen on the pooled
// runs, never among FVDF's own mechanism or compress-at-write.
func TestPool(t *testing.T) {
	header := "sched,compression,resched,gbps,cores,seed,mean_cct_s,median_cct_s,p95_cct_s,p99_cct_s,mean_jct_s,traffic_reduction,codec_cpu_s,max_wait_s,sn_s,ln_s,sw_s,lw_s,calls,wall_s,predictor\n"
	line := func(sched, comp string, seed int, cct, jct float64) string {
		return fmt.Sprintf("%s,%s,varys,40,4,%d,%g,0,0,0,%g,0,0,0,0,0,0,0,1,0.1,\n", sched, comp, seed, cct, jct)
	}
	// Per directory and seed: FVDF's and the baselines' mean CCT and JCT.
	type run struct{ fvdf, raw, lz4, order, write float64 }
	data := [][]run{
		{{1, 1.5, 1.2, 1, 0.5}, {2, 2.2, 2.6, 2, 1}},
		{{4, 4.4, 5.2, 4, 2}, {8, 8.8, 8.4, 8, 4}},
	}
	var dirs []string
	var wantCCT, wantJCT []float64
	for d, seeds := range data {
		var b strings.Builder
		b.WriteString(header)
		for s, r := range seeds {
			b.WriteString(line("fvdf", "fvdf", s+1, r.fvdf, 10*r.fvdf))
			b.WriteString(line("sebf", "none", s+1, r.raw, 10*r.raw+1))
			b.WriteString(line("sebf", "lz4", s+1, r.lz4, 10*r.lz4))
			b.WriteString(line("sebf-order", "fvdf", s+1, r.order, 10*r.order))
			b.WriteString(line("sebf", "write-lz4", s+1, r.write, 10*r.write))
			wantCCT = append(wantCCT, r.raw/r.fvdf)
			wantJCT = append(wantJCT, (10*r.raw+1)/(10*r.fvdf))
		}
		dir := filepath.Join(t.TempDir(), fmt.Sprint(d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "runs.csv"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	out := t.TempDir()
	if err := pool(dirs, out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out, "pooled.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Median pooled mean CCT: raw (1.5, 2.2, 4.4, 8.8) → 3.3 against
	// lz4's (1.2, 2.6, 5.2, 8.4) → 3.9: raw is the strongest.
	ci, ji := bootstrap(wantCCT), bootstrap(wantJCT)
	want := fmt.Sprintf("| 40G-4c/varys | sebf/none (strongest, §9 on the pooled runs) | 4 | %s | %s | %s | %s |", ivs(ci), ci.excludes1(), ivs(ji), ji.excludes1())
	if !strings.Contains(string(got), want) {
		t.Fatalf("pooled.md lacks\n%s\ngot:\n%s", want, got)
	}
	if strings.Count(string(got), "strongest") != 1 {
		t.Fatalf("one strongest baseline expected:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(out, "pooled.md")); err != nil {
		t.Fatal(err)
	}
	if err := pool([]string{t.TempDir()}, out); err == nil {
		t.Fatal("pool of a directory without runs.csv: no error")
	}
}
