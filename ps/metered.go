package ps

import (
	"errors"
	"slices"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/ps/metrics"
	"github.com/falconml/falcon/transport"
)

// Metrics: the roles report to a metrics.Recorder (package ps/metrics
// names every metric, its labels and unit). Each hook below is one line
// in its role's code and does nothing — no clock read, no call — when no
// Recorder is set (options.met nil, the default).

// WithMetrics sets the Recorder a role reports its metrics to; nil (the
// default) records nothing.
func WithMetrics(r metrics.Recorder) Option { return func(p *options) { p.met = r } }

// opNames are the label values of the wire ops; any other op is
// "unknown", so the label set stays bounded whatever a peer sends.
var opNames = func() (n [256]string) {
	for i := range n {
		n[i] = "unknown"
	}
	for o, s := range map[op]string{
		wire.OpPing: "ping", wire.OpInit: "init", wire.OpPush: "push", wire.OpPull: "pull",
		wire.OpPushPull: "pushpull", wire.OpFlush: "flush", wire.OpLayout: "layout",
		wire.OpHello: "hello", wire.OpAdmit: "admit", wire.OpClock: "clock", wire.OpProgress: "progress",
		wire.OpTransferResult: "transfer-result", wire.OpTransferDone: "transfer-done", wire.OpFail: "fail",
		wire.OpRelease: "release", wire.OpSetParallelism: "set-parallelism", wire.OpSetBatch: "set-batch",
		wire.OpTransferOrder: "transfer-order", wire.OpTransferTask: "transfer-task", wire.OpAbort: "abort",
		wire.OpLeave: "leave", wire.OpHeartbeat: "heartbeat", wire.OpPushID: "push",
		wire.OpPushPullID: "pushpull",
	} {
		n[o] = s
	}
	return n
}()

// opLabel is the op label of message b.
func opLabel(b []byte) string {
	if len(b) < 2 {
		return "unknown"
	}
	return opNames[b[1]]
}

// now is the start of a measurement: the zero time without a Recorder.
func (o *options) now() time.Time {
	if o.met == nil {
		return time.Time{}
	}
	return time.Now()
}

// served reports a request (or, with resp nil, a one-way message) that
// node, a role, began serving at t0 (options.now); tail is the value piece
// of a request that came in two. It is deferred with a pointer to the
// handler's response.
func (o *options) served(role, node string, t0 time.Time, req, tail []byte, resp *[]byte) {
	if o.met == nil {
		return
	}
	r := metrics.Request{Role: role, Node: node, Op: opLabel(req), OneWay: resp == nil,
		BytesIn: len(req) + len(tail), Duration: time.Since(t0)}
	if resp != nil {
		r.BytesOut = len(*resp)
	}
	o.met.Request(r)
}

// servedPieces is served for a server request in pieces
// (Server.HandleRequestV).
func (o *options) servedPieces(node string, t0 time.Time, reqs [][]byte, resp *[]byte) {
	if o.met == nil {
		return
	}
	var head [2]byte
	n, in := 0, 0
	for _, r := range reqs {
		for _, b := range r {
			if n == len(head) {
				break
			}
			head[n] = b
			n++
		}
		in += len(r)
	}
	o.met.Request(metrics.Request{Role: "server", Node: node, Op: opLabel(head[:n]), BytesIn: in,
		BytesOut: len(*resp), Duration: time.Since(t0)})
}

// admitted reports the staleness of a push the coordinator admitted with
// decision d: the version before its admission minus the version it was
// computed from (epsp.Coordinator.Admit counts the same).
func (c *Coordinator) admitted(p epsp.Push, d epsp.PushDecision) {
	if c.opts.met == nil || d.Action == epsp.Drop {
		return
	}
	v := c.core.View().Version()
	if d.Action == epsp.ApplyNow {
		v-- // Admit counted this push
	}
	c.opts.met.Staleness(int(p.Worker), int(v-p.BaseVersion))
}

// blocked reports the wait of Worker.Clock that began at t0.
func (w *Worker) blocked(t0 time.Time) {
	if w.opts.met != nil {
		w.opts.met.Blocked(int(w.cfg.ID), time.Since(t0))
	}
}

// clockStarted reports that the worker started clock c.
func (w *Worker) clockStarted(c int) {
	if w.opts.met != nil {
		w.opts.met.Clock(int(w.cfg.ID), c)
	}
}

// leaseMiss reports a peer found silent past its lease.
func (c *Coordinator) leaseMiss(role string, peer transport.NodeID) {
	if c.opts.met != nil {
		c.opts.met.LeaseMiss(role, string(peer))
	}
}

// leaseMiss reports the worker's coordinator silent past its timeout.
func (w *Worker) leaseMiss() {
	if w.opts.met != nil {
		w.opts.met.LeaseMiss("coordinator", string(w.cfg.Coordinator))
	}
}

// checkpointed reports a checkpoint that began at t0 and ended with *err.
func (s *Server) checkpointed(t0 time.Time, err *error) {
	if s.opts.met != nil && !errors.Is(*err, errCheckpointClosed) {
		s.opts.met.Checkpoint(s.name, time.Since(t0), *err)
	}
}

// meterStragglers adds to the coordinator's observer a tracker of the
// workers' speeds (the one Cluster.WorkerStates uses) that reports every
// worker's straggler rank whenever a clock ends.
func (c *Coordinator) meterStragglers(slots int) {
	if c.opts.met == nil {
		return
	}
	t := &rankTracker{st: newStateTracker(slots, 0, 1), met: c.opts.met}
	if prev := c.opts.obs; prev != nil {
		c.opts.obs = event.Func(func(e event.Event) { prev.Observe(e); t.Observe(e) })
	} else {
		c.opts.obs = t
	}
}

type rankTracker struct {
	st  *stateTracker
	met metrics.Recorder
}

func (t *rankTracker) Observe(e event.Event) {
	t.st.Observe(e)
	if e.Kind != event.ClockDone && e.Kind != event.Leave && e.Kind != event.WorkerLost {
		return
	}
	states := t.st.states()
	order := make([]int, 0, len(states))
	for i, s := range states {
		if s.Speed > 0 && !s.Left {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case states[a].Speed < states[b].Speed:
			return -1
		case states[a].Speed > states[b].Speed:
			return 1
		}
		return 0
	})
	rank := make([]int, len(states))
	for r, i := range order {
		rank[i] = r + 1
	}
	for i, s := range states {
		t.met.Straggler(int(s.Worker), rank[i], s.Speed)
	}
}
