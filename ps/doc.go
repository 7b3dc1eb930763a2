// Package ps is Falcon's parameter server: a key-value API in the
// vocabulary of ps-lite and Bösen, a pure parameter Store with server-side
// optimizers, and the server, coordinator and worker roles as thin
// concurrent shells over transport.Transport.
//
// # Overview
//
// Keys are uint64, values float32. Every call takes keys sorted and unique
// (ErrUnsortedKeys otherwise) and their values back to back; lens gives
// each key's value length, or nil for the client's fixed Width:
//
//	cl.Push(ctx, keys, grads, lens)           // one optimizer step per key, on its server
//	cl.Pull(ctx, keys, vals, lens)            // fills the caller's buffer
//	cl.PushPull(ctx, keys, grads, vals, lens) // both, one round trip per server
//
// Servers own keys chosen by a Partitioner (Modulo by default: key mod
// the number of servers; KeyRange cuts the key space into ranges as
// ps-lite does; Hash mixes the keys first); a value longer than MaxSegment
// is split across servers (ps-lite#156). The Client fans a request out to the
// servers with errgroup and merges the replies. It validates a request
// completely before sending anything — every key known (Init creates keys;
// keys created by other clients are learned from the servers) with the right
// length — and every server validates its part again before applying it, so
// a refused request changes nothing. (A server that dies in the middle of a
// multi-server push can still leave the other servers' parts applied.)
// Errors are sentinels: ErrUnknownKey, ErrLengthMismatch, ErrUnsortedKeys,
// ErrServerUnavailable (naming the server and wrapping the transport error);
// a cancelled context returns ctx.Err().
//
// The Store is one server's shard: values, optimizer state (SGD, Momentum,
// Adam behind the Optimizer interface) and per-clock gradient buffers for
// barrier-style policies (Accumulate, then Flush applies the sample-weighted
// mean Σ n_i·g_i / Σ n_i with one optimizer step). It is pure and
// deterministic, and the ps/sim simulator runs the same apply step in
// virtual time. Buffers exist only for open clocks, the
// StoreConfig.AccumulateWindow (default 4) clocks after the last flushed
// one; an accumulate into another clock is refused with ErrClockNotOpen
// and allocates nothing. A buffer holds only the keys pushed into it (at
// most 8·V + 128·K + 256 bytes for V values in K keys) and is dropped at its
// flush (its memory kept as one spare for the next clock's buffer), so a
// shard of N values in E keys buffers at most
// (AccumulateWindow+1)·(8·N + 128·E + 256) bytes while flushes come in
// order.
//
// # Roles
//
// The Server role wraps a Store. The Coordinator role wraps an
// epsp.Coordinator in one goroutine: workers ask it to admit their pushes
// (apply now with a scale, accumulate for a clock, or drop) and tell it when
// a clock's pushes are stored; it carries out the policy's orders, flushing
// on every server and waiting for all acknowledgements before it releases
// anyone, then sending parallelism, batch and transfer orders.
//
// The Worker role runs the training loop of Worker.Train for a user Model
// (a gradient function over sample ids) and a Sampler (which sample ids form
// a worker's batch of a clock; deterministic, so any worker can compute any
// other's batch):
//
//	for each clock c:
//	    pull the parameters (BaseVersion = the version the release carried)
//	    compute the batch with p goroutines claiming chunks of samples;
//	    p follows the coordinator's SetParallelism orders, live
//	    ("parallelism as an infrastructure"); report progress every few chunks
//	    (then the samples of other workers' batches its release assigned it)
//	    push the mean gradient with its sample count, as the coordinator admits it
//	    tell the coordinator clock c is done; wait for release into c+1
//	after the last clock: leave (the policy stops waiting for this worker)
//
// Task transfer (falcon.md §3, a reconstruction: the paper's protocol is
// not public): a giver takes its orders in the order they were sent and
// accepts one only if it ends where the giver's own range ends (so what it
// keeps is always one prefix [0, end) of its batch, even with several
// pieces outstanding, as EPSP's multi-taker split orders them tail-first)
// and only for samples no goroutine has claimed yet (trimming the front of
// the range), so it never computes what it gave; the taker computes the
// range with its own latest parameters and pushes it with Owner = the
// giver, in one push; servers merge the parts sample-weighted (ApplyNow
// scales each part by Samples/BatchSamples; Accumulate weights by Samples),
// so every sample of a clock counts exactly once. The coordinator admits a
// push of another worker's samples only when an accepted transfer (or a
// lost worker's hand-over, or an assignment) covers it, once; any other is
// refused (ErrRejected, wrapping the epsp core's ErrNotOrdered message). A
// transfer's (or hand-over's) done is refused from any worker but its
// taker, and before the taker's push of it is admitted, so a barrier never
// passes a range not yet counted. The chunk size (4 samples) and progress
// cadence (every 2 chunks) are our defaults, in WorkerConfig.
//
// Clock-start assignments (epsp.Output.Assign: samples [Lo, Hi) of one
// released worker's batch given to another released into the same clock)
// ride on the release messages: the giver's release says it computes
// [0, keep) of its batch, the taker's lists its pieces (owner, lo, hi,
// owner's batch size), so planning at clock start adds no message. The
// taker runs one job with one cursor over its own samples and then the
// pieces in order (a chunk is filled across the boundaries; a piece's
// sample ids are Sampler.Batch(owner, clock, size)[lo:hi], and its EvChunk
// events name the owner) and sends one push for the clock: the gradient
// sum over all of them, Samples = own + assigned, BatchSamples = own batch
// + assigned, and Parts naming each owner's share; it clocks only after
// that push. Servers merge it sample-weighted like any push. A taker
// refuses reactive transfer orders while it holds assigned samples (its
// tail is not its own); a giver still gives reactively from the end of
// what it kept. Progress reports count own samples in Done, Assigned and
// Claimed and assigned ones in Extra and ExtraDone, and every push carries
// Busy, the job's compute time (its start, after the pull, to its last
// chunk), so Samples/Busy is the worker's speed.
//
// An Observer sees pushes, applies and flushes, clock starts and ends,
// pulls and pushes done, releases, parallelism and batch changes,
// transfers and computed chunks; each EventKind names the role that emits
// it. Events carry a process-wide Seq, and the coordinator emits the
// event a request reports (EvClockDone, EvLeave, transfer answers) before
// the orders it caused, so Seq order is causal within a process.
//
// # Observability
//
// Timeline is an Observer that writes a run as a Chrome trace-event JSON
// timeline (pull, compute, push, wait and transfer spans per worker and
// clock; open it in chrome://tracing or ui.perfetto.dev). A Cluster with
// its coordinator in this process tracks every worker's state (clock,
// waiting or left, parallelism, batch, speed, straggler or pioneer):
// Cluster.WorkerStates on demand, ClusterConfig.StateEvery and OnState at
// an interval.
//
// # Failures
//
// Nothing waits without a bound: Start waits at most StartTimeout for its
// peers and names who is missing; every request has a RequestTimeout (a
// hung peer cannot block a caller whose ctx has no deadline); a worker
// that fails after training began reports it, and a coordinator that cannot
// flush or release tells every worker, so the others return ErrAborted
// instead of waiting at a barrier forever.
//
// Peers that die without a word are found by leases (lease.go): workers
// heartbeat the coordinator every WorkerConfig.Heartbeat (500 ms), the
// coordinator pings every server every LeaseConfig.Interval, and a peer
// silent for LeaseConfig.Timeout (10 s; counted from the coordinator's
// Start, and at least StartTimeout, for a peer never heard from) is lost,
// declared within Timeout + Interval of its last sign of life. Measured
// with a 400 ms lease (ps/internal/faulttest, separate processes on
// loopback): a worker killed with kill -9 in the middle of a clock, or
// stopped with SIGSTOP, ends the coordinator and every other worker
// 403–412 ms later with an error naming it. A lost server aborts the run
// with ErrPeerLost naming it, unless it comes back within
// LeaseConfig.ServerRestart (see Durability). A lost worker aborts the
// run naming it (AbortRun, the default) or, with ContinueWithout, leaves
// the run (epsp.EventLeave) once the samples of its current clock it had
// not processed — the prefix of its batch it had not given away, unless its
// own push of the clock was already admitted — have been computed by a
// survivor and stored, so each sample counts exactly once (a push admitted
// but not stored when it died is lost, never counted twice). The hand-over
// is an order in the epsp core's transfer ledger
// (epsp.Coordinator.HandOver), so the survivor's push of those samples is
// admitted once, and the lost worker's own push of them never; transfer
// orders the lost worker had not answered, and any the policy makes of it
// or to it while it leaves, count as refused. What it owed as a taker is
// settled the same way: a range it pushed but never reported done is
// reported done for it, and every range it still owed — accepted transfers
// and hand-overs not pushed, orders to it not yet answered, samples
// assigned to it at its release — goes to a survivor that is not the
// range's giver (epsp.Coordinator.Retarget), which computes and pushes it
// like a transfer, so the clock's barrier passes with each sample counted
// once (with no such survivor the range is lost, counted in
// epsp.Stats.SamplesAbandoned, and no barrier waits for it). A worker that
// hears nothing from the coordinator for CoordinatorTimeout (10 s) fails
// with ErrPeerLost naming it; one whose request fails because the
// coordinator is gone fails at once with ErrCoordinatorUnavailable naming
// it.
//
// Incarnations: each Worker draws a random 64-bit incarnation id that its
// hello and heartbeats carry; the coordinator binds the first one it
// hears, and a restarted process under the same name is refused at Start
// with ErrRestarted instead of running its clocks a second time, as long
// as the name is a member of the run (under AbortRun its first
// incarnation's expired lease then ends the run naming it). Once the name
// has left the run — it quit, or was lost under ContinueWithout — a new
// process may rejoin after the cooldown (see Membership).
//
// # Membership
//
// Workers join and leave while training runs (membership.go; the rules are
// the epsp core's, see the epsp package doc). epsp.Config.MaxWorkers gives
// the worker slots (CoordinatorConfig.Workers names them all; a Cluster
// names them worker-<i> and its servers' role checks admit them). A hello
// from a worker that is not a member — a new slot, or a worker that left —
// is a join: it is admitted at the join clock J, the clock the next release
// goes into (under BSP the next barrier's clock, never the one in
// progress), waits for its release into J, pulls the parameters then and
// runs the clocks J .. TrainConfig.Clocks-1 only (Worker.JoinClock).
// Worker.Quit (or TrainConfig.Quit) leaves mid-run; a worker lost under
// ContinueWithout leaves too; barriers never wait for a departed worker.
// Below epsp.Config.MinWorkers (and while no worker has finished its
// schedule) the run pauses — clocks every member finished are still
// flushed, no worker is released into a new clock — and resumes when joins
// bring the count back; a pause longer than MembershipConfig.PauseTimeout
// (60 s) aborts the run with ErrBelowMinimum naming the members and the
// departed. A departed worker rejoins only epsp.Config.RejoinAfter after it
// left (ErrRejoinTooSoon before, saying how long is left); a join under a
// policy that does not accept joins is ErrJoinRefused naming it (BSP, SSP
// and ASP accept them; EPSP v2 and the other policies size per-worker
// state at the start and refuse). MembershipConfig.OnChange sees every
// change (kind, who, old and new size, clock, paused) so a program can
// rescale its learning rate: Coordinator.SetLRScale multiplies the scale
// of every update ordered from then on (flushes, ApplyNow pushes), e.g.
// by members/initial under the linear scaling rule
// (TestElastic_HookRescalesLR).
// Cluster.AddWorker starts a joiner in process; over TCP a joiner is a
// process like any worker, whose address the coordinator's Peers must
// hold. A hand-over of a lost worker's samples never goes to a joiner that
// has not started its first clock. Every sample counts once across joins
// and leaves (TestElastic_*: scale-up 2→3, scale-down 3→2, pause and
// resume, cooldown, asserted from the server's counts). The simulator
// (ps/sim) does not model membership changes.
//
// # Durability
//
// A server with ServerConfig.Durable set keeps a checkpoint (checkpoint.go:
// a header naming the run, the server and the layout, then key layout,
// per-key versions, values, optimizer state, buffered clocks, the last
// flushed clock and the request-id windows; a versioned format with a
// CRC-32C over the content, written atomically every CheckpointEvery
// flushes, after CheckpointPeriod, once the log holds LogMaxBytes
// (default 64 MiB, so a log never grows without bound) and by
// Server.Checkpoint) and, with Log, a log of every update since
// (durable.go), and restores both at NewServer. A truncated or
// bit-flipped checkpoint is refused with ErrCorruptCheckpoint naming the
// file; an intact one of another server, another run (DurableConfig.RunID:
// NewCluster picks a random one unless given the id of the run to
// resume), another layout (LayoutHash of the partitioner and servers) or
// another format version is refused with ErrCheckpointMismatch naming
// both sides (TestCheckpoint_CopiedFileRefused, _StaleRunRefused,
// _OldVersionRefused, _LayoutAndReshard). Temporary files of interrupted
// checkpoint writes are removed at start. The log is write-ahead: an
// update is logged (and fsynced, with LogSync) before it is applied and
// its request id marked, and an update answered with an error — the log
// could not take it (a full disk: ErrLogFailed), or the store refused it —
// has changed nothing, in memory or on disk, and is not marked, so its
// resend is served as new. Every log record's length and body carry a
// CRC-32C; a record that fails them is cut only when no complete record
// follows (a torn last write, never acknowledged), and otherwise refuses
// the start naming its offset; a log of another format version is refused
// naming both. The replay reads one record at a time.
//
// Checkpoints do not stall requests: the write lock is held to rotate the
// log and begin a copy-on-write snapshot (O(keys + buffered values +
// client windows)) and then per slice of 128 Ki values with their state;
// updates copy what the snapshot lacks of a key before writing it; the
// windows are sorted and the file encoded, fsynced and renamed without
// the lock, in the background for scheduled checkpoints. A 96 MiB Adam
// shard with 40k client windows: the checkpoint took 1.2–1.5 s and a
// one-value pull waited as long; now 0.15–0.69 s, holding the lock
// 1.9–3.5 ms to begin (the windows' copy, most of it) and 0.075 ms per
// slice (median), and the longest pull wait during it, 6–85 ms over six
// runs, is of the order of the loaded 2-core test machine's own without
// a checkpoint, 3–47 ms (BenchmarkCheckpoint_PullDuring, _LockHolds;
// TestCheckpoint_RequestsServedDuring, _SnapshotIsCopyOnWrite).
//
// With ClientConfig.Retry
// workers resend requests a restarting server does not answer, and pushes
// carry request ids, so a resent push is applied once (servers keep at
// most DurableConfig.DedupClients request-id windows, least recently used
// evicted first, and forget one unused for DedupIdle, which a Cluster sets
// from its Retry: dedup.go says why, and what an evicted client's late
// resend meets); LeaseConfig.
// ServerRestart makes the coordinator resend flushes as long. A BSP run
// whose server is killed with kill -9 and restarted mid-clock ends with
// parameters bit-identical to the fault-free run
// (TestDurable_ServerRestartBitIdentical in-process,
// TestMultiProcess_ServerRestartBitIdentical across processes). Reshard
// moves the checkpoints of N servers onto any number of servers, every
// value, state element and version bit for bit, and gives them the new
// layout's header (write them as the new servers' <Dir>/<name>.ckpt and
// start the cluster with the same RunID); it needs checkpoints without
// buffered clocks. Policies that count steps rather than clocks
// (Sync-opt) can leave a worker waiting once the others have run their
// last clock; stop it with its ctx.
//
// Non-finite values are refused: a push, accumulation or init holding a
// NaN or ±Inf returns ErrNonFinite naming the key and element and changes
// nothing (one SSE2 pass over the request's values before the apply;
// StoreConfig.AcceptNonFinite skips it; its cost is under Performance).
// So are finite requests whose arithmetic would store one: a scale or
// weight beyond float32's range, a step, a buffered sum or a flush that
// would overflow a value, an optimizer state or a buffer. Each is checked
// before anything changes, against per-key overflow bounds that cost a few
// float64 operations per key; a request the bounds cannot clear is
// computed exactly into scratch and stored only when every result is
// finite (finite.go), so a refused request never leaves some keys
// updated.
// WriteFileAtomic writes a file so that a crash leaves the old one or the
// new one whole.
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
// # Role checks
//
// A server of a Cluster with workers checks the role of every request's
// sender (ServerConfig.Access, ClusterAccess): pings, layouts and pulls
// come from anyone (evaluation and monitoring clients read), inits, pushes
// and pushpulls only from workers and the coordinator, flushes only from
// the coordinator; anything else is answered with an ErrForbidden error
// naming the op, the sender and the server, and changes nothing. The
// coordinator serves workers only (hello, admit, clock, progress,
// transfers, leave, heartbeat: ErrForbidden for any other sender), and a
// worker and a Cluster's control handler take orders and the end of a run
// from the coordinator only. The sender is the name the connection proved
// over TCP and the joined name in process. Over TCP those checks hold
// against members only under per-node identity (ClusterConfig.NodeTLS:
// the name is the one in the peer's certificate; or keys minted per pair,
// transport.PairKeys): a shared secret (or one TLS certificate for all)
// proves membership only, and any member can claim any role; without a
// secret the name is only claimed. A servers-only Cluster (Workers 0) and a Server built
// with a zero Access check nothing.
//
// # Wire format
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
// The refusal of non-finite gradients (ErrNonFinite) is one more read of
// the pushed values (an SSE2 pass at about 90 GB/s when they are in cache),
// and in this benchmark, whose ceiling pass evicts them, it costs a memory
// read: measured paired against the build without it (7 interleaved runs
// of 500 ms, 1e6 values, one worker, in-process, medians), 10.35 → 8.74
// pp-GB/s and 0.74 → 0.62 of the copy ceiling on a quiet hour, 2.33 →
// 1.95 pp-GB/s and 0.39 → 0.36 on a loaded one. The overflow bounds add
// no pass over the values: in process CPU time against the build without
// them (min of 15 runs), an apply of one key of 1e3–1e6 values takes
// 0.97–1.08× (Momentum, Adam; SGD's varies 0.54–1.01× between builds of
// the same loop, code placement), four accumulates and a flush 0.49–0.56×
// (the float32 accumulate now uses the SSE kernel, and buffers are
// reused); where the per-key work shows, 1000 keys of one value each, a
// push takes 1.6× (SGD) and 1.1× (Adam), four accumulates and a flush
// 2.4× and 1.6× (a map lookup per key into the sparse buffer). A trusted
// cluster can skip both checks with StoreConfig.AcceptNonFinite.
// Start-up is bounded: Start waits at most StartTimeout and the
// ErrStartTimeout error says who is missing, e.g.
//
//	ps: start timed out: waiting for 1/2 servers: server-1 unreachable (… dial "server-1" at 127.0.0.1:37093 …)
//
// # Clusters
//
// NewCluster starts a whole cluster from one ClusterConfig — servers and
// workers counted, the policy, batch, optimizer, partitioner, and the
// network: in-process (transport.InmemNetwork) or TCP with a shared
// secret, TLS and compression — or only the nodes of it named in Local,
// reaching the others at their Peers addresses (one process per node, as
// a deployment runs it). Nodes are named coordinator, server-<i> and
// worker-<i>; a worker's epsp.WorkerID is its i, so names and ids cannot
// disagree (a Worker whose WorkerConfig.ID differs from its position in
// the coordinator's list is refused at Start with ErrRejected). The
// cluster owns its transports. Train trains on the local workers; Wait
// blocks until the run is over (the coordinator's node waits for every
// worker to leave and then tells the others, which return on its word);
// Close ends the roles, then the transports, is idempotent and returns
// within CloseTimeout even when peers are dead. Across processes the
// nodes ping each other (the coordinator everyone, the others the
// coordinator); a peer silent for PeerTimeout ends Wait and Train with
// ErrPeerGone. The cluster's control requests (ping, stats, shutdown,
// abort) travel on the roles' transports with a first byte (0xFE) that
// is never this package's wire version. ParsePeers reads a static
// address book and PeersFromTemplate makes one from DNS names such as a
// Kubernetes JobSet's pods ("falcon-{role}-0-{rank}.falcon:7000").
// Example_cluster starts 2 servers
// and 3 workers over TCP with a secret and lz4 in under 30 lines;
// ExampleFromModel trains a model.Model in-process:
//
//	c, err := ps.NewCluster(ctx, ps.ClusterConfig{Servers: 2, Workers: 3, Policy: epsp.NewSSP(2)})
//	defer c.Close()
//	stats, err := c.Train(ctx, ps.FromModel(m, train), ps.ShardSampler{N: train.N, Workers: 3}, tc)
//
// FromModel bridges model.Model (mean loss, an overwritten gradient, one
// goroutine) and Model (sums added into the runtime's buffer, called from
// p goroutines), with one model copy per computing goroutine.
//
// The default partitioner (of Client and Cluster) is Modulo: key mod the
// number of servers, so dense small keys 0..n−1 spread over every server.
// (It was KeyRange over all of uint64, which put keys 0..10 on server-0.)
// Cluster.Train logs a warning when a server holds none of the keys
// (IdleServers). Elastic EPSP (on in epsp.DefaultEPSPConfig) can change
// no parallelism without a Topology or Parallelism.PMax; a Cluster whose
// workers all run in this process supplies OneHost{runtime.NumCPU()}
// (Cluster.Policy returns the policy it runs), and warns otherwise.
//
// # Usage
//
// pstest.NewCluster starts a whole cluster in-process for tests (built on
// NewCluster). Elsewhere, either use NewCluster, or join each role to a
// transport under its node name: a Server is just a transport.Handler;
// NewCoordinator + Start; NewWorker + Start, then Worker.Train.
// Example_training shows that wiring in one process.
package ps
