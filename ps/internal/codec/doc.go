// Package codec holds the little-endian byte codec that package ps and its
// store share: an Encoder and a Decoder of fixed-width integers, floats and
// length-prefixed strings (a short read sets Decoder.Err, wrapping
// ErrMalformed, and every later read returns zero), and the float32 block
// moves (Put, Get, View, SubScaled, AxpyNeg) that read and write values as
// their IEEE-754 bits, in bulk on little-endian hosts.
//
// It is internal: the wire protocol (package ps) and the checkpoint format
// (package ps/store) are built on it; a user of ps never needs it. It
// imports nothing of ps, so it sits beneath both.
package codec
