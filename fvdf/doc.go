// Package fvdf implements Swallow's compression-aware coflow scheduling:
// Fastest-Volume-Disposal-First (FVDF) with stage pipelining, resource
// conservation, starvation freedom and codec-speed prediction in the loop,
// plus a live transport.CompressionPolicy that applies the same rule to
// single messages.
//
// # Overview
//
// Swallow (Zhou et al., "Swallow: Joint Online Scheduling and Coflow
// Compression in Datacenter Networks", IPDPS 2018; "Fast Coflow Scheduling
// via Traffic Compression and Stage Pipelining in Datacenter Networks", IEEE
// Trans. Computers 2019) extends Varys' SEBF to coflows whose flows may be
// compressed. Its full text is not public: everything here beyond the
// abstract (the ordering key, the greedy compression choice, the rate and
// core rules, the starvation parameters, the job and contention models) is
// our reconstruction, consistent with the Varys model it extends (research
// note swallow.md §1–§4). Constants that are ours say so and are
// configurable.
//
// A compressed flow passes three stages, compress (sender cores) → transmit
// (wire) → decompress (receiver cores). Pipelined in chunks it disposes of
// raw volume at D = min(k_s·s, r/ρ, k_r·u): see [PipelinedTime],
// [ChunkedTime] (exact flow-shop time for chunk size b, what package
// coflow's simulator models) and [SequentialTime] (no pipelining).
// Compression pays only when D > r.
//
// [Scheduler] is FVDF (its doc lists the five steps): order coflows by
// ascending effective disposal bottleneck Γ' (compressing, greedily at the
// bottleneck machine, where that is faster), MADD rates so a coflow's flows
// finish together, cores reserved as r/(ρ·s) at the sender and r/(ρ·u) at
// the receiver, backfilling of bandwidth then cores (raw flows switched to a
// codec where free cores make them faster, then idle cores handed to
// compressed flows as headroom), a CPU budget
// (Config.CPUFraction) and Varys' T/δ starvation guard. With compression
// disabled, or no codec that shrinks, it returns exactly package coflow's
// SEBF allocation (tested bit for bit).
//
// Prediction in the loop: the scheduler decides with an [Estimator]
// ([Nominal], [Oracle], or [Predicted] wrapping any predictor.Predictor by
// name), while the simulator advances with [TrueSpeeds] driven by a seeded
// [Contention] drift; measured speeds flow back to the predictor. An
// estimator that reports its recent relative error ([Uncertain], as
// Predicted does) makes the scheduler plan with the pessimistic speed
// predicted/(1 + error).
//
// Incremental work: a call re-plans (the greedy) only the coflows whose
// Γ' it needs and cannot get otherwise — not a coflow that did not run
// since the last call (its Γ' is remembered), nor one whose bracket of Γ'
// from its per-port loads (O(P_c + F_c) additions) is disjoint from every
// other coflow's, nor, in step 3, one that waits for a full port; bandwidth
// backfilling visits only coflows with open ports and the core steps only
// coflows given a rate. Allocations are exactly those of re-planning
// everything (a lockstep test against the previous implementation). A
// running coflow whose bracket overlaps another's is still re-planned at
// every call, its Γ' depending on every flow's remaining bytes; the greedy
// then sorts its candidates by insertion from their order at its previous
// plan (linear when its flows advanced together) and keeps the ports in an
// indexed heap. Config.ReplanPeriod (off by default) is an approximation
// that scales a running coflow's last Γ' by its raw bottleneck's change
// instead, re-planning every N calls. The cost ladder before and after,
// and the approximation's effect on order and CCT, are in STUDY.md §7.
//
// Per-flow data classes: with coflow.Fabric.Classes, every ρ, s and u
// above is the flow's own class's (coflow.Fabric.Profile), so FVDF orders
// and compresses per flow; [Scheduler.Order] exposes the priority order of
// its last call (the study compares it with SEBF's).
//
// Baselines that isolate FVDF's mechanism ([Baseline], [ParseBaseline],
// [NewBaseline]; the names cmd/falcon-coflow -sched and the matrix in
// internal/coflowmatrix take, each under the rescheduling rules
// [ReschedVarys], [ReschedTimers], [ReschedEvery]):
//
//   - "sebf+lz4", "dclas+lz4", "sincronia+lz4" (and "+snappy", "+policy"):
//     the raw scheduler inside a [Compressor], which always compresses
//     (or decides per flow with the Policy rule) and is work-conserving:
//     bandwidth a core-starved flow cannot use is re-offered in the same
//     call to the other flows, in the inner scheduler's priority order;
//   - "sebf+write-lz4": compress at write, as Spark does
//     (spark.shuffle.compress): [JobPlan.CompressAtWrite] puts ρ·V on the
//     wire at full rate and charges the codec's CPU to the map and reduce
//     stages;
//   - "sebf-order+fvdf": FVDF with SEBF's order ([Config.OrderBySEBF]),
//     so FVDF over it is what FVDF's ordering earns;
//   - "sebf-rho": SEBF keyed by the compressed bottleneck ρΓ ([SEBFRho])
//     inside an always-lz4 Compressor.
//
// Whole cores ([BaselineConfig.WholeCores], the study's PROTOCOL-v3 §7):
// FVDF reserves whole cores per compressed flow ([Config.WholeCores]) and
// the Compressor likewise takes whole codec workers, ⌊free cores⌋ per
// port, ⌈need⌉ per flow at each end in the inner scheduler's order, a flow
// with none left sent raw ([CompressorConfig.WholeCores]). With a port of
// fewer than one free core nothing is compressed on the wire.
//
// [Jobs] wraps coflows in map → shuffle → reduce jobs for JCT; [PlanJobs]
// builds multi-stage jobs (chains of 1..k shuffles from a declared
// distribution, each released by its parent's completion after the
// reducers' compute and their reading of the shuffle as written, ρ·V when
// compressed; [DAGConfig]), whose one-stage, no-I/O case is exactly Jobs'
// formula. [Run]
// replays a workload under "fvdf", "sebf", "fvdf-raw" or any baseline
// name (under ReplayConfig.Rescheduling) and returns [Metrics]; examples/fvdf is the command-line front end. [WaitTracker]
// measures how long coflows go unserved.
//
// [Policy] applies the rule per message on a live link: compress when
// max(V/s, ρV/B, V/u) + overhead < V/B, with s and ρ learned online from
// the transport's outcomes (transport.CompressionObserver).
//
// Codec profiles (s, u, ρ per data class, measured on real data with lz4
// and snappy) live in subpackage codecprof.
//
// # Usage
//
//	sched, err := fvdf.New(fvdf.DefaultConfig(), nil) // decide with the fabric's profiles
//	sim, err := coflow.NewSim(coflow.DefaultConfig(), fabric, sched)
//	res, err := sim.Run(coflows)
//
//	m, err := fvdf.Run("fvdf", coflows, ports, fvdf.ReplayConfig{Bandwidth: 125e6, Cores: 4, Predictor: "ewma"})
//
//	pol, err := fvdf.NewPolicy(fvdf.PolicyConfig{Bandwidth: 125e6}) // a transport.CompressionPolicy
//
// All types except Policy are single-goroutine values with no clocks and no
// goroutines; Policy is safe for concurrent use.
package fvdf
