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
