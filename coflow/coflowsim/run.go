package coflowsim

import (
	"fmt"
	"github.com/falconml/falcon/coflow"
	"io"
	"strconv"
	"strings"
)

// Config holds coflowsim's constants. DefaultConfig returns the values the
// reference simulator hard-codes; change them only to explore.
type Config struct {
	// EpochMs is the admission epoch in simulator ms (10240).
	EpochMs int64
	// QuantumMs is the time step in simulator ms (8).
	QuantumMs int64
	// SecondMs is the number of simulator ms in one simulated second (1024).
	SecondMs int64
	// PortBps is the up and down capacity of each port in bit/s (1024·1048576).
	PortBps float64
	// Seed seeds the java.util.Random that draws deadlines (17).
	Seed int64

	zero float64
}

// DefaultConfig returns coflowsim's defaults.
func DefaultConfig() Config {
	return Config{EpochMs: 10240, QuantumMs: 8, SecondMs: 1024, PortBps: 1024 * 1048576, Seed: 17}
}

// Validate checks that every field is usable.
func (c *Config) Validate() error {
	switch {
	case c.QuantumMs <= 0:
		return fmt.Errorf("%w: QuantumMs %d <= 0", ErrConfig, c.QuantumMs)
	case c.EpochMs <= 0 || c.EpochMs%c.QuantumMs != 0:
		return fmt.Errorf("%w: EpochMs %d must be a positive multiple of QuantumMs %d", ErrConfig, c.EpochMs, c.QuantumMs)
	case c.SecondMs <= 0:
		return fmt.Errorf("%w: SecondMs %d <= 0", ErrConfig, c.SecondMs)
	case !(c.PortBps > 0):
		return fmt.Errorf("%w: PortBps %v <= 0", ErrConfig, c.PortBps)
	}
	return nil
}

var useBrute = false

// Record is one coflow's line of the reference output.
type Record struct {
	ID             int
	ArrivalMs      int64
	StartMs        int64
	FinishMs       int64
	NumMappers     int
	NumReducers    int
	TotalBytes     float64
	MaxBytes       float64
	DeadlineMs     int64
	IndividualSums float64
}

// DurationMs is FinishMs - StartMs.
func (r Record) DurationMs() int64 { return r.FinishMs - r.StartMs }

// Result is the outcome of a replay: one record per coflow in trace order.
type Result struct {
	Scheduler string
	Records   []Record
}

// SumDurationsMs is the reference output's last line.
func (r *Result) SumDurationsMs() float64 {
	s := 0.0
	for _, rec := range r.Records {
		s += float64(rec.DurationMs())
	}
	return s
}

// Run replays tr under the named coflowsim scheduler.
func Run(tr *coflow.Trace, sched string, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.zero = 1e-3
	s := &sim{cfg: cfg, ports: tr.Ports, sendFree: make([]float64, tr.Ports), recvFree: make([]float64, tr.Ports)}
	s.jobs = buildJobs(tr, cfg)
	switch strings.ToUpper(sched) {
	case "FIFO":
		s.sched = &ordered{}
	case "SEBF":
		s.sched = &ordered{key: func(j *job) float64 { return j.alpha }}
	case "SCF":
		s.sched = &ordered{key: func(j *job) float64 { return j.maxBytes / float64(j.numMappers) }}
	case "NCF":
		s.sched = &ordered{key: func(j *job) float64 { return float64(min(j.numMappers, j.numReducers)) }}
	case "LCF":
		s.sched = &ordered{key: func(j *job) float64 { return j.totalBytes - j.sent }}
	case "FAIR":
		s.sched = fair{}
	case "PFP":
		s.sched = pfp{}
	case "DARK":
		s.sched = dark{}
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnknownScheduler, sched)
	}
	if useBrute {
		s.run()
	} else {
		s.runEvents()
	}
	if s.stalled {
		return nil, fmt.Errorf("%w: %d coflows can never finish", ErrStalled, len(s.active))
	}
	res := &Result{Scheduler: strings.ToUpper(sched), Records: make([]Record, len(s.jobs))}
	for i, j := range s.jobs {
		sum := 0.0
		for _, f := range j.redFinish {
			sum += float64(f - j.start)
		}
		res.Records[i] = Record{ID: j.id, ArrivalMs: j.arrival, StartMs: j.start, FinishMs: j.finish,
			NumMappers: j.numMappers, NumReducers: j.numReducers, TotalBytes: j.totalBytes, MaxBytes: j.maxBytes,
			DeadlineMs: j.deadline, IndividualSums: sum}
	}
	return res, nil
}

// WriteReference writes res in coflowsim's stdout format.
func WriteReference(w io.Writer, res *Result) error {
	var b strings.Builder
	for _, r := range res.Records {
		b.WriteString("JOB-")
		b.WriteString(strconv.Itoa(r.ID))
		for _, v := range []float64{float64(r.StartMs), float64(r.FinishMs)} {
			b.WriteByte(' ')
			b.WriteString(javaDouble(v))
		}
		fmt.Fprintf(&b, " %d %d %s %s %s %d %s\n", r.NumMappers, r.NumReducers, javaDouble(r.TotalBytes),
			javaDouble(r.MaxBytes), javaDouble(float64(r.DurationMs())), r.DeadlineMs, javaDouble(r.IndividualSums))
	}
	b.WriteString(javaDouble(res.SumDurationsMs()))
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}
