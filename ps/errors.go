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
)

// ErrSuperseded: another coordinator has taken over this one's run (a
// fenced CoordinatorStore refused a save because its leadership passed
// to a successor, or Coordinator.Abandon was called). A CoordinatorStore
// whose Save or Append fails with an error wrapping it makes the
// coordinator stop as a crash would (Coordinator.Abandon says what the
// others see) instead of aborting the run; Coordinator.Err then wraps it.
var ErrSuperseded = errors.New("ps: coordinator superseded: another coordinator has taken over the run")
