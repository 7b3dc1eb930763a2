// Package live is a coflow runtime over real sockets: a client API for
// applications, one agent per machine (a port of the big-switch fabric) and
// a coordinator that runs any coflow.Scheduler unchanged on the live state
// the agents report. It is Swallow "as a system" (Zhou et al., IPDPS 2018),
// in the shape of Varys' and Aalo's daemons and client libraries (register a
// coflow, put and get its flows, unregister).
//
// It lives under coflow/ because it is a second driver of coflow.Scheduler
// next to coflow.Sim: the State it builds, the allocation rules it checks
// (coflow.Config.CheckAllocation) and the rescheduling rules it applies are
// the simulator's, so a scheduler tested in simulation runs here as it is.
// It imports fvdf only through the scheduler interface and predictor for the
// codec profiles; nothing in coflow imports it.
//
// # Overview
//
// An application on a machine talks to that machine's Agent:
//
//	id, err := agent.Register(ctx, flows, weight) // coflow.Flow: Src, Dst port, Bytes, Class
//	err = agent.Send(ctx, id, j, data)            // at flow j's source: returns once delivered
//	data, err := agent.Receive(ctx, id, j)        // at flow j's destination: exactly the bytes sent
//	err = agent.Unregister(ctx, id)
//
// Ports are the agents' positions in Config.Agents. Every blocking call takes
// a ctx first and is also bounded by the configured timeouts (below).
//
// The Coordinator keeps every registered coflow's flows and, per flow, the
// raw bytes the receiver has acknowledged as the sender reports them (every
// AgentConfig.ReportInterval, and at once when a flow finishes). It calls the
// scheduler with a coflow.State of the active coflows in arrival order
// (remaining = bytes − acknowledged; Index and ID are the CoflowID), checks the
// allocation with coflow.Config.CheckAllocation, and pushes to every agent
// the flows it sends or receives with their wire rate, codec and cores.
//
// # Rescheduling rules (as coflow.Sim)
//
// The scheduler is called on every coflow arrival (registration), completion,
// failure and unregistration; at the time its coflow.Timer asks for (the T–δ
// starvation guard, D-CLAS's thresholds); and on flow completions: an
// EventDriven scheduler (Varys' rule) only when the last flow with a positive
// rate has ended, any other on every flow completion, coalesced by
// Config.CoalesceFlowEvents (a completion within Δ of the last call waits for
// one call at last call + Δ).
//
// # Agents: pacing and codecs
//
// A flow is cut into chunks of AgentConfig.ChunkBytes (64 KiB). The sender
// paces each flow's wire bytes with its own token bucket at the allocated rate
// (burst one chunk, so the flow is paced in chunk-sized quanta; rate 0 pauses
// it; a rate change rescales the debt still to pay). A flow allocated a codec
// (a fabric codec named "lz4" or "snappy": github.com/pierrec/lz4/v4 blocks and
// github.com/golang/snappy blocks) compresses its chunks in the sender's codec
// pool and the receiver decompresses them in its own: compress → send →
// decompress overlap PipelineDepth chunks deep. A chunk that does not shrink
// goes raw. Each pool runs at most ⌈k⌉ jobs at once for the k cores the
// scheduler grants the port in that role (Σ SendCores of the flows it sends,
// Σ RecvCores of those it receives), each worker duty-cycled to k/⌈k⌉ of a
// core (after a job of CPU time t it keeps its slot idle for
// t·(⌈k⌉/k − 1), recomputed when the grant changes, while the job's caller
// goes on: a chunk is sent, or answered, as soon as its codec job ran), so
// on average the pool uses the granted cores. The receiver writes
// each chunk straight into the flow's buffer and acknowledges it; Receive
// returns the buffer once every byte is in.
//
// Codec profiles come from live measurement: the sender times each chunk's
// compression (raw bytes, compressed bytes, and the CPU time of the worker
// thread on Linux, its wall time elsewhere) and the receiver each
// decompression; agents aggregate them per (data class, codec)
// and report them; the coordinator feeds them to one predictor per (class,
// codec) (Config.Predictor, by predictor.New name; "ewma" by default), started
// from the fabric's profile, and writes the predictions (speeds per core,
// ratio capped at 1) into the fabric the scheduler sees before every call.
// FVDF (with fvdf.Nominal, its default estimator) thus decides with measured
// speeds and ratios.
//
// A speed per CPU-second cannot see what the pool loses to stalls: under a
// CFS quota that the agent's networking shares with its codecs, or on a
// busy machine, a job of CPU time t keeps its slot for a wall time w > t,
// and the pool processes fewer bytes than k granted cores at that speed
// (on the bed the simulator needs a codec core efficiency η ≈ 0.5 to match
// live runs; CALIBRATION.md in cmd/falcon-coflow). With
// AgentConfig.SpeedPerGrantedCore the agents report speeds per granted
// core-second instead: a job's cost is
//
//	c = max(t, s·(r − b)),  s = k/⌈k⌉ (k/max when MaxWorkers caps)
//
// with t the job's CPU time, b the time it took its slot, r the time it
// freed it (after the duty hold t·(1/s − 1)) and k > 0 the cores the
// pool's role is granted at b; with no grant at b (k = 0: chunks of a
// flow paused or finished still in the pipeline run unthrottled on no
// granted core) c = t. The reported speed is Σ raw / Σ c. For a pool kept busy this is exactly the
// pool's throughput over its grant: each of its ⌈k⌉ slots moves raw bytes
// every r − b, i.e. ⌈k⌉·raw/(r − b) = k·raw/c per second. Unstalled
// (w = t) c = s·w + t(1 − s) = t, the CPU-time speed; stalled, lower,
// η = t/c included; never higher (the floor t: a hold cut short by a
// grant change does not make a job cheaper than its CPU time). Per-job slot time, not bytes over an interval: a pool
// that idles because its flows wait on the wire (the bandwidth-bound case)
// is not charged for the idle, and time a job queues for a slot is not
// charged to it (another job held the slot and is charged). A cost is
// accounted when its slot is freed, so a report carries it up to one hold
// late. Off by default: it changes what the predictors learn.
//
// # Failures and bounds
//
// Every wait is bounded. Agents report every ReportInterval (50 ms); an agent
// unheard for Config.AgentTimeout (2 s) is dead: the coordinator fails each
// active coflow with a flow at its port with an error wrapping ErrAgentDead
// and naming it, and tells the other agents, whose Send and Receive calls on
// those coflows return that error. A sender whose chunk cannot reach the
// receiver (transport.ErrUnreachable, or no answer within ChunkTimeout,
// 10 s) fails at once with ErrAgentDead naming the receiver. An agent whose
// reports go unanswered for AgentConfig.CoordinatorTimeout (2 s) fails every
// call with ErrCoordinatorDead naming the coordinator, for good (make a new
// agent). A push is bounded by PushTimeout (1 s), a report and a client
// request by ReportTimeout (1 s), Send's wait for the coordinator to announce
// the flow by AnnounceTimeout (2 s), as is a receiver's for a chunk of a
// flow it has not yet been told of (only announced flows hold state at an
// agent). Receive waits until its ctx ends: the data may legitimately take
// long, but a failure anywhere in the coflow ends it at once. A scheduler
// decision that breaks a capacity or core budget, or a scheduler that
// panics, fails the active coflows with ErrBadAllocation; the coordinator
// goes on.
//
// Messages (see wire.go for the layout) are versioned binary; every decoder
// checks list counts against fixed bounds and the bytes present before
// allocating, and refuses trailing bytes. Registered coflows are bounded by
// Config.MaxCoflows, a flow's size by MaxFlowBytes, an agent's receive
// buffers by AgentConfig.MaxBufferedBytes. A coflow's state (and received
// data not yet taken) is kept until it is unregistered.
//
// Package internal/testbed runs this runtime with real limits on one Linux
// machine (as root): each agent a process in its own network namespace, its
// link rate-limited each way by tc and its cores a CFS quota
// (TestLiveOnBed prints live and simulated average CCTs side by side).
//
// Over TCP use the transport's shared secret (TCPConfig.Secret, at least 32
// random bytes): chunks and allocations then come only from members.
//
// # Semantics and limits (ours)
//
// Arrival is the registration time at the coordinator; a coflow finishes when
// the coordinator learns that its last flow was acknowledged (one report
// after the last chunk's acknowledgement). Remaining bytes are as of the last
// report, so a scheduler sees them up to one ReportInterval late. A
// worker's duty cycle is computed from each job's CPU time (see above), so
// a job stalled by a CFS quota or a busy machine does not idle its slot for
// a multiple of the stall; elsewhere wall time stands in, stalls included.
package live
