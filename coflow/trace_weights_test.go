package coflow_test

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
)

const weightsTrace = "4 3\n7 0 1 0 1 1:1.0\n8 0 1 2 1 3:1.0\n9 10 1 0 1 3:2.0\n"

func readWeightsTrace(t testing.TB) *coflow.Trace {
	t.Helper()
	tr, err := coflow.ReadTrace(strings.NewReader(weightsTrace))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestReadWeights checks the side file: listed coflows get their weight,
// the others 1, through ToCoflows and into the State a scheduler sees.
func TestReadWeights(t *testing.T) {
	tr := readWeightsTrace(t)
	side := "# weights for the test trace\n\n9 0.25\n  7   3  \n"
	if err := tr.ReadWeights(strings.NewReader(side)); err != nil {
		t.Fatal(err)
	}
	cfs, err := tr.ToCoflows()
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]float64{7: 3, 8: 1, 9: 0.25}
	for _, c := range cfs {
		if c.Weight != want[c.ID] {
			t.Fatalf("coflow %d: weight %v, want %v", c.ID, c.Weight, want[c.ID])
		}
	}
	d := coflowtest.Driver{Fabric: tr.Fabric(1e6), OnSchedule: func(_ time.Duration, s *coflow.State, _ []coflow.Allocation) error {
		for _, c := range s.Coflows {
			if c.Weight != want[c.ID] {
				t.Errorf("state: coflow %d weight %v, want %v", c.ID, c.Weight, want[c.ID])
			}
		}
		return nil
	}}
	if _, err := d.Run(mustSched(t, "sincronia"), cfs); err != nil {
		t.Fatal(err)
	}
	// Written back and read into a fresh trace, the weights are the same.
	var b bytes.Buffer
	if err := tr.WriteWeights(&b); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != "7 3\n9 0.25\n" {
		t.Fatalf("WriteWeights = %q", got)
	}
	back := readWeightsTrace(t)
	if err := back.ReadWeights(&b); err != nil {
		t.Fatal(err)
	}
	for i := range back.Coflows {
		if back.Coflows[i].Weight != tr.Coflows[i].Weight {
			t.Fatalf("round trip: coflow %d weight %v, want %v", back.Coflows[i].ID, back.Coflows[i].Weight, tr.Coflows[i].Weight)
		}
	}
	// No side file: every weight is 1.
	plain, _ := readWeightsTrace(t).ToCoflows()
	for _, c := range plain {
		if c.Weight != 1 {
			t.Fatalf("coflow %d without weights: %v", c.ID, c.Weight)
		}
	}
}

// TestReadWeights_Refused checks that bad side files are refused with the
// line named, wrapping ErrSyntax, and leave the trace unchanged.
func TestReadWeights_Refused(t *testing.T) {
	tests := []struct{ name, in, msg string }{
		{"negative", "7 2\n8 -1\n", "line 2: weight \"-1\""},
		{"zero", "7 0\n", "line 1: weight \"0\""},
		{"NaN", "# c\n7 NaN\n", "line 2: weight \"NaN\""},
		{"Inf", "7 +Inf\n", "line 1: weight \"+Inf\""},
		{"overflow", "7 1e400\n", "line 1: weight"},
		{"not a number", "7 heavy\n", "line 1: weight \"heavy\""},
		{"duplicate", "7 1\n8 2\n\n7 3\n", "line 4: coflow id 7 listed twice (first on line 1)"},
		{"unknown id", "7 1\n42 1\n", "line 2: coflow id 42 is not in the trace"},
		{"id not integer", "x7 1\n", "line 1: coflow id \"x7\""},
		{"one field", "7\n", "line 1: 1 fields"},
		{"three fields", "7 1 1\n", "line 1: 3 fields"},
		{"line too long", "7 1\n" + strings.Repeat("9", 70<<10) + " 1\n", "line 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := readWeightsTrace(t)
			tr.Coflows[0].Weight = 5
			err := tr.ReadWeights(strings.NewReader(tc.in))
			if !errors.Is(err, coflow.ErrSyntax) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want ErrSyntax mentioning %q", err, tc.msg)
			}
			if tr.Coflows[0].Weight != 5 || tr.Coflows[1].Weight != 0 || tr.Coflows[2].Weight != 0 {
				t.Fatalf("a refused side file changed the weights: %v %v %v", tr.Coflows[0].Weight, tr.Coflows[1].Weight, tr.Coflows[2].Weight)
			}
		})
	}
}

// TestTrace_ValidateWeight checks that a weight set in code is validated
// like one read from a side file.
func TestTrace_ValidateWeight(t *testing.T) {
	for _, w := range []float64{-1, math.NaN(), math.Inf(1)} {
		tr := readWeightsTrace(t)
		tr.Coflows[1].Weight = w
		if _, err := tr.ToCoflows(); !errors.Is(err, coflow.ErrSyntax) {
			t.Fatalf("weight %v: ToCoflows err = %v", w, err)
		}
		if err := tr.WriteWeights(&bytes.Buffer{}); !errors.Is(err, coflow.ErrSyntax) {
			t.Fatalf("weight %v: WriteWeights err = %v", w, err)
		}
	}
}

func FuzzReadWeights(f *testing.F) {
	f.Add("7 3\n9 0.25\n")
	f.Add("# c\n\n8 1e-300\n")
	f.Add("7 1\n7 2\n")
	f.Add("7 -0\n")
	f.Add("9 0x1p-3\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr := readWeightsTrace(t)
		if err := tr.ReadWeights(strings.NewReader(in)); err != nil {
			if !errors.Is(err, coflow.ErrSyntax) {
				t.Fatalf("error does not wrap ErrSyntax: %v", err)
			}
			for _, c := range tr.Coflows {
				if c.Weight != 0 {
					t.Fatalf("refused input changed coflow %d's weight", c.ID)
				}
			}
			return
		}
		cfs, err := tr.ToCoflows()
		if err != nil {
			t.Fatalf("accepted weights make ToCoflows fail: %v", err)
		}
		for _, c := range cfs {
			if !(c.Weight > 0) {
				t.Fatalf("coflow %d weight %v", c.ID, c.Weight)
			}
		}
		var b bytes.Buffer
		if err := tr.WriteWeights(&b); err != nil {
			t.Fatal(err)
		}
		back := readWeightsTrace(t)
		if err := back.ReadWeights(&b); err != nil {
			t.Fatalf("re-read: %v\n%s", err, b.String())
		}
		for i := range back.Coflows {
			if back.Coflows[i].Weight != tr.Coflows[i].Weight {
				t.Fatalf("round trip changed coflow %d's weight", back.Coflows[i].ID)
			}
		}
	})
}
