// Package store is the pure core beneath the parameter server (package
// ps): one server's shard of parameters (Store), the optimizers that
// apply updates to it (Optimizer: SGD, Momentum, Adam), the initializers
// that fill new keys (Initializer: Zeros, Constant, Uniform, Normal), the
// refusal of non-finite values and results, and the checkpoint format
// (Checkpoint, EncodeCheckpoint, DecodeCheckpoint, its header and version).
//
// It is named for what it holds: the parameter store, the layer that
// ps-lite and Bösen call the server's "KV store". It is pure in the sense
// of etcd raft's core: no goroutines, no locks, no network, no clocks, so
// the live server (ps.Server, which serialises calls under its lock) and
// the virtual-time simulator (ps/sim) run the same apply step and get the
// same bits. It imports nothing of ps or of transport; ps imports it.
//
//	s, err := store.New(store.Config{Optimizer: store.Adam{LR: 1e-3}})
//	err = s.Init([]uint64{1, 2}, []int{4, 8}, store.Uniform{Lo: -0.1, Hi: 0.1, Seed: 1})
//	err = s.Apply([]uint64{1}, nil, grad, 1)   // one optimizer step
//	err = s.Accumulate(0, keys, nil, grad, 64) // buffer for clock 0, weight 64
//	n, err := s.Flush(0, 1)                    // one step with the weighted mean
//	err = s.Pull(keys, nil, out)
//
// # Lifecycle and zero values
//
// A Store is made by New (a zero Store is not usable) and lives as long as
// its server; it is not safe for concurrent use. Every mutating call
// validates the whole request first and changes nothing when it returns an
// error. Config's zero value is usable: a nil Optimizer means SGD{LR:
// 0.01}, AccumulateWindow 0 means DefaultAccumulateWindow, and non-finite
// values are refused. The optimizers and initializers are plain values;
// their zero values are valid (an SGD of learning rate 0 changes nothing;
// Adam's zero Beta1, Beta2 and Eps mean 0.9, 0.999 and 1e-8).
//
// # Non-finite values
//
// A push, accumulation or init holding a NaN or ±Inf returns ErrNonFinite
// naming the key and element and changes nothing (one SSE2 pass over the
// request's values before the apply; Config.AcceptNonFinite skips it). So
// are finite requests whose arithmetic would store one: a scale or weight
// beyond float32's range, a step, a buffered sum or a flush that would
// overflow a value, an optimizer state or a buffer. Each is checked before
// anything changes, against per-key overflow bounds that cost a few
// float64 operations per key; a request the bounds cannot clear is
// computed exactly into scratch and stored only when every result is
// finite (finite.go), so a refused request never leaves some keys updated.
//
// Cost, measured paired against the build without the checks (ps's
// BenchmarkPairedPushPull, 7 interleaved runs of 500 ms, 1e6 values, one
// worker, in-process, medians): the non-finite pass is one more read of
// the pushed values (about 90 GB/s when they are in cache), 10.35 → 8.74
// pp-GB/s on a quiet hour, 2.33 → 1.95 on a loaded one. The overflow
// bounds add no pass over the values: in process CPU time (min of 15
// runs), an apply of one key of 1e3–1e6 values takes 0.97–1.08×
// (Momentum, Adam), four accumulates and a flush 0.49–0.56× (the float32
// accumulate uses the SSE kernel, and buffers are reused); with 1000 keys
// of one value each, a push takes 1.6× (SGD) and 1.1× (Adam), four
// accumulates and a flush 2.4× and 1.6× (a map lookup per key into the
// sparse buffer).
//
// # Checkpoints
//
// A Checkpoint is a store's durable state plus a header naming whose it
// is; its encoded form (version CheckpointVersion, documented on
// Checkpoint) ends in a CRC-32C, and DecodeCheckpoint checks every count
// against the bytes that remain before it allocates. A file of another
// format version is refused with ErrCheckpointMismatch naming both
// versions. BeginSnapshot and SnapshotSlice take a copy-on-write snapshot a
// slice at a time, so a server keeps serving while it checkpoints.
//
// # Errors
//
// ErrUnsortedKeys, ErrUnknownKey, ErrLengthMismatch, ErrNonFinite,
// ErrClockNotOpen, ErrMalformed, ErrCorruptCheckpoint and
// ErrCheckpointMismatch; check them with errors.Is. Package ps re-exports
// each with the same value, and its server sends them to clients as wire
// codes, so a ps.Client sees the same sentinels.
package store
