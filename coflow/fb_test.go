package coflow_test

import (
	"testing"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
)

// readFB reads the 526-coflow FB2010 coflow-benchmark trace from the shared
// data (skipping tb when it is absent) and returns it with its coflows.
func readFB(tb testing.TB) (*coflow.Trace, []coflow.Coflow) {
	tb.Helper()
	tr := coflowtest.ReadTraceFile(tb, coflowtest.SharedFile(tb, "coflow-benchmark", "FB2010-1Hr-150-0.txt"))
	cfs, err := tr.ToCoflows()
	if err != nil {
		tb.Fatal(err)
	}
	return tr, cfs
}

// TestOfferedLoad_FB2010 logs FB2010's offered load at 1 Gbit/s, the
// reference for the synthetic loads of the claims protocol
// (fvdf/PROTOCOL-v3.md), and checks it is a plausible utilisation.
func TestOfferedLoad_FB2010(t *testing.T) {
	tr, _ := readFB(t)
	l := coflow.OfferedLoad(tr, 125e6)
	t.Logf("FB2010 offered load at 1 Gbit/s: %.4f", l)
	if !(l > 0.01 && l < 10) {
		t.Fatalf("FB2010 load %v", l)
	}
}
