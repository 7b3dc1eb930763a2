package transporttest

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/falconml/falcon/transport"
)

// Echo is a Handler that answers every request with a copy of it and
// ignores one-way messages.
type Echo struct{}

var _ transport.Handler = Echo{}

// HandleRequest returns a copy of req.
func (Echo) HandleRequest(_ context.Context, _ transport.NodeID, req []byte) ([]byte, error) {
	return append([]byte{}, req...), nil
}

// HandleMessage ignores msg.
func (Echo) HandleMessage(transport.NodeID, []byte) {}

// Funcs adapts two functions to a Handler. A nil Request echoes; a nil
// Message ignores messages.
type Funcs struct {
	Request func(ctx context.Context, from transport.NodeID, req []byte) ([]byte, error)
	Message func(from transport.NodeID, msg []byte)
}

var _ transport.Handler = Funcs{}

// HandleRequest calls f.Request, or echoes when it is nil.
func (f Funcs) HandleRequest(ctx context.Context, from transport.NodeID, req []byte) ([]byte, error) {
	if f.Request == nil {
		return Echo{}.HandleRequest(ctx, from, req)
	}
	return f.Request(ctx, from, req)
}

// HandleMessage calls f.Message when it is set.
func (f Funcs) HandleMessage(from transport.NodeID, msg []byte) {
	if f.Message != nil {
		f.Message(from, msg)
	}
}

// Message is one one-way message a Recorder received.
type Message struct {
	From transport.NodeID
	Body []byte
}

// Recorder is a Handler that records every one-way message (copied) in
// arrival order and counts requests and records their senders, serving
// them with Reply (nil echoes). The zero value is ready to use. It is safe for concurrent use.
type Recorder struct {
	// Reply serves requests; nil means echo. Set it before use.
	Reply func(ctx context.Context, from transport.NodeID, req []byte) ([]byte, error)

	requests atomic.Int64
	mu       sync.Mutex
	msgs     []Message
	senders  []transport.NodeID // of the requests, in arrival order
	changed  chan struct{}      // closed and replaced on every new message
}

var _ transport.Handler = (*Recorder)(nil)

// HandleRequest counts the request and serves it with r.Reply.
func (r *Recorder) HandleRequest(ctx context.Context, from transport.NodeID, req []byte) ([]byte, error) {
	r.requests.Add(1)
	r.mu.Lock()
	r.senders = append(r.senders, from)
	r.mu.Unlock()
	return Funcs{Request: r.Reply}.HandleRequest(ctx, from, req)
}

// HandleMessage records a copy of msg.
func (r *Recorder) HandleMessage(from transport.NodeID, msg []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, Message{From: from, Body: append([]byte{}, msg...)})
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// NumRequests returns how many requests the handler has been called with.
func (r *Recorder) NumRequests() int { return int(r.requests.Load()) }

// RequestSenders returns the from of every request so far, in arrival
// order.
func (r *Recorder) RequestSenders() []transport.NodeID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]transport.NodeID(nil), r.senders...)
}

// Messages returns the messages recorded so far, in arrival order.
func (r *Recorder) Messages() []Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Message(nil), r.msgs...)
}

// WaitMessages waits until at least n messages have been recorded and
// returns them, or returns what it has and ctx.Err() when ctx is done.
func (r *Recorder) WaitMessages(ctx context.Context, n int) ([]Message, error) {
	for {
		r.mu.Lock()
		if len(r.msgs) >= n {
			out := append([]Message(nil), r.msgs...)
			r.mu.Unlock()
			return out, nil
		}
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return r.Messages(), ctx.Err()
		}
	}
}
