package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/model/mnist"
)

// TestRun_CNNDeterministic runs the CNN workload on MNIST under the cost
// model (LeNet-5's tensors over 1 Gbit/s links, slow-link scenario, USL
// curve) twice with the same seed and gets the same CSVs, and prints the
// scenario's comp/comm line. It skips when MNIST is not found.
func TestRun_CNNDeterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two CNN simulations")
	}
	if _, err := mnist.Locate(); err != nil {
		t.Skipf("MNIST not found: %v", err)
	}
	run := func() (string, map[string][]byte) {
		dir := t.TempDir()
		var out bytes.Buffer
		o := options{
			scenario: "slow-link", policies: "bsp,dynsgd", data: "mnist", modelName: "cnn",
			train: 1000, test: 100, batch: 8, lr: 0.1, target: 0.5, window: 1,
			duration: 40 * time.Millisecond, evalEvery: 20 * time.Millisecond, seed: 1, seeds: 1, noise: 0.05,
			out: dir, liveScale: 1, quiet: true, stdout: &out,
			cost: costOptions{net: "cnn", link: 1, servers: 2, apply: time.Nanosecond, curve: "usl"},
		}
		if err := run(o); err != nil {
			t.Fatal(err)
		}
		csv := map[string][]byte{}
		files, _ := filepath.Glob(filepath.Join(dir, "*.csv"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			csv[filepath.Base(f)] = b
		}
		return out.String(), csv
	}
	out1, a := run()
	_, b := run()
	if len(a) == 0 {
		t.Fatal("no CSV written")
	}
	for name, x := range a {
		if !bytes.Equal(x, b[name]) {
			t.Errorf("%s differs between two runs of the same seed", name)
		}
	}
	if !strings.Contains(out1, "cost slow-link (cnn, 1 Gbit/s, 2 server(s)") || !strings.Contains(out1, "model: cnn") {
		t.Errorf("no cost line or CNN model in the output:\n%s", out1)
	}
}
