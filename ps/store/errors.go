package store

import (
	"errors"

	"github.com/falconml/falcon/ps/internal/codec"
)

// Errors returned by the store. Check them with errors.Is; the returned
// errors wrap them with details (the key, the lengths). Package ps
// re-exports each under the same name and value, and the server sends
// them to clients as wire codes, so a client sees the same sentinel.
// Their text keeps the "ps:" prefix it had before the store had a
// package of its own.
var (
	// ErrUnsortedKeys: the keys of a request are not strictly increasing
	// (sorted and unique).
	ErrUnsortedKeys = errors.New("ps: keys not sorted and unique")
	// ErrUnknownKey: a key was never initialised on the server that owns it.
	ErrUnknownKey = errors.New("ps: unknown key")
	// ErrLengthMismatch: a value length disagrees with the key's length, or
	// len(vals) disagrees with the lengths.
	ErrLengthMismatch = errors.New("ps: length mismatch")
	// ErrNonFinite: a gradient or initial value is NaN or ±Inf, a scale
	// or weight lies outside float32's range, or the request's arithmetic
	// would store a NaN or ±Inf (a value, an optimizer state or a
	// gradient buffer overflowing float32); the request was refused and
	// changed nothing.
	ErrNonFinite = errors.New("ps: non-finite value")
	// ErrNotDeterministic: a flush asked to leave a sender's pushes out
	// (FlushExcept) of a store without Config.Deterministic, which sums
	// every sender's pushes together.
	ErrNotDeterministic = errors.New("ps: the store does not keep each sender's pushes apart (Config.Deterministic)")
	// ErrClockNotOpen: an accumulating push named a clock outside the
	// window of open clocks (Config.AccumulateWindow): already
	// flushed, or too far ahead. Nothing was buffered.
	ErrClockNotOpen = errors.New("ps: clock not open for accumulation")
	// ErrCorruptCheckpoint: a checkpoint could not be decoded (truncated, a
	// checksum mismatch, inconsistent sizes) or does not fit the server.
	ErrCorruptCheckpoint = errors.New("ps: corrupt checkpoint")
	// ErrCheckpointMismatch: a checkpoint is intact but not this server's: it
	// names another server, another run or another layout, or is of another
	// format version. The error names both sides.
	ErrCheckpointMismatch = errors.New("ps: checkpoint of another server, run, layout or format")
	// ErrMalformed: bytes given to ApplyBytes or AccumulateBytes, or a
	// checkpoint field, could not be decoded.
	ErrMalformed = codec.ErrMalformed
)
