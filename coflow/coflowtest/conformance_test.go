package coflowtest_test

import (
	"testing"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
)

// TestRunSuite_BuiltIns runs the conformance suite on the built-in
// schedulers, all of which are work-conserving at each decision.
func TestRunSuite_BuiltIns(t *testing.T) {
	for _, name := range coflow.SchedulerNames() {
		t.Run(name, func(t *testing.T) {
			coflowtest.RunSuite(t, func() coflow.Scheduler {
				s, err := coflow.NewScheduler(name)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}, coflowtest.SuiteOptions{WorkConserving: true, Seeds: 2})
		})
	}
}
