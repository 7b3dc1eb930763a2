// Package coflowtr carries a parameter-server job's traffic as coflows of
// the live coflow runtime (package coflow/live): the pushes of clock c of
// job J form coflow (J, c, Push) and the replies to the pulls that start
// clock c form coflow (J, c, Pull), so two jobs sharing links are
// scheduled by whichever coflow.Scheduler the live coordinator runs (SEBF,
// FVDF, ...) instead of by the transport's per-message compression policy
// and the network's own sharing.
//
// # Design: a transport wrapper, not a change to ps
//
// ps talks to its servers through a transport.Transport. Transport wraps a
// worker's transport and Handler wraps a server's handler; the ps roles
// run unchanged on them (build them as ps's Example_training does:
// NewServer, NewCoordinator, NewWorker, each given the wrapped transport
// or joined with the wrapped handler). The package lives under ps/ only to
// read a request's op and clock (ps/internal/wire); it imports nothing
// else of ps. Why a wrapper: the ps core is left as it is, the per-clock
// grouping is visible on the wire (a push carries its clock), and a job
// that does not use the runtime pays nothing.
//
// A worker's request to one of the job's servers:
//
//   - a push (OpPush, OpPushID, OpPushPull, OpPushPullID) of at least
//     Config.MinBytes: the worker's agent sends the whole request as the
//     worker's flow of coflow (J, c, Push), c being the push's clock;
//     once the server's agent has every byte, a small envelope on the
//     inner transport names the flow; the server's Handler takes the
//     bytes from its agent (Receive), runs the ps server on them and
//     answers inline (a push's answer is a few bytes).
//   - a pull (OpPull) whose reply (4 bytes per value) has at least
//     MinBytes: the request goes inline in an envelope naming the reply's
//     flow of coflow (J, c, Pull), c being one past the worker's last
//     push (ps pulls at the start of each clock, after the previous
//     clock's push); the server runs the pull and its agent sends the
//     values as that flow; the worker takes them from its agent.
//   - anything else (control, init, small messages) goes on the inner
//     transport as it is, and so do one-way messages.
//
// Request/response semantics hold: the caller gets exactly the bytes the
// server's ps handler returned, a server's error comes back as the same
// transport.RemoteError (the ps client decodes it as before), and a reply
// that is not the announced size (an error path) comes back inline.
//
// Replies are a coflow of their own, not flows of the push coflow: a
// coflow's flows are all ready when it arrives (the scheduler allocates
// them rates at once), but a pull of clock c+1 cannot start before the
// pushes of clock c are in and the clock is released; put in one coflow,
// the replies would hold rates they cannot use and make the push coflow
// look larger than it is.
//
// # Registration
//
// One Registry per job, shared by its wrapped nodes (in-process), knows the
// job's workers and servers and each one's fabric port. The first message
// of (J, c, phase) registers the coflow through the agent of the node that
// sent it, declared ahead from the layout: one flow per (worker, server),
// worker-major, each the size of the clock's first message to that
// server in that phase, or for a server not yet addressed in the clock the
// size learnt in an earlier one (all workers of a ps job push the same
// keys, so their pushes to one server have one size); a message whose size or pair the coflow does not declare
// (a server not yet seen in clock 0, an asymmetric push) goes direct. A
// coflow is unregistered as soon as every flow has been received, and in
// any case when clock c + Keep + 1 of its phase registers (a push the
// policy dropped never comes). A multi-process job needs the registration
// done by one node for all (the ps coordinator, at release, carrying the
// coflow id in the release message): that is the ps change this design
// would need, not made here.
//
// # Failures and bounds
//
// Every wait is bounded by the caller's ctx and a configured timeout
// (Config.FlowTimeout per Send or Receive, RegistryConfig.Timeout per
// registration or unregistration), and the live runtime bounds its own
// (a dead agent or coordinator fails the coflow; see coflow/live). An
// error of the runtime comes back wrapped with the job, the node, the
// clock, the peer and the agent's name ("coflowtr: job A: worker-0 push
// clock 3 to server-0 through agent m1: live: agent dead: m0: ..."), so
// errors.Is(err, live.ErrAgentDead) holds and the message names the agent.
// A server takes from its agent only a flow that the job's registry says
// is the requesting worker's to it (ErrForeignFlow otherwise); envelopes
// are fixed-size, checked and fuzzed.
//
// # Measurement
//
// cmd/falcon-pscoflow runs two jobs sharing a machine's link under SEBF and
// FVDF through the runtime and under the transport's compression policy
// alone on an emulated fabric of the same rate; PROTOCOL.md beside this
// file is the comparison's protocol, fixed before its runs, and the
// command's README has the results (two equal jobs at 25 MB/s: about a
// third less time per clock as coflows than with fair sharing, raw or
// compressed; unequal jobs: SEBF speeds the smaller, the larger ties).
package coflowtr
