package ps

import (
	"errors"
	"fmt"

	"github.com/falconml/falcon/ps/internal/codec"
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
	ErrServerUnavailable = errors.New("ps: server unavailable")
	// ErrCoordinatorUnavailable: the coordinator could not be reached.
	ErrCoordinatorUnavailable = errors.New("ps: coordinator unavailable")
	// ErrMalformed: a message could not be decoded (bad length, bad field).
	ErrMalformed = codec.ErrMalformed
	// ErrWireVersion: a message carries a wire version this build does not speak.
	ErrWireVersion = codec.ErrWireVersion
	// ErrStartTimeout: a role could not reach its peers before its start
	// deadline; the message says who is missing.
	ErrStartTimeout = errors.New("ps: start timed out")
	// ErrClosed: the role was closed.
	ErrClosed = errors.New("ps: closed")
	// ErrRejected: the coordinator refused a request (for example an
	// out-of-order clock); the message carries the coordinator's reason.
	ErrRejected = errors.New("ps: rejected by coordinator")
	// ErrAborted: the coordinator stopped the run after a failure (a
	// server unreachable during a flush, a worker that failed); the message
	// carries the cause.
	ErrAborted = errors.New("ps: run aborted")
	// ErrNonFinite is store.ErrNonFinite (same value, so errors.Is matches either).
	ErrNonFinite = store.ErrNonFinite
	// ErrLogFailed: a durable server could not append the update to its
	// request log (a full disk, an I/O error); the update was refused and
	// changed nothing. The message names the log and the cause.
	ErrLogFailed = errors.New("ps: request log not written")
	// ErrClockNotOpen is store.ErrClockNotOpen (same value, so errors.Is matches either).
	ErrClockNotOpen = store.ErrClockNotOpen
	// ErrRemote: a peer failed in a way no other sentinel describes.
	ErrRemote = errors.New("ps: remote error")
)

// errCode is how an error travels on the wire: one byte, mapped back to a
// sentinel by the receiver.
type errCode uint8

const (
	codeOK errCode = iota
	codeMalformed
	codeUnknownKey
	codeLengthMismatch
	codeUnsortedKeys
	codeWireVersion
	codeRejected
	codeClosed
	codeInternal
	codeAborted
	codeServerUnavailable
	codeStartTimeout
	codeNonFinite
	codeRestarted
	codePeerLost
	codeForbidden
	codeJoinRefused
	codeRejoinTooSoon
	codeBelowMinimum
	codeLogFailed
	codeClockNotOpen
)

var codeErrors = [...]error{
	codeMalformed:      ErrMalformed,
	codeUnknownKey:     ErrUnknownKey,
	codeLengthMismatch: ErrLengthMismatch,
	codeUnsortedKeys:   ErrUnsortedKeys,
	codeWireVersion:    ErrWireVersion,
	codeRejected:       ErrRejected,
	codeClosed:         ErrClosed,
	codeInternal:       ErrRemote,
	codeAborted:        ErrAborted,
	// later codes lose to earlier ones when an error wraps several
	codeServerUnavailable: ErrServerUnavailable,
	codeStartTimeout:      ErrStartTimeout,
	codeNonFinite:         ErrNonFinite,
	codeRestarted:         ErrRestarted,
	codePeerLost:          ErrPeerLost,
	codeForbidden:         ErrForbidden,
	codeJoinRefused:       ErrJoinRefused,
	codeRejoinTooSoon:     ErrRejoinTooSoon,
	codeBelowMinimum:      ErrBelowMinimum,
	codeLogFailed:         ErrLogFailed,
	codeClockNotOpen:      ErrClockNotOpen,
}

// codeOf maps an error to its wire code.
func codeOf(err error) errCode {
	for c, e := range codeErrors {
		if e != nil && errors.Is(err, e) {
			return errCode(c)
		}
	}
	return codeInternal
}

// errorOf maps a wire code and message back to an error wrapping the
// matching sentinel.
func errorOf(c errCode, from, msg string) error {
	sentinel := ErrRemote
	if int(c) < len(codeErrors) && codeErrors[c] != nil {
		sentinel = codeErrors[c]
	}
	if msg == "" || msg == sentinel.Error() {
		return fmt.Errorf("%w (from %s)", sentinel, from)
	}
	return &remoteErr{sentinel: sentinel, from: from, msg: msg}
}

// remoteErr is an error received from a peer: its text is the peer's, and it
// matches the sentinel of its code under errors.Is.
type remoteErr struct {
	sentinel error
	from     string
	msg      string
}

func (e *remoteErr) Error() string { return e.msg + " (from " + e.from + ")" }
func (e *remoteErr) Unwrap() error { return e.sentinel }
