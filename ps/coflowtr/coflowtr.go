package coflowtr

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/falconml/falcon/coflow/live"
	"github.com/falconml/falcon/transport"
)

// Config configures one node's wrapper (a worker's Transport or a
// server's Handler). Zero fields take the defaults of DefaultConfig where
// a field says so.
type Config struct {
	// Registry is the job's registry, shared by all its wrapped nodes.
	// Required.
	Registry *Registry
	// Agent is the live agent of this node's machine (started). Required.
	Agent *live.Agent
	// AgentName is the agent's node name, for errors. Required.
	AgentName transport.NodeID
	// MinBytes: a push shorter than this, or a pull whose reply is, goes
	// on the inner transport as it is. Zero means 64 KiB
	// (coflow.DefaultChunkBytes: below one chunk a flow is all overhead).
	MinBytes int
	// FlowTimeout bounds each wait on the agent for one message (a Send, a
	// Receive), besides the caller's ctx. Zero means 60 s.
	FlowTimeout time.Duration
}

// DefaultConfig returns the defaults (Registry, Agent and AgentName still
// need setting).
func DefaultConfig() Config {
	return Config{MinBytes: 64 << 10, FlowTimeout: time.Minute}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MinBytes == 0 {
		c.MinBytes = d.MinBytes
	}
	if c.FlowTimeout == 0 {
		c.FlowTimeout = d.FlowTimeout
	}
	return c
}

// Validate checks the configuration (zeros mean defaults).
func (c *Config) Validate() error {
	if c.Registry == nil || c.Agent == nil || c.AgentName == "" {
		return fmt.Errorf("%w: Registry, Agent and AgentName are required", ErrInvalidConfig)
	}
	if c.MinBytes < 0 || c.FlowTimeout < 0 {
		return fmt.Errorf("%w: negative MinBytes or FlowTimeout", ErrInvalidConfig)
	}
	return nil
}

// Transport is a worker's transport: pushes and pulls to the job's
// servers travel as flows of the clock's coflows through the machine's
// agent, everything else on the inner transport. It implements
// transport.Transport; Close closes the inner transport.
type Transport struct {
	inner transport.Transport
	cfg   Config
	self  transport.NodeID

	mu       sync.Mutex
	lastPush int64 // the last clock this worker pushed; -1 before any
}

var _ transport.Transport = (*Transport)(nil)

// Wrap returns inner wrapped for a worker of cfg.Registry's job; the
// worker's node name is inner.LocalID() and must be one of the job's
// Workers.
func Wrap(inner transport.Transport, cfg Config) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if _, ok := cfg.Registry.cfg.Ports[inner.LocalID()]; !ok {
		return nil, fmt.Errorf("%w: %s is not a node of job %s", ErrInvalidConfig, inner.LocalID(), cfg.Registry.cfg.Job)
	}
	return &Transport{inner: inner, cfg: cfg, self: inner.LocalID(), lastPush: -1}, nil
}

// LocalID implements transport.Transport.
func (t *Transport) LocalID() transport.NodeID { return t.self }

// Send implements transport.Transport: one-way messages (control) go on
// the inner transport.
func (t *Transport) Send(ctx context.Context, to transport.NodeID, msg []byte) error {
	return t.inner.Send(ctx, to, msg)
}

// Close implements transport.Transport: it closes the inner transport.
func (t *Transport) Close() error { return t.inner.Close() }

// Request implements transport.Transport. A push of clock c of at least
// MinBytes to one of the job's servers is sent as its flow of coflow
// (job, c, Push) and the server is told where to take it; a pull whose
// reply has at least MinBytes asks the server to answer as its flow of
// coflow (job, c, Pull), c being one past this worker's last push. The
// caller sees the ps response as the inner transport would deliver it.
func (t *Transport) Request(ctx context.Context, to transport.NodeID, req []byte) ([]byte, error) {
	reg := t.cfg.Registry
	ph, clock, reply := classify(req)
	if ph == 0 || !reg.isServer(to) {
		return t.inner.Request(ctx, to, req)
	}
	switch ph {
	case Push:
		t.mu.Lock()
		t.lastPush = max(t.lastPush, clock) // a small push starts the next clock's pulls too
		t.mu.Unlock()
		if len(req) < t.cfg.MinBytes {
			break
		}
		return t.push(ctx, to, clock, req)
	case Pull:
		if reply < int64(t.cfg.MinBytes) {
			break
		}
		t.mu.Lock()
		clock = t.lastPush + 1
		t.mu.Unlock()
		return t.pull(ctx, to, clock, reply, req)
	}
	reg.count(false, len(req))
	return t.inner.Request(ctx, to, req)
}

// fail wraps an agent's error with the job, clock and agent.
func (t *Transport) fail(what string, to transport.NodeID, clock int64, err error) error {
	return fmt.Errorf("coflowtr: job %s: %s %s clock %d to %s through agent %s: %w", t.cfg.Registry.cfg.Job, t.self, what, clock, to, t.cfg.AgentName, err)
}

func (t *Transport) push(ctx context.Context, to transport.NodeID, clock int64, req []byte) ([]byte, error) {
	reg := t.cfg.Registry
	id, j, ok, err := reg.flow(ctx, t.cfg.Agent, t.cfg.AgentName, clock, Push, t.self, to, int64(len(req)))
	if err != nil {
		return nil, err
	}
	if !ok {
		reg.count(false, len(req))
		return t.inner.Request(ctx, to, req)
	}
	reg.count(true, len(req))
	fctx, cancel := context.WithTimeout(ctx, t.cfg.FlowTimeout)
	defer cancel()
	if err := t.cfg.Agent.Send(fctx, id, j, req); err != nil {
		return nil, t.fail("push", to, clock, err)
	}
	resp, err := t.inner.Request(ctx, to, encodeEnvelope(envelope{kind: kindData, coflow: id, flow: j, bytes: int64(len(req))}))
	if err != nil {
		return nil, err
	}
	kind, inline, err := decodeResponse(resp)
	if err != nil {
		return nil, fmt.Errorf("coflowtr: from %s: %w", to, err)
	}
	if kind != respInline {
		return nil, fmt.Errorf("%w: push answered with a flow by %s", ErrMalformed, to)
	}
	return inline, nil
}

func (t *Transport) pull(ctx context.Context, to transport.NodeID, clock, reply int64, req []byte) ([]byte, error) {
	reg := t.cfg.Registry
	id, j, ok, err := reg.flow(ctx, t.cfg.Agent, t.cfg.AgentName, clock, Pull, t.self, to, reply)
	if err != nil {
		return nil, err
	}
	if !ok {
		reg.count(false, int(reply))
		return t.inner.Request(ctx, to, req)
	}
	resp, err := t.inner.Request(ctx, to, encodeEnvelope(envelope{kind: kindReply, coflow: id, flow: j, bytes: reply, inline: req}))
	if err != nil {
		return nil, err
	}
	kind, inline, err := decodeResponse(resp)
	if err != nil {
		return nil, fmt.Errorf("coflowtr: from %s: %w", to, err)
	}
	if kind == respInline {
		reg.count(false, len(inline))
		return inline, nil
	}
	fctx, cancel := context.WithTimeout(ctx, t.cfg.FlowTimeout)
	defer cancel()
	data, err := t.cfg.Agent.Receive(fctx, id, j)
	if err != nil {
		return nil, t.fail("pull reply", to, clock, err)
	}
	reg.received(id, j)
	reg.count(true, len(data))
	return data, nil
}

// Handler is a server's handler: it serves the envelopes of the job's
// wrapped workers (taking a push from the agent, answering a pull as a
// flow) and hands every other request to the inner handler unchanged.
type Handler struct {
	inner transport.Handler
	cfg   Config
	self  transport.NodeID
}

var _ transport.AppendHandler = (*Handler)(nil)

// NewHandler wraps inner, the handler of server self of cfg.Registry's job.
func NewHandler(inner transport.Handler, self transport.NodeID, cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if inner == nil || !cfg.Registry.isServer(self) {
		return nil, fmt.Errorf("%w: %s is not a server of job %s (or no inner handler)", ErrInvalidConfig, self, cfg.Registry.cfg.Job)
	}
	return &Handler{inner: inner, cfg: cfg.withDefaults(), self: self}, nil
}

// HandleMessage implements transport.Handler.
func (h *Handler) HandleMessage(from transport.NodeID, msg []byte) { h.inner.HandleMessage(from, msg) }

// HandleRequestAppend implements transport.AppendHandler: plain requests
// go to the inner handler's HandleRequestAppend when it has one.
func (h *Handler) HandleRequestAppend(ctx context.Context, from transport.NodeID, req, dst []byte) ([]byte, error) {
	if len(req) > 0 && req[0] == Magic {
		return h.serve(ctx, from, req)
	}
	if a, ok := h.inner.(transport.AppendHandler); ok {
		return a.HandleRequestAppend(ctx, from, req, dst)
	}
	return h.inner.HandleRequest(ctx, from, req)
}

// HandleRequest implements transport.Handler.
func (h *Handler) HandleRequest(ctx context.Context, from transport.NodeID, req []byte) ([]byte, error) {
	if len(req) > 0 && req[0] == Magic {
		return h.serve(ctx, from, req)
	}
	return h.inner.HandleRequest(ctx, from, req)
}

func (h *Handler) serve(ctx context.Context, from transport.NodeID, req []byte) ([]byte, error) {
	reg := h.cfg.Registry
	e, err := decodeEnvelope(req, reg.cfg.MaxFlowBytes)
	if err != nil {
		return nil, err
	}
	ph := Push
	if e.kind == kindReply {
		ph = Pull
	}
	if err := reg.lookup(e.coflow, e.flow, ph, from, h.self); err != nil {
		return nil, err
	}
	fctx, cancel := context.WithTimeout(ctx, h.cfg.FlowTimeout)
	defer cancel()
	fail := func(what string, err error) error {
		return fmt.Errorf("coflowtr: job %s: %s %s of coflow %d from %s through agent %s: %w", reg.cfg.Job, h.self, what, e.coflow, from, h.cfg.AgentName, err)
	}
	if e.kind == kindData {
		data, err := h.cfg.Agent.Receive(fctx, e.coflow, e.flow)
		if err != nil {
			return nil, fail("push", err)
		}
		if int64(len(data)) != e.bytes {
			return nil, fail("push", fmt.Errorf("%w: %d bytes received, %d announced", ErrMalformed, len(data), e.bytes))
		}
		reg.received(e.coflow, e.flow)
		resp, err := h.inner.HandleRequest(ctx, from, data)
		if err != nil {
			return nil, err
		}
		return append([]byte{Magic, respInline}, resp...), nil
	}
	resp, err := h.inner.HandleRequest(ctx, from, e.inline)
	if err != nil {
		return nil, err
	}
	if int64(len(resp)) != e.bytes {
		return append([]byte{Magic, respInline}, resp...), nil
	}
	if err := h.cfg.Agent.Send(fctx, e.coflow, e.flow, resp); err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fail("pull reply", err)
	}
	return []byte{Magic, respFlow}, nil
}
