package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowsim"
)

// differs reports whether the two simulators print different output for
// tr under sched.
func differs(ref, sched string, tr *coflow.Trace) (bool, error) {
	res, err := coflowsim.Run(tr, sched, coflowsim.DefaultConfig())
	if err != nil {
		return false, err
	}
	var got, text bytes.Buffer
	if err := coflowsim.WriteReference(&got, res); err != nil {
		return false, err
	}
	if err := coflow.WriteTrace(&text, tr); err != nil {
		return false, err
	}
	f, err := os.CreateTemp("", "coflowsimlab-*.txt")
	if err != nil {
		return false, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(text.Bytes()); err != nil {
		f.Close()
		return false, err
	}
	f.Close()
	argv := append(strings.Fields(ref), sched, "COFLOW-BENCHMARK", f.Name())
	cmd := exec.Command(argv[0], argv[1:]...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Run(); err != nil {
		return false, fmt.Errorf("reference: %w", err)
	}
	return !bytes.Equal(refLines(stdout.Bytes()), got.Bytes()), nil
}

func cloneTrace(tr *coflow.Trace) *coflow.Trace {
	c := &coflow.Trace{Ports: tr.Ports, Coflows: make([]coflow.TraceCoflow, len(tr.Coflows))}
	for i, cf := range tr.Coflows {
		cf.Mappers = slices.Clone(cf.Mappers)
		cf.Reducers = slices.Clone(cf.Reducers)
		c.Coflows[i] = cf
	}
	return c
}

// shrink delta-debugs the trace at path (see the package comment).
func shrink(out io.Writer, ref, sched, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	tr, err := coflow.ReadTrace(f)
	f.Close()
	if err != nil {
		return err
	}
	runs := 0
	try := func(c *coflow.Trace) bool {
		runs++
		d, err := differs(ref, sched, c)
		if err != nil {
			fmt.Fprintln(os.Stderr, "shrink:", err)
			return false
		}
		return d
	}
	if !try(tr) {
		return fmt.Errorf("%s: the simulators agree under %s", path, sched)
	}
	save := func() {
		var b bytes.Buffer
		if coflow.WriteTrace(&b, tr) == nil {
			_ = os.WriteFile(path+".shrunk", b.Bytes(), 0o644)
		}
	}
	// Coflows, in chunks halving down to one.
	for chunk := len(tr.Coflows) / 2; chunk >= 1; chunk /= 2 {
		for i := 0; i+chunk <= len(tr.Coflows) && len(tr.Coflows) > 1; {
			c := cloneTrace(tr)
			c.Coflows = slices.Delete(c.Coflows, i, i+chunk)
			if len(c.Coflows) > 0 && try(c) {
				tr = c
				save()
				fmt.Fprintf(os.Stderr, "shrink: %d coflows (%d runs)\n", len(tr.Coflows), runs)
			} else {
				i += chunk
			}
		}
	}
	// Reducers and mappers, one at a time.
	for ci := range tr.Coflows {
		for k := 0; k < len(tr.Coflows[ci].Reducers) && len(tr.Coflows[ci].Reducers) > 1; {
			c := cloneTrace(tr)
			c.Coflows[ci].Reducers = slices.Delete(c.Coflows[ci].Reducers, k, k+1)
			if try(c) {
				tr = c
				save()
			} else {
				k++
			}
		}
		for k := 0; k < len(tr.Coflows[ci].Mappers) && len(tr.Coflows[ci].Mappers) > 1; {
			c := cloneTrace(tr)
			c.Coflows[ci].Mappers = slices.Delete(c.Coflows[ci].Mappers, k, k+1)
			if try(c) {
				tr = c
				save()
			} else {
				k++
			}
		}
		fmt.Fprintf(os.Stderr, "shrink: coflow %d done (%d runs)\n", tr.Coflows[ci].ID, runs)
	}
	// Megabytes: 1, else halved while that keeps the difference.
	for ci := range tr.Coflows {
		for k := range tr.Coflows[ci].Reducers {
			for _, mb := range []float64{1, 0} {
				c := cloneTrace(tr)
				r := &c.Coflows[ci].Reducers[k]
				if mb == 0 {
					mb = math.Ceil(r.MB / 2)
				}
				if mb >= r.MB {
					continue
				}
				r.MB = mb
				if try(c) {
					tr = c
					save()
					break
				}
			}
		}
	}
	fmt.Fprintf(os.Stderr, "shrink: %d coflows after %d runs\n", len(tr.Coflows), runs)
	return coflow.WriteTrace(out, tr)
}
