package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/fvdf/codecprof"
)

// TestParseFlags_Live: the -live flags land in liveOptions, the defaults
// are the documented slice (10 ports, 40 coflows from 0, 300 MB over
// 30 s, 40 Mbit/s and 0.12 core per port, an uncalibrated simulator), and
// liveNames accepts the scheduler names of -sched elsewhere (fvdf.ParseBaseline
// with lz4) while refusing what the bed cannot run.
func TestParseFlags_Live(t *testing.T) {
	o, err := parseFlags(strings.Fields("-live -trace t.txt -ports 6 -coflows 12 -skip 50 -mb 80 -span 9s -link-bps 20e6 -link-payload 0.9 -port-cores 0.1 -sim-wire-eff 0.95 -sim-codec-eff 0.5 -sim-done-delay 4ms -sched sebf,sebf+lz4,dclas+lz4,fvdf"), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := liveOptions{on: true, ports: 6, coflows: 12, skip: 50, mb: 80, span: 9 * time.Second, lead: 30 * time.Second,
		linkBits: 20e6, payload: 0.9, cores: 0.1, wireEff: 0.95, codecEff: 0.5, doneDelay: 4 * time.Millisecond, period: 10 * time.Millisecond}
	if o.live != want || o.trace != "t.txt" {
		t.Fatalf("live options %+v trace %q, want %+v", o.live, o.trace, want)
	}
	names, err := liveNames(o)
	if err != nil || strings.Join(names, ",") != "sebf,sebf+lz4,dclas+lz4,fvdf" {
		t.Fatalf("liveNames = %v, %v", names, err)
	}
	d, err := parseFlags([]string{"-live", "-trace", "t.txt"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if dw := (liveOptions{on: true, ports: 10, coflows: 40, mb: 300, span: 30 * time.Second, lead: 30 * time.Second, linkBits: 40e6, payload: 1, cores: 0.12, period: 10 * time.Millisecond}); d.live != dw {
		t.Fatalf("defaults %+v, want %+v", d.live, dw)
	}
	for _, bad := range []string{
		"-live -sched sebf",                        // no trace
		"-live -trace t.txt -sched sebf+snappy",    // the bed has lz4 only
		"-live -trace t.txt -sched sebf+write-lz4", // no compress-at-write jobs
		"-live -trace t.txt -sched nosuch",         // unknown
		"-live -trace t.txt -ports 1",              // a bed needs two ports
		"-live -trace t.txt -sim-wire-eff 1.2",     // an efficiency above 1
		"-live -trace t.txt -sched sebf -format coflowsim",
	} {
		o, err := parseFlags(strings.Fields(bad), &bytes.Buffer{})
		if err != nil {
			t.Fatalf("%s: %v", bad, err)
		}
		if _, err := liveNames(o); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	var errOut bytes.Buffer
	if _, err := parseFlags([]string{"-live", "-ports", "x"}, &errOut); err == nil || errOut.Len() == 0 {
		t.Errorf("-ports x: err %v, said %q", err, errOut.String())
	}
}

// TestRunLive_RefusesNonRoot: without root, -live says why and what to do,
// before it touches the trace or the machine.
func TestRunLive_RefusesNonRoot(t *testing.T) {
	defer func(f func() int) { geteuid = f }(geteuid)
	geteuid = func() int { return 1000 }
	o, err := parseFlags([]string{"-live", "-trace", filepath.Join(t.TempDir(), "absent.txt"), "-sched", "sebf"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = runLive(o, &out)
	if !errors.Is(err, errNotRoot) || !strings.Contains(err.Error(), "needs root") {
		t.Fatalf("runLive as uid 1000 = %v, want errNotRoot", err)
	}
	if out.Len() != 0 {
		t.Errorf("printed %q before refusing", out.String())
	}
	if _, err := os.Stat(o.trace); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("trace stat: %v", err)
	}
}

// TestRunRefit: a stored live run simulates again as it did (before: the
// uncalibrated simulator), the constants move the "after" column as their
// closed forms say (a 10 ms completion delay adds 10 ms to each CCT), and
// slices split into fit and validation by -fit-skips.
func TestRunRefit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "runs.jsonl")
	mk := func(skip int) liveRecord {
		return liveRecord{Sched: "sebf", Skip: skip, Ports: 2, Bandwidth: 1e6, Cores: 0.1,
			Classes:  []codecprof.Class{codecprof.Text},
			Profiles: []coflow.CodecProfile{{Name: "lz4", CompressSpeed: 100e6, DecompressSpeed: 400e6, Ratio: 0.5}},
			Coflows: []coflow.Coflow{
				{ID: 0, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 1e6}}},
				{ID: 1, Arrival: 2 * time.Second, Flows: []coflow.Flow{{Src: 1, Dst: 0, Bytes: 5e5}}},
			},
			LiveMS: []float64{1100, 600}, Load: "1.00/1.00/1.00"}
	}
	var buf bytes.Buffer
	for _, s := range []int{0, 50} {
		b, _ := json.Marshal(mk(s))
		buf.Write(append(b, '\n'))
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"-refit", path, "-fit-skips", "0", "-sim-done-delay", "10ms"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runRefit(o, &out); err != nil {
		t.Fatal(err)
	}
	// 1 MB and 0.5 MB at 1 MB/s alone: 1000 and 500 ms; after: 1010, 510.
	for _, want := range []string{
		"| fit | 0 | sebf | 2 | 850.0 | 750.0 | 760.0 | 1.13 | 1.12 | 1.15 | 1.13 | 1.00/1.00/1.00 |",
		"| validation | 50 | sebf | 2 | 850.0 | 750.0 | 760.0 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	if strings.Index(out.String(), "| fit |") > strings.Index(out.String(), "| validation |") {
		t.Errorf("validation rows before fit rows:\n%s", out.String())
	}
	os.WriteFile(path, []byte("{\"Sched\":\"sebf\",\"Ports\":2}\n"), 0o600)
	if err := runRefit(o, &out); err == nil {
		t.Error("an inconsistent record was accepted")
	}
}

// TestRunRefit_Calibration2026: the live runs kept in testdata (the
// calibration of CALIBRATION.md) simulate again to the table's SEBF rows
// with its constants (fails when the stored runs or the simulator's model
// of raw flows drift from the committed table).
func TestRunRefit_Calibration2026(t *testing.T) {
	o, err := parseFlags(strings.Fields("-refit testdata/calibration-20261205.jsonl.gz -fit-skips 0,100,200 -sim-done-delay 8.8ms -sim-codec-eff 0.35"), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runRefit(o, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| fit | 0 | sebf | 40 | 144.4 | 104.3 | 113.1 | 1.38 | 1.28 | 2.33 | 0.62 |",
		"| validation | 150 | sebf | 40 | 160.5 | 104.9 | 113.7 | 1.53 | 1.41 | 2.27 | 0.94 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}
