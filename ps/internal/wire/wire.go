// Package wire is the ps wire protocol: the message envelope (a version
// byte, an op byte), the op codes, the one-byte error codes and the
// sentinels they stand for, and the framing of responses. Message bodies
// are written and read with package codec.
//
// One binary format for every ps message: a version byte, an op byte, then
// little-endian fields and float32 values as IEEE-754 bits (below).
// On little-endian hosts a block of values is their memory image, moved
// with one copy(); a portable loop serves big-endian hosts. Pushes pad
// their values to a 4-byte offset so servers apply them straight from the
// wire bytes (SGD and accumulation through an SSE kernel on amd64). Pulls
// are answered with the bare values, which the client has the transport
// write straight into the caller's slice (transport.RequestAppend; the
// server is a transport.AppendHandler). Errors travel as one-byte codes and
// come back as this package's sentinels.
//
// It is internal: a user of ps never needs it. It imports the codec and
// the store (for the sentinels the store returns) and nothing of ps; ps
// imports it.
package wire

import (
	"errors"
	"fmt"

	"github.com/falconml/falcon/ps/internal/codec"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
)

// The ps wire format. Every message starts with two bytes: the wire version
// and the operation. Integers and floats are little-endian; float32 values
// travel as their IEEE-754 bits, back to back. Responses start with the wire
// version and an error code (0 = ok); a failed response carries the error
// text after the code.
//
//	push, pushpull: mode u8 | clock i64 | scale f64 | weight f64 | n u32 | n × (key u64, len u32) | pad | values
//	pull:           n u32 | n × (key u64, len u32)
//	init:           n u32 | n × (key u64, len u32) | pad | values
//	flush:          clock i64 | scale f64 [| n u32 | n × sender str]; response weight f64
//	layout:         (empty); response n u32 | n × (key u64, len u32)
//
// A flush may name senders whose pushes of the clock it leaves out
// (store.Store.FlushExcept; a str is len u32 | bytes); its response
// carries the clock's weight without them, before the flush
// (store.Store.ClockWeight).
//
// pad is 0 to 3 zero bytes that make the values start at an offset from the
// message's first byte that is a multiple of 4, so a server can read them
// in place as float32s (version 2 added it).
//
// A successful pull or pushpull is answered with the values alone, no
// header, so that a client can have them written straight into its output
// slice (see Client.Pull); the client knows their exact length. A failed
// one is answered with a transport-level error whose text is the version,
// the error code and the message (see ValuesError).
const Version = 2

type Op uint8

const (
	// server requests
	OpPing Op = iota + 1
	OpInit
	OpPush
	OpPull
	OpPushPull
	OpFlush
	OpLayout
	// coordinator requests and messages
	OpHello
	OpAdmit
	OpClock
	OpProgress
	OpTransferResult
	OpTransferDone
	OpFail // worker → coordinator message: the worker failed (reason)
	// worker messages
	OpRelease
	OpSetParallelism
	OpSetBatch
	OpTransferOrder
	OpTransferTask
	OpAbort // coordinator → worker message: the run is aborted (reason)
	OpLeave // worker → coordinator request: the worker has finished training
)

const (
	ModeApply      = 0
	ModeAccumulate = 1
)

// SegBytes is the wire size of one (key, len) pair.
const SegBytes = 12

func NewMsg(b []byte, o Op) codec.Encoder { return codec.Encoder{B: append(b[:0], Version, byte(o))} }

// header checks the version and returns the Op of a message.
func Header(b []byte) (Op, []byte, error) {
	if len(b) < 2 {
		return 0, nil, fmt.Errorf("%w: %d-byte message", codec.ErrMalformed, len(b))
	}
	if b[0] != Version {
		return 0, nil, fmt.Errorf("%w: version %d, want %d", codec.ErrWireVersion, b[0], Version)
	}
	return Op(b[1]), b[2:], nil
}

// OKResponse starts a successful response.
func OKResponse(b []byte) []byte { return append(b[:0], Version, byte(CodeOK)) }

// ErrResponse encodes err as a failed response.
func ErrResponse(err error) []byte {
	return append([]byte{Version, byte(CodeOf(err))}, err.Error()...)
}

// ReturnsValues reports whether req asks for a values-only response (pull,
// pushpull).
func ReturnsValues(req []byte) bool {
	return len(req) >= 2 && (Op(req[1]) == OpPull || Op(req[1]) == OpPushPull || Op(req[1]) == OpPushPullID)
}

// ValuesError is the transport-level error that carries a failed pull or
// pushpull: its text is the wire version, the error code and the message,
// which the client turns back into the matching sentinel (RemoteValuesError).
type ValuesError struct{ text string }

func (e *ValuesError) Error() string { return e.text }

func NewValuesError(err error) error {
	return &ValuesError{text: string([]byte{Version, byte(CodeOf(err))}) + err.Error()}
}

// RemoteValuesError decodes the error a server sent for a pull or pushpull,
// or returns nil if err is not one.
func RemoteValuesError(err error, from string) error {
	var re *transport.RemoteError
	if !errors.As(err, &re) || len(re.Msg) < 2 || re.Msg[0] != Version {
		return nil
	}
	return ErrorOf(Code(re.Msg[1]), from, re.Msg[2:])
}

// ParseResponse checks a response's version and code, returning the
// payload or the error it carries (from names the peer).
func ParseResponse(b []byte, from string) ([]byte, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d-byte response from %s", codec.ErrMalformed, len(b), from)
	}
	if b[0] != Version {
		return nil, fmt.Errorf("%w: response version %d from %s", codec.ErrWireVersion, b[0], from)
	}
	if c := Code(b[1]); c != CodeOK {
		return nil, ErrorOf(c, from, string(b[2:]))
	}
	return b[2:], nil
}

// Ops set apart from the others: a worker's heartbeat (incarnation u64),
// the server ops that carry a request id (client u64, seq u64) before the
// push body, and the coordinator loop's internal "worker lost" request,
// which is never on the wire (decoders refuse it).
const (
	OpHeartbeat  Op = 64
	OpPushID     Op = 66
	OpPushPullID Op = 67
	OpLost       Op = 68
)

// Code is how an error travels on the wire: one byte, mapped back to a
// sentinel by the receiver.
type Code uint8

const (
	CodeOK Code = iota
	CodeMalformed
	CodeUnknownKey
	CodeLengthMismatch
	CodeUnsortedKeys
	CodeWireVersion
	CodeRejected
	CodeClosed
	CodeInternal
	CodeAborted
	CodeServerUnavailable
	CodeStartTimeout
	CodeNonFinite
	CodeRestarted
	CodePeerLost
	CodeForbidden
	CodeJoinRefused
	CodeRejoinTooSoon
	CodeBelowMinimum
	CodeLogFailed
	CodeClockNotOpen
)

var codeErrors = [...]error{
	CodeMalformed:      codec.ErrMalformed,
	CodeUnknownKey:     store.ErrUnknownKey,
	CodeLengthMismatch: store.ErrLengthMismatch,
	CodeUnsortedKeys:   store.ErrUnsortedKeys,
	CodeWireVersion:    codec.ErrWireVersion,
	CodeRejected:       ErrRejected,
	CodeClosed:         ErrClosed,
	CodeInternal:       ErrRemote,
	CodeAborted:        ErrAborted,
	// later codes lose to earlier ones when an error wraps several
	CodeServerUnavailable: ErrServerUnavailable,
	CodeStartTimeout:      ErrStartTimeout,
	CodeNonFinite:         store.ErrNonFinite,
	CodeRestarted:         ErrRestarted,
	CodePeerLost:          ErrPeerLost,
	CodeForbidden:         ErrForbidden,
	CodeJoinRefused:       ErrJoinRefused,
	CodeRejoinTooSoon:     ErrRejoinTooSoon,
	CodeBelowMinimum:      ErrBelowMinimum,
	CodeLogFailed:         ErrLogFailed,
	CodeClockNotOpen:      store.ErrClockNotOpen,
}

// CodeOf maps an error to its wire code.
func CodeOf(err error) Code {
	for c, e := range codeErrors {
		if e != nil && errors.Is(err, e) {
			return Code(c)
		}
	}
	return CodeInternal
}

// ErrorOf maps a wire code and message back to an error wrapping the
// matching sentinel.
func ErrorOf(c Code, from, msg string) error {
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

// The sentinels the wire codes stand for. Package ps re-exports each
// under the same name and value and documents it; they live here so that
// a code maps back to the same error on every side of the wire.
var (
	ErrRejected               = errors.New("ps: rejected by coordinator")
	ErrClosed                 = errors.New("ps: closed")
	ErrRemote                 = errors.New("ps: remote error")
	ErrAborted                = errors.New("ps: run aborted")
	ErrServerUnavailable      = errors.New("ps: server unavailable")
	ErrStartTimeout           = errors.New("ps: start timed out")
	ErrRestarted              = errors.New("ps: restarted worker refused")
	ErrPeerLost               = errors.New("ps: peer lost")
	ErrForbidden              = errors.New("ps: forbidden")
	ErrJoinRefused            = errors.New("ps: join refused")
	ErrRejoinTooSoon          = errors.New("ps: rejoin before the cooldown")
	ErrBelowMinimum           = errors.New("ps: too few workers")
	ErrLogFailed              = errors.New("ps: request log not written")
	ErrCoordinatorUnavailable = errors.New("ps: coordinator unavailable")
)
