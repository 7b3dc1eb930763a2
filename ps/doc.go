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
// The types a user needs, in the order they are needed (each one's doc
// gives its zero value and lifecycle): Cluster and ClusterConfig; TrainConfig,
// Model (FromModel adapts a model.Model), ShardSampler; Timeline and
// WorkerState to watch a run; LeaseConfig (failures), DurableConfig (a
// server that restarts), CoordinatorStore (a coordinator that restarts),
// MembershipConfig (workers that join and leave); store.Config
// (ClusterConfig.Store: the optimizer, and Deterministic BSP sums).
// Errors are sentinels checked with errors.Is; a cancelled context
// returns ctx.Err().
//
// Beneath: ps/store is the pure core (the parameter store, optimizers,
// initializers, checkpoint format), ps/layout places keys on servers,
// ps/event and ps/metrics are what the roles report (ps/metrics/prom
// exports to Prometheus); ps's old names for them remain as deprecated
// aliases. Beside: transport carries the messages, epsp holds the
// policies, ps/sim replays a run in virtual time, ps/pstest starts
// clusters for tests. A program that wires its own transports uses the
// roles one by one (NewServer, NewCoordinator, NewWorker, NewClient), as
// Example_training does. Design notes sit beside their code (client.go,
// worker.go, lease.go, partial.go, membership.go, durable.go,
// coordstate.go, access.go, wire.go, cluster.go).
package ps
