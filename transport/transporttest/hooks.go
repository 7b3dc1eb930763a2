package transporttest

import (
	"context"
	"errors"

	"github.com/falconml/falcon/transport"
)

// ErrDrop, returned by Hooks.BeforeSend, makes the wrapped Send drop the
// message and report success, as a lossy network would.
var ErrDrop = errors.New("transporttest: drop message")

// Hooks intercept the outgoing calls of a Transport wrapped by WithHooks,
// for fault injection on any implementation (TCP included). Nil hooks are
// skipped. Hooks run on the caller's goroutine and must be safe for
// concurrent use; randomness they use should come from a seeded source.
type Hooks struct {
	// BeforeRequest runs before each Request; a non-nil error is returned
	// to the caller and nothing is sent.
	BeforeRequest func(ctx context.Context, to transport.NodeID, req []byte) error
	// AfterRequest sees each Request's outcome and returns the one the
	// caller gets (e.g. replacing a response by an error).
	AfterRequest func(to transport.NodeID, req, resp []byte, err error) ([]byte, error)
	// BeforeSend runs before each Send; ErrDrop drops the message (Send
	// returns nil), any other error is returned and nothing is sent.
	BeforeSend func(ctx context.Context, to transport.NodeID, msg []byte) error
}

// WithHooks wraps t so that h sees its outgoing traffic. Close and LocalID
// pass through.
func WithHooks(t transport.Transport, h Hooks) transport.Transport {
	return &hooked{Transport: t, h: h}
}

type hooked struct {
	transport.Transport
	h Hooks
}

func (w *hooked) Request(ctx context.Context, to transport.NodeID, req []byte) ([]byte, error) {
	if w.h.BeforeRequest != nil {
		if err := w.h.BeforeRequest(ctx, to, req); err != nil {
			return nil, err
		}
	}
	resp, err := w.Transport.Request(ctx, to, req)
	if w.h.AfterRequest != nil {
		resp, err = w.h.AfterRequest(to, req, resp, err)
	}
	return resp, err
}

func (w *hooked) Send(ctx context.Context, to transport.NodeID, msg []byte) error {
	if w.h.BeforeSend != nil {
		if err := w.h.BeforeSend(ctx, to, msg); err != nil {
			if errors.Is(err, ErrDrop) {
				return nil
			}
			return err
		}
	}
	return w.Transport.Send(ctx, to, msg)
}
