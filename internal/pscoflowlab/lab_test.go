package pscoflowlab

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunArms: two small jobs train to the end under a live scheduler
// (every push and pull reply carried as a flow of its clock's coflows,
// none direct) and under the baseline, and each job's time per clock is
// measured over at least one contended clock.
func TestRunArms(t *testing.T) {
	for _, arm := range []string{"live:sebf", "plain:lz4"} {
		cfg := Config{Arm: arm, Rate: 100e6, Density: 0.1, Compute: 5 * time.Millisecond, Inmem: arm == "live:sebf", Seed: 1,
			Jobs: []JobConfig{{Name: "A", Workers: 2, Params: 40_000, Clocks: 4}, {Name: "B", Workers: 1, Params: 60_000, Clocks: 3}}}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		res, err := Run(ctx, cfg)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", arm, err)
		}
		// The first job to end bounds the measured clocks; on a loaded
		// machine the other job's first clocks can all fall after it
		// (job A measured nothing once, its 4 clocks against B's 3), so
		// one job measured is what can be asserted.
		measured := 0
		for k, j := range res.Jobs {
			if j.Contended > 0 {
				measured++
				if j.PerClock <= 0 {
					t.Fatalf("%s: job %s: %d contended clocks in %v", arm, j.Name, j.Contended, j.PerClock)
				}
			}
			if arm == "live:sebf" {
				c := cfg.Jobs[k].Clocks
				if j.Coflow.Registered != 2*c || j.Coflow.DirectMsgs != 0 || j.Coflow.FlowMsgs != 2*c*cfg.Jobs[k].Workers {
					t.Fatalf("job %s: %+v; want %d coflows, %d messages as flows, none direct", j.Name, j.Coflow, 2*c, 2*c*cfg.Jobs[k].Workers)
				}
			}
		}
		if measured == 0 {
			t.Fatalf("%s: no job measured a contended clock: %+v", arm, res.Jobs)
		}
		t.Log(res.Line())
	}
}
