// Package epsp holds Falcon's synchronization policies: when a worker may
// start its next clock and how each gradient push is applied.
//
// # Overview
//
// A Policy is a pure, deterministic state machine (no goroutines, locks,
// timers or wall-clock reads; time is passed in as the duration since the
// run began). It sees the cluster through a read-only View (worker clocks,
// the model version, progress, batch sizes, parallelism, pending transfers)
// and answers two kinds of questions:
//
//   - Admit: how is this push applied? Apply it now with a scale
//     (ASP, SSP, DynSGD, ConSGD, slack EPSP v2), accumulate it into its clock's buffer
//     until a barrier flushes it (BSP, enforced EPSP, Sync-opt, LB-BSP), or
//     drop it (Sync-opt's late gradients).
//   - Step: an event happened (a worker finished a clock, reported
//     progress, a control tick, a transfer was answered or completed, a
//     worker finished training and left);
//     which orders follow? Orders are flushes of clock buffers, releases of
//     waiting workers, parallelism and batch-size changes, transfers of
//     sample ranges from stragglers to pioneers, and assignments of sample
//     ranges made at a release (Output.Assign: they ride on the releases,
//     and a taker pushes its own and its assigned samples in one push
//     whose Parts name each owner).
//
// A Coordinator is the pure core that keeps the View, validates events and
// policy output, and counts what was decided (Stats). Every decision and
// order is checked before it is applied, and a bad one is an error
// (ErrPolicyOutput) naming the policy and the field: push and flush scales
// finite and >= 0 (0 reads as 1), accumulations only into buffers >= 0,
// flushes only of clocks that exist (reached by a worker, or a buffer a
// push accumulated into), each once, releases only of workers that exist, parallelism and batch
// sizes positive, transfers only of a computing worker's batch. A policy
// that leaves every worker still training waiting is reported as
// ErrStalled (at once without a control tick, after Config.StallAfter with
// one) instead of leaving the run to its caller's deadline.
//
// The Coordinator keeps the ledger of who computes which samples, so that
// every sample of a clock counts at most once: a worker pushes its own
// samples, and another worker's only when an order covers them. A plain
// push of another owner's samples needs a transfer from that owner to the
// pusher, in that clock, accepted by the giver and not yet pushed, whose
// range holds them (one push per transfer, and EventTransferDone only
// after it: a done with no push admitted is ErrBadEvent); the parts of
// other owners in a push with Parts must be owed to the pusher by
// assignments. Anything else is refused (ErrBadPush and ErrNotOrdered) and
// changes nothing. A runtime that loses a worker mid-clock hands its
// unprocessed samples — the prefix of its batch below the ranges it gave
// away, unless its own push of the clock was admitted — to a survivor
// through the same ledger (Coordinator.HandOver returns the order to
// send); the taker's push of them is then admitted once, the lost worker
// may no longer push, clock or give away that clock, and its EventLeave
// ends the hand-over. What a lost worker owed as a taker — accepted
// transfers and hand-overs it has not pushed, orders to it not yet
// answered, samples assigned to it at its release — the runtime gives to
// survivors with Coordinator.Retarget (each range to the first survivor
// that is not its giver; moved transfers keep their ID, and the policy's
// events keep naming the taker it ordered), so every sample of the clock
// is counted once and its barrier passes; what no survivor can take (the
// range's giver is the only one) it gives up with Coordinator.Abandon:
// lost, counted in Stats.SamplesAbandoned, and no clock waits for it. A
// worker that merely leaves (EventLeave) keeps the ranges it took: it may
// still compute them, and its push of them is admitted.
//
// Two drivers run the same Coordinator and policy values: package ps
// drives it live, over a transport, and package ps/sim drives it in
// virtual time. Because policies are pure, a policy can be unit-tested
// with a scripted view (package epsptest) and its simulated behaviour is a
// statement about the code that ships.
//
// Gradients are pushed as means over the samples a worker processed. In
// ApplyNow mode the runtime applies g·Scale·Samples/BatchSamples, and in
// Accumulate mode a flush applies Σ Samples·g / Σ Samples, so the parts of
// a batch split by a transfer add up to the update its owner would have
// pushed alone.
//
// # Membership
//
// The set of workers may change while a run goes on. Config.MaxWorkers
// gives the worker slots (ids NumWorkers .. MaxWorkers-1 start outside the
// run); EventJoin admits a slot that is not a member — a new one, or a
// worker that left — and EventLeave takes one out, either finished
// (Event.Quit false: its schedule is done) or departed mid-run (Quit true:
// it quit, or the runtime lost it). A joiner becomes a member at the join
// clock J = max over members of Clock + (1 if computing, 0 if waiting) —
// the clock the next release goes into — waiting to be released into J as
// if it had just finished J-1: a barrier counts it from J on, never in the
// clock in progress, and a staleness gate measures it from J. A barrier
// never waits for a departed worker (MinClock and the stall check skip
// non-members). Config.MinWorkers pauses the run while fewer workers are
// members and none has finished: the policy still runs and completed
// clocks are still flushed, but releases are held (no worker starts a
// clock, so no clock advances, and no ErrStalled is reported) until joins
// bring the count back; then the held releases go out with the policy's.
// Paused and Members report the state, JoinClock the clock a joiner would
// get. A worker that departed mid-run may rejoin only Config.RejoinAfter
// after its leave (ErrRejoinTooSoon before); a join of a member, or of a
// worker with transferred or assigned work outstanding, is ErrJoinRefused.
// The View of an elastic run has the Membership capability.
//
// Only policies that implement Elastic accept joins (and an elastic
// Config): BSP, SSP and ASP. The others size per-worker state at their
// first Step from NumWorkers — EPSPv2's speed trackers, kept-batch ledger
// and tiers, Falcon's straggler model, FlexRR's and LB-BSP's speed
// estimates, Sync-opt's and DSSP's per-step counts — and would have to
// grow it and decide what a newcomer's speed is before its first clock;
// they refuse joins with ErrJoinRefused (ErrBadConfig for an elastic
// Config at NewCoordinator). They still see EventLeave as before. The
// ps/sim simulator does not model membership changes.
//
// # Usage
//
//	c, err := epsp.NewCoordinator(epsp.Config{NumWorkers: 4, Batch: 32}, epsp.NewSSP(2))
//	...
//	d, err := c.Admit(now, epsp.Push{Worker: w, Owner: w, Clock: k, BaseVersion: v, Samples: 32, BatchSamples: 32})
//	// apply the push per d, then:
//	out, err := c.Step(now, epsp.Event{Kind: epsp.EventClock, Worker: w, Clock: k})
//	// carry out out.Flush on every server, then deliver out.Release, ...
//
// # Policies
//
// BSP, ASP and SSP(s) are in this file's package, as are two
// reconstructions of Falcon's EPSP and the baselines FlexRR, Sync-opt,
// ConSGD, DynSGD, LB-BSP and DSSP; each constructor's doc states its rule,
// parameters, defaults and source, and which parts are reconstructions.
//
// [EPSPv2] is the one to use: EPSP's throughput layer composed with a
// synchronization scheme (below). [EPSP] ("epsp-v1") is the first
// reconstruction (enforced or slack, transfers only to blocked pioneers, a
// controller that equalises speeds), kept so that studies can show what v2
// changed.
//
// # EPSP as a throughput layer
//
// Falcon's EPSP "supports both enforced- and slack-synchronization
// schemes" (falcon.md §1); how its straggler projection, parallelism
// control and task transfer act under slack synchronization is not
// public. Our reconstruction [ours] separates what EPSP adds from how
// updates are applied. The throughput layer is one piece, the same under
// both schemes: each worker's speed from its busy compute time
// (samples per busy second, with jumps on changes of speed), the
// parallelism controller (each host's cores where they add the most
// samples/s), a plan of every clock from those speeds, and residual
// transfers (a blocking worker's unclaimed prefix split among it and the
// workers it blocks). Under both schemes a balanced clock takes ΣB/Σr,
// which is why the controller maximises Σr on every host under both.
//
//   - Enforced (EPSPv2Config.Scheme Enforced, "epsp-v2"; every EPSP v2
//     result before issue 27): a barrier each clock and one
//     sample-weighted update per clock. The plan is made at the clock's
//     start: T* = ΣB/Σr over the released workers, and a worker projected
//     past (1+margin)·T* gives its batch's tail to workers with room, as
//     assignments that ride on the releases. Residual transfers start
//     when a worker blocks at the barrier.
//   - Slack (Scheme Slack, "epsp-v2-slack"): an SSP gate s
//     (EPSPv2Config.Staleness, default [DefaultSlackStaleness] = 3: the
//     study's SSP bound, and enough to ride out the one late clock of a
//     slowdown) and each push applied on arrival with DynSGD's damping,
//     Scale = 1/(d+1)·b/B̄ (d the updates applied since the pusher's
//     pull, b its batch, B̄ the mean initial batch, so every sample weighs
//     the same whoever computed it). The plan balances the push rates: at
//     each release, a worker's batch becomes round(r·T*), T* = ΣB₀/Σr
//     over all members with the total batch ΣB₀ fixed, when its projected
//     clock time runs past T* by more than the margin or ends early by
//     more than twice it (see [EPSPv2] for the band); every worker then
//     completes 1/T* clocks per second, leads stay at 0-1 clock and the
//     gate rarely binds. Residual transfers start when a worker blocks at
//     the gate: the samples, computed by the taker in its own later clock,
//     are pushed into the giver's clock (the ledger's) and damped by the
//     taker's staleness.
//
// Why rate balancing and not the enforced plan's assignments under a
// gate: a clock-start assignment needs its giver and taker released
// together into the same clock, and a gate releases workers into
// different clocks at different times, so a slack scheme planning by
// assignment plans nothing (the reason EPSP v2 had no slack mode before
// issue 27). Moving samples between workers in different clocks is what
// a transfer does, at the cost of an order, an answer and the samples'
// bytes, and only once a worker has already fallen behind. Sizing each
// worker's own batch to its speed costs no message (the order rides on
// the release), acts before anyone falls behind, and gives each worker
// exactly the load the enforced plan would (keep r·T*, take up to r·T*),
// held in its own clock instead of moved within one. It is LB-BSP's rule
// applied to push rates under a gate, with EPSP's busy speeds,
// parallelism control and transfers around it. What it does not do is
// balance the number of samples each push carries: a straggler pushes
// smaller batches as often as the others, and b/B̄ in the scale weighs
// them accordingly. With all workers equally fast the slack scheme
// orders and scales exactly what DynSGD with the same gate does.
//
// # Baseline parameters
//
// Each baseline's defaults and where each value comes from. [P] is the
// primary text or code, [S] a third-party summary or reimplementation,
// "ours" a choice of this package; the research note behind it is
// baselines-params.md. Jiang et al.'s SIGMOD'17 paper (ConSGD, DynSGD) is
// known here only by its abstract and first page: its method section,
// which would give ConSGD's λ and whether ConSGD runs under a staleness
// bound, was not found (searched: the research notes; the page, code and
// documentation corpora). ConSGD therefore runs as DynSGD, from the same
// paper, runs: with no gate.
//
//	Baseline  Parameter                      Default                          Source
//	FlexRR    SSP slack s                    1                                kensiuhk/flexps reproduction [S], not the paper
//	FlexRR    helper group                   every other worker               reproduction [S]; the ring of GroupSize > 0 is ours
//	FlexRR    steal φ / helpee threshold     0.5 of the tail / ≤ 0.9·batch    reproduction [S]
//	FlexRR    speed EWMA α, HelpBehind       0.5, off                         ours
//	Sync-opt  backups b                      max(1, round(0.04·(N+b)))        Chen et al. 96+4 of 100 [S]
//	Sync-opt  b in a study                   best of {1, 2, 3, stragglers}    ours (SyncOptBackupCandidates), chosen like the rate
//	Sync-opt  aggregation                    first N fresh, drop stale        Chen et al. [S]; TF SyncReplicasOptimizer [P]
//	ConSGD    scale λ                        1/M                              ours (the paper's λ not found)
//	ConSGD    SSP gate                       none (Staleness −1)              as DynSGD; a gate s ≥ 0 is an option, ours
//	DynSGD    scale                          1/(d+1), d = version − base      cerndb/dist-keras [P]
//	DynSGD    window / SSP gate              1 / none                         ours (dist-keras: 5) / dist-keras [P]
//	LB-BSP    batch b_i                      ∝ speed, Σ b_i = B               paper abstract [P], reading note [S]
//	LB-BSP    speed predictor                EWMA α = 0.5                     ours (the paper: NARX)
//	LB-BSP    total batch B, aggregation     initial total, Σ b_i·g_i / B     ours / reading note [S]
//	DSSP      range [s_L, s_U]               [3, 15]                          TF reimplementation [S]
//
// Until issue 27, ConSGD ran under an SSP gate s = 3 of ours by default
// while DynSGD ran without; results computed with that default handicapped
// ConSGD alone. Learning rates are not policy parameters: the studies
// select one per policy family.
package epsp
