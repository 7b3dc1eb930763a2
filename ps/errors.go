package ps

import (
	"errors"

	"github.com/falconml/falcon/ps/internal/codec"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/ps/store"
)

// Errors returned by the package. Check them with errors.Is; the returned
// errors wrap them with details (the key, the server, the lengths).
var (
	// ErrUnsortedKeys is store.ErrUnsortedKeys (same value, so errors.Is matches either).
	ErrUnsortedKeys = store.ErrUnsortedKeys
	// ErrUnknownKey is store.ErrUnknownKey (same value, so errors.Is matches either).
	ErrUnknownKey = store.ErrUnknownKey
	// ErrLengthMismatch is store.ErrLengthMismatch (same value, so errors.Is matches either).
	ErrLengthMismatch = store.ErrLengthMismatch
	// ErrServerUnavailable: a server could not be reached or did not answer;
	// the wrapped error names the server and carries the transport error.
	ErrServerUnavailable = wire.ErrServerUnavailable
	// ErrCoordinatorUnavailable: the coordinator could not be reached.
	ErrCoordinatorUnavailable = wire.ErrCoordinatorUnavailable
	// ErrMalformed: a message could not be decoded (bad length, bad field).
	ErrMalformed = codec.ErrMalformed
	// ErrWireVersion: a message carries a wire version this build does not speak.
	ErrWireVersion = codec.ErrWireVersion
	// ErrStartTimeout: a role could not reach its peers before its start
	// deadline; the message says who is missing.
	ErrStartTimeout = wire.ErrStartTimeout
	// ErrClosed: the role was closed.
	ErrClosed = wire.ErrClosed
	// ErrRejected: the coordinator refused a request (for example an
	// out-of-order clock); the message carries the coordinator's reason.
	ErrRejected = wire.ErrRejected
	// ErrAborted: the coordinator stopped the run after a failure (a
	// server unreachable during a flush, a worker that failed); the message
	// carries the cause.
	ErrAborted = wire.ErrAborted
	// ErrNonFinite is store.ErrNonFinite (same value, so errors.Is matches either).
	ErrNonFinite = store.ErrNonFinite
	// ErrLogFailed: a durable server could not append the update to its
	// request log (a full disk, an I/O error); the update was refused and
	// changed nothing. The message names the log and the cause.
	ErrLogFailed = wire.ErrLogFailed
	// ErrClockNotOpen is store.ErrClockNotOpen (same value, so errors.Is matches either).
	ErrClockNotOpen = store.ErrClockNotOpen
	// ErrRemote: a peer failed in a way no other sentinel describes.
	ErrRemote = wire.ErrRemote
	// ErrForbidden: a node sent a request its role may not send (a worker's
	// flush, a write from a node that is not a member of the cluster). The
	// request changed nothing; the message names the operation and the sender.
	ErrForbidden = wire.ErrForbidden
	// ErrCloseTimeout: Cluster.Close gave up waiting for its roles and
	// transports after CloseTimeout; some goroutine is still blocked (a bug
	// worth reporting: every wait in the roles is bounded).
	ErrCloseTimeout = errors.New("ps: close timed out")
	// ErrPeerGone: a node of the cluster stopped answering the cluster's pings.
	ErrPeerGone = errors.New("ps: peer gone")
	// ErrCoordinatorState: a coordinator's saved state cannot be used (too
	// large, truncated, of another format version, or of another cluster);
	// the message names what differs.
	ErrCoordinatorState = errors.New("ps: coordinator state unusable")
	// ErrSuperseded: another coordinator has taken over this one's run (a
	// fenced CoordinatorStore refused a save because its leadership passed
	// to a successor, or Coordinator.Abandon was called). A CoordinatorStore
	// whose Save or Append fails with an error wrapping it makes the
	// coordinator stop as a crash would (Coordinator.Abandon says what the
	// others see) instead of aborting the run; Coordinator.Err then wraps it.
	ErrSuperseded = errors.New("ps: coordinator superseded: another coordinator has taken over the run")
	// ErrRestarted: a worker came back under its name as a new process (a new
	// incarnation) while the run its first incarnation joined goes on; it is
	// refused.
	ErrRestarted = wire.ErrRestarted
	// ErrPeerLost: a peer stopped answering for longer than its lease; the
	// message names it.
	ErrPeerLost = wire.ErrPeerLost
	// ErrBadNodeName: a node name is not coordinator, server-<i> or worker-<i>
	// with i in range.
	ErrBadNodeName = errors.New("ps: bad node name")
	// ErrBadPeers: an address book or address template is malformed.
	ErrBadPeers = errors.New("ps: bad peer addresses")
	// ErrJoinRefused: a worker's join was refused (the policy does not
	// accept joins, the worker is a member already, or it still has
	// transferred work outstanding); the message says which.
	ErrJoinRefused = wire.ErrJoinRefused
	// ErrRejoinTooSoon: a worker that left mid-run asked to rejoin before
	// its cooldown (epsp.Config.RejoinAfter) had passed; the message says
	// how long is left.
	ErrRejoinTooSoon = wire.ErrRejoinTooSoon
	// ErrBelowMinimum: the run stayed paused below epsp.Config.MinWorkers
	// for longer than MembershipConfig.PauseTimeout; the message names the
	// members and the departed workers.
	ErrBelowMinimum = wire.ErrBelowMinimum
)
