package testbed

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/falconml/falcon/coflow"
)

// SliceConfig says which part of a coflow-benchmark trace to replay on a
// bed and how to fit it.
type SliceConfig struct {
	// Ports is the bed's port count N, ≥ 2: trace port p becomes p mod N.
	Ports int
	// Skip and Coflows select the coflows: the Coflows ones after the first
	// Skip, in arrival order (ties: trace order). Coflows ≥ 1.
	Skip, Coflows int
	// TotalBytes is the slice's raw volume after scaling (every flow
	// scaled by one factor). Required.
	TotalBytes float64
	// MinFlowBytes is the smallest flow after scaling. Zero means 4 KiB.
	MinFlowBytes float64
	// Span is the time from the first arrival to the last after scaling
	// (arrivals keep their proportions). Zero means all arrive at once.
	Span time.Duration
}

// ErrSlice marks a slice that cannot be made (bad config, not enough
// coflows).
var ErrSlice = errors.New("testbed: bad slice")

// Slice folds a trace's coflows onto a bed of cfg.Ports ports:
//
//   - ports fold by p mod N; a flow whose ends fold onto one port goes to
//     the next port instead ((p+1) mod N), since a process's traffic to
//     itself would bypass its link and its limit;
//   - the flows of a coflow that fold onto the same (source, destination)
//     pair merge into one (their bytes add), so a coflow has at most N(N−1)
//     flows however wide it was;
//   - bytes scale by TotalBytes / (the slice's raw bytes), rounded to whole
//     bytes, at least MinFlowBytes;
//   - arrivals are shifted to start at 0 and scaled to last Span.
//
// Flow classes are kept (class 0 from a trace); coflow IDs are the trace's.
func Slice(tr *coflow.Trace, cfg SliceConfig) ([]coflow.Coflow, error) {
	if cfg.MinFlowBytes == 0 {
		cfg.MinFlowBytes = 4 << 10
	}
	if cfg.Ports < 2 || cfg.Coflows < 1 || cfg.Skip < 0 || !(cfg.TotalBytes > 0) || math.IsInf(cfg.TotalBytes, 0) ||
		!(cfg.MinFlowBytes >= 1) || cfg.Span < 0 {
		return nil, fmt.Errorf("%w: %+v", ErrSlice, cfg)
	}
	all, err := tr.ToCoflows()
	if err != nil {
		return nil, err
	}
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(all[a].Arrival - all[b].Arrival) })
	if cfg.Skip+cfg.Coflows > len(order) {
		return nil, fmt.Errorf("%w: %d+%d coflows of %d", ErrSlice, cfg.Skip, cfg.Coflows, len(order))
	}
	order = order[cfg.Skip : cfg.Skip+cfg.Coflows]
	n := cfg.Ports
	var out []coflow.Coflow
	var raw float64
	for _, i := range order {
		c := all[i]
		type pair struct{ s, d, class int }
		idx := map[pair]int{}
		fc := coflow.Coflow{ID: c.ID, Arrival: c.Arrival, Weight: c.Weight}
		for _, f := range c.Flows {
			s, d := f.Src%n, f.Dst%n
			if s == d {
				d = (d + 1) % n
			}
			k := pair{s, d, f.Class}
			j, ok := idx[k]
			if !ok {
				j = len(fc.Flows)
				idx[k] = j
				fc.Flows = append(fc.Flows, coflow.Flow{ID: j, Src: s, Dst: d, Class: f.Class})
			}
			fc.Flows[j].Bytes += f.Bytes
			raw += f.Bytes
		}
		out = append(out, fc)
	}
	scale := cfg.TotalBytes / raw
	t0, t1 := out[0].Arrival, out[len(out)-1].Arrival
	for i := range out {
		for j := range out[i].Flows {
			f := &out[i].Flows[j]
			f.Bytes = math.Max(cfg.MinFlowBytes, math.Round(f.Bytes*scale))
		}
		a := out[i].Arrival - t0
		if t1 > t0 {
			a = time.Duration(float64(a) / float64(t1-t0) * float64(cfg.Span))
		} else {
			a = 0
		}
		out[i].Arrival = a.Round(time.Millisecond)
	}
	return out, nil
}
