package fvdf

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/falconml/falcon/predictor"
)

// TestRecordedFactors_Series: the committed recording gives one factor per
// lz4 record, each class's median factor is 1, and the series drifts
// (factors spread well beyond measurement noise: the recorder's background
// tasks slowed the codec).
func TestRecordedFactors_Series(t *testing.T) {
	f, err := os.Open("../predictor/testdata/series.csv")
	if err != nil {
		t.Skip("recorded series not available:", err)
	}
	defer f.Close()
	recs, err := predictor.ReadCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := RecordedFactors(recs, "lz4", 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.Codec == "lz4" && r.CompressWallNs > 0 {
			n++
		}
	}
	if len(fs) != n || n < 1000 {
		t.Fatalf("%d factors for %d lz4 records", len(fs), n)
	}
	lo, hi := fs[0], fs[0]
	for _, x := range fs {
		lo, hi = min(lo, x), max(hi, x)
	}
	if hi/lo < 2 {
		t.Fatalf("factors span only [%v, %v]: no drift", lo, hi)
	}
	if _, err := RecordedFactors(recs, "zstd", 0); !errors.Is(err, ErrBadInput) {
		t.Fatalf("unknown codec: %v", err)
	}
}

// TestRecordedFactors_Window: a window's factor is the harmonic mean of
// the per-record factors in it (the relative throughput of those chunks
// back to back), so one stalled chunk weighs by the time it took.
func TestRecordedFactors_Window(t *testing.T) {
	rec := func(class int, wallNs int64) predictor.Record {
		return predictor.Record{Codec: "lz4", Class: class, RawBytes: 1000, CompressWallNs: wallNs}
	}
	// class 1 median wall 100 ns; class 2 median 400 ns.
	recs := []predictor.Record{rec(1, 100), rec(2, 400), rec(1, 1000), rec(2, 400), rec(1, 100), {Codec: "snappy", Class: 1, RawBytes: 1, CompressWallNs: 1}}
	per, err := RecordedFactors(recs, "lz4", 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{1, 1, 0.1, 1, 1}
	for i := range want {
		if d := per[i] - want[i]; d > 1e-12 || d < -1e-12 {
			t.Fatalf("per-record factors %v, want %v", per, want)
		}
	}
	w, err := RecordedFactors(recs, "lz4", 3)
	if err != nil {
		t.Fatal(err)
	}
	// i=2: 3/(1+1+10) = 0.25; i=3: 3/(1+10+1); i=4: 3/(10+1+1).
	want = []float64{1, 1, 0.25, 0.25, 0.25}
	for i := range want {
		if d := w[i] - want[i]; d > 1e-12 || d < -1e-12 {
			t.Fatalf("window factors %v, want %v", w, want)
		}
	}
}

// TestReplayedContention: step i gives factors[(start+i) mod n], whatever
// the query order; bad input is refused.
func TestReplayedContention(t *testing.T) {
	c, err := NewReplayedContention([]float64{1, 0.5, 0.25}, time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		at   time.Duration
		want float64
	}{{5 * time.Second, 1}, {0, 0.5}, {1500 * time.Millisecond, 0.25}, {2 * time.Second, 1}, {-time.Second, 0.5}} {
		if got := c.Factor(q.at); got != q.want {
			t.Fatalf("Factor(%v) = %v, want %v", q.at, got, q.want)
		}
	}
	for _, bad := range [][]float64{nil, {1, 0}, {1, -1}} {
		if _, err := NewReplayedContention(bad, 0, 0); !errors.Is(err, ErrConfig) {
			t.Fatalf("%v: %v", bad, err)
		}
	}
}
