package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestRun simulates a short straggler scenario and checks the table: one
// row per policy, the barrier moves no work, EPSP v2 moves some off the
// slow worker.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four short simulations")
	}
	var out bytes.Buffer
	if err := run(&out, "straggler", 0.5, 500*time.Millisecond, 1); err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		if len(f) == 5 {
			rows[f[0]] = f
		}
	}
	for _, p := range policies {
		if rows[p.name] == nil {
			t.Errorf("no row for %s in\n%s", p.name, out.String())
		}
	}
	if r := rows["bsp"]; r != nil && r[4] != "0" {
		t.Errorf("bsp moved work: %v", r)
	}
	if r := rows["epsp-v2"]; r != nil && r[4] == "0" {
		t.Errorf("epsp-v2 moved no work off a 4x straggler: %v", r)
	}
}
