package coflow_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

func secs(xs ...float64) []time.Duration {
	out := make([]time.Duration, len(xs))
	for i, x := range xs {
		out[i] = time.Duration(x * float64(time.Second))
	}
	return out
}

func TestSummarizeDurations(t *testing.T) {
	tests := []struct {
		name string
		in   []time.Duration
		want coflow.Summary
	}{
		{"empty", nil, coflow.Summary{}},
		{"one", secs(3), coflow.Summary{N: 1, Mean: 3 * time.Second, Median: 3 * time.Second, P95: 3 * time.Second, P99: 3 * time.Second, Min: 3 * time.Second, Max: 3 * time.Second, Sum: 3 * time.Second}},
		// 1..5: median 3; p95 at position 0.95·4 = 3.8 → 4.8; p99 at 3.96 → 4.96.
		{"five", secs(5, 1, 4, 2, 3), coflow.Summary{N: 5, Mean: 3 * time.Second, Median: 3 * time.Second,
			P95: 4800 * time.Millisecond, P99: 4960 * time.Millisecond, Min: time.Second, Max: 5 * time.Second, Sum: 15 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := coflow.SummarizeDurations(tc.in); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBinOf(t *testing.T) {
	tests := []struct {
		max   float64
		width int
		want  coflow.Bin
	}{
		{5*coflow.MiB - 1, 50, coflow.ShortNarrow},
		{5 * coflow.MiB, 50, coflow.LongNarrow},
		{1, 51, coflow.ShortWide},
		{5 * coflow.MiB, 51, coflow.LongWide},
	}
	for _, tc := range tests {
		if got := coflow.BinOf(tc.max, tc.width); got != tc.want {
			t.Errorf("BinOf(%v, %d) = %v, want %v", tc.max, tc.width, got, tc.want)
		}
	}
}

// TestBins_FB checks the bin counts of the FB2010 trace against the
// research notes (swallow.md §7: SN 309, LN 90, SW 59, LW 68), which were
// computed by an independent script.
func TestBins_FB(t *testing.T) {
	_, cfs := readFB(t)
	var n [4]int
	for i := range cfs {
		n[coflow.BinOf(cfs[i].MaxFlowBytes(), cfs[i].Width())]++
	}
	if n != [4]int{309, 90, 59, 68} {
		t.Fatalf("bins SN/LN/SW/LW = %v, want [309 90 59 68]", n)
	}
}

func result(ccts ...float64) *coflow.Result {
	r := &coflow.Result{}
	for i, d := range secs(ccts...) {
		r.Coflows = append(r.Coflows, coflow.CoflowResult{Index: i, ID: i + 1, CCT: d})
	}
	return r
}

func TestCompare(t *testing.T) {
	base := result(10, 2)
	x := result(5, 4)
	c, err := coflow.Compare(x, base)
	if err != nil {
		t.Fatal(err)
	}
	// Ratio of means: 12/9; mean of ratios: (10/5 + 2/4)/2 = 1.25.
	if !near(c.RatioOfMeans, 12.0/9) || !near(c.MeanOfRatios, 1.25) || c.Faster != 1 || c.Slower != 1 {
		t.Fatalf("got %+v", c)
	}
	if _, err := coflow.Compare(result(1), base); !errors.Is(err, coflow.ErrMismatch) {
		t.Fatalf("length mismatch: %v", err)
	}
}

func TestJCTs(t *testing.T) {
	res := result(3)
	jobs := []coflow.Job{{Coflow: coflow.Coflow{ID: 1}, MapDuration: time.Second, ReduceDuration: 2 * time.Second}}
	got, err := coflow.JCTs(jobs, res)
	if err != nil || got[0] != 6*time.Second {
		t.Fatalf("JCTs = %v, %v; want [6s]", got, err)
	}
	if _, err := coflow.JCTs(jobs[:0], res); !errors.Is(err, coflow.ErrMismatch) {
		t.Fatalf("mismatch: %v", err)
	}
}

func TestWriteCSV(t *testing.T) {
	res := run(t, mustSched(t, "sebf"), coflow.NewFabric(3, mb), varysExample())
	var buf bytes.Buffer
	if err := coflow.WriteCSV(&buf, res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[2], "1,2,0,0,2000,2000,1,2000000,2000000,2000000,SN") {
		t.Fatalf("csv:\n%s", buf.String())
	}
	if res.TrafficReduction() != 0 {
		t.Fatalf("traffic reduction %v without compression", res.TrafficReduction())
	}
}
