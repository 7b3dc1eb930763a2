package coflow

import "errors"

// Sentinel errors. Callers test them with errors.Is; the returned errors wrap
// them with detail (line numbers, flow references, port numbers).
var (
	// ErrSyntax marks a malformed coflow-benchmark trace line.
	ErrSyntax = errors.New("coflow: malformed trace")
	// ErrInvalidFabric marks a fabric that fails Fabric.Validate.
	ErrInvalidFabric = errors.New("coflow: invalid fabric")
	// ErrInvalidCoflow marks a coflow or flow that does not fit its fabric.
	ErrInvalidCoflow = errors.New("coflow: invalid coflow")
	// ErrInvalidConfig marks a configuration that fails Validate.
	ErrInvalidConfig = errors.New("coflow: invalid config")
	// ErrBadAllocation marks a scheduler decision the simulator rejects:
	// a port over its capacity, cores over budget, an unknown or finished
	// flow, a duplicate, a bad codec or a non-finite rate.
	ErrBadAllocation = errors.New("coflow: bad allocation")
	// ErrStalled is returned when active coflows remain but nothing can make
	// progress: no flow has a positive disposal rate and no arrival or timer
	// is pending.
	ErrStalled = errors.New("coflow: simulation stalled")
)
