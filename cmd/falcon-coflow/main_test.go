package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func testOptions() options {
	return options{scheds: "sebf,fifo", mode: "exact", format: "table", portBits: 1024 * 1048576,
		synthPorts: 10, synthCoflows: 20, synthGap: time.Second, seed: 3}
}

var summaryLine = regexp.MustCompile(`^sched=(\S+) mode=(exact|coflowsim) coflows=(\d+) avg_cct_ms=[0-9.]+ p95_cct_ms=[0-9.]+ wall_ms=[0-9.]+$`)

func TestRun_SummaryLines(t *testing.T) {
	var out bytes.Buffer
	if err := run(testOptions(), &out); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(out.String(), "\n") {
		if m := summaryLine.FindStringSubmatch(l); m != nil {
			if m[3] != "20" {
				t.Errorf("coflows = %s, want 20", m[3])
			}
			got = append(got, m[1])
		} else if strings.HasPrefix(l, "sched=") {
			t.Errorf("malformed summary line %q", l)
		}
	}
	if strings.Join(got, ",") != "sebf,fifo" {
		t.Fatalf("summary lines for %v, want sebf,fifo\n%s", got, out.String())
	}
}

func TestRun_CoflowsimFormatAndCSV(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.txt")
	// Two coflows; the second has 2 mappers and 2 reducers.
	if err := os.WriteFile(trace, []byte("4 2\n1 0 1 0 1 1:1.0\n2 100 2 0 1 2 2:4.0 3:2.0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := testOptions()
	o.trace, o.scheds, o.format, o.csv = trace, "sebf", "coflowsim", filepath.Join(dir, "out.csv")
	var out bytes.Buffer
	if err := run(o, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// 1 MiB at 128 MiB/s = 7.8125 ms; coflow 2: 4 MiB into port 2 → 31.25 ms.
	want := []string{
		"JOB-1 0.0 7.8125 1 1 1048576.0 1048576.0 7.8125 0 7.8125",
		"JOB-2 100.0 131.25 2 2 6291456.0 4194304.0 31.25 0 46.875",
		"39.0625",
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d = %q, want %q", i, lines[i], w)
		}
	}
	if !summaryLine.MatchString(lines[len(lines)-1]) {
		t.Errorf("last line %q is not a summary line", lines[len(lines)-1])
	}
	csv, err := os.ReadFile(o.csv)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(csv), "\n"); n != 3 || !strings.HasPrefix(string(csv), "sched,index,id,") {
		t.Errorf("csv has %d lines:\n%s", n, csv)
	}
}

func TestRun_Errors(t *testing.T) {
	for _, mod := range []func(*options){
		func(o *options) { o.mode = "bogus" },
		func(o *options) { o.format = "xml" },
		func(o *options) { o.scheds = "nope" },
		func(o *options) { o.trace = "/nonexistent/trace.txt" },
		func(o *options) { o.portBits = 0 },
	} {
		o := testOptions()
		mod(&o)
		if err := run(o, &bytes.Buffer{}); err == nil {
			t.Errorf("options %+v: no error", o)
		}
	}
}

func TestJavaDouble(t *testing.T) {
	tests := map[float64]string{
		2097152: "2097152.0", 2.62144e7: "2.62144E7", 16: "16.0", 0: "0.0", 1e7: "1.0E7",
		9999999: "9999999.0", 0.001: "0.001", 1e-4: "1.0E-4", 7.8125: "7.8125", 9.60495616e8: "9.60495616E8",
	}
	for x, want := range tests {
		if got := javaDouble(x); got != want {
			t.Errorf("javaDouble(%v) = %q, want %q", x, got, want)
		}
	}
}

func TestRun_CoflowsimMode(t *testing.T) {
	o := testOptions()
	o.mode, o.scheds = "coflowsim", "fifo"
	var out bytes.Buffer
	if err := run(o, &out); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(out.String(), "\n") {
		if m := summaryLine.FindStringSubmatch(l); m != nil && m[2] == "coflowsim" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d coflowsim summary lines, want 1:\n%s", n, out.String())
	}
}

var compressionLine = regexp.MustCompile(`^sched=(\S+) mode=exact coflows=(\d+) avg_cct_ms=[0-9.]+ p95_cct_ms=[0-9.]+ avg_jct_ms=[0-9.]+ wire_bytes=(\d+) raw_bytes=(\d+) max_wait_ms=[0-9.]+ wall_ms=[0-9.]+$`)

func TestRun_CompressionAwareReplay(t *testing.T) {
	o := testOptions()
	o.scheds = "fvdf,sebf"
	o.comp = compressionOptions{cores: 4, data: "text", predictor: "ewma"}
	var out bytes.Buffer
	if err := run(o, &out); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(out.String(), "\n") {
		m := compressionLine.FindStringSubmatch(l)
		if m == nil {
			if strings.HasPrefix(l, "sched=") {
				t.Errorf("malformed line %q", l)
			}
			continue
		}
		got = append(got, m[1])
		if m[2] != "20" {
			t.Errorf("%s: coflows = %s, want 20", m[1], m[2])
		}
		wire, _ := strconv.ParseFloat(m[3], 64)
		raw, _ := strconv.ParseFloat(m[4], 64)
		switch m[1] {
		case "fvdf":
			// Text compresses (ratio well below 1): FVDF must send fewer bytes than it disposes of.
			if !(wire < raw) {
				t.Errorf("fvdf: wire bytes %s not below raw bytes %s on text", m[3], m[4])
			}
		case "sebf":
			if wire != raw {
				t.Errorf("sebf: wire bytes %s != raw bytes %s (SEBF never compresses)", m[3], m[4])
			}
		}
	}
	if strings.Join(got, ",") != "fvdf,sebf" {
		t.Fatalf("lines for %v, want fvdf,sebf\n%s", got, out.String())
	}
}

func TestRun_CompressionNeedsExactMode(t *testing.T) {
	o := testOptions()
	o.scheds, o.mode = "fvdf", "coflowsim"
	o.comp = compressionOptions{cores: 4, data: "shuffle", predictor: "ewma"}
	if err := run(o, io.Discard); err == nil || !strings.Contains(err.Error(), "-mode exact") {
		t.Fatalf("run = %v, want an error asking for -mode exact", err)
	}
	o.mode, o.scheds = "exact", "fvdf,fifo"
	if err := run(o, io.Discard); err == nil || !strings.Contains(err.Error(), "fifo") {
		t.Fatalf("run = %v, want an error naming fifo", err)
	}
}

// TestRun_Baselines runs every isolating baseline and FVDF under each
// -resched rule on text (which compresses): one line per name, the same
// raw bytes for all, every compressing baseline fewer wire bytes than raw
// (compress at write too), raw SEBF none; bad rules and a name with its
// own rule are refused.
func TestRun_Baselines(t *testing.T) {
	names := []string{"fvdf", "sebf", "sebf+lz4", "dclas+lz4", "sebf+snappy", "dclas+snappy", "sebf+write-lz4", "sebf-order+fvdf", "sebf-rho"}
	for _, rule := range []string{"varys", "timers", "every"} {
		t.Run(rule, func(t *testing.T) {
			o := testOptions()
			o.scheds = strings.Join(names, ",")
			o.comp = compressionOptions{bandwidthGbps: 10, cores: 1, data: "text", predictor: "oracle", resched: rule, coalesce: 100 * time.Millisecond}
			o.set = map[string]bool{"resched": true}
			var out bytes.Buffer
			if err := run(o, &out); err != nil {
				t.Fatal(err)
			}
			var got []string
			var raw0 string
			for _, l := range strings.Split(out.String(), "\n") {
				m := compressionLine.FindStringSubmatch(l)
				if m == nil {
					if strings.HasPrefix(l, "sched=") {
						t.Errorf("malformed line %q", l)
					}
					continue
				}
				got = append(got, m[1])
				if raw0 == "" {
					raw0 = m[4]
				}
				wire, _ := strconv.ParseFloat(m[3], 64)
				raw, _ := strconv.ParseFloat(m[4], 64)
				if m[4] != raw0 {
					t.Errorf("%s: raw bytes %s, want %s as the others", m[1], m[4], raw0)
				}
				if m[1] == "sebf" && wire != raw || m[1] != "sebf" && !(wire < raw) {
					t.Errorf("%s: wire %s, raw %s", m[1], m[3], m[4])
				}
			}
			if strings.Join(got, ",") != o.scheds {
				t.Fatalf("lines for %v, want %s\n%s", got, o.scheds, out.String())
			}
		})
	}
	o := testOptions()
	o.comp = compressionOptions{cores: 4, data: "text", predictor: "ewma", resched: "sometimes"}
	o.scheds, o.set = "sebf+lz4", map[string]bool{"resched": true}
	if err := run(o, io.Discard); err == nil || !strings.Contains(err.Error(), "sometimes") {
		t.Fatalf("-resched sometimes: %v", err)
	}
	o.comp.resched, o.scheds = "timers", "sebf-guard"
	if err := run(o, io.Discard); err == nil || !strings.Contains(err.Error(), "sebf-guard") {
		t.Fatalf("sebf-guard with -resched: %v", err)
	}
}

// TestRun_Weights checks -weights: a side file changes the weighted
// scheduler's result, and a bad one is refused naming the file and line.
func TestRun_Weights(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.txt")
	// Two coflows on the same ports; Sincronia serves the heavier first.
	if err := os.WriteFile(trace, []byte("2 2\n1 0 1 0 1 1:4.0\n2 0 1 0 1 1:1.0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runWith := func(weights string) (string, error) {
		o := testOptions()
		o.trace, o.scheds, o.format = trace, "sincronia", "coflowsim"
		if weights != "" {
			o.weights = filepath.Join(dir, "w.txt")
			if err := os.WriteFile(o.weights, []byte(weights), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var out bytes.Buffer
		err := run(o, &out)
		return out.String(), err
	}
	plain, err := runWith("")
	if err != nil {
		t.Fatal(err)
	}
	heavy, err := runWith("# coflow 1 first\n1 100\n")
	if err != nil {
		t.Fatal(err)
	}
	job1 := func(out string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "JOB-1 ") {
				return l
			}
		}
		t.Fatalf("no JOB-1 line in\n%s", out)
		return ""
	}
	if job1(plain) == job1(heavy) {
		t.Fatalf("weight 100 on coflow 1 changed nothing: %s", job1(plain))
	}
	if _, err := runWith("1 100\n2 -3\n"); err == nil || !strings.Contains(err.Error(), "w.txt") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad weights: err = %v, want the file and line 2 named", err)
	}
}
