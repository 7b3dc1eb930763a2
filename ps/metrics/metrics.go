// Package metrics is how the roles of package ps report what an operator
// scrapes: requests by op with their bytes and latency, the staleness of
// admitted pushes, the workers' clocks, blocked time and straggler rank,
// lease misses and checkpoint durations. A Recorder receives them; pass
// one with ps.WithMetrics or ps.ClusterConfig.Metrics. Package
// ps/metrics/prom is a Recorder that exports them to Prometheus; a program
// that does not want Prometheus implements Recorder itself (embedding Nop
// to pick the methods it needs) or passes none, and imports nothing more.
//
// Without a Recorder (nil, the zero value of the config fields) the roles
// measure nothing: no clock read, no call, no allocation is added to a
// request.
//
// # The metrics, as ps/metrics/prom names them
//
// Every series carries the labels shown; node is the role's node name
// ("server-0", "coordinator", "worker-1"), role is "server",
// "coordinator" or "worker", op the wire operation ("push", "pull",
// "admit", "clock", "release", ...; "unknown" for anything else, so a
// hostile peer cannot grow the label set), worker the worker's ID.
//
//	falcon_ps_requests_total{role,node,op}               counter    requests and one-way messages served (Request)
//	falcon_ps_request_bytes_total{role,node,op,dir}      counter    bytes; dir "in" (request) or "out" (response)
//	falcon_ps_request_duration_seconds{role,node,op}     histogram  seconds from receipt to response (Request.Duration)
//	falcon_ps_push_staleness{}                           histogram  updates, see Staleness
//	falcon_ps_worker_clock{worker}                       gauge      the clock a worker last started
//	falcon_ps_worker_blocked_seconds_total{worker}       counter    seconds a worker waited for release
//	falcon_ps_worker_blocked_seconds{worker}             histogram  seconds of each wait
//	falcon_ps_straggler_rank{worker}                     gauge      1 = slowest; 0 = speed unknown or left
//	falcon_ps_worker_speed_samples_per_second{worker}    gauge      the coordinator's speed estimate
//	falcon_ps_lease_misses_total{role,node}              counter    peers found silent past their lease (role, node of the peer)
//	falcon_ps_checkpoint_duration_seconds{node,result}   histogram  seconds per checkpoint; result "ok" or "error"
package metrics

import "time"

// Recorder receives the roles' measurements. Its methods are called
// synchronously from the roles' goroutines, concurrently, on the request
// path: they must be safe for concurrent use, return quickly and not
// block. A Recorder should embed Nop so that methods added to this
// interface later reach it as no-ops.
type Recorder interface {
	// Request: a server, the coordinator or a worker served one request
	// or one-way message.
	Request(Request)
	// Staleness: the coordinator admitted a push (not dropped) computed
	// from parameters staleness updates old: the model version when it
	// was admitted minus the version the worker had pulled (as
	// epsp.Stats.Staleness counts it; 0 under BSP).
	Staleness(worker, staleness int)
	// Clock: worker started computing clock (the worker's own report).
	Clock(worker, clock int)
	// Blocked: worker waited d for its release after ending a clock
	// (Worker.Clock: the clock request and the wait).
	Blocked(worker int, d time.Duration)
	// Straggler: the coordinator's view of a worker after a clock ended
	// anywhere. rank orders the running workers by speed, 1 the slowest
	// (ties in worker order); 0 means its speed is not known yet (before
	// the end of its second clock) or it has left. speed is its
	// throughput in samples/s over its last clock (ps.WorkerState.Speed).
	Straggler(worker, rank int, speed float64)
	// LeaseMiss: a role found peer silent past its lease: the
	// coordinator a worker or a server (LeaseConfig.Timeout), a worker
	// its coordinator (WorkerConfig.CoordinatorTimeout). role is the
	// peer's role: "worker", "server" or "coordinator".
	LeaseMiss(role, peer string)
	// Checkpoint: server node took a checkpoint in d; err is nil or why
	// it failed.
	Checkpoint(node string, d time.Duration, err error)
}

// Request is one request or one-way message a role served.
type Request struct {
	Role string // "server", "coordinator" or "worker"
	Node string // the serving node
	Op   string // the wire op ("push", "pull", ...; "unknown")
	// OneWay marks a message, which has no response (BytesOut 0).
	OneWay bool
	// BytesIn and BytesOut are the request's and the response's body
	// bytes (the ps message, before transport framing and compression;
	// transport.Stats counts those).
	BytesIn, BytesOut int
	// Duration is from the handler's call to its return: decoding,
	// waiting for locks or the coordinator's loop, applying, encoding.
	Duration time.Duration
}

// Nop is a Recorder that records nothing. Embed it to implement only some
// methods; its zero value is ready.
type Nop struct{}

var _ Recorder = Nop{}

// The methods of Nop do nothing.

func (Nop) Request(Request)                         {}
func (Nop) Staleness(int, int)                      {}
func (Nop) Clock(int, int)                          {}
func (Nop) Blocked(int, time.Duration)              {}
func (Nop) Straggler(int, int, float64)             {}
func (Nop) LeaseMiss(string, string)                {}
func (Nop) Checkpoint(string, time.Duration, error) {}
