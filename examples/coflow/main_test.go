package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// TestRun replays the synthetic trace under SEBF and FIFO and checks the
// table: a row per scheduler with positive times, and SEBF (smallest
// bottleneck first) no slower on average than FIFO.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, "", []string{"sebf", "fifo"}); err != nil {
		t.Fatal(err)
	}
	mean := map[string]float64{}
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			mean[f[0]] = v
		}
	}
	if !(mean["sebf"] > 0 && mean["fifo"] > 0) {
		t.Fatalf("no mean CCT for sebf and fifo in\n%s", out.String())
	}
	if mean["sebf"] > mean["fifo"] {
		t.Errorf("mean CCT: sebf %.3f s > fifo %.3f s", mean["sebf"], mean["fifo"])
	}
}

func TestRun_UnknownScheduler(t *testing.T) {
	if err := run(&bytes.Buffer{}, "", []string{"nope"}); err == nil {
		t.Fatal("an unknown scheduler was accepted")
	}
}
