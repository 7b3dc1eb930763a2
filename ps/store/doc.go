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
//	err = s.AccumulateFrom(0, "worker-1", keys, nil, grad, 64) // per sender with Deterministic
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
// # Deterministic flushes
//
// Without Config.Deterministic a clock has one buffer, to which each push
// is added as it comes. float32 addition is not associative: with three
// or more pushes of a clock ((a+b)+c and (a+c)+b differ in the last bit
// of some values; two pushes commute), two runs whose pushes arrive in
// different orders, as they do over a network, end with parameters that
// differ, and training lets the difference grow.
//
// With Config.Deterministic each sender's pushes of a clock
// (AccumulateFrom; a ps server passes the pushing worker's node name) go
// to a buffer of their own, and Flush adds the senders' sums in
// increasing byte order of their names ("worker-10" before "worker-2"),
// then takes the step. The result no longer depends on how the senders'
// pushes interleave. Two runs of the same build on the same architecture
// end with bit-identical parameters when:
//
//   - the same senders push the same gradients, with the same weights,
//     into the same clocks: the same data order (sampler, seeds) and the
//     same policy decisions (a policy that decides from measured times,
//     LB-BSP's batch sizes or EPSP's transfers, gives the same bits only
//     when it decides the same);
//   - each sender's own pushes of a clock reach the server in the same
//     order (they are summed in the order they come; a ps Worker pushes
//     a clock once per server), and hold the same bits: a ps Worker
//     computing with Parallelism p > 1 adds its goroutines' partial sums
//     in the order they finish, so its push can differ in the last bits
//     from run to run; bit-identity needs p = 1 there (or a Model whose
//     sums do not depend on that order);
//   - the updates are accumulated and flushed: BSP and the averaged
//     synchronous policies (enforced EPSP, EPSPv2, LB-BSP, Sync-opt).
//     A push applied at once (ASP, SSP, DynSGD, ConSGD, EPSP with slack:
//     epsp.ApplyNow) is a step of its own in arrival order, which no
//     buffer reorders: not bit-identical;
//   - the workers keep their names (a worker's name is its place in the
//     order; a replacement under another name moves its pushes).
//
// It holds across a server restart: checkpoint format 3 keeps one
// pending buffer per clock and sender, and the request log (package ps)
// names the sender of each accumulate, so a replay rebuilds the same
// buffers. TestDeterministicOrderFree, TestDeterministicCheckpoint and
// package ps's TestDeterministicBSP_ArrivalOrder (3 and 4 workers over
// TCP, forced arrival orders) and TestDeterministicBSP_ServerRestart
// check it.
//
// Because each sender's pushes stay apart until the flush, a flush can
// also leave a sender out (FlushExcept): its pushes of the clock are
// dropped, never applied, and the result is that of a store that never
// had them, bit for bit (TestFlushExcept). Package ps does so with a
// worker it lost after its push reached some servers only.
//
// The overflow checks hold for the sum Flush forms: a push is checked
// against the sum of its key's bounds in every sender's buffer of its
// clock, grown by one rounding per sender, and a push those bounds cannot
// clear is checked exactly, adding the senders' sums in Flush's order
// into scratch, and refused with ErrNonFinite, changing nothing, if that
// sum overflows. The accumulate window (ErrClockNotOpen) is unchanged.
//
// Cost. Memory: a clock's buffers take, for S senders each pushing K
// keys of V values,
//
//	S·(8·V + 128·K + 256) bytes
//
// (Store's formula per sender's buffer), so for a shard of N values in E
// keys pushed by S workers at most AccumulateWindow·S·(8·N + 128·E + 256)
// bytes for the open clocks (4 bytes per value and worker, doubled at
// most by slice growth: S times the plain store's), plus the spares: one
// merged buffer and S emptied sender buffers kept for the next clock.
// BufferedBytes counts them. Time (BenchmarkStore_AccumulateFlush and
// its Deterministic twin: four pushes of one key of n values, from four
// senders, then the flush, SGD; minimum of 7 interleaved 300 ms runs on a
// loaded 2-core amd64 machine), per iteration:
//
//	n      plain     deterministic   ratio (of medians)
//	1e3    1.13 µs   2.45 µs         2.2× (2.1×)
//	1e5    95.0 µs   148 µs          1.6× (1.6×)
//	1e6    1.11 ms   1.89 ms         1.7× (1.9×)
//
// The flush reads each sender's sum once more (SSE), and S buffers of n
// values leave the cache sooner than one; an accumulate looks its keys
// up in each other sender's buffer of the clock for the bound. Without
// the option the store does what it did before (TestPlainFlushUnchanged
// pins its bits; ps/sim's outputs are byte-identical).
//
// # Checkpoints
//
// A Checkpoint is a store's durable state plus a header naming whose it
// is; its encoded form (version CheckpointVersion, documented on
// Checkpoint) ends in a CRC-32C, and DecodeCheckpoint checks every count
// against the bytes that remain before it allocates. A file of another
// format version (1 and 2 included: version 3 added the sender of each
// pending buffer) is refused with ErrCheckpointMismatch naming both
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
