// Package pstest starts in-process parameter-server clusters for tests.
//
// # Overview
//
// NewCluster starts a ps.Cluster — a coordinator, servers and workers on
// one transport.InmemNetwork, or over loopback TCP with the TCP option —
// failing the test if any role does not start, and registers its Close
// with t.Cleanup: workers, then the coordinator, then the transports;
// then goleak checks that no goroutine outlives the test. Options choose the policy, the optimizer, batch,
// chunk and progress settings, the partitioner, an Observer, and the
// network's fault options (delay, drops, compression).
//
// # Usage
//
//	c := pstest.NewCluster(t, pstest.Workers(3), pstest.Policy(epsp.NewSSP(1)))
//	stats, err := c.Train(ctx, model, ps.ShardSampler{N: 600, Workers: 3},
//		ps.TrainConfig{Keys: keys, Init: store.Zeros{}, Clocks: 10})
//
// Recorder collects the cluster's events for order checks (barriers,
// exactly-once sample accounting). Workers(0) starts servers only, for
// key-value tests with NewClient.
//
// # Testing a policy live
//
// LedgerModel and LedgerSampler keep accounts instead of learning: one
// parameter per (worker, clock), so the final parameters say how each
// clock's update was weighted, and every read can be checked against the
// SSP guarantee. CheckExactlyOnce checks a recorded run's sample
// accounting: every sample of a finished clock computed once (EvChunk) and
// counted once by the admitted pushes, whether it was transferred or
// assigned at release (a push's Parts). RunPolicy puts them together — a user's own epsp.Policy runs
// on a live cluster with a straggler and is checked the way the SDK checks
// its own:
//
//	func TestMyPolicy(t *testing.T) {
//		st := pstest.RunPolicy(t, func() epsp.Policy { return NewMyPolicy() }, pstest.PolicyRun{})
//		t.Logf("transfers: %d", st.TransfersAccepted)
//	}
package pstest
