// Package sim is Falcon's virtual-time training simulator: a deterministic
// discrete-event simulation of a parameter-server cluster that runs the
// same epsp.Coordinator and policy values, and the same store.Store apply
// step, as the live runtime, on a model that really trains, with compute
// time taken from a straggler.Model instead of the wall clock.
//
// # Overview
//
// A [Queue] orders events by (virtual time, insertion sequence); there are
// no goroutines, so the same [Config] and [Job] give the same [Result] bit
// for bit. Each worker goes through the runtime contract of package epsp:
//
//  1. on release it pulls: the store is read at release time, the
//     response arrives after Network.Delay(4·params bytes), and
//     BaseVersion is the coordinator's Version() at the read;
//  2. it computes its batch in rounds: each of its p goroutines claims
//     Chunk samples, as in the live runtime, so a round is p·Chunk
//     samples and lasts the time its longest claim needs at R/p (a last,
//     partial round leaves goroutines idle; see roundWork), that is the
//     time to integrate the worker's rate
//     Rate(w, p, t) samples/s (piecewise constant; integrated exactly
//     across the model's NextChange points, and with core contention
//     among the workers of a host when the model offers RateAll), and
//     sends an EventProgress after every round but the last;
//  3. it computes the real mean gradient of the rows it processed at its
//     pulled parameters, pushes it (Admit; ApplyNow applies
//     g·Scale·Samples/BatchSamples, Accumulate adds it to the clock's
//     buffer weighted by Samples, Drop discards it), and after the push's
//     network delay sends EventClock and waits;
//  4. orders are carried out in the order Flush, SetParallelism, SetBatch
//     (read at the worker's next release), Transfers, Release; a tick
//     (EventTick) fires every TickPeriod.
//
// A TransferOrder reaches its giver after Network.Latency (orders sent
// together arrive in the order sent). The giver hands over the part of
// [Lo, Hi) it has not started (the round in progress is started), but
// only if Hi is the end of what it still owns: the pieces of a
// multi-taker split are ordered tail-first, and a piece below one that
// was refused or trimmed is refused, so the giver keeps one prefix
// [0, end) of its batch. It answers
// after another Latency (EventTransferResult). The taker receives the task
// one Latency later and computes it with its cached parameters as soon as
// it is not computing its own batch (a worker that is released while it
// still has transfer work starts its next clock after it); it pushes with
// Owner = the giver and the giver's clock, then EventTransferDone is sent.
// The simulator checks that no (owner, clock) ever receives more samples
// than its batch ([ErrInvariant]), so a sample computed twice is caught.
// SetParallelism re-plans every segment in progress on the worker's host.
//
// With Config.ComputeNoise c > 0 each round's modelled work is multiplied
// by an independent lognormal factor of mean 1 and CV c (one seeded stream
// per worker). Without it, workers of equal speed finish every clock at
// the same instant, which no real cluster does: asynchronous policies then
// apply the gradients of all workers computed on one model version in a
// burst, and straggler-handling policies see no gaps between equal
// workers. Result.ClockTime summarises the time from release to clock
// completion, the quantity to compare with a live run's.
//
// Time is charged per worker to busy (computing), blocked (clocked and
// waiting for release) and network (pull and push in flight); the three
// add up to the run's length. The model is evaluated on the test rows
// every EvalEvery; the time to target is the first evaluation at which the
// mean accuracy over the last TargetWindow evaluations reaches Target.
//
// Against the live runtime (cmd/falcon-study -live, 12 workers, 5
// scenarios, 11 policies, 3 seeds), with that example's ComputeNoise 0.05
// and Network.Latency 600 µs, both calibrated on live homogeneous BSP, the
// simulated throughput agrees: live clocks over simulated clocks have
// median 1.01 (within 5 % for 45 of 55 policy–scenario pairs) and the
// blocked fractions agree within 0.03 for 50 of 55.
//
// What the simulator does not model by default: contention on the
// network (each message takes latency + size/bandwidth independently),
// server CPU and the cost of the coordinator (cmd/falcon-study folds the
// in-process runtime's per-clock messaging cost into Network.Latency,
// calibrated on live throughput), and a communication window of local
// steps (epsp.LocalSteps; every clock pushes once). Compute time comes
// only from the heterogeneity model: the real gradient math is done, but
// its own duration on the machine running the simulation is not measured.
//
// # Cost model
//
// Config.Cost ([CostModel]; its zero value is the default above, bit for
// bit) charges pulls and pushes with the bytes and keys of a real
// network's tensor list (model.ResNet50Tensors, model.VGG16Tensors, or
// the trained model's own, e.g. LeNet-5's) while the gradient math stays
// the trained model's: the keys are spread over Servers parameter
// servers, every server's and worker's link is a max-min fair-shared
// fluid resource in virtual time (two pushes into one server link take
// twice as long as one; a slow link per worker: [CostScenarios]'s
// slow-link), each server applies the values it receives one push at a
// time at ApplyPerValue, and ComputeScale maps one trained sample to a
// network's forward+backward FLOPs on a [Device] ([Device.SampleTime],
// [ComputeScaleFor]). [EstimateStep] reports a configuration's compute
// and communication per step, alone and with every worker at once. With
// 12 workers, batch 64, 600 µs latency, one server and the default device
// (TestEstimateStep_Table), communication is of a step, alone / with
// every worker at once: LeNet-5 at the suite's CPU rate 7 % / 22 % at
// 10 Gbit/s and 20 % / 70 % at 1 Gbit/s; ResNet-50 40 % / 89 % and
// 87 % / 99 %; VGG-16 48 % / 92 % and 90 % / 99 %.
//
// [Contended] replaces the heterogeneity model's Amdahl curve (the one
// EPSP's controller assumes, serial fraction 0.1) with a [USL] curve and
// a cost for oversubscribing a host's cores ([DefaultContention], our
// values; Scenario.Contention).
//
// [Scenarios] is the fixed scenario suite of the convergence study
// (cmd/falcon-study); [StudyScenarios] adds the five scenarios of the
// study v2 protocol (cmd/falcon-study/PROTOCOL.md): several persistent
// stragglers, spare cores and its control, a foreign job that comes and
// goes on two hosts ([Foreign], a [straggler.Model] over a
// [straggler.Hetero]; build it with [Scenario.Model]) and 36 workers.
//
// # Usage
//
//	sp, _ := straggler.NewHetero(straggler.DefaultHeteroConfig(8))
//	train, test, _ := model.Synthetic(model.SyntheticConfig{Seed: 1})
//	cfg := sim.DefaultConfig()
//	cfg.Target = 0.7
//	res, err := sim.Run(cfg, sim.Job{
//		Model: model.NewSoftmax(train.D, train.Classes), Train: train, Test: test,
//		Speed: sp, Policy: epsp.NewBSP(),
//	})
//	fmt.Println(res.TimeToTargetSeconds(), res.BlockedFraction())
//	for _, t := range sim.CSVTables() { // one CSV per kind of row
//		f, _ := os.Create("run_" + t.Name + ".csv")
//		t.Write(f, res)
//		f.Close()
//	}
package sim
