package straggler

import "errors"

// Sentinel errors. Constructors wrap them with %w and a detail; test with
// errors.Is.
var (
	// ErrConfig reports an invalid configuration value.
	ErrConfig = errors.New("straggler: invalid config")
	// ErrWorker reports a worker index outside 0..n-1.
	ErrWorker = errors.New("straggler: worker out of range")
	// ErrUnknownTransfer reports a Resolve for an id the planner never
	// issued or already resolved.
	ErrUnknownTransfer = errors.New("straggler: unknown transfer")
	// ErrRange reports a transfer result whose range is not inside the
	// ordered one.
	ErrRange = errors.New("straggler: bad transfer range")
)
