package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// policyLine is the machine-readable line the program prints per policy.
var policyLine = regexp.MustCompile(`^policy=(\S+) scenario=(\S+) time_to_target_s=([0-9.]+|inf) final_acc=(0|1|0\.[0-9]+|1\.0+) blocked_frac=(0|1|0\.[0-9]+|1\.0+) transfers=(\d+)$`)

// TestRun_Synthetic runs the study end to end on a small synthetic setup and
// checks its output contract: one policy= line per policy, the table, and
// the CSV and PNG files.
func TestRun_Synthetic(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three short simulations")
	}
	dir := t.TempDir()
	var out bytes.Buffer
	o := options{
		scenario: "straggler", policies: "bsp,dynsgd,epsp-enforced", data: "synthetic", modelName: "softmax",
		train: 2000, test: 300, batch: 16, lr: 1.0, target: 0.5, window: 1,
		duration: 400 * time.Millisecond, evalEvery: 50 * time.Millisecond, seed: 1, seeds: 1,
		out: dir, liveScale: 1, quiet: true, stdout: &out,
	}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	var got []string
	transfers := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if m := policyLine.FindStringSubmatch(l); m != nil {
			if m[2] != "straggler" {
				t.Errorf("scenario = %q in %q", m[2], l)
			}
			got = append(got, m[1])
			transfers[m[1]] = m[6]
		} else if strings.HasPrefix(l, "policy=") {
			t.Errorf("malformed policy line %q", l)
		}
	}
	// epsp-enforced is the old name of epsp-v1: the alias selects it.
	if strings.Join(got, ",") != "bsp,dynsgd,epsp-v1" {
		t.Fatalf("policy lines for %v, want bsp,dynsgd,epsp-v1\n%s", got, out.String())
	}
	// A 4x straggler with task transfer on: EPSP moves work, BSP never does.
	if transfers["bsp"] != "0" || transfers["epsp-v1"] == "0" {
		t.Errorf("transfers = %v: want none for bsp and some for epsp-v1", transfers)
	}
	for _, f := range []string{"straggler_straggler_evals.csv", "straggler_straggler_workers.csv", "straggler_straggler_parallelism.csv",
		"straggler_straggler_transfers.csv", "straggler_straggler_staleness.csv", "straggler_straggler_summary.csv", "straggler_straggler.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v (size %v)", f, err, st)
		}
	}
}
