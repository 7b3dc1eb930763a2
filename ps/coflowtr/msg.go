package coflowtr

import (
	"encoding/binary"
	"fmt"

	"github.com/falconml/falcon/coflow/live"
	"github.com/falconml/falcon/ps/internal/wire"
)

// Magic is the first byte of every envelope this package puts on the
// inner transport. It is neither the ps wire version (2) nor the ps
// cluster's control byte (0xFE), so a wrapped server tells an envelope
// from a plain ps request by its first byte.
const Magic = 0xFC

// Envelope kinds (the byte after Magic).
const (
	kindData  = 1 // request: the ps request travels as flow Flow of Coflow (Bytes long); response inline
	kindReply = 2 // request: the ps request follows inline; its response travels as flow Flow (Bytes long)
	// responses
	respInline = 1 // the ps response follows
	respFlow   = 2 // the ps response travels as the request's reply flow
)

// envHead is the fixed part of a request envelope: magic, kind, coflow
// id u64, flow u32, bytes u64 (little-endian).
const envHead = 2 + 8 + 4 + 8

// envelope is a decoded request envelope.
type envelope struct {
	kind   byte
	coflow live.CoflowID
	flow   int
	bytes  int64
	inline []byte // kindReply: the ps request
}

func encodeEnvelope(e envelope) []byte {
	b := make([]byte, envHead, envHead+len(e.inline))
	b[0], b[1] = Magic, e.kind
	binary.LittleEndian.PutUint64(b[2:], uint64(e.coflow))
	binary.LittleEndian.PutUint32(b[10:], uint32(e.flow))
	binary.LittleEndian.PutUint64(b[14:], uint64(e.bytes))
	return append(b, e.inline...)
}

// decodeEnvelope decodes a request envelope; the inline part aliases b.
func decodeEnvelope(b []byte, maxBytes int64) (envelope, error) {
	if len(b) < envHead || b[0] != Magic {
		return envelope{}, fmt.Errorf("%w: %d-byte envelope", ErrMalformed, len(b))
	}
	e := envelope{kind: b[1], coflow: live.CoflowID(binary.LittleEndian.Uint64(b[2:])),
		flow: int(binary.LittleEndian.Uint32(b[10:]))}
	n := binary.LittleEndian.Uint64(b[14:])
	if n < 1 || n > uint64(maxBytes) {
		return envelope{}, fmt.Errorf("%w: flow of %d bytes (bound %d)", ErrMalformed, n, maxBytes)
	}
	e.bytes = int64(n)
	switch e.kind {
	case kindData:
		if len(b) != envHead {
			return envelope{}, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(b)-envHead)
		}
	case kindReply:
		e.inline = b[envHead:]
	default:
		return envelope{}, fmt.Errorf("%w: envelope kind %d", ErrMalformed, e.kind)
	}
	return e, nil
}

// decodeResponse splits an envelope response into its kind and the inline
// ps response (aliasing b).
func decodeResponse(b []byte) (byte, []byte, error) {
	if len(b) < 2 || b[0] != Magic || (b[1] != respInline && b[1] != respFlow) || (b[1] == respFlow && len(b) != 2) {
		return 0, nil, fmt.Errorf("%w: %d-byte envelope response", ErrMalformed, len(b))
	}
	return b[1], b[2:], nil
}

// Phase is which half of a clock's traffic a coflow carries.
type Phase uint8

const (
	// Push: the workers' pushes to the servers (request bytes).
	Push Phase = 1
	// Pull: the servers' replies to the workers' pulls (response bytes).
	Pull Phase = 2
)

func (p Phase) String() string {
	switch p {
	case Push:
		return "push"
	case Pull:
		return "pull"
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// classify reads a ps request: its phase (0 for traffic that is not a push
// or a pull), the clock of a push, and for a pull the size of its reply
// (4 bytes per value: the values-only answer, ps/internal/wire). Anything
// it cannot read is 0: the request then goes on the inner transport as it
// is, and the server judges it.
func classify(req []byte) (ph Phase, clock int64, reply int64) {
	op, body, err := wire.Header(req)
	if err != nil {
		return 0, 0, 0
	}
	switch op {
	case wire.OpPushID, wire.OpPushPullID:
		if len(body) < 16 {
			return 0, 0, 0
		}
		body = body[16:] // client u64, seq u64
		fallthrough
	case wire.OpPush, wire.OpPushPull:
		if len(body) < 9 {
			return 0, 0, 0
		}
		return Push, int64(binary.LittleEndian.Uint64(body[1:])), 0 // mode u8, clock i64
	case wire.OpPull:
		if len(body) < 4 {
			return 0, 0, 0
		}
		n := int(binary.LittleEndian.Uint32(body))
		if n < 1 || len(body) != 4+n*wire.SegBytes {
			return 0, 0, 0
		}
		var vals int64
		for i := range n {
			vals += int64(binary.LittleEndian.Uint32(body[4+i*wire.SegBytes+8:]))
		}
		return Pull, 0, 4 * vals
	}
	return 0, 0, 0
}
