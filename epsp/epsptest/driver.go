package epsptest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/falconml/falcon/epsp"
)

// ErrScript reports a malformed script line; the error names the line.
var ErrScript = errors.New("epsptest: bad script")

// Record is one step a [Driver] played: a push (Push set) or an event
// (Event set), with the decision or output the coordinator returned.
type Record struct {
	Now      time.Duration
	Push     *epsp.Push
	Decision epsp.PushDecision
	Event    *epsp.Event
	Out      epsp.Output
	Err      error
}

// String renders the record as one trace line.
func (r Record) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "@%v ", r.Now)
	switch {
	case r.Push != nil:
		p := r.Push
		fmt.Fprintf(&b, "push w=%d", p.Worker)
		if p.Owner != p.Worker {
			fmt.Fprintf(&b, " owner=%d", p.Owner)
		}
		fmt.Fprintf(&b, " clock=%d base=%d samples=%d/%d -> %v", p.Clock, p.BaseVersion, p.Samples, p.BatchSamples, r.Decision.Action)
		switch r.Decision.Action {
		case epsp.ApplyNow:
			fmt.Fprintf(&b, " scale=%.4g", r.Decision.EffectiveScale())
		case epsp.Accumulate:
			fmt.Fprintf(&b, " clock=%d", r.Decision.Clock)
		}
	case r.Event != nil:
		e := r.Event
		switch e.Kind {
		case epsp.EventClock:
			fmt.Fprintf(&b, "clock w=%d c=%d", e.Worker, e.Clock)
		case epsp.EventProgress:
			fmt.Fprintf(&b, "progress w=%d done=%d/%d", e.Progress.Worker, e.Progress.Done, e.Progress.Assigned)
		case epsp.EventTick:
			b.WriteString("tick")
		case epsp.EventTransferResult:
			fmt.Fprintf(&b, "result id=%d accepted=%v [%d,%d)", e.Transfer.ID, e.Transfer.Accepted, e.Transfer.Lo, e.Transfer.Hi)
		case epsp.EventTransferDone:
			fmt.Fprintf(&b, "done id=%d", e.Transfer.ID)
		case epsp.EventLeave:
			fmt.Fprintf(&b, "leave w=%d", e.Worker)
		}
		b.WriteString(" ->")
		b.WriteString(FormatOutput(r.Out))
	}
	if r.Err != nil {
		fmt.Fprintf(&b, " error: %v", r.Err)
	}
	return b.String()
}

// FormatOutput renders an Output compactly: " flush[0] release[0 1]
// par[2:3] batch[1:40] transfer[1:2->3 c4 [10,20)]", or " -" if empty.
func FormatOutput(o epsp.Output) string {
	if o.Empty() {
		return " -"
	}
	var b strings.Builder
	if len(o.Flush) > 0 {
		b.WriteString(" flush[")
		for i, f := range o.Flush {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprint(&b, f.Clock)
			if f.Scale != 0 && f.Scale != 1 {
				fmt.Fprintf(&b, "x%.4g", f.Scale)
			}
		}
		b.WriteString("]")
	}
	if len(o.Release) > 0 {
		fmt.Fprintf(&b, " release%v", o.Release)
	}
	if len(o.SetParallelism) > 0 {
		b.WriteString(" par[")
		for i, p := range o.SetParallelism {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%d:%d", p.Worker, p.P)
		}
		b.WriteString("]")
	}
	if len(o.SetBatch) > 0 {
		b.WriteString(" batch[")
		for i, p := range o.SetBatch {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%d:%d", p.Worker, p.Size)
		}
		b.WriteString("]")
	}
	if len(o.Transfers) > 0 {
		b.WriteString(" transfer[")
		for i, t := range o.Transfers {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%d:%d->%d c%d [%d,%d)", t.ID, t.From, t.To, t.Clock, t.Lo, t.Hi)
		}
		b.WriteString("]")
	}
	return b.String()
}

// Driver plays pushes and events against a policy through a real
// [epsp.Coordinator] and records every decision. It remembers the version
// each worker read when it was last released (its BaseVersion for the
// next push). Not safe for concurrent use.
type Driver struct {
	C       *epsp.Coordinator
	Now     time.Duration
	Records []Record
	pulled  []uint64
}

// NewDriver returns a driver for a new Coordinator with cfg and p.
func NewDriver(cfg epsp.Config, p epsp.Policy) (*Driver, error) {
	c, err := epsp.NewCoordinator(cfg, p)
	if err != nil {
		return nil, err
	}
	return &Driver{C: c, pulled: make([]uint64, c.Config().NumWorkers)}, nil
}

// View returns the coordinator's view.
func (d *Driver) View() epsp.View { return d.C.View() }

// Pulled returns the version worker w read at its last release.
func (d *Driver) Pulled(w epsp.WorkerID) uint64 { return d.pulled[w] }

// Push admits p at d.Now and records it.
func (d *Driver) Push(p epsp.Push) (epsp.PushDecision, error) {
	dec, err := d.C.Admit(d.Now, p)
	d.Records = append(d.Records, Record{Now: d.Now, Push: &p, Decision: dec, Err: err})
	return dec, err
}

// PushOwn pushes worker w's whole batch for its current clock, based on
// the version it read at its last release.
func (d *Driver) PushOwn(w epsp.WorkerID) (epsp.PushDecision, error) {
	v := d.C.View()
	b := v.Batch(w)
	return d.Push(epsp.Push{Worker: w, Owner: w, Clock: v.Clock(w), BaseVersion: d.pulled[w], Samples: b, BatchSamples: b})
}

// Step feeds e at d.Now, records it, and notes the version released
// workers read.
func (d *Driver) Step(e epsp.Event) (epsp.Output, error) {
	out, err := d.C.Step(d.Now, e)
	d.Records = append(d.Records, Record{Now: d.Now, Event: &e, Out: out, Err: err})
	for _, w := range out.Release {
		d.pulled[w] = d.C.View().Version()
	}
	return out, err
}

// Clock sends EventClock for w's current clock.
func (d *Driver) Clock(w epsp.WorkerID) (epsp.Output, error) {
	return d.Step(epsp.Event{Kind: epsp.EventClock, Worker: w, Clock: d.C.View().Clock(w)})
}

// Trace returns one line per record.
func (d *Driver) Trace() string {
	var b strings.Builder
	for _, r := range d.Records {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Run plays a script, one command per line; blank lines and text after
// '#' are ignored. A line may start with "@<duration>" to set the time
// (e.g. "@1.5s"). Commands, with key=value arguments:
//
//	push w=W [owner=O] [clock=C] [base=V] [samples=N] [batch=B]
//	    (defaults: owner W, the owner's clock, the version W read, the owner's batch)
//	clock w=W
//	progress w=W done=D [assigned=A] [elapsed=DUR] [p=P]
//	tick
//	result id=I accept|refuse [lo=L] [hi=H]   (defaults: the ordered range)
//	done id=I
//	leave w=W
//
// Run stops at the first error: a malformed line (ErrScript, with its line
// number) or an error of the coordinator.
func (d *Driver) Run(script string) error {
	orders := map[uint64]epsp.TransferOrder{}
	for _, r := range d.Records {
		for _, t := range r.Out.Transfers {
			orders[t.ID] = t
		}
	}
	for i, line := range strings.Split(script, "\n") {
		ln := i + 1
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if strings.HasPrefix(f[0], "@") {
			t, err := time.ParseDuration(f[0][1:])
			if err != nil {
				return fmt.Errorf("%w: line %d: time %q: %v", ErrScript, ln, f[0], err)
			}
			d.Now = t
			f = f[1:]
			if len(f) == 0 {
				continue
			}
		}
		args, flags, err := parseArgs(f[1:])
		if err != nil {
			return fmt.Errorf("%w: line %d: %v", ErrScript, ln, err)
		}
		n := d.C.Config().NumWorkers
		worker := func() (epsp.WorkerID, error) {
			w, ok := args["w"]
			if !ok || w < 0 || w >= n {
				return 0, fmt.Errorf("%w: line %d: need w=0..%d", ErrScript, ln, n-1)
			}
			return epsp.WorkerID(w), nil
		}
		v := d.C.View()
		switch f[0] {
		case "push":
			w, err := worker()
			if err != nil {
				return err
			}
			o := epsp.WorkerID(get(args, "owner", int(w)))
			if o < 0 || int(o) >= n {
				return fmt.Errorf("%w: line %d: owner %d", ErrScript, ln, o)
			}
			b := get(args, "batch", v.Batch(o))
			p := epsp.Push{Worker: w, Owner: o, Clock: get(args, "clock", v.Clock(o)),
				BaseVersion: uint64(get(args, "base", int(d.pulled[w]))), Samples: get(args, "samples", b), BatchSamples: b}
			if _, err := d.Push(p); err != nil {
				return fmt.Errorf("line %d: %w", ln, err)
			}
			continue
		case "clock":
			w, err := worker()
			if err != nil {
				return err
			}
			out, err := d.Clock(w)
			if err != nil {
				return fmt.Errorf("line %d: %w", ln, err)
			}
			for _, t := range out.Transfers {
				orders[t.ID] = t
			}
			continue
		}
		var e epsp.Event
		switch f[0] {
		case "progress":
			w, err := worker()
			if err != nil {
				return err
			}
			e = epsp.Event{Kind: epsp.EventProgress, Worker: w, Progress: epsp.ProgressReport{
				Worker: w, Clock: v.Clock(w), Done: get(args, "done", 0), Assigned: get(args, "assigned", v.Progress(w).Assigned),
				Parallelism: get(args, "p", v.Parallelism(w)), Elapsed: time.Duration(get(args, "elapsed", 0)),
			}}
		case "tick":
			e = epsp.Event{Kind: epsp.EventTick}
		case "leave":
			w, err := worker()
			if err != nil {
				return err
			}
			e = epsp.Event{Kind: epsp.EventLeave, Worker: w}
		case "result", "done":
			id, ok := args["id"]
			o, known := orders[uint64(id)]
			if !ok || !known {
				return fmt.Errorf("%w: line %d: need id= of an ordered transfer", ErrScript, ln)
			}
			if f[0] == "done" {
				e = epsp.Event{Kind: epsp.EventTransferDone, Transfer: epsp.TransferResult{ID: o.ID}}
				break
			}
			acc := flags["accept"]
			if acc == flags["refuse"] {
				return fmt.Errorf("%w: line %d: result needs accept or refuse", ErrScript, ln)
			}
			e = epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: o.ID, Accepted: acc}}
			if acc {
				e.Transfer.Lo, e.Transfer.Hi = get(args, "lo", o.Lo), get(args, "hi", o.Hi)
			}
		default:
			return fmt.Errorf("%w: line %d: unknown command %q", ErrScript, ln, f[0])
		}
		out, err := d.Step(e)
		if err != nil {
			return fmt.Errorf("line %d: %w", ln, err)
		}
		for _, t := range out.Transfers {
			orders[t.ID] = t
		}
	}
	return nil
}

func get(args map[string]int, k string, def int) int {
	if v, ok := args[k]; ok {
		return v
	}
	return def
}

// parseArgs reads key=value (integers, or durations for "elapsed") and
// bare flags.
func parseArgs(f []string) (map[string]int, map[string]bool, error) {
	args, flags := map[string]int{}, map[string]bool{}
	for _, a := range f {
		k, val, ok := strings.Cut(a, "=")
		if !ok {
			flags[a] = true
			continue
		}
		if k == "elapsed" {
			t, err := time.ParseDuration(val)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %v", a, err)
			}
			args[k] = int(t)
			continue
		}
		n, err := strconv.Atoi(val)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: not an integer", a)
		}
		args[k] = n
	}
	return args, flags, nil
}
