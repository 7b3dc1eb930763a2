// Package ps is Falcon's parameter server: servers hold a model's
// parameters, workers train it, and a coordinator paces them with a
// synchronisation policy of package epsp. NewCluster starts them all from
// one ClusterConfig, in this process or one process per node (Example,
// runnable):
//
//	train, _, _ := model.Synthetic(model.SyntheticConfig{Train: 2000, Test: 1, Seed: 1})
//	m := model.NewSoftmax(train.D, train.Classes)
//	c, err := ps.NewCluster(ctx, ps.ClusterConfig{Servers: 1, Workers: 2, Policy: epsp.NewSSP(1),
//		Store: store.Config{Optimizer: store.SGD{LR: 0.5}}})
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	tc := ps.TrainConfig{Keys: []uint64{0}, Lens: []int{m.NumParams()}, Init: store.Zeros{}, Clocks: 20}
//	stats, err := c.Train(ctx, ps.FromModel(m, train), ps.ShardSampler{N: train.N, Workers: 2}, tc)
//
// # The types a user needs, in the order they are needed
//
//   - Cluster: made by NewCluster (a zero Cluster is not usable), which
//     starts the servers, the coordinator and the workers and returns when
//     they are up (at most StartTimeout). Train trains on the local workers
//     and returns when they have run their clocks; Wait blocks until the
//     whole run is over (the node of a multi-process cluster calls it);
//     Close ends the roles, then the transports, is idempotent and returns
//     within CloseTimeout. Client gives the key-value API (Push, Pull).
//   - ClusterConfig: what to start. Servers (at least 1) and Workers (0:
//     servers only) must be set; NewCluster gives the other zero fields
//     the values of DefaultClusterConfig (BSP, batch 32, SGD 0.01, in
//     process, the Modulo partitioner, its timeouts). Secret, for TCP, needs at least 16 bytes
//     (transport.MinSecretLen; shorter is refused with
//     transport.ErrWeakSecret) and is stretched with scrypt before use;
//     use 32 random bytes.
//   - TrainConfig: the keys and lengths of the parameters, their
//     Initializer (store.Zeros, store.Uniform, ...) and the clocks to run.
//     Without Init the keys must already exist (ErrUnknownKey).
//   - Model, or FromModel to adapt a model.Model: the gradient of a batch.
//   - ShardSampler: which samples form a worker's batch (a value; set N
//     and Workers). Any Sampler works if it is deterministic.
//   - Timeline: an event.Observer (ClusterConfig.Observer) that records the run
//     as a Chrome trace; its zero value is ready and safe for concurrent
//     use. WriteJSON writes what it has seen so far: call it after Close
//     for the whole run (until then the roles may still emit events).
//   - WorkerState: one worker's clock, parallelism, batch, speed and class
//     (straggler or pioneer), a value from
//     Cluster.WorkerStates or ClusterConfig.OnState every StateEvery.
//   - LeaseConfig: how a silent worker or server, or a worker cut off
//     from a server, is found lost and what follows (zero value: 10 s
//     leases, the run aborts on a lost worker, naming it on every node).
//   - DurableConfig: checkpoints and the request log that let a server
//     restart where it stopped (zero value: not durable).
//   - CoordinatorStore (ClusterConfig.CoordinatorStore;
//     DirCoordinatorStore keeps it in a directory): the coordinator's
//     state, so that a coordinator killed and started again resumes the
//     run, its workers and servers waiting for it CoordinatorWait
//     (DefaultCoordinatorWait, 60 s) and then failing naming it (nil:
//     not durable, a dead coordinator ends the run); one superseded by a
//     standby (ErrSuperseded, Coordinator.Abandon) stops as a crash would.
//   - StoreConfig (ClusterConfig.Store): the servers' optimizer and
//     buffers; Deterministic sums a clock's pushes per worker, the workers
//     in name order, so BSP runs of any number of workers end
//     bit-identical whatever order their pushes arrive in (zero value:
//     arrival order; package store's doc, Deterministic flushes, says when
//     it holds and what it costs).
//   - MembershipConfig: workers that join and leave mid-run (zero value:
//     a 60 s pause below epsp.Config.MinWorkers, no callback).
//
// Errors are sentinels checked with errors.Is (ErrAborted, ErrPeerGone,
// ErrUnknownKey, ...); a cancelled context returns ctx.Err().
//
// # Beneath and beside
//
// Package ps/store is the pure core: the parameter Store, the optimizers
// (store.SGD, store.Momentum, store.Adam), the initializers, the refusal of
// non-finite values and the checkpoint format; package ps/layout places
// keys on servers (Modulo, KeyRange, Hash); package ps/event holds the
// events the roles report to an Observer; package ps/metrics is the
// Recorder they report metrics to (ClusterConfig.Metrics, WithMetrics; nil
// measures nothing), which ps/metrics/prom exports to Prometheus without ps
// importing it. The names ps used to have for them (ps.Store, ps.SGD,
// ps.Modulo, ps.Event, ...) remain as deprecated aliases. Package transport
// carries the messages (in process, or TCP with a secret, TLS and
// compression); epsp holds the policies; ps/sim replays a run in virtual
// time; ps/pstest starts clusters for tests.
//
// The roles one by one, for a program that wires its own transports: Server
// (a transport.Handler over a Store), Coordinator, Worker and Client
// (NewServer, NewCoordinator + Start, NewWorker + Start then Worker.Train,
// NewClient); Example_training shows that wiring in one process. Each part
// of the design is documented beside its code: the key-value API in
// client.go, the training loop, task transfer and assignments in worker.go,
// the timeline in timeline.go, failures and leases in lease.go, membership
// in membership.go, durability in durable.go, the coordinator's restart in
// coordstate.go, role checks in access.go, hostile input and performance in
// wire.go (the wire format itself in ps/internal/wire), clusters across
// processes in cluster.go.
package ps
