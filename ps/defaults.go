package ps

import "time"

// Defaults and limits of the roles: what a zero field of their configs
// means, and the bounds on what a peer or a file may make them hold.
const (
	// DefaultCoordinatorWait is how long workers and servers wait for a
	// durable coordinator that stopped answering (CoordinatorConfig.Wait):
	// time for a supervisor (Kubernetes, systemd) to restart its process.
	DefaultCoordinatorWait = 60 * time.Second
	// MaxCoordinatorState bounds a coordinator's saved state: Save refuses a
	// larger one and DirCoordinatorStore's Load refuses a larger file without
	// reading it, so a corrupt or hostile file cannot grow memory. A state
	// holds O(worker slots + open transfers + servers) fixed-size records
	// (coordstate.go), a few KiB for hundreds of workers.
	MaxCoordinatorState = 64 << 20
	// DefaultDedupClients is the number of clients whose request ids a server
	// remembers when DurableConfig.DedupClients is zero. One window costs
	// about 90 bytes (measured with 100,000 windows: its 24 bytes of state,
	// its last use, two list links and its share of the map), so the default
	// holds 4096 clients in about 360 KiB.
	DefaultDedupClients = 4096
	// DefaultLogMaxBytes is the request log size that triggers a checkpoint
	// when DurableConfig.LogMaxBytes is zero: 64 MiB (our choice: replayed in
	// well under a second, small beside a shard worth checkpointing).
	DefaultLogMaxBytes = 64 << 20
)
