package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseFlags_Live: the -live flags land in liveOptions, the defaults
// are the documented slice (10 ports, 40 coflows from 0, 300 MB over
// 30 s, 40 Mbit/s and 0.12 core per port, an uncalibrated simulator), and
// liveNames accepts the scheduler names of -sched elsewhere (fvdf.ParseBaseline
// with lz4) while refusing what the bed cannot run.
func TestParseFlags_Live(t *testing.T) {
	o, err := parseFlags(strings.Fields("-live -trace t.txt -ports 6 -coflows 12 -skip 50 -mb 80 -span 9s -link-bps 20e6 -link-payload 0.9 -port-cores 0.1 -sim-wire-eff 0.95 -sim-done-delay 4ms -sched sebf,sebf+lz4,dclas+lz4,fvdf"), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := liveOptions{on: true, ports: 6, coflows: 12, skip: 50, mb: 80, span: 9 * time.Second, lead: 30 * time.Second,
		linkBits: 20e6, payload: 0.9, cores: 0.1, wireEff: 0.95, doneDelay: 4 * time.Millisecond}
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
	if dw := (liveOptions{on: true, ports: 10, coflows: 40, mb: 300, span: 30 * time.Second, lead: 30 * time.Second, linkBits: 40e6, payload: 1, cores: 0.12}); d.live != dw {
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
