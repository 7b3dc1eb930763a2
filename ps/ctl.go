package ps

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/falconml/falcon/transport"
)

// A Cluster's own control requests share each node's transport with the
// roles' traffic. They start with ctlMagic, whose first byte (0xFE) is
// never this package's wire version (1), so a role never sees them and
// never mistakes them for its own:
//
//	ping     → ack (liveness)
//	stats    → 6 × u64: the node's transport.Stats
//	shutdown coordinator → everyone: the run is over → ack
//	abort    coordinator → everyone: the run failed → ack
//
// The fields of ping and stats are big-endian u64s (at most 8). A
// shutdown or an abort may carry a text instead (at most maxCtlNote
// bytes, longer is cut): an abort's cause, a shutdown's note of the
// workers the run lost, which the node then reports, so every node's log
// names a lost peer and not only the coordinator's.
var ctlMagic = []byte{0xFE, 'F', 'C', 'L'}

const (
	ctlPing byte = iota + 1
	ctlStats
	ctlShutdown
	ctlAbort
)

func ctlMsg(op byte, vals ...uint64) []byte {
	b := append(append(make([]byte, 0, len(ctlMagic)+1+8*len(vals)), ctlMagic...), op)
	for _, v := range vals {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

// maxCtlNote bounds the text of a shutdown or an abort.
const maxCtlNote = 2048

// ctlNote is a shutdown or abort carrying note (cut to maxCtlNote bytes).
func ctlNote(op byte, note string) []byte {
	if len(note) > maxCtlNote {
		note = note[:maxCtlNote]
	}
	return append(ctlMsg(op), note...)
}

// parseCtl splits a control message into its op and u64 fields; ok is
// false for anything else (role traffic). At most 8 fields are accepted.
// A shutdown's or abort's text is in note.
func parseCtl(b []byte) (op byte, vals []uint64, ok bool) {
	op, vals, _, ok = parseCtlNote(b)
	return op, vals, ok
}

// parseCtlNote is parseCtl, with the text of a shutdown or an abort.
func parseCtlNote(b []byte) (op byte, vals []uint64, note string, ok bool) {
	if len(b) < len(ctlMagic)+1 || string(b[:len(ctlMagic)]) != string(ctlMagic) {
		return 0, nil, "", false
	}
	body := b[len(ctlMagic)+1:]
	if op := b[len(ctlMagic)]; op == ctlShutdown || op == ctlAbort {
		if len(body) > maxCtlNote {
			return 0, nil, "", false
		}
		return op, nil, strings.ToValidUTF8(string(body), "?"), true
	}
	if len(body)%8 != 0 || len(body) > 64 {
		return 0, nil, "", false
	}
	for i := 0; i < len(body); i += 8 {
		vals = append(vals, binary.BigEndian.Uint64(body[i:]))
	}
	return b[len(ctlMagic)], vals, "", true
}

// ctlHandler wraps a role's handler: control requests are served here,
// everything else goes to the role (through its bulk paths when it has
// them, see ctlServer).
type ctlHandler struct {
	inner transport.Handler

	shutdownOnce sync.Once
	shutdown     chan struct{} // closed when the coordinator says the run is over
	abortOnce    sync.Once
	aborted      chan struct{} // closed when the coordinator says the run failed
	// note is the text of the first shutdown or abort (set before its
	// channel closes): the abort's cause, the shutdown's lost workers
	note  string
	noted bool

	mu sync.Mutex
	tr transport.Transport
}

func newCtlHandler(inner transport.Handler) *ctlHandler {
	return &ctlHandler{inner: inner, shutdown: make(chan struct{}), aborted: make(chan struct{})}
}

// abortErr is the error of the coordinator's abort: ErrAborted with the
// cause it sent.
func (h *ctlHandler) abortErr() error {
	h.mu.Lock()
	note := h.note
	h.mu.Unlock()
	if note == "" {
		return fmt.Errorf("%w (the coordinator's log says why)", ErrAborted)
	}
	return fmt.Errorf("%w by the coordinator: %s", ErrAborted, note)
}

// shutdownNote is the coordinator's note on a shutdown ("" for none).
func (h *ctlHandler) shutdownNote() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.note
}

func (h *ctlHandler) setTransport(tr transport.Transport) {
	h.mu.Lock()
	h.tr = tr
	h.mu.Unlock()
}

// control serves a control request; ok is false for role traffic.
func (h *ctlHandler) control(from transport.NodeID, req []byte) (resp []byte, err error, ok bool) {
	op, _, note, isCtl := parseCtlNote(req)
	if !isCtl {
		return nil, nil, false
	}
	switch op {
	case ctlPing:
		if co, ok := h.inner.(*Coordinator); ok {
			if w := co.advertisedWait(); w > 0 {
				// how long the others should wait for it (CoordinatorConfig.Wait)
				return ctlMsg(ctlPing, uint64(w)), nil, true
			}
		}
		return ctlMsg(ctlPing), nil, true
	case ctlShutdown, ctlAbort:
		if from != CoordinatorNode {
			return nil, fmt.Errorf("%w: end of run from %q refused (only the coordinator ends a run)", ErrRejected, from), true
		}
		h.mu.Lock()
		if !h.noted {
			h.note, h.noted = note, true
		}
		h.mu.Unlock()
		if op == ctlShutdown {
			h.shutdownOnce.Do(func() { close(h.shutdown) })
		} else {
			h.abortOnce.Do(func() { close(h.aborted) })
		}
		return ctlMsg(op), nil, true
	case ctlStats:
		h.mu.Lock()
		tr := h.tr
		h.mu.Unlock()
		sr, _ := tr.(transport.StatsReporter)
		if sr == nil {
			return nil, errors.New("ps: transport reports no stats"), true
		}
		s := sr.Stats()
		return ctlMsg(ctlStats, s.FramesSent, s.RawBytesSent, s.WireBytesSent, s.FramesReceived, s.RawBytesReceived, s.WireBytesReceived), nil, true
	}
	return nil, fmt.Errorf("%w: unknown control request %d", ErrMalformed, op), true
}

func (h *ctlHandler) HandleRequest(ctx context.Context, from transport.NodeID, req []byte) ([]byte, error) {
	if resp, err, ok := h.control(from, req); ok {
		return resp, err
	}
	return h.inner.HandleRequest(ctx, from, req)
}

// HandleMessage passes the roles' one-way messages on; the cluster sends
// none of its own.
func (h *ctlHandler) HandleMessage(from transport.NodeID, msg []byte) {
	if _, _, ok := parseCtl(msg); !ok {
		h.inner.HandleMessage(from, msg)
	}
}

// ctlServer is a ctlHandler around a Server that keeps the server's bulk
// paths (transport.AppendHandler and transport.VectorHandler).
type ctlServer struct {
	*ctlHandler
	s *Server
}

var (
	_ transport.AppendHandler = ctlServer{}
	_ transport.VectorHandler = ctlServer{}
)

func (h ctlServer) HandleRequestAppend(ctx context.Context, from transport.NodeID, req, dst []byte) ([]byte, error) {
	if resp, err, ok := h.control(from, req); ok {
		return append(dst, resp...), err
	}
	return h.s.HandleRequestAppend(ctx, from, req, dst)
}

func (h ctlServer) HandleRequestV(ctx context.Context, from transport.NodeID, reqs [][]byte, dst []byte) ([]byte, error) {
	if len(reqs) > 0 && len(reqs[0]) > 0 && reqs[0][0] == ctlMagic[0] {
		var req []byte
		for _, r := range reqs {
			req = append(req, r...)
		}
		if resp, err, ok := h.control(from, req); ok {
			return append(dst, resp...), err
		}
	}
	return h.s.HandleRequestV(ctx, from, reqs, dst)
}

// statsOf decodes a stats reply.
func statsOf(resp []byte) (transport.Stats, error) {
	op, v, ok := parseCtl(resp)
	if !ok || op != ctlStats || len(v) != 6 {
		return transport.Stats{}, fmt.Errorf("%w: stats reply", ErrMalformed)
	}
	return transport.Stats{FramesSent: v[0], RawBytesSent: v[1], WireBytesSent: v[2], FramesReceived: v[3], RawBytesReceived: v[4], WireBytesReceived: v[5]}, nil
}
