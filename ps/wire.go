package ps

import (
	"errors"
	"fmt"

	"github.com/falconml/falcon/ps/internal/codec"
	"github.com/falconml/falcon/transport"
)

// # Wire format
//
// (This part of the package documentation sits beside the code it
// describes; the package doc in doc.go is the map.)
//
// One binary format for every ps message: a version byte, an op byte, then
// little-endian fields and float32 values as IEEE-754 bits (see wire.go).
// On little-endian hosts a block of values is their memory image, moved
// with one copy(); a portable loop serves big-endian hosts. Pushes pad
// their values to a 4-byte offset so servers apply them straight from the
// wire bytes (SGD and accumulation through an SSE kernel on amd64). Pulls
// are answered with the bare values, which the client has the transport
// write straight into the caller's slice (transport.RequestAppend; the
// server is a transport.AppendHandler). Errors travel as one-byte codes and
// come back as this package's sentinels.
//
// # Hostile input
//
// No message ends a process. Every decoder checks counts and lengths
// against what exists before it allocates: a pull may name at most the
// values its server holds (resolved against the store before the reply is
// grown), a push or init at most the values it carries, a batch size read
// from the wire at most 2^24 samples. A panic while a role serves a message
// (a bug, or a policy's) is recovered: the request is answered with an
// error wrapping ErrRemote, one line goes to the role's logger (WithLogger;
// slog.Default() otherwise) with the stack, and a panic inside the
// coordinator's step aborts the run with an error that names it. The fuzz
// targets FuzzServerRequest, FuzzCoordinatorRequest, FuzzWorkerMessage,
// FuzzClientResponse, FuzzCheckpointDecode and FuzzRequestLogReplay (a
// server's request log at start) cover every decoder; they fail on a
// recovered panic too, and CI fuzzes each under a memory limit (.ci/fuzz).
//
// # Performance
//
// BenchmarkPairedPushPull alternates a Push+Pull of n float32 values per
// worker with its ceiling inside one loop — copy() of the same bytes
// in-process, a raw TCP stream of them over loopback — and reports both and
// their ratio:
//
//	go test -run '^$' -bench PairedPushPull -benchtime 500ms -count 5 ./ps
//
// In-process, with the bulk paths, a push is lent (header plus a byte view
// of the caller's gradients, transport.RequestAppendV; the server is a
// transport.VectorHandler) and applied from the caller's memory by the SGD
// kernel, and a pull is one copy from the server's values into the
// caller's slice: one pass of SGD (reads weights and gradients, writes
// weights) and one copy against the ceiling's two copies. Over TCP the
// same request is written with one writev from the caller's memory and
// the pulled values are read from the socket straight into the caller's
// slice. Measured side by side on a loaded 2-core VM (median of 5, 1e6
// values, one worker): 23 GB/s in-process, 0.85 of the copy ceiling;
// 2.3 GB/s over loopback TCP, 0.65 of a raw TCP stream. Values that fit in
// L2 (1e5) reach only about 0.35 of a copy, which runs at cache speed.
//
// The cost of refusing non-finite values is measured in package ps/store.

// The ps wire format. Every message starts with two bytes: the wire version
// and the operation. Integers and floats are little-endian; float32 values
// travel as their IEEE-754 bits, back to back. Responses start with the wire
// version and an error code (0 = ok); a failed response carries the error
// text after the code.
//
//	push, pushpull: mode u8 | clock i64 | scale f64 | weight f64 | n u32 | n × (key u64, len u32) | pad | values
//	pull:           n u32 | n × (key u64, len u32)
//	init:           n u32 | n × (key u64, len u32) | pad | values
//	flush:          clock i64 | scale f64
//	layout:         (empty); response n u32 | n × (key u64, len u32)
//
// pad is 0 to 3 zero bytes that make the values start at an offset from the
// message's first byte that is a multiple of 4, so a server can read them
// in place as float32s (version 2 added it).
//
// A successful pull or pushpull is answered with the values alone, no
// header, so that a client can have them written straight into its output
// slice (see Client.Pull); the client knows their exact length. A failed
// one is answered with a transport-level error whose text is the version,
// the error code and the message (see valuesError).
const wireVersion = 2

type op uint8

const (
	// server requests
	opPing op = iota + 1
	opInit
	opPush
	opPull
	opPushPull
	opFlush
	opLayout
	// coordinator requests and messages
	opHello
	opAdmit
	opClock
	opProgress
	opTransferResult
	opTransferDone
	opFail // worker → coordinator message: the worker failed (reason)
	// worker messages
	opRelease
	opSetParallelism
	opSetBatch
	opTransferOrder
	opTransferTask
	opAbort // coordinator → worker message: the run is aborted (reason)
	opLeave // worker → coordinator request: the worker has finished training
)

const (
	modeApply      = 0
	modeAccumulate = 1
)

// segBytes is the wire size of one (key, len) pair.
const segBytes = 12

type (
	encoder = codec.Encoder
	decoder = codec.Decoder
)

func newMsg(b []byte, o op) encoder { return encoder{B: append(b[:0], wireVersion, byte(o))} }

// header checks the version and returns the op of a message.
func header(b []byte) (op, []byte, error) {
	if len(b) < 2 {
		return 0, nil, fmt.Errorf("%w: %d-byte message", ErrMalformed, len(b))
	}
	if b[0] != wireVersion {
		return 0, nil, fmt.Errorf("%w: version %d, want %d", ErrWireVersion, b[0], wireVersion)
	}
	return op(b[1]), b[2:], nil
}

// okResponse starts a successful response.
func okResponse(b []byte) []byte { return append(b[:0], wireVersion, byte(codeOK)) }

// errResponse encodes err as a failed response.
func errResponse(err error) []byte {
	return append([]byte{wireVersion, byte(codeOf(err))}, err.Error()...)
}

// returnsValues reports whether req asks for a values-only response (pull,
// pushpull).
func returnsValues(req []byte) bool {
	return len(req) >= 2 && (op(req[1]) == opPull || op(req[1]) == opPushPull || op(req[1]) == opPushPullID)
}

// valuesError is the transport-level error that carries a failed pull or
// pushpull: its text is the wire version, the error code and the message,
// which the client turns back into the matching sentinel (remoteValuesError).
type valuesError struct{ text string }

func (e *valuesError) Error() string { return e.text }

func newValuesError(err error) error {
	return &valuesError{text: string([]byte{wireVersion, byte(codeOf(err))}) + err.Error()}
}

// remoteValuesError decodes the error a server sent for a pull or pushpull,
// or returns nil if err is not one.
func remoteValuesError(err error, from string) error {
	var re *transport.RemoteError
	if !errors.As(err, &re) || len(re.Msg) < 2 || re.Msg[0] != wireVersion {
		return nil
	}
	return errorOf(errCode(re.Msg[1]), from, re.Msg[2:])
}

// parseResponse checks a response's version and code, returning the
// payload or the error it carries (from names the peer).
func parseResponse(b []byte, from string) ([]byte, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d-byte response from %s", ErrMalformed, len(b), from)
	}
	if b[0] != wireVersion {
		return nil, fmt.Errorf("%w: response version %d from %s", ErrWireVersion, b[0], from)
	}
	if c := errCode(b[1]); c != codeOK {
		return nil, errorOf(c, from, string(b[2:]))
	}
	return b[2:], nil
}
