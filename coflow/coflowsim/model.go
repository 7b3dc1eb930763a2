package coflowsim

import (
	"cmp"
	"math"
	"slices"

	"github.com/falconml/falcon/coflow"
)

const mib = 1048576.0

// flow is one mapper→reducer transfer.
type flow struct {
	src, dst int
	rem      float64 // bytes left
	size     float64 // bytes at the start
	rate     float64 // bit per simulated second
	red      int     // index of the reducer within its job
	done     bool
	lz       *lazyFlow // per-flow schedulers' state (runPerFlow), nil otherwise
}

// job is coflowsim's view of a coflow.
type job struct {
	id          int
	arrival     int64 // ms, from the trace
	numMappers  int
	numReducers int
	totalBytes  float64 // after rounding
	maxBytes    float64 // largest reducer total
	alpha       float64 // static bottleneck: max bytes through one port
	deadline    int64   // ms, see buildJobs
	dueMs       int64   // ms: the deadline before rounding, truncated (the backfill's key)
	start       int64   // ms: the epoch that admitted it
	finish      int64   // ms
	flows       []*flow // reducer-major, reducers and mappers by port
	portOrder   []*flow // the same flows by sender port, then receiver port
	redActive   []int   // unfinished flows per reducer
	// redLeft is each reducer's bytes left as coflowsim keeps it (ordering
	// schedulers): the rounded total minus every flow's bytes, quantum by
	// quantum, flows in sender port order. The float64 count drifts from
	// the flows' own remaining bytes; MADD reads it, it ends the reducer
	// when it drops to zeroBytes, and LCF's key counts from it.
	redLeft   []float64
	redBytes  []float64 // each reducer's bytes after the rounding
	redRaw    []float64 // each reducer's trace megabytes × MiB, before the rounding
	redFinish []int64   // ms
	active    int       // unfinished flows
	// sent is the coflow's bytes sent as coflowsim counts them (DARK):
	// one float64 to which every unfinished flow adds the bytes it moves,
	// min(b, rem), quantum by quantum, in j.flows' order.
	sent     float64
	queue    int   // DARK: current queue
	queueSeq int64 // DARK: when it joined that queue
	done     bool
}

// reducer returns the flows of j's reducer ri (flows are reducer-major,
// one per mapper).
func (j *job) reducer(ri int) []*flow {
	nm := len(j.flows) / len(j.redLeft)
	return j.flows[ri*nm : (ri+1)*nm]
}

// byPort returns j's flows sorted by sender port, then receiver port.
func (j *job) byPort() []*flow {
	if j.portOrder == nil {
		j.portOrder = slices.Clone(j.flows)
		slices.SortStableFunc(j.portOrder, func(a, b *flow) int {
			if a.src != b.src {
				return a.src - b.src
			}
			return a.dst - b.dst
		})
	}
	return j.portOrder
}

// buildJobs turns trace lines into jobs the way coflowsim's
// COFLOW-BENCHMARK reader does: one mapper and one reducer per port
// (distinctPorts); each reducer's megabytes are rounded up to
// a multiple of the number of mappers (at least one MiB per flow) and split
// equally into one flow per mapper. The deadline field is
// round(alpha / portBytesPerSec × 1000 × (1 + u)) ms with u drawn per
// coflow in trace order from java.util.Random(seed); withRandom false drops
// the (1 + u) factor (DARK prints that). The backfill orders by the same
// value truncated, not rounded (dueMs; see backfill).
func buildJobs(tr *coflow.Trace, cfg Config, withRandom bool) []*job {
	rng := newJavaRand(cfg.Seed)
	portBytes := cfg.PortBps / 8
	send := make([]float64, tr.Ports)
	recv := make([]float64, tr.Ports)
	// coflowsim sorts the coflows by arrival (stably) before anything else:
	// admission, the random draws and its output follow that order.
	order := make([]int, len(tr.Coflows))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(tr.Coflows[a].ArrivalMS, tr.Coflows[b].ArrivalMS)
	})
	jobs := make([]*job, len(tr.Coflows))
	for i, ci := range order {
		c := &tr.Coflows[ci]
		mappers, reducers := distinctPorts(c)
		nm := len(mappers)
		j := &job{id: c.ID, arrival: c.ArrivalMS, numMappers: nm, numReducers: len(reducers),
			redActive: make([]int, len(reducers)), redFinish: make([]int64, len(reducers))}
		slab := make([]flow, nm*len(reducers))
		j.flows = make([]*flow, 0, len(slab))
		for ri, r := range reducers {
			perFlowMB := math.Max(math.Ceil(r.MB/float64(nm)), 1)
			bytes := perFlowMB * float64(nm) * mib
			j.totalBytes += bytes
			j.redLeft = append(j.redLeft, bytes)
			j.redBytes = append(j.redBytes, bytes)
			j.redRaw = append(j.redRaw, r.MB*mib)
			j.maxBytes = math.Max(j.maxBytes, bytes)
			per := bytes / float64(nm)
			for _, m := range mappers {
				f := &slab[len(j.flows)]
				*f = flow{src: m, dst: r.Port, rem: per, size: per, red: ri}
				j.flows = append(j.flows, f)
				send[m] += per
				recv[r.Port] += per
				j.redActive[ri]++
			}
		}
		for _, f := range j.flows {
			j.alpha = math.Max(j.alpha, math.Max(send[f.src], recv[f.dst]))
		}
		for _, f := range j.flows {
			send[f.src], recv[f.dst] = 0, 0
		}
		j.active = len(j.flows)
		d := j.alpha / portBytes * 1000
		if u := rng.nextDouble(); withRandom {
			d *= 1 + u
		}
		j.deadline = int64(math.Round(d))
		j.dueMs = int64(d)
		jobs[i] = j
	}
	return jobs
}

// distinctPorts returns c's mapper ports without repeats and its reducers
// with the megabytes of a repeated port added up (in trace order), both
// sorted by port: coflowsim keeps one mapper and one reducer per port (a
// mapper listed twice counts once; a reducer's megabytes are summed
// before the rounding), and its output does not depend on the order a
// trace line lists them in. Its per-quantum count of a reducer's bytes
// left takes the flows in sender port order (RESEARCH.md).
func distinctPorts(c *coflow.TraceCoflow) ([]int, []coflow.TraceReducer) {
	var mappers []int
	for _, m := range c.Mappers {
		if !slices.Contains(mappers, m) {
			mappers = append(mappers, m)
		}
	}
	var reducers []coflow.TraceReducer
	for _, r := range c.Reducers {
		if i := slices.IndexFunc(reducers, func(q coflow.TraceReducer) bool { return q.Port == r.Port }); i >= 0 {
			reducers[i].MB += r.MB
		} else {
			reducers = append(reducers, r)
		}
	}
	slices.Sort(mappers)
	slices.SortFunc(reducers, func(a, b coflow.TraceReducer) int { return a.Port - b.Port })
	return mappers, reducers
}
