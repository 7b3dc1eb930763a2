// Package coflow models coflow scheduling on a non-blocking big-switch fabric
// and simulates it exactly.
//
// # Overview
//
// A coflow is a set of flows (Flow: source port, destination port, raw
// bytes) that is useful only when all of them have finished; its completion
// time (CCT) is the finish time of its last flow minus its arrival. The
// fabric (Fabric) is the model of Varys, Aalo and Sincronia: one switch with
// no internal congestion, so only the ports' ingress (send) and egress
// (receive) links constrain rates. Each port also has CPU cores and the
// fabric a list of codec profiles (CodecProfile: compression and
// decompression speed per core, ratio), so that schedulers which compress
// traffic, such as FVDF (package fvdf), can be simulated.
//
// Traces in the public coflow-benchmark format are read and written by
// ReadTrace and WriteTrace; coflow weights, which that format lacks, come
// from an optional side file of "<coflow id> <weight>" lines
// (Trace.ReadWeights, Trace.WriteWeights) and reach Coflow.Weight through
// ToCoflows. Synthetic generates traces of the same shape from a seed,
// optionally at a set offered load (SynthConfig.Load; OfferedLoad measures
// a trace's).
//
// A Scheduler maps a State (active coflows, their unfinished flows with
// remaining bytes, the fabric) to a list of Allocations (per-flow wire rate,
// codec, cores). Optional capabilities are separate interfaces found by type
// assertion: EventDriven (reschedule only on coflow arrival and completion,
// Varys' rule) and Timer (ask to be called at a given time).
//
// Compression model (a reconstruction; the Swallow paper's formulas are not
// public, see the research notes): a flow compressed with codec c (ratio ρ,
// per-core speeds s at the sender and u at the receiver), wire rate r and
// cores k_s, k_r disposes of its raw volume at
//
//	D = min(k_s·s, r/ρ, k_r·u)                        (pipelined stages)
//	D = 1 / (1/(k_s·s) + ρ/r + 1/(k_r·u))             (sequential stages)
//
// and puts ρ bytes on the wire per raw byte. ρ, s and u depend on the
// flow's data class (Flow.Class, Fabric.Classes, Fabric.Profile): text,
// serialized rows and float tensors compress very differently.
// AssignClasses draws one class per coflow from a declared distribution.
//
// Calibration constants (Config.WireEfficiency, CompletionDelay,
// CodecCoreEfficiency, FlowWindowBytes with ChunkRoundTrip) bend the model
// toward a live runtime: r·e on the wire, η·k_s·s and η·k_r·u for the codec
// stages, D capped at W/T, a fixed delay on every finish. Their zero values
// are the model above, bit for bit; the values measured and fitted on the
// test bed (coflow/live on internal/testbed) are in
// cmd/falcon-coflow/CALIBRATION.md.
//
// # Usage
//
//	tr, err := coflow.ReadTrace(f)          // or coflow.Synthetic(cfg, rng)
//	cfs, err := tr.ToCoflows()
//	sebf, err := coflow.NewSEBF(coflow.DefaultOrderedConfig())
//	sim, err := coflow.NewSim(coflow.DefaultConfig(), tr.Fabric(coflow.CoflowsimBytesPerSec), sebf)
//	res, err := sim.Run(cfs)
//	fmt.Println(coflow.Summarize(res).Mean)
//
// A custom scheduler is any value with Name and Schedule; test it with
// package coflowtest (CheckAllocation and Checker, which have the shape of
// Config.Check; Driver; the RunSuite conformance suite).
//
// # Writing a scheduler
//
// Schedule(now, state) returns the allocation that holds until the next
// event. The State lists the active coflows in arrival order; each has its
// unfinished flows (source, destination, raw bytes, raw bytes remaining,
// current rate and codec), the bytes already sent, and per-port aggregates
// of its remaining bytes (Send, Recv) so that bottleneck computations cost
// O(ports) rather than O(flows). Flows without an allocation are paused. An
// Allocation gives a wire rate and optionally a codec (Allocation.Codec ≥ 1
// selects Fabric.Codecs[Codec-1]) with cores at both ends; the driver
// rejects any decision that exceeds a port's ingress or egress capacity or
// its free cores. The scheduler must not keep or modify the State. Two
// optional interfaces refine when it is called: EventDriven and Timer.
//
// Allocator holds the allocation rules the built-in schedulers are made of,
// on the capacity still free: MADD (Varys: every flow of a coflow gets
// remaining/Γ, Γ = max over its ports of remaining bytes / free rate, so
// its flows finish together), MaxMin (weighted max-min fair sharing by
// progressive filling), Backfill (greedy work conservation) and Bottleneck
// (Γ on full capacity, SEBF's key). A scheduler that orders coflows its own
// way is a sort plus a loop over them (see ExampleAllocator).
//
// # Built-in schedulers
//
// FIFO, SCF, NCF, LCF and SEBF (Ordered: an order plus Varys' MADD and
// backfilling), per-flow Fair (max-min) and PFP (shortest remaining flow
// first), D-CLAS (Aalo) and Sincronia (BSSI order with MADD and backfilling,
// or greedy per-flow priority).
// NewScheduler builds any of them by name with default settings. Guard
// adds Varys' T/δ starvation guard (a max-min fair slice every period)
// to any scheduler, for those without one built in.
//
// # Simulation semantics
//
// Sim is exact for the fluid model: rates are constant between events and
// each event time is computed in closed form, so there is no time step. An
// EventDriven scheduler (the default for the ordering baselines, D-CLAS and
// Sincronia, following Varys) is called on coflow arrivals and completions,
// on its timers, and when the last running flow ends; capacity freed by a
// flow that finishes early stays idle until then. Other schedulers are also
// called on every flow completion.
//
// Later stages of multi-stage jobs are coflows with a Parent: the
// simulator releases one when its parent completes, after a fixed delay
// plus a gap per byte the parent put on the wire (Coflow.Parent).
// Config.CoalesceFlowEvents bounds the cost of rescheduling on every flow
// completion (completions within Δ of the last call share one call).
// Times are kept relative to the earliest arrival, so shifting a trace in
// time (by whole nanoseconds, and a scheduler's timers with it) does not
// change any result; the event heap holds at most 2·running + 1024
// entries. A Sim can be Run again (one run at a time): every run starts
// afresh and, with the built-in schedulers, equals a run on a new Sim.
//
// # Performance
//
// The simulator keeps per-coflow flow lists and per-port aggregates
// incrementally and settles only the running flows at an event, so one
// scheduling step costs O(active coflows + running flows + ports) in the
// simulator; see Sim and each scheduler's doc for the scheduler's own cost.
// An allocation equal to the one applied last, with no flow finished
// since, is neither validated nor applied again, and D-CLAS answers a call
// whose queues, flows and capacities are unchanged from its previous
// allocation: both change no result, and together they make timer-driven
// calls that change nothing cheap (settling the running flows remains).
// Replaying the 526-coflow, 706k-flow FB2010 trace under SEBF takes about
// 0.6–0.7 s of CPU (BenchmarkReplayFB).
package coflow
