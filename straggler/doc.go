// Package straggler is the pure, deterministic straggler toolkit of the
// Falcon SDK: speed tracking, straggler projection, the elastic
// parallelism controller, the task-transfer planner, and the
// heterogeneity models that tests and the simulator use.
//
// # Overview
//
// Nothing here starts goroutines, reads the wall clock or uses global
// randomness; time is passed in as a [time.Duration] since the run began
// and randomness comes from a seed. The same values therefore run inside
// the live coordinator and inside the virtual-time simulator.
//
//   - [Tracker]: per-worker EWMA of samples/s from progress reports.
//   - [Project]: straggler projection — when each worker finishes its
//     clock, how long it will then be blocked by the staleness gate, and
//     its class (straggler / pioneer / normal) against the median, as a
//     printable [Snapshot].
//   - [Controller]: elastic parallelism control — moves cores within each
//     host's budget to the workers whose projected clock they shorten
//     most, using a [Speedup] curve, with a dead-band.
//   - [Planner]: task transfer — which idle worker takes which tail range
//     of which straggler's batch for the same clock, with a ledger that
//     never assigns a sample twice.
//   - [Model] and [Hetero]: seeded heterogeneity — static speed factors,
//     per-host cores, persistent stragglers, transient slowdowns and an
//     [Amdahl] speed-up curve per worker.
//
// # Sources and reconstructions
//
// Falcon's full text is not public (Zhou et al., IEEE TC 2020; ICDCS
// 2019). Only its vocabulary is: straggler projection, elastic training
// parallelism control, task transfer from stragglers to pioneers. The
// formulas of [Project], [Controller] and [Planner] are therefore
// RECONSTRUCTIONS, documented on each and configurable. The transfer
// defaults (φ = 0.5 of the remaining tail, a helpee at most 0.9·batch
// done) come from a public reproduction of FlexRR's RapidReassignment;
// the multi-taker split (TransferConfig.SplitAll: a tail shared among
// all idle takers in proportion to their speeds, so all finish together)
// is ours, our reading of "fully exploiting cluster computation capacity";
// the EWMA α = 0.5 from LB-BSP's default in our notes. The classification
// threshold θ = 0.2, the dead-band 0.1, the serial fraction 0.1 and all
// slowdown-injection parameters are ours.
//
// # Usage
//
//	tr, _ := straggler.NewTracker(n, straggler.DefaultTrackerConfig())
//	tr.Observe(straggler.Report{Worker: w, Clock: c, Done: done, Elapsed: el})
//	snap := straggler.Project(now, states, straggler.ProjectConfig{Staleness: 0})
//	fmt.Print(snap) // one line per worker
//
//	ctl, _ := straggler.NewController(straggler.DefaultParallelismConfig())
//	newP := ctl.Plan(loads, coresPerHost)
//
//	pl, _ := straggler.NewPlanner(straggler.DefaultTransferConfig())
//	orders := pl.Plan(givers, takers)
//	pl.Resolve(orders[0].ID, accepted, lo, hi)
package straggler
