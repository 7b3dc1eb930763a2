package coflow_test

import (
	"os"
	"testing"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
)

// readFB reads the 526-coflow FB2010 coflow-benchmark trace from the shared
// data (skipping tb when it is absent) and returns it with its coflows.
func readFB(tb testing.TB) (*coflow.Trace, []coflow.Coflow) {
	tb.Helper()
	path := coflowtest.SharedFile(tb, "coflow-benchmark", "FB2010-1Hr-150-0.txt")
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	tr, err := coflow.ReadTrace(f)
	if err != nil {
		tb.Fatal(err)
	}
	cfs, err := tr.ToCoflows()
	if err != nil {
		tb.Fatal(err)
	}
	return tr, cfs
}
