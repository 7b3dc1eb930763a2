package testbed

import (
	"errors"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// A hand-made trace: folding merges flows onto port pairs, never leaves a
// flow on one port, scales bytes to the total and arrivals to the span.
func TestSlice(t *testing.T) {
	tr := &coflow.Trace{Ports: 6, Coflows: []coflow.TraceCoflow{
		{ID: 1, ArrivalMS: 1000, Mappers: []int{0, 2}, Reducers: []coflow.TraceReducer{{Port: 4, MB: 2}}},
		{ID: 2, ArrivalMS: 3000, Mappers: []int{1}, Reducers: []coflow.TraceReducer{{Port: 3, MB: 1}, {Port: 5, MB: 1}}},
		{ID: 3, ArrivalMS: 0, Mappers: []int{5}, Reducers: []coflow.TraceReducer{{Port: 1, MB: 4}}},
	}}
	cfs, err := Slice(tr, SliceConfig{Ports: 2, Skip: 1, Coflows: 2, TotalBytes: 4e6, Span: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Arrival order: 3 (0 ms), 1 (1000), 2 (3000); skip one.
	if len(cfs) != 2 || cfs[0].ID != 1 || cfs[1].ID != 2 {
		t.Fatalf("got %+v", cfs)
	}
	if cfs[0].Arrival != 0 || cfs[1].Arrival != 10*time.Second {
		t.Errorf("arrivals %v, %v", cfs[0].Arrival, cfs[1].Arrival)
	}
	// Coflow 1: 0→4 and 2→4 fold to 0→0, i.e. 0→1 twice: one flow.
	// Coflow 2: 1→3 folds to 1→1, i.e. 1→0; 1→5 to 1→1, i.e. 1→0: one flow.
	var total float64
	for _, c := range cfs {
		if len(c.Flows) != 1 {
			t.Fatalf("coflow %d: %+v", c.ID, c.Flows)
		}
		for _, f := range c.Flows {
			if f.Src == f.Dst {
				t.Errorf("coflow %d: flow on one port %+v", c.ID, f)
			}
			total += f.Bytes
		}
	}
	if total != 4e6 || cfs[0].Flows[0].Bytes != 2e6 {
		t.Errorf("total %v, first flow %v", total, cfs[0].Flows[0].Bytes)
	}
	if _, err := Slice(tr, SliceConfig{Ports: 2, Skip: 2, Coflows: 2, TotalBytes: 1}); !errors.Is(err, ErrSlice) {
		t.Errorf("too many coflows: %v", err)
	}
}
