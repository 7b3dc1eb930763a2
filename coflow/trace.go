package coflow

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Trace is a coflow-benchmark trace as written in the file: the fabric size
// and, per coflow, the mapper ports and each reducer's port and shuffle size
// in the file's "MB" (which are MiB, 1048576 bytes). Keeping the raw reducer
// sizes lets a compatibility mode apply its own rounding (coflowsim rounds
// each reducer's total up to a multiple of the number of mappers MiB).
//
// Format (coflow-benchmark README):
//
//	Line 1: <ports> <coflows>
//	Line i: <id> <arrival ms> <#mappers> <mapper port>... <#reducers> <port:MB>...
//
// Coflow weights, which the format has no room for, live in an optional
// side file next to the trace (read by ReadWeights, written by
// WriteWeights), so the trace itself stays readable by coflowsim and the
// other tools of the benchmark:
//
//	# comment lines and blank lines are ignored
//	<coflow id> <weight>
//
// one coflow per line, each at most once, weights positive and finite.
// Coflows the side file does not list have weight 1.
type Trace struct {
	Ports   int
	Coflows []TraceCoflow
}

// TraceCoflow is one line of a trace.
type TraceCoflow struct {
	ID int
	// ArrivalMS is the arrival time in milliseconds.
	ArrivalMS int64
	// Mappers lists the mapper ports (repeats allowed).
	Mappers []int
	// Reducers lists the reducers with their total shuffle MiB.
	Reducers []TraceReducer
	// Weight is the coflow's weight from the weights side file
	// (ReadWeights); zero means none given, weight 1.
	Weight float64
}

// TraceReducer is a reducer's port and the MiB it receives in total.
type TraceReducer struct {
	Port int
	MB   float64
}

// Arrival returns ArrivalMS as a duration.
func (c *TraceCoflow) Arrival() time.Duration { return time.Duration(c.ArrivalMS) * time.Millisecond }

// maxLineBytes bounds one trace line; the FB2010 trace's longest is ~2 KB.
const maxLineBytes = 16 << 20

// ReadTrace parses a trace in the coflow-benchmark format. Blank lines are
// skipped. It checks that the header's coflow count matches the lines, that
// every count matches its list, that ports are in [0, ports), arrivals are
// non-negative integers, sizes are finite and non-negative and coflow ids
// are unique (results are keyed by id). Errors wrap ErrSyntax and name the
// line. It never panics on bad input. The format carries no weights: they
// come from an optional side file, read by Trace.ReadWeights (see Trace).
func ReadTrace(r io.Reader) (*Trace, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	lineNo := 0
	next := func() (string, bool) {
		for sc.Scan() {
			lineNo++
			if s := strings.TrimSpace(sc.Text()); s != "" {
				return s, true
			}
		}
		return "", false
	}
	head, ok := next()
	if !ok {
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrSyntax, lineNo+1, err)
		}
		return nil, fmt.Errorf("%w: empty input, want header \"<ports> <coflows>\"", ErrSyntax)
	}
	hf := strings.Fields(head)
	if len(hf) != 2 {
		return nil, fmt.Errorf("%w: line %d: header has %d fields, want \"<ports> <coflows>\"", ErrSyntax, lineNo, len(hf))
	}
	ports, err := atoiPos(hf[0], 1)
	if err != nil {
		return nil, fmt.Errorf("%w: line %d: ports: %v", ErrSyntax, lineNo, err)
	}
	n, err := atoiPos(hf[1], 0)
	if err != nil {
		return nil, fmt.Errorf("%w: line %d: coflow count: %v", ErrSyntax, lineNo, err)
	}
	t := &Trace{Ports: ports, Coflows: make([]TraceCoflow, 0, min(n, 1<<16))}
	idLine := make(map[int]int, min(n, 1<<16)) // coflow id → its line
	for {
		s, ok := next()
		if !ok {
			break
		}
		if len(t.Coflows) == n {
			return nil, fmt.Errorf("%w: line %d: more coflow lines than the %d in the header", ErrSyntax, lineNo, n)
		}
		c, err := parseCoflowLine(s, ports)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrSyntax, lineNo, err)
		}
		if prev, dup := idLine[c.ID]; dup {
			return nil, fmt.Errorf("%w: line %d: duplicate coflow id %d (first on line %d)", ErrSyntax, lineNo, c.ID, prev)
		}
		idLine[c.ID] = lineNo
		t.Coflows = append(t.Coflows, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d: %v", ErrSyntax, lineNo+1, err)
	}
	if len(t.Coflows) != n {
		return nil, fmt.Errorf("%w: header announces %d coflows, found %d", ErrSyntax, n, len(t.Coflows))
	}
	return t, nil
}

func atoiPos(s string, lo int) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	if v < lo {
		return 0, fmt.Errorf("%d is below %d", v, lo)
	}
	return v, nil
}

func parseCoflowLine(s string, ports int) (TraceCoflow, error) {
	var c TraceCoflow
	f := strings.Fields(s)
	if len(f) < 5 {
		return c, fmt.Errorf("%d fields, want at least 5 (<id> <arrival> <#mappers> <mapper>... <#reducers> <port:MB>...)", len(f))
	}
	id, err := strconv.Atoi(f[0])
	if err != nil {
		return c, fmt.Errorf("coflow id %q is not an integer", f[0])
	}
	c.ID = id
	arr, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || arr < 0 || arr > math.MaxInt64/int64(time.Millisecond) {
		return c, fmt.Errorf("arrival %q is not a non-negative integer of milliseconds", f[1])
	}
	c.ArrivalMS = arr
	nm, err := atoiPos(f[2], 1)
	if err != nil {
		return c, fmt.Errorf("mapper count: %v", err)
	}
	if 3+nm >= len(f) {
		return c, fmt.Errorf("mapper count %d but only %d fields follow", nm, len(f)-3)
	}
	c.Mappers = make([]int, nm)
	for i := range nm {
		p, err := strconv.Atoi(f[3+i])
		if err != nil || p < 0 || p >= ports {
			return c, fmt.Errorf("mapper %d: port %q not in [0,%d)", i, f[3+i], ports)
		}
		c.Mappers[i] = p
	}
	k := 3 + nm
	nr, err := atoiPos(f[k], 1)
	if err != nil {
		return c, fmt.Errorf("reducer count: %v", err)
	}
	if got := len(f) - k - 1; got != nr {
		return c, fmt.Errorf("reducer count %d but %d reducer fields follow", nr, got)
	}
	c.Reducers = make([]TraceReducer, nr)
	for i := range nr {
		tok := f[k+1+i]
		ps, ms, ok := strings.Cut(tok, ":")
		if !ok {
			return c, fmt.Errorf("reducer %d: %q is not <port>:<MB>", i, tok)
		}
		p, err := strconv.Atoi(ps)
		if err != nil || p < 0 || p >= ports {
			return c, fmt.Errorf("reducer %d: port %q not in [0,%d)", i, ps, ports)
		}
		mb, err := strconv.ParseFloat(ms, 64)
		if err != nil || !(mb >= 0) || math.IsInf(mb, 0) {
			return c, fmt.Errorf("reducer %d: size %q is not a finite non-negative number", i, ms)
		}
		c.Reducers[i] = TraceReducer{Port: p, MB: mb}
	}
	return c, nil
}

// WriteTrace writes t in the coflow-benchmark format. Sizes are printed in
// the shortest form that reads back exactly, with ".0" for whole numbers as
// in the published trace, so a trace read with ReadTrace is written back byte
// for byte.
func WriteTrace(w io.Writer, t *Trace) error {
	if err := t.Validate(); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	var buf []byte
	buf = strconv.AppendInt(buf, int64(t.Ports), 10)
	buf = append(buf, ' ')
	buf = strconv.AppendInt(buf, int64(len(t.Coflows)), 10)
	buf = append(buf, '\n')
	for i := range t.Coflows {
		c := &t.Coflows[i]
		buf = strconv.AppendInt(buf, int64(c.ID), 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, c.ArrivalMS, 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, int64(len(c.Mappers)), 10)
		for _, m := range c.Mappers {
			buf = append(buf, ' ')
			buf = strconv.AppendInt(buf, int64(m), 10)
		}
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, int64(len(c.Reducers)), 10)
		for _, r := range c.Reducers {
			buf = append(buf, ' ')
			buf = strconv.AppendInt(buf, int64(r.Port), 10)
			buf = append(buf, ':')
			buf = appendMB(buf, r.MB)
		}
		buf = append(buf, '\n')
		if _, err := bw.Write(buf); err != nil {
			return err
		}
		buf = buf[:0]
	}
	if _, err := bw.Write(buf); err != nil {
		return err
	}
	return bw.Flush()
}

func appendMB(buf []byte, mb float64) []byte {
	start := len(buf)
	buf = strconv.AppendFloat(buf, mb, 'f', -1, 64)
	for _, b := range buf[start:] {
		if b == '.' {
			return buf
		}
	}
	return append(buf, '.', '0')
}

// Validate checks what ReadTrace checks, for traces built in code.
func (t *Trace) Validate() error {
	if t == nil || t.Ports < 1 {
		return fmt.Errorf("%w: trace needs at least one port", ErrSyntax)
	}
	ids := make(map[int]int, len(t.Coflows))
	for i := range t.Coflows {
		c := &t.Coflows[i]
		if j, dup := ids[c.ID]; dup {
			return fmt.Errorf("%w: coflow index %d: duplicate coflow id %d (first at index %d)", ErrSyntax, i, c.ID, j)
		}
		ids[c.ID] = i
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%w: coflow %d (index %d): %s", ErrSyntax, c.ID, i, fmt.Sprintf(format, a...))
		}
		if c.Weight != 0 && !validWeight(c.Weight) {
			return bad("weight %v is not positive and finite", c.Weight)
		}
		if c.ArrivalMS < 0 {
			return bad("negative arrival %d", c.ArrivalMS)
		}
		if len(c.Mappers) == 0 || len(c.Reducers) == 0 {
			return bad("needs at least one mapper and one reducer")
		}
		for _, m := range c.Mappers {
			if m < 0 || m >= t.Ports {
				return bad("mapper port %d not in [0,%d)", m, t.Ports)
			}
		}
		for _, r := range c.Reducers {
			if r.Port < 0 || r.Port >= t.Ports {
				return bad("reducer port %d not in [0,%d)", r.Port, t.Ports)
			}
			if !(r.MB >= 0) || math.IsInf(r.MB, 0) {
				return bad("reducer size %v not finite and non-negative", r.MB)
			}
		}
	}
	return nil
}

// Fabric returns a fabric with t.Ports ports of bytesPerSec each way (no
// cores, no codecs).
func (t *Trace) Fabric(bytesPerSec float64) *Fabric { return NewFabric(t.Ports, bytesPerSec) }

// ErrEmptyCoflow is returned by Trace.ToCoflows for a coflow whose reducers
// all have zero bytes.
var ErrEmptyCoflow = errors.New("coflow: coflow has no bytes")

// ToCoflows converts the trace to coflows the exact way: reducer r's
// MB·1048576 bytes are split equally over the mappers, one flow per
// (mapper, reducer) pair, numbered reducer-major (flow ID = r·#mappers + m).
// Reducers with zero bytes get no flows; a coflow left without flows is an
// error wrapping ErrEmptyCoflow. Weight is the TraceCoflow's Weight (from
// the weights side file, see ReadWeights), 1 when none was given. No
// rounding is applied (see package coflowsim for coflowsim's).
func (t *Trace) ToCoflows() ([]Coflow, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	out := make([]Coflow, len(t.Coflows))
	for i := range t.Coflows {
		tc := &t.Coflows[i]
		nm := len(tc.Mappers)
		c := Coflow{
			ID:        tc.ID,
			Arrival:   tc.Arrival(),
			Weight:    tc.EffectiveWeight(),
			Mappers:   append([]int(nil), tc.Mappers...),
			Reducers:  make([]int, len(tc.Reducers)),
			ReducerMB: make([]float64, len(tc.Reducers)),
			Flows:     make([]Flow, 0, nm*len(tc.Reducers)),
		}
		for r, red := range tc.Reducers {
			c.Reducers[r] = red.Port
			c.ReducerMB[r] = red.MB
			if red.MB == 0 {
				continue
			}
			per := red.MB * MiB / float64(nm)
			for m, src := range tc.Mappers {
				c.Flows = append(c.Flows, Flow{ID: r*nm + m, Src: src, Dst: red.Port, Bytes: per})
			}
		}
		if len(c.Flows) == 0 {
			return nil, fmt.Errorf("%w: coflow %d (index %d)", ErrEmptyCoflow, tc.ID, i)
		}
		out[i] = c
	}
	return out, nil
}

// EffectiveWeight returns Weight, or 1 when no weight was given.
func (c *TraceCoflow) EffectiveWeight() float64 {
	if c.Weight == 0 {
		return 1
	}
	return c.Weight
}

func validWeight(w float64) bool { return w > 0 && !math.IsInf(w, 1) }

// maxWeightLineBytes bounds one line of a weights side file.
const maxWeightLineBytes = 64 << 10

// ReadWeights reads a weights side file for t (format in Trace's doc:
// "<coflow id> <weight>" per line, '#' comments and blank lines ignored)
// and sets the listed coflows' Weight; the others keep theirs. It refuses,
// naming the line, a line that is not two fields, an id that is not an
// integer or not a coflow of t, an id listed twice, and a weight that is
// not a positive finite number (negative, zero, NaN, Inf). On error t is
// unchanged. Errors wrap ErrSyntax. It never panics on bad input and
// keeps at most one entry per coflow of t.
func (t *Trace) ReadWeights(r io.Reader) error {
	index := make(map[int]int, len(t.Coflows)) // coflow id → index
	for i := range t.Coflows {
		index[t.Coflows[i].ID] = i
	}
	type entry struct {
		i int
		w float64
	}
	var got []entry
	seen := make(map[int]int) // coflow id → its line
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4<<10), maxWeightLineBytes)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		f := strings.Fields(s)
		if len(f) != 2 {
			return fmt.Errorf("%w: weights line %d: %d fields, want \"<coflow id> <weight>\"", ErrSyntax, lineNo, len(f))
		}
		id, err := strconv.Atoi(f[0])
		if err != nil {
			return fmt.Errorf("%w: weights line %d: coflow id %q is not an integer", ErrSyntax, lineNo, f[0])
		}
		i, ok := index[id]
		if !ok {
			return fmt.Errorf("%w: weights line %d: coflow id %d is not in the trace", ErrSyntax, lineNo, id)
		}
		if prev, dup := seen[id]; dup {
			return fmt.Errorf("%w: weights line %d: coflow id %d listed twice (first on line %d)", ErrSyntax, lineNo, id, prev)
		}
		seen[id] = lineNo
		w, err := strconv.ParseFloat(f[1], 64)
		if err != nil || !validWeight(w) {
			return fmt.Errorf("%w: weights line %d: weight %q of coflow %d is not a positive finite number", ErrSyntax, lineNo, f[1], id)
		}
		got = append(got, entry{i, w})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: weights line %d: %v", ErrSyntax, lineNo+1, err)
	}
	for _, e := range got {
		t.Coflows[e.i].Weight = e.w
	}
	return nil
}

// WriteWeights writes the weights side file of t: one "<coflow id>
// <weight>" line per coflow with a Weight given (non-zero), in trace
// order, weights in the shortest form that reads back exactly. A trace
// without weights gives an empty file.
func (t *Trace) WriteWeights(w io.Writer) error {
	if err := t.Validate(); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	var buf []byte
	for i := range t.Coflows {
		c := &t.Coflows[i]
		if c.Weight == 0 {
			continue
		}
		buf = strconv.AppendInt(buf[:0], int64(c.ID), 10)
		buf = append(buf, ' ')
		buf = strconv.AppendFloat(buf, c.Weight, 'g', -1, 64)
		buf = append(buf, '\n')
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}
