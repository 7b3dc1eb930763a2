package ps

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/metrics"
	"github.com/falconml/falcon/transport"
)

// Option configures a role with an injected dependency.
type Option func(*options)

type options struct {
	obs   event.Observer
	clock func() time.Duration
	log   *slog.Logger
	met   metrics.Recorder // nil: none (metered.go)
}

// WithLogger sets the logger a role reports recovered panics and other
// faults to; the default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(p *options) { p.log = l } }

// WithObserver sets the observer of a role.
func WithObserver(o event.Observer) Option { return func(p *options) { p.obs = o } }

// WithClock sets the role's time source (the duration since the cluster
// started); the default measures from the role's construction.
func WithClock(now func() time.Duration) Option { return func(p *options) { p.clock = now } }

func buildOptions(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if o.clock == nil {
		start := time.Now()
		o.clock = func() time.Duration { return time.Since(start) }
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	return o
}

// recovered turns a panic caught while node served a message from peer
// into an error (wrapping ErrRemote, so it travels as an internal error)
// and one log line with the stack. Handlers call it from a deferred
// recover: no input, however crafted, ends the process.
func (o *options) recovered(node string, peer transport.NodeID, r any) error {
	err := fmt.Errorf("%w: %s recovered from a panic serving %s: %v", ErrRemote, node, peer, r)
	o.log.Error("ps: handler panic", "node", node, "peer", string(peer), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	return err
}

// eventSeq numbers the events of this process (Event.Seq).
var eventSeq atomic.Uint64

func (o *options) emit(e event.Event) {
	if o.obs != nil {
		e.Seq = eventSeq.Add(1)
		e.At = o.clock()
		o.obs.Observe(e)
	}
}
