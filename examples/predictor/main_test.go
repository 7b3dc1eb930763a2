package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/falconml/falcon/predictor"
)

// TestRun_MachineLines runs the program on a small synthetic CSV and checks
// the table and the one-line-per-predictor-and-series output format.
func TestRun_MachineLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.csv")
	var buf bytes.Buffer
	if err := predictor.WriteCSVHeader(&buf); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		for _, codec := range []string{"lz4", "snappy"} {
			class := 1 + (i/40)%3
			ns := int64(100000 * class)
			if i%7 == 0 {
				ns += 30000
			}
			r := predictor.Record{At: 0, Codec: codec, Class: class, ClassName: "c", RawBytes: 65536,
				CompressedBytes: 20000 * class, CompressNs: ns, DecompressNs: ns / 4, CompressWallNs: ns, DecompressWallNs: ns / 4}
			if err := predictor.WriteCSVRow(&buf, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	o := opts{series: path, trainFrac: 0.6, span: 5, names: "last,ewma,lstm", hidden: 4, window: 4, seed: 1}
	if err := run(context.Background(), &out, o); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^predictor=(\S+) series=(\S+) mape=([0-9.]+) rmse=([0-9.e+]+) predict_ns=([0-9.]+) update_ns=([0-9.]+)$`)
	var n int
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "predictor=") {
			if !line.MatchString(l) {
				t.Fatalf("malformed machine line %q", l)
			}
			n++
		}
	}
	if n != 6 {
		t.Fatalf("%d machine lines, want 3 predictors × 2 series:\n%s", n, out.String())
	}
	if !strings.Contains(out.String(), "tiny:snappy") {
		t.Fatalf("series name missing:\n%s", out.String())
	}
	if err := run(context.Background(), &out, opts{series: path, trainFrac: 2}); err == nil {
		t.Fatal("bad -train accepted")
	}
	if err := run(context.Background(), &out, opts{series: filepath.Join(dir, "nope.csv"), trainFrac: 0.6, names: "last"}); err == nil {
		t.Fatal("missing file accepted")
	}
}
