package live

import "errors"

// Sentinel errors. Callers test them with errors.Is; returned errors wrap
// them with detail, and a failure caused by a node names it (the node's
// transport.NodeID follows the sentinel's text).
var (
	// ErrInvalidConfig marks a Config or AgentConfig that fails Validate.
	ErrInvalidConfig = errors.New("live: invalid config")
	// ErrInvalidCoflow marks a coflow or flow the coordinator refuses at
	// registration (a port out of range, a size over the bounds, no flows)
	// or a Send whose data does not match the flow's declared size.
	ErrInvalidCoflow = errors.New("live: invalid coflow")
	// ErrUnknownCoflow marks a coflow or flow id that is not registered
	// (never was, or was unregistered).
	ErrUnknownCoflow = errors.New("live: unknown coflow")
	// ErrAgentDead fails the coflows with a flow at an agent that stopped
	// reporting for AgentTimeout or could not be reached; the error names
	// the agent.
	ErrAgentDead = errors.New("live: agent dead")
	// ErrCoordinatorDead fails every coflow an agent knows when the
	// coordinator has not answered its reports for CoordinatorTimeout;
	// the error names the coordinator.
	ErrCoordinatorDead = errors.New("live: coordinator dead")
	// ErrBadAllocation fails the active coflows when the scheduler returns
	// an allocation that breaks the fabric's capacities or core budgets
	// (coflow.Config.CheckAllocation's rules); it wraps the check's error.
	ErrBadAllocation = errors.New("live: bad allocation")
	// ErrTooLarge marks a message, coflow or buffer over a configured bound.
	ErrTooLarge = errors.New("live: over a bound")
	// ErrMalformed marks a message that does not decode.
	ErrMalformed = errors.New("live: malformed message")
	// ErrClosed is returned by calls on a closed Agent or Coordinator.
	ErrClosed = errors.New("live: closed")
)
