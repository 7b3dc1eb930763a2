package transport

import (
	"context"
	"errors"
	"fmt"
)

// NodeID names a node (a server, a worker, the coordinator) on a transport.
type NodeID string

// Handler serves what a transport receives. from is the sender's name: over
// TCP with a secret, the name it proved in the connection's handshake (see
// the package doc for what that proves); over Inmem, the name it joined
// with; over TCP without a secret, the name it claimed. Implementations
// must be safe for
// concurrent use: HandleRequest may be called from many goroutines at once,
// while HandleMessage is called sequentially for each sender, in the order the
// sender sent the messages. HandleMessage should return promptly: while it
// runs, later traffic from the same sender waits. A transport's Close waits
// for running handler calls, so handlers must honour their ctx.
//
// Ownership of bytes, the rules that let the in-process transport pass
// buffers without copying them:
//   - Request bodies are read-only and borrowed: req is valid only until
//     HandleRequest returns and the handler must not modify it (Inmem may
//     hand the handler the caller's own buffer). A handler that keeps data
//     must copy it.
//   - One-way messages are the handler's to read and modify until
//     HandleMessage returns (transports always copy them: the sender
//     continues at once); a handler that keeps data must still copy it.
//   - A response is handed over: once HandleRequest returns it, the
//     transport owns it and may deliver it to the caller as it is, so the
//     handler must not modify or reuse it afterwards, nor return a slice it
//     shares with anything else (a package-level constant, a cache). A
//     response may alias the request (an echo may return req itself); the
//     caller then gets back (a slice of) its own request buffer.
type Handler interface {
	// HandleRequest serves one request and returns its response. A non-nil
	// error is delivered to the caller as a *RemoteError. ctx ends when the
	// transport closes, when the caller gives up on the request (its ctx
	// ended; TCP tells the peer with a cancel frame, best effort) or, for
	// TCP, when the connection dies; the response is then discarded.
	HandleRequest(ctx context.Context, from NodeID, req []byte) ([]byte, error)
	// HandleMessage receives one one-way message.
	HandleMessage(from NodeID, msg []byte)
}

// Transport moves bytes between named nodes: request/response calls
// (correlated by an id the transport assigns) and one-way messages.
//
// All methods are safe for concurrent use. Messages and requests sent by one
// node to another are delivered in the order they were sent while the
// connection between them stays up.
type Transport interface {
	// LocalID is the name of this node.
	LocalID() NodeID
	// Request sends req to node to and waits for its response, until ctx is
	// done. On cancellation it returns ctx.Err().
	//
	// Request neither modifies req nor uses it after returning: if ctx ends
	// while the peer's handler is reading a borrowed req (Inmem), Request
	// cancels the handler's ctx and waits for it to return first, so the
	// caller may overwrite req as soon as Request returns, whatever the
	// outcome. The caller owns the response and may modify it.
	Request(ctx context.Context, to NodeID, req []byte) ([]byte, error)
	// Send sends a one-way message. It returns once the message is handed to
	// the network (not when it is handled).
	Send(ctx context.Context, to NodeID, msg []byte) error
	// Close stops the transport; it returns only when every goroutine the
	// transport started has ended. Calls after Close return ErrClosed.
	Close() error
}

// RequestAppender is an optional interface of transports that can append a
// response to a caller's buffer: RequestAppend is Request with the response
// appended to dst (grown if needed) and the extended slice returned, so a
// caller that passes its previous response back as dst[:0] reads large
// responses without allocating per call. Inmem and TCP implement it; use
// the RequestAppend function to call it on any Transport.
type RequestAppender interface {
	RequestAppend(ctx context.Context, dst []byte, to NodeID, req []byte) ([]byte, error)
}

// VectorRequester is an optional interface of transports that can send a
// request given in pieces without joining them first: RequestAppendV is
// RequestAppend with the request being the concatenation of reqs (which
// are borrowed and read-only, as req is for Request). TCP writes the pieces
// with one writev; Inmem hands them as they are to a VectorHandler and
// joins them for any other handler. Use the RequestAppendV function to call
// it on any Transport.
type VectorRequester interface {
	RequestAppendV(ctx context.Context, dst []byte, to NodeID, reqs [][]byte) ([]byte, error)
}

// RequestAppendV calls t.RequestAppendV when t implements VectorRequester,
// and otherwise joins reqs and calls RequestAppend.
func RequestAppendV(ctx context.Context, t Transport, dst []byte, to NodeID, reqs [][]byte) ([]byte, error) {
	if v, ok := t.(VectorRequester); ok {
		return v.RequestAppendV(ctx, dst, to, reqs)
	}
	return RequestAppend(ctx, t, dst, to, joinPieces(nil, reqs))
}

// joinPieces appends the concatenation of reqs to dst.
func joinPieces(dst []byte, reqs [][]byte) []byte {
	for _, r := range reqs {
		dst = append(dst, r...)
	}
	return dst
}

func piecesLen(reqs [][]byte) int {
	n := 0
	for _, r := range reqs {
		n += len(r)
	}
	return n
}

// VectorHandler is an optional interface of an AppendHandler that can
// serve a request given in pieces: HandleRequestV is HandleRequestAppend
// with the request being the concatenation of reqs (borrowed and
// read-only, like req). The pieces may be split anywhere; the handler must
// give the same answer as for the joined request. Inmem calls it for
// RequestAppendV, so a large request is never copied.
type VectorHandler interface {
	AppendHandler
	HandleRequestV(ctx context.Context, from NodeID, reqs [][]byte, dst []byte) ([]byte, error)
}

// AppendHandler is an optional interface of a Handler that can write its
// response into a buffer the transport supplies instead of allocating one:
// HandleRequestAppend is HandleRequest with the response appended to dst (an
// empty slice, possibly with spare capacity) and the extended slice
// returned, grown with append if dst is too small. Transports call it when
// they have a buffer to offer: Inmem's RequestAppend passes the caller's dst,
// so the response is written straight into the caller's memory; TCP passes a
// pooled buffer that it reuses once the response is written. The ownership
// rules of Handler apply to the returned slice (it is handed over), and dst
// is valid only until the call returns.
type AppendHandler interface {
	Handler
	HandleRequestAppend(ctx context.Context, from NodeID, req, dst []byte) ([]byte, error)
}

// RequestAppend calls t.RequestAppend when t implements RequestAppender,
// and otherwise appends the response of t.Request to dst.
func RequestAppend(ctx context.Context, t Transport, dst []byte, to NodeID, req []byte) ([]byte, error) {
	if a, ok := t.(RequestAppender); ok {
		return a.RequestAppend(ctx, dst, to, req)
	}
	resp, err := t.Request(ctx, to, req)
	if err != nil {
		return dst, err
	}
	return append(dst, resp...), nil
}

// Codec identifies how a message body is compressed on the wire.
type Codec uint8

// The codecs every transport understands.
const (
	CodecNone Codec = iota
	CodecLZ4
	CodecSnappy
)

// String returns the codec's name: "none", "lz4" or "snappy".
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecLZ4:
		return "lz4"
	case CodecSnappy:
		return "snappy"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// CompressionPolicy chooses the codec for each outgoing message. It is
// consulted once per message and must be safe for concurrent use.
type CompressionPolicy interface {
	Choose(to NodeID, msg []byte) Codec
}

// Errors returned by transports. Check them with errors.Is.
var (
	ErrClosed        = errors.New("transport: closed")
	ErrUnknownPeer   = errors.New("transport: unknown peer")
	ErrUnreachable   = errors.New("transport: peer unreachable")
	ErrFrameTooLarge = errors.New("transport: frame too large")
	ErrCorruptFrame  = errors.New("transport: corrupt frame")
	ErrUnauthorized  = errors.New("transport: unauthorized")
)

// RemoteError is the error a remote Handler returned for a request.
type RemoteError struct {
	Node NodeID
	Msg  string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("transport: remote %s: %s", e.Node, e.Msg)
}
