package sim

import (
	"bytes"
	"encoding/csv"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCSVTables checks that each kind of row has its own table with named
// columns: the header is the table's, every row has exactly its width, the
// policy column is first, numeric columns parse, and the row counts are
// those of the results.
func TestCSVTables(t *testing.T) {
	r, err := Run(testConfig(4), testJob(t, 4, []float64{1, 1, 1, 0.25}, &transferPolicy{}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"evals": 2 * len(r.Evals), "workers": 8, "parallelism": 2 * len(r.Parallelism),
		"transfers": 2 * len(r.Transfers), "staleness": 2 * len(r.Stats.Staleness), "summary": 2,
	}
	if len(r.Transfers) == 0 || len(r.Stats.Staleness) == 0 || len(r.Parallelism) == 0 {
		t.Fatalf("test run lacks rows of some kind: %d transfers, %d staleness, %d parallelism", len(r.Transfers), len(r.Stats.Staleness), len(r.Parallelism))
	}
	var names []string
	for _, tab := range CSVTables() {
		names = append(names, tab.Name)
		var b bytes.Buffer
		if err := tab.Write(&b, r, r); err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(&b).ReadAll() // fails on rows of another width
		if err != nil {
			t.Fatalf("%s: %v", tab.Name, err)
		}
		if strings.Join(recs[0], ",") != strings.Join(tab.Header, ",") || tab.Header[0] != "policy" {
			t.Fatalf("%s: header %v, want %v with policy first", tab.Name, recs[0], tab.Header)
		}
		for _, h := range tab.Header {
			if len(h) <= 1 {
				t.Fatalf("%s: column %q is not named", tab.Name, h)
			}
		}
		rows := recs[1:]
		if len(rows) != want[tab.Name] {
			t.Errorf("%s: %d rows, want %d", tab.Name, len(rows), want[tab.Name])
		}
		for _, row := range rows {
			if row[0] != r.Policy {
				t.Fatalf("%s: policy column %q", tab.Name, row[0])
			}
			for k, v := range row[1:] {
				if v == "true" || v == "false" {
					continue
				}
				if _, err := strconv.ParseFloat(v, 64); err != nil {
					t.Fatalf("%s: column %s value %q is not a number", tab.Name, tab.Header[k+1], v)
				}
			}
		}
	}
	if got := strings.Join(names, ","); got != "evals,workers,parallelism,transfers,staleness,summary" {
		t.Fatalf("tables %s", got)
	}
}

// TestCSVTables_Quoting checks that a policy name with a comma or a quote
// stays one field, and that the summary of a run that never reached its
// target says +Inf.
func TestCSVTables_Quoting(t *testing.T) {
	r := &Result{Policy: `ssp(s=3, "slow")`, Evals: []EvalPoint{{Time: 1500 * time.Millisecond, Loss: 0.5, Accuracy: 0.25}}}
	for _, tab := range CSVTables() {
		if tab.Name != "evals" && tab.Name != "summary" {
			continue
		}
		var b bytes.Buffer
		if err := tab.Write(&b, r); err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(&b).ReadAll()
		if err != nil || len(recs) != 2 {
			t.Fatalf("%s: %v, %d records\n%s", tab.Name, err, len(recs), b.String())
		}
		if recs[1][0] != r.Policy || len(recs[1]) != len(tab.Header) {
			t.Fatalf("%s: row %q", tab.Name, recs[1])
		}
		if tab.Name == "summary" {
			if v, _ := strconv.ParseFloat(recs[1][1], 64); !math.IsInf(v, 1) {
				t.Fatalf("time to target %q, want +Inf", recs[1][1])
			}
		} else if recs[1][1] != "1.500000" {
			t.Fatalf("time_s %q", recs[1][1])
		}
	}
}
