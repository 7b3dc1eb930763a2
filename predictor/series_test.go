package predictor

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestCSV_RoundTrip(t *testing.T) {
	recs := []Record{
		{At: time.Millisecond, Codec: "lz4", Class: 2, ClassName: "sparse", Contention: 0.5, RawBytes: 1000, CompressedBytes: 100,
			CompressNs: 2000, DecompressNs: 500, CompressWallNs: 2100, DecompressWallNs: 510},
		{At: 2 * time.Millisecond, Codec: "snappy", Class: 5, ClassName: "random", Contention: 0, RawBytes: 1000, CompressedBytes: 1000,
			CompressNs: 100, DecompressNs: 50, CompressWallNs: 100, DecompressWallNs: 50},
	}
	var buf bytes.Buffer
	if err := WriteCSVHeader(&buf); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := WriteCSVRow(&buf, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("got %d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		if got[i] != recs[i] {
			t.Fatalf("record %d: got %+v, want %+v", i, got[i], recs[i])
		}
	}
	m := got[0].Measurement()
	if m.CompressSpeed != 5e8 || m.DecompressSpeed != 2e9 || m.Ratio != 0.1 || m.Class != 2 || m.Contention != 0.5 {
		t.Fatalf("Measurement = %+v", m)
	}
}

func TestReadCSV_Errors(t *testing.T) {
	row := "1,lz4,2,sparse,0,1000,100,2000,500,2100,510,5e+08,2e+09,0.1"
	tests := []struct {
		name, in, line string
	}{
		{"empty", "", "empty"},
		{"header", "time,codec\n" + row, "line 1"},
		{"columns", CSVHeader + "\n" + row + "\n1,2,3\n", "line 3"},
		{"negative time", CSVHeader + "\n" + strings.Replace(row, "1,", "-1,", 1), "line 2"},
		{"zero ns", CSVHeader + "\n" + strings.Replace(row, ",2000,", ",0,", 1), "line 2"},
		{"contention", CSVHeader + "\n" + strings.Replace(row, "sparse,0,", "sparse,x,", 1), "line 2"},
		{"codec", CSVHeader + "\n" + strings.Replace(row, "lz4", "", 1), "line 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadCSV(strings.NewReader(tc.in))
			if !errors.Is(err, ErrCSV) || !strings.Contains(err.Error(), tc.line) {
				t.Fatalf("error = %v, want ErrCSV mentioning %q", err, tc.line)
			}
		})
	}
}

// TestCommittedSeries checks the recorded series in testdata: it parses,
// has both codecs, every data class and contention level, and regime
// changes, and is small enough to commit.
func TestCommittedSeries(t *testing.T) {
	b, err := os.ReadFile("testdata/series.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) >= 1<<20 {
		t.Fatalf("series is %d bytes, want < 1 MiB", len(b))
	}
	recs, err := ReadCSV(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	codecs, by := Split(recs)
	if len(codecs) != 2 {
		t.Fatalf("codecs %v, want lz4 and snappy", codecs)
	}
	for _, c := range codecs {
		s := by[c]
		classes, levels, changes := map[int]bool{}, map[float64]bool{}, 0
		for i, m := range s {
			classes[m.Class], levels[m.Contention] = true, true
			if i > 0 && (m.Class != s[i-1].Class || m.Contention != s[i-1].Contention) {
				changes++
			}
		}
		if len(s) < 1000 || len(classes) != 5 || len(levels) < 2 || changes < 20 {
			t.Fatalf("%s: %d rows, %d classes, %d contention levels, %d regime changes", c, len(s), len(classes), len(levels), changes)
		}
	}
}
