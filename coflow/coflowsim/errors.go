package coflowsim

import "errors"

// Errors returned by this package; test with errors.Is.
var (
	// ErrUnknownScheduler reports a scheduler name coflowsim does not have.
	ErrUnknownScheduler = errors.New("coflowsim: unknown scheduler")
	// ErrConfig reports an invalid Config.
	ErrConfig = errors.New("coflowsim: invalid config")
	// ErrTrace reports a trace the replay cannot use.
	ErrTrace = errors.New("coflowsim: invalid trace")
	// ErrStalled reports a replay in which active coflows stopped making
	// progress with no arrival left to change the allocation.
	ErrStalled = errors.New("coflowsim: simulation stalled")
)
