// Package coflowtest helps test coflow schedulers: a builder for fabric
// states, CheckAllocation and Checker (capacity, cores and work-conservation
// checks, in the shape of coflow.Config.Check), a
// fake driver that steps a scheduler through virtual time, and a locator for
// the shared trace data used by tests and benchmarks.
//
// # Overview
//
// A user who writes a coflow.Scheduler can build a State in a few lines with
// NewState, ask their scheduler for an allocation and validate it with
// CheckAllocation or Checker, run it end to end on a small trace with Driver, or run
// the conformance suite RunSuite, which the built-in schedulers pass.
// SharedData, SharedDir and SharedFile find the shared trace data (tests
// skip with a clear message when it is absent) and ReadTraceFile reads a
// coflow-benchmark trace or fails the test.
//
// # Usage
//
//	st := coflowtest.NewState(coflow.NewFabric(3, 100)).
//		Coflow(0, 0, coflowtest.F(0, 1, 50)).State()
//	allocs := myScheduler.Schedule(0, st)
//	err := coflowtest.Checker(coflowtest.WorkConserving)(0, st, allocs)
//
// CheckAllocation and the functions Checker returns have the shape of
// coflow.Config.Check (coflow.CheckFunc), so either can be set there.
package coflowtest
