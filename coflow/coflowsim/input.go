package coflowsim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Errors returned by this package.
var (
	// ErrMalformed reports a trace that is not in the coflow-benchmark format.
	ErrMalformed = errors.New("coflowsim: malformed trace")
	// ErrUnknownScheduler reports a scheduler name coflowsim does not have.
	ErrUnknownScheduler = errors.New("coflowsim: unknown scheduler")
	// ErrConfig reports an invalid Config.
	ErrConfig = errors.New("coflowsim: invalid config")
)

// Trace is the input of a replay: the fabric size and the coflows in trace
// order, exactly as the coflow-benchmark format states them (before any
// coflowsim rounding, which Run applies).
type Trace struct {
	// NumPorts is the number of ports (racks) of the big switch.
	NumPorts int
	// Coflows in trace order; coflowsim expects non-decreasing arrivals.
	Coflows []TraceCoflow
}

// TraceCoflow is one line of a coflow-benchmark trace.
type TraceCoflow struct {
	ID        int
	ArrivalMs int64
	// Mappers are the 0-indexed ports of the map tasks.
	Mappers []int
	// Reducers are the reduce tasks with their shuffle megabytes (MiB).
	Reducers []TraceReducer
}

// TraceReducer is one reduce task: its port and the megabytes it receives.
type TraceReducer struct {
	Port int
	MB   float64
}

// ReadTrace parses the public coflow-benchmark format:
//
//	line 1: <ports> <coflows>
//	line i: <id> <arrival ms> <#mappers> <mapper ports...> <#reducers> <port:MB ...>
//
// Ports are 0-indexed and must be below <ports>; the number of coflow lines
// must equal the header's count. Errors wrap ErrMalformed and name the line.
func ReadTrace(r io.Reader) (*Trace, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<26)
	lineNo := 0
	var tr *Trace
	want := 0
	for sc.Scan() {
		lineNo++
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if tr == nil {
			if len(fields) != 2 {
				return nil, fmt.Errorf("%w: line %d: header wants <ports> <coflows>, got %d fields", ErrMalformed, lineNo, len(fields))
			}
			ports, err1 := strconv.Atoi(fields[0])
			n, err2 := strconv.Atoi(fields[1])
			if err1 != nil || err2 != nil || ports <= 0 || n < 0 {
				return nil, fmt.Errorf("%w: line %d: bad header %q", ErrMalformed, lineNo, sc.Text())
			}
			tr = &Trace{NumPorts: ports, Coflows: make([]TraceCoflow, 0, n)}
			want = n
			continue
		}
		c, err := parseCoflowLine(fields, tr.NumPorts)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrMalformed, lineNo, err)
		}
		tr.Coflows = append(tr.Coflows, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d: %v", ErrMalformed, lineNo+1, err)
	}
	if tr == nil {
		return nil, fmt.Errorf("%w: empty input", ErrMalformed)
	}
	if len(tr.Coflows) != want {
		return nil, fmt.Errorf("%w: header announces %d coflows, found %d", ErrMalformed, want, len(tr.Coflows))
	}
	return tr, nil
}

func parseCoflowLine(f []string, ports int) (TraceCoflow, error) {
	var c TraceCoflow
	if len(f) < 4 {
		return c, fmt.Errorf("too few fields (%d)", len(f))
	}
	var err error
	if c.ID, err = strconv.Atoi(f[0]); err != nil {
		return c, fmt.Errorf("bad coflow id %q", f[0])
	}
	if c.ArrivalMs, err = strconv.ParseInt(f[1], 10, 64); err != nil || c.ArrivalMs < 0 {
		return c, fmt.Errorf("bad arrival %q", f[1])
	}
	port := func(s string) (int, error) {
		p, err := strconv.Atoi(s)
		if err != nil || p < 0 || p >= ports {
			return 0, fmt.Errorf("bad port %q (fabric has %d)", s, ports)
		}
		return p, nil
	}
	nm, err := strconv.Atoi(f[2])
	if err != nil || nm <= 0 || 3+nm >= len(f) {
		return c, fmt.Errorf("bad mapper count %q", f[2])
	}
	c.Mappers = make([]int, nm)
	for i := range nm {
		if c.Mappers[i], err = port(f[3+i]); err != nil {
			return c, fmt.Errorf("mapper %d: %v", i, err)
		}
	}
	k := 3 + nm
	nr, err := strconv.Atoi(f[k])
	if err != nil || nr <= 0 || k+1+nr != len(f) {
		return c, fmt.Errorf("bad reducer count %q (or wrong number of reducer fields)", f[k])
	}
	c.Reducers = make([]TraceReducer, nr)
	for i := range nr {
		ps, ms, ok := strings.Cut(f[k+1+i], ":")
		if !ok {
			return c, fmt.Errorf("reducer %d: want <port>:<MB>, got %q", i, f[k+1+i])
		}
		p, err := port(ps)
		if err != nil {
			return c, fmt.Errorf("reducer %d: %v", i, err)
		}
		mb, err := strconv.ParseFloat(ms, 64)
		if err != nil || mb < 0 || mb != mb || mb > 1e15 {
			return c, fmt.Errorf("reducer %d: bad megabytes %q", i, ms)
		}
		c.Reducers[i] = TraceReducer{Port: p, MB: mb}
	}
	return c, nil
}
