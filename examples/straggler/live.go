package main

import (
	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/ps/sim"
)

// runLive runs the scenarios with real goroutines. Not yet wired to ps's
// live runtime.
func runLive(o options, scenarios []sim.Scenario, specs []policySpec, m model.Model, train, test *model.Dataset) error {
	return errLiveUnavailable
}
