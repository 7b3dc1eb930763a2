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
// Transient failures: a Store request that fails with an error a retry
// may not meet (etcd without a leader or changing it, the request's own
// timeout, a connection lost or refused, too many requests) is retried,
// 50 ms doubling to 1 s, while the leadership holds, for at most one
// lease TTL from the first failure; every Store transaction is fenced and
// idempotent, so a retry of one that was applied changes nothing. Past
// the TTL the Store gives the leadership up (Lost closes, the lease is
// revoked when etcd answers, so a standby leads at once) and fails with
// ErrNotLeader and ps.ErrSuperseded: the coordinator stops as a crash
// would instead of aborting the run (before, one failed request during a
// save aborted it). A leader cut off from etcd has lost its lease by then
// anyway (Lost at 9/10 of the TTL). Refusals (a fenced write refused, a
// request too large, a compacted revision) are not retried.
//
// # The cluster binary
//
// cmd/falcon-cluster-etcd is cmd/falcon-cluster (internal/clusterbin)
// with -etcd-endpoints and the other -etcd-* flags: its coordinator role
// runs under RunStandby with a Store, binds the coordinator's address
// only once it leads, stands by again when deposed, and, once the run is
// over, marks it so ("coordinator/done" under the prefix) so that each
// standby exits when it leads in turn. The workers and servers must reach
// whichever process leads at the one coordinator address they dial: the
// same -listen on one host, a Service with a readiness probe across hosts
// (cmd/falcon-cluster/deploy/jobset-etcd.json). TestProcess_TakeoverOverTCP
// and TestDeploy_JobSetEtcd run it as processes.
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
