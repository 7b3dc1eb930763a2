package coflow_test

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
)

func TestReadTrace_Example(t *testing.T) {
	// The example line from the coflow-benchmark README.
	in := "150 1\n2 10833 2 104 132 1 140:48.0\n"
	tr, err := coflow.ReadTrace(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	c := tr.Coflows[0]
	if tr.Ports != 150 || c.ID != 2 || c.ArrivalMS != 10833 || len(c.Mappers) != 2 || c.Mappers[1] != 132 ||
		len(c.Reducers) != 1 || c.Reducers[0] != (coflow.TraceReducer{Port: 140, MB: 48}) {
		t.Fatalf("parsed %+v", tr)
	}
	cfs, err := tr.ToCoflows()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(cfs[0].Flows); got != 2 {
		t.Fatalf("flows = %d, want 2", got)
	}
	// 48 MiB split equally over 2 mappers.
	for i, f := range cfs[0].Flows {
		if f.Bytes != 24*coflow.MiB || f.Dst != 140 || f.Src != c.Mappers[i] {
			t.Errorf("flow %d = %+v", i, f)
		}
	}
	if cfs[0].Arrival != 10833*time.Millisecond {
		t.Errorf("arrival = %v", cfs[0].Arrival)
	}
}

func TestReadTrace_Malformed(t *testing.T) {
	tests := []struct {
		name, in string
		line     string // substring of the error
	}{
		{"empty", "", "empty input"},
		{"header fields", "3\n", "line 1"},
		{"header ports", "x 1\n", "line 1"},
		{"header zero ports", "0 1\n", "line 1"},
		{"too few lines", "3 2\n1 0 1 0 1 1:1.0\n", "announces 2"},
		{"too many lines", "3 1\n1 0 1 0 1 1:1.0\n2 0 1 0 1 1:1.0\n", "line 3"},
		{"short line", "3 1\n1 0 1\n", "line 2"},
		{"bad id", "3 1\nA 0 1 0 1 1:1.0\n", "line 2"},
		{"negative arrival", "3 1\n1 -5 1 0 1 1:1.0\n", "line 2"},
		{"float arrival", "3 1\n1 5.5 1 0 1 1:1.0\n", "line 2"},
		{"mapper out of range", "3 1\n1 0 1 3 1 1:1.0\n", "line 2: mapper 0"},
		{"mapper count too big", "3 1\n1 0 9 0 1 1:1.0\n", "mapper count 9"},
		{"zero mappers", "3 1\n1 0 0 1 1:1.0\n", "mapper count"},
		{"reducer count mismatch", "3 1\n1 0 1 0 2 1:1.0\n", "reducer count 2"},
		{"reducer no colon", "3 1\n1 0 1 0 1 1\n", "not <port>:<MB>"},
		{"reducer port", "3 1\n1 0 1 0 1 7:1.0\n", "reducer 0: port"},
		{"reducer size", "3 1\n1 0 1 0 1 1:abc\n", "size"},
		{"reducer negative", "3 1\n1 0 1 0 1 1:-2\n", "size"},
		{"reducer inf", "3 1\n1 0 1 0 1 1:Inf\n", "size"},
		{"blank line counted", "3 1\n\n1 0 1 0 1 9:1.0\n", "line 3"},
		{"duplicate id", "3 3\n1 0 1 0 1 1:1.0\n2 0 1 0 1 1:1.0\n\n1 5 1 0 1 2:1.0\n", "line 5: duplicate coflow id 1 (first on line 2)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := coflow.ReadTrace(strings.NewReader(tc.in))
			if !errors.Is(err, coflow.ErrSyntax) {
				t.Fatalf("err = %v, want ErrSyntax", err)
			}
			if !strings.Contains(err.Error(), tc.line) {
				t.Fatalf("err = %q, want it to mention %q", err, tc.line)
			}
		})
	}
}

func TestTrace_ValidateDuplicateID(t *testing.T) {
	tr := &coflow.Trace{Ports: 2, Coflows: []coflow.TraceCoflow{
		{ID: 7, Mappers: []int{0}, Reducers: []coflow.TraceReducer{{Port: 1, MB: 1}}},
		{ID: 7, Mappers: []int{1}, Reducers: []coflow.TraceReducer{{Port: 0, MB: 1}}},
	}}
	if err := tr.Validate(); !errors.Is(err, coflow.ErrSyntax) || !strings.Contains(err.Error(), "duplicate coflow id 7") {
		t.Fatalf("Validate = %v, want a duplicate-id ErrSyntax", err)
	}
}

// TestTrace_RoundTripFiles reads the published trace and the fixtures and
// writes them back byte for byte.
func TestTrace_RoundTripFiles(t *testing.T) {
	files := []struct{ set, name string }{
		{"coflow-benchmark", "FB2010-1Hr-150-0.txt"},
		{"coflowsim-fixtures", "synth-a.txt"},
		{"coflowsim-fixtures", "synth-b.txt"},
	}
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			path := coflowtest.SharedFile(t, f.set, f.name)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := coflow.ReadTrace(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := coflow.WriteTrace(&out, tr); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), raw) {
				t.Fatalf("round trip differs (%d vs %d bytes)", out.Len(), len(raw))
			}
		})
	}
}

// TestTrace_FBStats pins statistics of the FB2010 trace listed in the
// research notes (swallow.md §7), computed there by an independent script.
func TestTrace_FBStats(t *testing.T) {
	tr, cfs := readFB(t)
	flows, mb := 0, 0.0
	for i := range cfs {
		flows += len(cfs[i].Flows)
		for _, r := range tr.Coflows[i].Reducers {
			mb += r.MB
		}
	}
	if tr.Ports != 150 || len(cfs) != 526 || flows != 706397 || mb != 35533534 {
		t.Fatalf("ports=%d coflows=%d flows=%d MB=%v; want 150 526 706397 35533534", tr.Ports, len(cfs), flows, mb)
	}
}

func TestTrace_WriteReadSynthetic(t *testing.T) {
	cfg := coflow.DefaultSynthConfig()
	cfg.Ports, cfg.Coflows = 30, 200
	tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(7, 7)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := coflow.WriteTrace(&buf, tr); err != nil {
		t.Fatal(err)
	}
	back, err := coflow.ReadTrace(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Coflows) != len(tr.Coflows) {
		t.Fatalf("coflows %d vs %d", len(back.Coflows), len(tr.Coflows))
	}
	for i := range tr.Coflows {
		a, b := tr.Coflows[i], back.Coflows[i]
		if a.ID != b.ID || a.ArrivalMS != b.ArrivalMS || len(a.Mappers) != len(b.Mappers) || len(a.Reducers) != len(b.Reducers) {
			t.Fatalf("coflow %d differs: %+v vs %+v", i, a, b)
		}
		for j := range a.Reducers {
			if a.Reducers[j] != b.Reducers[j] {
				t.Fatalf("coflow %d reducer %d differs", i, j)
			}
		}
	}
}

func TestSynthetic_Shape(t *testing.T) {
	cfg := coflow.DefaultSynthConfig()
	cfg.Ports, cfg.Coflows = 100, 1000
	tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := coflow.Synthetic(cfg, rand.New(rand.NewPCG(1, 2)))
	var a, b bytes.Buffer
	_ = coflow.WriteTrace(&a, tr)
	_ = coflow.WriteTrace(&b, again)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("same seed gave different traces")
	}
	cfs, err := tr.ToCoflows()
	if err != nil {
		t.Fatal(err)
	}
	var sn, lwBytes, total float64
	var last time.Duration
	for i := range cfs {
		c := &cfs[i]
		if c.Arrival < last {
			t.Fatal("arrivals not sorted")
		}
		last = c.Arrival
		short := c.MaxFlowBytes() < 5*coflow.MiB
		narrow := c.Width() <= 50
		b := c.TotalBytes()
		total += b
		if short && narrow {
			sn++
		}
		if !short && !narrow {
			lwBytes += b
		}
	}
	// Shape targets (ours, FB2010-like): most coflows short-narrow, long-wide
	// carrying most bytes; mean inter-arrival near the configured one.
	if frac := sn / float64(len(cfs)); frac < 0.5 || frac > 0.7 {
		t.Errorf("short-narrow fraction %.2f, want about 0.59", frac)
	}
	if share := lwBytes / total; share < 0.9 {
		t.Errorf("long-wide byte share %.3f, want > 0.9", share)
	}
	mean := last.Seconds() / float64(len(cfs)-1)
	if want := cfg.MeanInterArrival.Seconds(); math.Abs(mean-want) > 0.15*want {
		t.Errorf("mean inter-arrival %.3fs, want about %.3fs", mean, want)
	}
}

func TestSynthetic_BadConfig(t *testing.T) {
	for _, cfg := range []coflow.SynthConfig{{Ports: 1, Coflows: 1}, {Ports: 4}, {Ports: 4, Coflows: 1, ShortNarrow: 0.9, LongNarrow: 0.9}} {
		if _, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(1, 1))); !errors.Is(err, coflow.ErrInvalidConfig) {
			t.Errorf("%+v: err = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

func FuzzReadTrace(f *testing.F) {
	f.Add("150 1\n2 10833 2 104 132 1 140:48.0\n")
	f.Add("3 2\n1 0 1 0 1 1:1.0\n2 5 2 0 1 2 1:3.5 2:0.0\n")
	f.Add("3 1\n1 0 9 0 1 1:1.0\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := coflow.ReadTrace(strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, coflow.ErrSyntax) {
				t.Fatalf("error does not wrap ErrSyntax: %v", err)
			}
			return
		}
		// A parsed trace writes and reads back to the same structure.
		var buf bytes.Buffer
		if err := coflow.WriteTrace(&buf, tr); err != nil {
			t.Fatalf("write of parsed trace: %v", err)
		}
		back, err := coflow.ReadTrace(&buf)
		if err != nil {
			t.Fatalf("re-read: %v\n%s", err, buf.String())
		}
		if len(back.Coflows) != len(tr.Coflows) || back.Ports != tr.Ports {
			t.Fatal("round trip changed the trace")
		}
		_, _ = tr.ToCoflows()
	})
}
