package ps_test

import (
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/pstest"
	"github.com/falconml/falcon/straggler"
)

// EPSP's default multi-taker split live (in-process transport, one
// straggler, five pioneers): a giver has several orders outstanding, the
// workers take them tail-first, and every sample of every clock is still
// computed exactly once (pstest.RunPolicy checks CheckExactlyOnce). The
// straggler takes 10 ms a chunk against the others' 0.1 ms: at RunPolicy's
// default 2 ms, scheduling on a loaded machine slowed the others enough
// that staleness 1 ordered only 2 transfers in 5 clocks (flake tally run
// 135; 18 at staleness 0 in the same run).
func TestEPSP_SplitAllLive(t *testing.T) {
	for _, s := range []int{0, 1} {
		c := epsp.DefaultEPSPConfig()
		c.Staleness = s
		c.Parallelism = straggler.ParallelismConfig{PMin: 1, PMax: 3}
		st := pstest.RunPolicy(t, func() epsp.Policy { return mustPolicy(epsp.NewEPSP(c)) },
			pstest.PolicyRun{Workers: 6, Batch: 48, Clocks: 5, Straggler: 10 * time.Millisecond})
		t.Logf("s=%d: transfers %d/%d accepted (samples %d), refused %d", s, st.TransfersAccepted, st.TransfersOrdered, st.SamplesTransferred, st.TransfersRefused)
		if st.TransfersAccepted == 0 {
			t.Errorf("s=%d: no transfer accepted; the check is vacuous", s)
		}
		if st.TransfersOrdered <= 5 {
			t.Errorf("s=%d: %d orders in 5 clocks; expected a split among several pioneers", s, st.TransfersOrdered)
		}
	}
}
