package sim

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/falconml/falcon/epsp"
)

// EvalPoint is one evaluation of the server's model.
type EvalPoint struct {
	Time     time.Duration
	Loss     float64 // mean test cross-entropy
	Accuracy float64 // test accuracy
	Version  uint64  // updates applied so far
	MinClock int
	MaxClock int
}

// WorkerStats is one worker's time budget and work. Busy + Blocked +
// Network equals the run's End.
type WorkerStats struct {
	Worker  int
	Busy    time.Duration // computing (own batch or transferred ranges)
	Blocked time.Duration // clocked and waiting for release, not computing
	Network time.Duration // waiting for a pull response or a push to land
	Clocks  int           // clocks completed
	Samples int           // samples computed (own and taken)
	Given   int           // samples handed to other workers
	Taken   int           // samples computed for other workers
	FinalP  int           // parallelism at the end
}

// ParallelismPoint records that worker Worker computes with P goroutines
// from Time on.
type ParallelismPoint struct {
	Time   time.Duration
	Worker int
	P      int
}

// TransferRecord follows one transfer order.
type TransferRecord struct {
	ID       uint64
	From, To int
	Clock    int
	Lo, Hi   int // ordered range; after the answer, the range handed over
	Ordered  time.Duration
	Answered time.Duration
	Accepted bool
	Done     time.Duration // when the taker's push landed (0 if never)
}

// Result is the outcome of a run.
type Result struct {
	Policy string
	Model  string
	// Target is the accuracy target; Reached tells whether the smoothed
	// accuracy (Config.TargetWindow) reached it, first at TimeToTarget.
	Target       float64
	Reached      bool
	TimeToTarget time.Duration
	// Crossed tells whether any single evaluation reached Target, first
	// at FirstCrossing (no smoothing).
	Crossed       bool
	FirstCrossing time.Duration
	End           time.Duration
	FinalLoss     float64
	FinalAccuracy float64
	Evals         []EvalPoint
	Workers       []WorkerStats
	Parallelism   []ParallelismPoint
	Transfers     []TransferRecord
	// Dropped counts gradients the policy dropped.
	Dropped int
	// Stats are the coordinator's counters, including the staleness
	// histogram (Stats.Staleness[d] = admitted pushes d updates stale).
	Stats epsp.Stats
	// ClockTime summarises, over every worker and clock, the time from a
	// worker's release into a clock to the moment its clock is complete
	// (pull, compute, transferred work and push).
	ClockTime Timing
}

// Timing accumulates durations and gives their count, mean and
// coefficient of variation (population standard deviation over mean),
// with Welford's update.
type Timing struct {
	N    int
	Mean time.Duration
	m2   float64 // sum of squared deviations, ns²
	mean float64 // running mean, ns
}

// Add records one duration.
func (t *Timing) Add(d time.Duration) {
	t.N++
	x := float64(d)
	delta := x - t.mean
	t.mean += delta / float64(t.N)
	t.m2 += delta * (x - t.mean)
	t.Mean = time.Duration(t.mean)
}

// CV is the standard deviation over the mean; 0 without samples.
func (t Timing) CV() float64 {
	if t.N == 0 || t.mean == 0 {
		return 0
	}
	return math.Sqrt(t.m2/float64(t.N)) / t.mean
}

// TimeToTargetSeconds is TimeToTarget in seconds, or +Inf if the target
// was not reached.
func (r *Result) TimeToTargetSeconds() float64 {
	if !r.Reached {
		return math.Inf(1)
	}
	return r.TimeToTarget.Seconds()
}

// BlockedFraction is Σ_w Blocked_w / Σ_w (Busy_w + Blocked_w + Network_w):
// the share of worker time spent waiting at synchronization.
func (r *Result) BlockedFraction() float64 {
	var b, tot time.Duration
	for _, w := range r.Workers {
		b += w.Blocked
		tot += w.Busy + w.Blocked + w.Network
	}
	if tot == 0 {
		return 0
	}
	return float64(b) / float64(tot)
}

// AcceptedTransfers counts transfers the giver accepted.
func (r *Result) AcceptedTransfers() int {
	n := 0
	for _, t := range r.Transfers {
		if t.Accepted {
			n++
		}
	}
	return n
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
func secs(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 6, 64)
}

// CSVTable is one kind of row of a Result (evaluations, per-worker
// statistics, parallelism changes, transfers, the staleness histogram,
// the summary), written as its own CSV file with named columns. Every
// table's first column is the policy, so the rows of several results
// share one file. Times are seconds with 6 decimals, other reals in the
// shortest form that reads back exactly, +Inf for a target never reached.
type CSVTable struct {
	// Name names the kind of row, in the plural ("evals", "workers",
	// "parallelism", "transfers", "staleness", "summary"); programs use it
	// as a file-name suffix.
	Name string
	// Header lists the column names, "policy" first.
	Header []string
	kind   string // row kind in the combined WriteCSV
	rows   func(r *Result, emit func(...string))
}

func itoa[T ~int | ~int64 | ~uint64](v T) string { return fmt.Sprint(v) }

// csvTables are the tables in the order CSVTables returns them.
var csvTables = []CSVTable{
	{Name: "evals", kind: "eval",
		Header: []string{"policy", "time_s", "loss", "accuracy", "version", "min_clock", "max_clock"},
		rows: func(r *Result, emit func(...string)) {
			for _, e := range r.Evals {
				emit(secs(e.Time), ftoa(e.Loss), ftoa(e.Accuracy), itoa(e.Version), itoa(e.MinClock), itoa(e.MaxClock))
			}
		}},
	{Name: "workers", kind: "worker",
		Header: []string{"policy", "worker", "busy_s", "blocked_s", "network_s", "clocks", "samples", "given", "taken", "final_p"},
		rows: func(r *Result, emit func(...string)) {
			for _, s := range r.Workers {
				emit(itoa(s.Worker), secs(s.Busy), secs(s.Blocked), secs(s.Network), itoa(s.Clocks), itoa(s.Samples), itoa(s.Given), itoa(s.Taken), itoa(s.FinalP))
			}
		}},
	{Name: "parallelism", kind: "parallelism",
		Header: []string{"policy", "time_s", "worker", "parallelism"},
		rows: func(r *Result, emit func(...string)) {
			for _, x := range r.Parallelism {
				emit(secs(x.Time), itoa(x.Worker), itoa(x.P))
			}
		}},
	{Name: "transfers", kind: "transfer",
		Header: []string{"policy", "id", "from", "to", "clock", "lo", "hi", "ordered_s", "answered_s", "accepted", "done_s"},
		rows: func(r *Result, emit func(...string)) {
			for _, t := range r.Transfers {
				emit(itoa(t.ID), itoa(t.From), itoa(t.To), itoa(t.Clock), itoa(t.Lo), itoa(t.Hi), secs(t.Ordered), secs(t.Answered), strconv.FormatBool(t.Accepted), secs(t.Done))
			}
		}},
	{Name: "staleness", kind: "staleness",
		Header: []string{"policy", "updates_behind", "pushes"},
		rows: func(r *Result, emit func(...string)) {
			for d, n := range r.Stats.Staleness {
				emit(itoa(d), itoa(n))
			}
		}},
	{Name: "summary", kind: "summary",
		Header: []string{"policy", "time_to_target_s", "first_crossing_s", "final_acc", "final_loss", "blocked_frac", "transfers", "dropped"},
		rows: func(r *Result, emit func(...string)) {
			fc := math.Inf(1)
			if r.Crossed {
				fc = r.FirstCrossing.Seconds()
			}
			emit(ftoa(r.TimeToTargetSeconds()), ftoa(fc), ftoa(r.FinalAccuracy), ftoa(r.FinalLoss), ftoa(r.BlockedFraction()), itoa(r.AcceptedTransfers()), itoa(r.Dropped))
		}},
}

// CSVTables returns the tables of a Result, each to be written to its own
// file (for example <base>_<Name>.csv): evals, workers, parallelism,
// transfers, staleness, summary.
func CSVTables() []CSVTable { return append([]CSVTable(nil), csvTables...) }

// Write writes the table's header and then its rows for each result in
// turn, quoted as RFC 4180 requires (a policy name with a comma stays one
// field). Equal results give equal bytes.
func (t CSVTable) Write(w io.Writer, results ...*Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(t.Header); err != nil {
		return err
	}
	var rec []string
	for _, r := range results {
		t.rows(r, func(f ...string) {
			rec = append(append(rec[:0], r.Policy), f...)
			cw.Write(rec) // errors are sticky: reported by Error below
		})
	}
	cw.Flush()
	return cw.Error()
}

// csvHeader documents the columns of each row kind of WriteCSV.
const csvHeader = `kind,policy,a,b,c,d,e,f,g,h
# eval: time_s,loss,accuracy,version,min_clock,max_clock
# worker: worker,busy_s,blocked_s,network_s,clocks,samples,given,taken,final_p
# parallelism: time_s,worker,p
# transfer: id,from,to,clock,lo,hi,ordered_s,answered_s,accepted,done_s
# staleness: updates_behind,pushes
# summary: time_to_target_s,first_crossing_s,final_acc,final_loss,blocked_frac,transfers,dropped
`

// WriteCSV writes the whole result as one CSV table with a "kind" column
// (eval, worker, parallelism, transfer, staleness and summary rows; the
// header's comment lines give each kind's columns). Equal results give
// equal bytes.
//
// Deprecated: the kinds of row share columns named a..h; write each of
// CSVTables to its own file instead. Kept for existing readers.
func (r *Result) WriteCSV(w io.Writer) error { return WriteCSV(w, r) }

// WriteCSV writes several results as one CSV table: one header, then the
// rows of each result in turn (see [Result.WriteCSV]).
//
// Deprecated: write each of CSVTables to its own file instead.
func WriteCSV(w io.Writer, results ...*Result) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(csvHeader)
	for _, r := range results {
		for _, t := range csvTables {
			t.rows(r, func(f ...string) {
				bw.WriteString(t.kind)
				bw.WriteByte(',')
				bw.WriteString(r.Policy)
				for _, v := range f {
					bw.WriteByte(',')
					bw.WriteString(v)
				}
				bw.WriteByte('\n')
			})
		}
	}
	return bw.Flush()
}

// WriteEvalCSV writes only the evaluation series with a header:
// policy,time_s,loss,accuracy,version.
func WriteEvalCSV(w io.Writer, results ...*Result) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "policy,time_s,loss,accuracy,version")
	for _, r := range results {
		for _, e := range r.Evals {
			fmt.Fprintf(bw, "%s,%s,%s,%s,%d\n", r.Policy, secs(e.Time), ftoa(e.Loss), ftoa(e.Accuracy), e.Version)
		}
	}
	return bw.Flush()
}

// TargetTime applies the time-to-target rule of [Config.TargetWindow] to
// an evaluation series: the time of the first evaluation at which the mean
// accuracy of the last window evaluations (that one included) reaches
// target. window <= 0 means 1. It reports false if the series never does.
// Live runs use it so that they are judged exactly like simulated ones.
func TargetTime(evals []EvalPoint, target float64, window int) (time.Duration, bool) {
	window = max(window, 1)
	var sum float64
	for i, e := range evals {
		sum += e.Accuracy
		if i >= window {
			sum -= evals[i-window].Accuracy
		}
		if i+1 >= window && sum/float64(window) >= target {
			return e.Time, true
		}
	}
	return 0, false
}
