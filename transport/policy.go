package transport

import (
	"time"
)

// CompressionObserver is an optional interface a CompressionPolicy may
// implement to learn from outcomes. After encoding a message for which the
// policy chose a codec other than CodecNone, a transport calls Observe with
// the chosen codec, the raw size, the compressed size (even when the
// transport then sends the raw bytes because compression did not shrink
// them) and the time compression took. Observe is called from many
// goroutines at once and must be cheap; it must not retain any slice.
type CompressionObserver interface {
	Observe(to NodeID, c Codec, raw, wire int, elapsed time.Duration)
}

// Never is the policy that never compresses. A nil CompressionPolicy in a
// transport's configuration means the same.
var Never CompressionPolicy = never{}

type never struct{}

func (never) Choose(NodeID, []byte) Codec { return CodecNone }

// Always returns a policy that compresses every message with c.
func Always(c Codec) CompressionPolicy { return always{c} }

type always struct{ c Codec }

func (p always) Choose(NodeID, []byte) Codec { return p.c }

// AboveSize returns a policy that compresses with c every message of at
// least n bytes and sends smaller ones raw (small messages rarely shrink
// enough to repay the codec's fixed cost).
func AboveSize(n int, c Codec) CompressionPolicy { return aboveSize{n, c} }

type aboveSize struct {
	n int
	c Codec
}

func (p aboveSize) Choose(_ NodeID, msg []byte) Codec {
	if len(msg) >= p.n {
		return p.c
	}
	return CodecNone
}

// PolicyFunc adapts a function to a CompressionPolicy.
type PolicyFunc func(to NodeID, msg []byte) Codec

// Choose calls f(to, msg).
func (f PolicyFunc) Choose(to NodeID, msg []byte) Codec { return f(to, msg) }

// encodeBody applies policy p to msg bound for node to. It returns the
// codec actually used and the bytes to send: msg itself for CodecNone, or
// the compressed bytes appended to scratch[:0]. When compression does not
// shrink msg, msg is sent raw with CodecNone. Observers are told the
// outcome of every attempted compression.
func encodeBody(p CompressionPolicy, to NodeID, msg, scratch []byte) (Codec, []byte, []byte, error) {
	if p == nil || len(msg) == 0 {
		return CodecNone, msg, scratch, nil
	}
	c := p.Choose(to, msg)
	if c == CodecNone {
		return CodecNone, msg, scratch, nil
	}
	start := time.Now()
	out, err := Compress(scratch[:0], c, msg)
	elapsed := time.Since(start)
	if err != nil {
		return CodecNone, nil, scratch, err
	}
	if o, ok := p.(CompressionObserver); ok {
		o.Observe(to, c, len(msg), len(out), elapsed)
	}
	if len(out) >= len(msg) {
		return CodecNone, msg, out, nil
	}
	return c, out, out, nil
}
