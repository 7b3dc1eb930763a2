// Package etcd keeps a Falcon coordinator's leadership and durable state
// in etcd, so that a standby coordinator takes over when the leader dies,
// with no shared volume (as TorchElastic's etcd rendezvous does for its
// agents). It is a module of its own (github.com/falconml/falcon/contrib/etcd):
// the core module does not depend on etcd.
//
// # Layers
//
// Backend is a connection to etcd under one key prefix (one job's
// namespace, Config.Prefix). It offers a small, general layer:
//
//   - a KV with revisions: Get, Put, Delete, List;
//   - Watch: the changes under a prefix from a revision on;
//   - Session: a lease this process renews every TTL/3; keys written with
//     Session.Put vanish TTL after the process dies;
//   - Election: Campaign blocks until this process leads; Leadership.Lost
//     closes when it no longer may act as leader; Resign hands over at
//     once; Leadership.Txn/Put/Get are fenced (applied by etcd only while
//     the leader key still exists with its create revision, Rev, which is
//     also a fencing token that grows with each leader).
//
// Store, a ps.CoordinatorStore (and ps.CoordinatorAppender) fenced by a
// Leadership, is the coordinator's durable state. RunStandby is the standby's loop:
// campaign; on winning, load the state and run the coordinator with the
// store; on losing leadership, cancel it at once.
//
// The same layer is meant to carry, later, membership (each member
// Session.Puts "members/<id>"; List + Watch give the membership and its
// changes, a dead member's key expires with its lease) and a rendezvous
// for elastic jobs over TCP (members publish their addresses under a
// round's prefix and the elected leader closes the round with a fenced
// write). Neither is built yet.
//
// # Timing and safety
//
// A leader whose process dies is replaced after its lease expires on the
// server: at most TTL after its last renewal, plus etcd's expiry sweep
// (500 ms) and one watch delivery. A leader that cannot renew sees Lost
// close when 9/10 of the TTL has passed since the start of its last
// successful renewal, before the server can expire the lease, so a
// coordinator that stops on Lost has stopped before its successor is
// elected (up to the difference of clock rates). A leader that misses
// Lost (paused, say) is still fenced: its Saves are refused with
// ErrNotLeader, and the state is its successor's.
//
// A deposed coordinator must stop as a crashed one does: RunFunc
// abandons it (ps.Coordinator.Abandon or ps.Cluster.Abandon) when its ctx
// is done, and the Store's refused saves wrap ps.ErrSuperseded, on which
// a ps coordinator stops the same way by itself instead of aborting the
// run (before ps had ErrSuperseded, TestTakeover_MidRunLosesNoSample's
// deposed leader aborted the run its successor was taking over).
//
// A state is kept in chunks of 16 KiB with a head record; a Save writes
// the chunks that changed, an Append the last chunk and the new ones, in
// one transaction, or, when more than 1 MiB changed, a new generation
// switched in atomically (Store). Measured on the embedded etcd (fsync
// off, a loaded 2-core machine): an append of 160 bytes 0.2-0.3 ms for
// states of 0 to 16 MiB (BenchmarkStore_Append). etcd keeps overwritten values until it
// compacts its history: run it with auto-compaction.
//
// Errors: ErrNotLeader (leadership lost, fenced write refused),
// ErrLeaseLost (a session's lease gone), ErrCorruptState, ErrClosed,
// ErrStopTimeout; test them with errors.Is.
package etcd
