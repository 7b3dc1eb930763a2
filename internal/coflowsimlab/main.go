// Command coflowsimlab is the differential-testing harness of package
// coflow/coflowsim: it generates coflow-benchmark traces, replays them with
// coflowsim and with the reference Java simulator (CoflowSim, run as a
// black box: only its standard output is read) and reports, per trace and
// scheduler, how many coflow lines agree and the first that does not.
//
//	coflowsimlab gen -ports 100 -coflows 300 -mean 2s -seed 1 > t.txt
//	coflowsimlab diff -ref 'java -cp <classes> coflowsim.CoflowSim' -sched DARK t.txt ...
//	coflowsimlab sweep -ref '...' -sched DARK -ports 100 -coflows 300 -mean 2s -seeds 1-5 -dir out
//	coflowsimlab shrink -ref '...' -sched DARK t.txt > small.txt
//
// The reference command is run as `<ref> <SCHED> COFLOW-BENCHMARK <trace>`
// (how its README and the fixtures' README invoke it); its output and ours
// are kept next to the trace for inspection. shrink delta-debugs a trace
// on which the two disagree: it drops coflows, then reducers and mappers,
// then lowers megabytes, keeping each change after which they still
// disagree, and writes the smallest trace it reached. gen draws the traces with
// coflow.Synthetic (the FB2010-like bin mix: short and long, narrow and
// wide coflows of log-normal sizes), the generator the fixtures'
// dimensions were taken from; -maxmb caps a reducer's megabytes to keep
// the Java replays short.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowsim"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "coflowsimlab:", err)
		os.Exit(1)
	}
}

// genConfig is how gen and sweep draw a trace.
type genConfig struct {
	ports, coflows int
	mean           time.Duration
	maxMB          float64
	seed           uint64
}

func (g *genConfig) flags(fs *flag.FlagSet) {
	fs.IntVar(&g.ports, "ports", 100, "ports of the fabric")
	fs.IntVar(&g.coflows, "coflows", 300, "coflows")
	fs.DurationVar(&g.mean, "mean", 2*time.Second, "mean inter-arrival")
	fs.Float64Var(&g.maxMB, "maxmb", 0, "cap on a reducer's megabytes (0: none)")
}

func (g genConfig) trace() (*coflow.Trace, error) {
	cfg := coflow.DefaultSynthConfig()
	cfg.Ports, cfg.Coflows, cfg.MeanInterArrival = g.ports, g.coflows, g.mean
	tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(g.seed, 0x636f666c6f77)))
	if err != nil {
		return nil, err
	}
	if g.maxMB > 0 {
		for i := range tr.Coflows {
			for k := range tr.Coflows[i].Reducers {
				if r := &tr.Coflows[i].Reducers[k]; r.MB > g.maxMB {
					r.MB = g.maxMB
				}
			}
		}
	}
	return tr, nil
}

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: coflowsimlab gen|diff|sweep [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	var g genConfig
	g.flags(fs)
	seed := fs.Uint64("seed", 1, "gen: trace seed")
	seeds := fs.String("seeds", "1-5", "sweep: seeds, a-b or a,b,c")
	dir := fs.String("dir", ".", "sweep: where traces and outputs go")
	ref := fs.String("ref", "", "reference command (run as <ref> <SCHED> COFLOW-BENCHMARK <trace>)")
	sched := fs.String("sched", "DARK", "schedulers, comma-separated")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "gen":
		g.seed = *seed
		tr, err := g.trace()
		if err != nil {
			return err
		}
		return coflow.WriteTrace(out, tr)
	case "diff":
		for _, path := range fs.Args() {
			for _, s := range strings.Split(*sched, ",") {
				if err := diffOne(out, *ref, s, path); err != nil {
					return err
				}
			}
		}
		return nil
	case "sweep":
		list, err := parseSeeds(*seeds)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			return err
		}
		for _, sd := range list {
			g.seed = sd
			tr, err := g.trace()
			if err != nil {
				return err
			}
			path := filepath.Join(*dir, fmt.Sprintf("p%d-c%d-s%d.txt", g.ports, g.coflows, sd))
			var buf bytes.Buffer
			if err := coflow.WriteTrace(&buf, tr); err != nil {
				return err
			}
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				return err
			}
			for _, s := range strings.Split(*sched, ",") {
				if err := diffOne(out, *ref, s, path); err != nil {
					return err
				}
			}
		}
		return nil
	case "shrink":
		if fs.NArg() != 1 || *ref == "" {
			return errors.New("shrink needs -ref and one trace")
		}
		return shrink(out, *ref, strings.ToUpper(*sched), fs.Arg(0))
	}
	return fmt.Errorf("unknown command %q", args[0])
}

func parseSeeds(s string) ([]uint64, error) {
	var list []uint64
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil {
				return nil, err
			}
		}
		for x := a; x <= b; x++ {
			list = append(list, x)
		}
	}
	return list, nil
}

// diffOne replays the trace at path under sched with both simulators
// (the reference's output is cached in <path>.<SCHED>.ref) and prints one
// summary line.
func diffOne(out io.Writer, ref, sched, path string) error {
	sched = strings.ToUpper(sched)
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	tr, err := coflow.ReadTrace(f)
	f.Close()
	if err != nil {
		return err
	}
	t0 := time.Now()
	res, err := coflowsim.Run(tr, sched, coflowsim.DefaultConfig())
	if err != nil {
		return err
	}
	ours := time.Since(t0)
	var got bytes.Buffer
	if err := coflowsim.WriteReference(&got, res); err != nil {
		return err
	}
	if err := os.WriteFile(path+"."+sched+".ours", got.Bytes(), 0o644); err != nil {
		return err
	}
	refPath := path + "." + sched + ".ref"
	want, err := os.ReadFile(refPath)
	var theirs time.Duration
	if err != nil {
		if ref == "" {
			return fmt.Errorf("no %s and no -ref command", refPath)
		}
		argv := append(strings.Fields(ref), sched, "COFLOW-BENCHMARK", path)
		cmd := exec.Command(argv[0], argv[1:]...)
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		t1 := time.Now()
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("reference on %s: %w", path, err)
		}
		theirs = time.Since(t1)
		want = refLines(stdout.Bytes())
		if err := os.WriteFile(refPath, want, 0o644); err != nil {
			return err
		}
	}
	g := strings.Split(strings.TrimRight(got.String(), "\n"), "\n")
	w := strings.Split(strings.TrimRight(string(want), "\n"), "\n")
	if len(g) != len(w) {
		fmt.Fprintf(out, "%s %s: %d lines, reference %d\n", path, sched, len(g), len(w))
		return nil
	}
	match, first := 0, ""
	for i := range len(w) - 1 {
		if g[i] == w[i] {
			match++
		} else if first == "" {
			first = fmt.Sprintf("line %d: ours %q, reference %q", i+1, g[i], w[i])
		}
	}
	fmt.Fprintf(out, "%s %s: %d/%d coflow lines, sum line %v (ours %.1fs, reference %.1fs) %s\n",
		path, sched, match, len(w)-1, g[len(g)-1] == w[len(w)-1], ours.Seconds(), theirs.Seconds(), first)
	return nil
}

// refLines keeps the reference's result lines (JOB-... and the sum line),
// dropping any progress output.
func refLines(b []byte) []byte {
	var keep []string
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "JOB-") || (i == len(lines)-1 && l != "") {
			keep = append(keep, l)
		}
	}
	return []byte(strings.Join(keep, "\n") + "\n")
}
