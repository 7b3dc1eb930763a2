package coflow

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
)

// Summary describes a set of durations (CCTs or JCTs).
type Summary struct {
	N                                int
	Mean, Median, P95, P99, Min, Max time.Duration
	Sum                              time.Duration
}

// Summarize returns the CCT summary of a result.
func Summarize(res *Result) Summary {
	ds := make([]time.Duration, len(res.Coflows))
	for i, c := range res.Coflows {
		ds[i] = c.CCT
	}
	return SummarizeDurations(ds)
}

// SummarizeDurations computes mean, median and percentiles. Percentiles
// interpolate linearly between the closest ranks (the "R-7"/NumPy default
// definition): the q-quantile of sorted x_0..x_{n-1} is x at position
// q·(n−1). An empty input gives the zero Summary.
func SummarizeDurations(ds []time.Duration) Summary {
	n := len(ds)
	if n == 0 {
		return Summary{}
	}
	x := slices.Clone(ds)
	slices.Sort(x)
	var sum time.Duration
	for _, d := range x {
		sum += d
	}
	return Summary{
		N: n, Sum: sum, Mean: sum / time.Duration(n), Min: x[0], Max: x[n-1],
		Median: quantile(x, 0.5), P95: quantile(x, 0.95), P99: quantile(x, 0.99),
	}
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	frac := pos - float64(lo)
	return sorted[lo] + time.Duration(math.Round(frac*float64(sorted[hi]-sorted[lo])))
}

// Bin is one of Varys' four coflow categories by length (largest flow) and
// width (number of flows).
type Bin int

const (
	ShortNarrow Bin = iota
	LongNarrow
	ShortWide
	LongWide
	numBins
)

// Bin thresholds (Varys §7.1): a coflow is short when its longest flow is
// below 5 MB and narrow when it has at most 50 flows. We read "MB" as the
// trace's unit, MiB.
const (
	ShortFlowBytes = 5 * MiB
	NarrowFlows    = 50
)

// String returns "SN", "LN", "SW" or "LW".
func (b Bin) String() string {
	switch b {
	case ShortNarrow:
		return "SN"
	case LongNarrow:
		return "LN"
	case ShortWide:
		return "SW"
	case LongWide:
		return "LW"
	}
	return "Bin(" + strconv.Itoa(int(b)) + ")"
}

// Bins lists the four bins in order.
func Bins() []Bin { return []Bin{ShortNarrow, LongNarrow, ShortWide, LongWide} }

// BinOf classifies a coflow by its longest flow's raw bytes and its number
// of flows.
func BinOf(maxFlowBytes float64, width int) Bin {
	b := ShortNarrow
	if maxFlowBytes >= ShortFlowBytes {
		b = LongNarrow
	}
	if width > NarrowFlows {
		b += 2
	}
	return b
}

// Bin classifies the coflow result.
func (c *CoflowResult) Bin() Bin { return BinOf(c.MaxFlowBytes, c.Width) }

// SummarizeBins returns the CCT summary of each Varys bin, indexed by Bin.
func SummarizeBins(res *Result) [4]Summary {
	var ds [numBins][]time.Duration
	for _, c := range res.Coflows {
		b := c.Bin()
		ds[b] = append(ds[b], c.CCT)
	}
	var out [4]Summary
	for b := range ds {
		out[b] = SummarizeDurations(ds[b])
	}
	return out
}

// ErrMismatch is returned when two results do not cover the same coflows.
var ErrMismatch = errors.New("coflow: results cover different coflows")

// Comparison is a result's CCT relative to a baseline's, as speed-ups
// (baseline CCT / this CCT; > 1 means faster than the baseline). Its
// reciprocal is the "normalized CCT" of Varys' figures.
type Comparison struct {
	// RatioOfMeans is mean(baseline CCT) / mean(CCT): the speed-up of the
	// average CCT, dominated by long coflows. Swallow and Varys quote
	// average-CCT improvements in this sense.
	RatioOfMeans float64
	// MeanOfRatios is the mean over coflows of baseline CCT_i / CCT_i:
	// every coflow counts equally, so it is dominated by the many small
	// ones.
	MeanOfRatios float64
	// Faster, Slower and Same count coflows by how their CCT compares
	// (exactly, in nanoseconds) with the baseline's.
	Faster, Slower, Same int
}

// Compare matches coflows by index. Both results must come from the same
// input coflows.
func Compare(res, baseline *Result) (Comparison, error) {
	if len(res.Coflows) != len(baseline.Coflows) || len(res.Coflows) == 0 {
		return Comparison{}, fmt.Errorf("%w: %d vs %d coflows", ErrMismatch, len(res.Coflows), len(baseline.Coflows))
	}
	var c Comparison
	var sumX, sumB, sumR float64
	for i := range res.Coflows {
		x, b := res.Coflows[i], baseline.Coflows[i]
		if x.ID != b.ID || x.Arrival != b.Arrival {
			return Comparison{}, fmt.Errorf("%w: index %d is coflow %d vs %d", ErrMismatch, i, x.ID, b.ID)
		}
		xs, bs := x.CCT.Seconds(), b.CCT.Seconds()
		sumX += xs
		sumB += bs
		if xs > 0 {
			sumR += bs / xs
		} else {
			sumR++
		}
		switch {
		case x.CCT < b.CCT:
			c.Faster++
		case x.CCT > b.CCT:
			c.Slower++
		default:
			c.Same++
		}
	}
	n := float64(len(res.Coflows))
	c.RatioOfMeans = sumB / sumX
	c.MeanOfRatios = sumR / n
	return c, nil
}

// TrafficReduction returns 1 − WireBytes/RawBytes (0 when nothing was
// compressed; the Swallow paper's "traffic reduced by 48.41 %" metric).
func (r *Result) TrafficReduction() float64 {
	if r.RawBytes == 0 {
		return 0
	}
	return 1 - r.WireBytes/r.RawBytes
}

// JCTs returns each job's completion time MapDuration + CCT +
// ReduceDuration (see Job), matching jobs to res.Coflows by index.
func JCTs(jobs []Job, res *Result) ([]time.Duration, error) {
	if len(jobs) != len(res.Coflows) {
		return nil, fmt.Errorf("%w: %d jobs vs %d coflows", ErrMismatch, len(jobs), len(res.Coflows))
	}
	out := make([]time.Duration, len(jobs))
	for i, j := range jobs {
		if j.Coflow.ID != res.Coflows[i].ID {
			return nil, fmt.Errorf("%w: job %d holds coflow %d, result has %d", ErrMismatch, i, j.Coflow.ID, res.Coflows[i].ID)
		}
		out[i] = j.MapDuration + res.Coflows[i].CCT + j.ReduceDuration
	}
	return out, nil
}

// WriteCSV writes one row per coflow with a header:
// index,id,arrival_ms,start_ms,finish_ms,cct_ms,width,bytes,max_flow_bytes,wire_bytes,bin.
// Output is deterministic.
func WriteCSV(w io.Writer, res *Result) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "index,id,arrival_ms,start_ms,finish_ms,cct_ms,width,bytes,max_flow_bytes,wire_bytes,bin")
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', -1, 64) }
	for _, c := range res.Coflows {
		fmt.Fprintf(bw, "%d,%d,%s,%s,%s,%s,%d,%s,%s,%s,%s\n", c.Index, c.ID, ms(c.Arrival), ms(c.Start), ms(c.Finish), ms(c.CCT),
			c.Width, strconv.FormatFloat(c.Bytes, 'f', -1, 64), strconv.FormatFloat(c.MaxFlowBytes, 'f', -1, 64),
			strconv.FormatFloat(c.WireBytes, 'f', -1, 64), c.Bin())
	}
	return bw.Flush()
}
