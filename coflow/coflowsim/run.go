package coflowsim

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/falconml/falcon/coflow"
)

// Config holds coflowsim's constants. DefaultConfig returns the values the
// reference simulator hard-codes; other values are for exploration only (the
// fixtures are reproduced with the defaults).
type Config struct {
	// EpochMs is the admission epoch in simulator ms (10240): at the start of
	// each epoch every coflow arriving before the next one is admitted and
	// timed from the epoch start. Must be a positive multiple of QuantumMs.
	EpochMs int64
	// QuantumMs is the time step in simulator ms (8).
	QuantumMs int64
	// SecondMs is the number of simulator ms in one simulated second (1024).
	SecondMs int64
	// PortBps is the up and the down capacity of every port in bit per
	// simulated second (1024·1048576, i.e. 128 MiB/s).
	PortBps float64
	// Seed seeds the java.util.Random that draws the deadline factors (17).
	Seed int64
}

// DefaultConfig returns coflowsim's defaults.
func DefaultConfig() Config {
	return Config{EpochMs: 10240, QuantumMs: 8, SecondMs: 1024, PortBps: 1024 * 1048576, Seed: 17}
}

// Validate checks that every field is usable.
func (c *Config) Validate() error {
	switch {
	case c.QuantumMs <= 0:
		return fmt.Errorf("%w: QuantumMs %d must be positive", ErrConfig, c.QuantumMs)
	case c.EpochMs <= 0 || c.EpochMs%c.QuantumMs != 0:
		return fmt.Errorf("%w: EpochMs %d must be a positive multiple of QuantumMs %d", ErrConfig, c.EpochMs, c.QuantumMs)
	case c.SecondMs <= 0:
		return fmt.Errorf("%w: SecondMs %d must be positive", ErrConfig, c.SecondMs)
	case !(c.PortBps > 0) || c.PortBps > 1e300:
		return fmt.Errorf("%w: PortBps %v must be positive and finite", ErrConfig, c.PortBps)
	}
	return nil
}

// Record is one coflow's line of the reference output. Times are simulator
// milliseconds (SecondMs of them per simulated second).
type Record struct {
	ID          int
	ArrivalMs   int64 // from the trace
	StartMs     int64 // the epoch start that admitted it (can precede ArrivalMs)
	FinishMs    int64 // end of the quantum in which its last flow finished
	NumMappers  int
	NumReducers int
	// TotalBytes and MaxBytes are the shuffle bytes after coflowsim's
	// rounding, in total and for the largest reducer.
	TotalBytes float64
	MaxBytes   float64
	// DeadlineMs is coflowsim's internal deadline field, see doc.go.
	DeadlineMs int64
	// IndividualSumsMs is the sum over reducers of (reducer finish − start).
	IndividualSumsMs int64
}

// DurationMs is FinishMs − StartMs, coflowsim's CCT.
func (r Record) DurationMs() int64 { return r.FinishMs - r.StartMs }

// Result is the outcome of a replay: one record per coflow, in trace order.
type Result struct {
	Scheduler string
	Records   []Record
}

// SumDurationsMs is the reference output's last line: the sum of all
// durations (divide by len(Records) for coflowsim's average CCT).
func (r *Result) SumDurationsMs() float64 {
	s := 0.0
	for _, rec := range r.Records {
		s += float64(rec.DurationMs())
	}
	return s
}

var schedulers = []string{"FIFO", "SCF", "NCF", "LCF", "SEBF", "DARK", "FAIR", "PFP"}

// Schedulers lists the scheduler names Run accepts (coflowsim's names).
func Schedulers() []string { return slices.Clone(schedulers) }

func newPolicy(name string) (policy, bool) {
	switch name {
	case "FIFO":
		return &ordered{}, true
	case "SCF": // shortest: largest reducer bytes per mapper
		return &ordered{key: func(j *job) float64 { return j.maxBytes / float64(j.numMappers) }}, true
	case "NCF": // narrowest
		return &ordered{key: func(j *job) float64 { return float64(min(j.numMappers, j.numReducers)) }}, true
	case "LCF": // lightest: bytes left at insertion time (lightKey)
		return &ordered{key: lightKey}, true
	case "SEBF": // static bottleneck bytes
		return &ordered{key: func(j *job) float64 { return j.alpha }}, true
	case "DARK":
		return dark{}, true
	case "FAIR":
		return fair{}, true
	case "PFP":
		return &pfp{}, true
	}
	return nil, false
}

// Run replays tr under the named coflowsim scheduler (case-insensitive, see
// Schedulers) and returns one record per coflow, in order of arrival (ties
// in trace order): coflowsim sorts the trace that way before it draws the
// deadlines, admits and prints. It is deterministic. The trace is validated
// first.
func Run(tr *coflow.Trace, sched string, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if tr == nil {
		return nil, fmt.Errorf("%w: nil trace", ErrTrace)
	}
	if err := tr.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTrace, err)
	}
	name := strings.ToUpper(sched)
	pol, ok := newPolicy(name)
	if !ok {
		return nil, fmt.Errorf("%w: %q (have %s)", ErrUnknownScheduler, sched, strings.Join(schedulers, ", "))
	}
	s := newSim(tr, cfg, name, pol)
	if pf, ok := pol.(perFlowPolicy); ok {
		s.runPerFlow(pf)
	} else {
		s.run()
	}
	if s.stalled {
		return nil, fmt.Errorf("%w: %d coflows can never finish under %s", ErrStalled, len(s.active), name)
	}
	res := &Result{Scheduler: name, Records: make([]Record, len(s.jobs))}
	for i, j := range s.jobs {
		var sum int64
		for _, f := range j.redFinish {
			sum += f - j.start
		}
		res.Records[i] = Record{ID: j.id, ArrivalMs: j.arrival, StartMs: j.start, FinishMs: j.finish,
			NumMappers: j.numMappers, NumReducers: j.numReducers, TotalBytes: j.totalBytes,
			MaxBytes: j.maxBytes, DeadlineMs: j.deadline, IndividualSumsMs: sum}
	}
	return res, nil
}

// newSim prepares a replay of tr under pol, coflowsim's scheduler name.
func newSim(tr *coflow.Trace, cfg Config, name string, pol policy) *sim {
	s := &sim{cfg: cfg, ports: tr.Ports, policy: pol,
		sendFree: make([]float64, tr.Ports), recvFree: make([]float64, tr.Ports)}
	s.jobs = buildJobs(tr, cfg, name != "DARK")
	s.moved = name == "DARK"
	_, s.redLeft = pol.(*ordered)
	return s
}

// WriteReference writes res in coflowsim's stdout format, one line per
// coflow and then the sum of durations:
//
//	JOB-<id> <start> <finish> <mappers> <reducers> <totalBytes> <maxBytes> <duration> <deadline> <individualSums>
//
// Doubles are formatted like Java's Double.toString ("16.0", "2.62144E7").
func WriteReference(w io.Writer, res *Result) error {
	var b []byte
	for _, r := range res.Records {
		b = append(b, "JOB-"...)
		b = strconv.AppendInt(b, int64(r.ID), 10)
		for _, v := range []float64{float64(r.StartMs), float64(r.FinishMs)} {
			b = append(b, ' ')
			b = append(b, javaDouble(v)...)
		}
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(r.NumMappers), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(r.NumReducers), 10)
		for _, v := range []float64{r.TotalBytes, r.MaxBytes, float64(r.DurationMs())} {
			b = append(b, ' ')
			b = append(b, javaDouble(v)...)
		}
		b = append(b, ' ')
		b = strconv.AppendInt(b, r.DeadlineMs, 10)
		b = append(b, ' ')
		b = append(b, javaDouble(float64(r.IndividualSumsMs))...)
		b = append(b, '\n')
	}
	b = append(b, javaDouble(res.SumDurationsMs())...)
	b = append(b, '\n')
	_, err := w.Write(b)
	return err
}
