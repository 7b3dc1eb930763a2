package ps

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/falconml/falcon/ps/internal/wire"
)

// retryState is a client's retry policy and request-id source (see
// durable.go: request ids make a resent push safe).
type retryState struct {
	for_ time.Duration // how long to keep resending; 0: never
	id   uint64        // random per client
	seq  atomic.Uint64
}

func newRetryState(d time.Duration) retryState {
	if d <= 0 {
		return retryState{}
	}
	return retryState{for_: d, id: newIncarnation()}
}

// stamp gives a push its request id, when the client retries.
func (r *retryState) stamp(pa pushArgs) pushArgs {
	if r.for_ > 0 {
		pa.rid = reqID{client: r.id, seq: r.seq.Add(1)}
	}
	return pa
}

// wireOp is the op a push travels as: with its request id or without.
func wireOp(o op, pa pushArgs) op {
	if pa.rid.client == 0 {
		return o
	}
	switch o {
	case wire.OpPush:
		return wire.OpPushID
	case wire.OpPushPull:
		return wire.OpPushPullID
	}
	return o
}

// retrying runs call until it succeeds, fails with an error other than
// ErrServerUnavailable (a server that answered), or the client's Retry
// has passed since the first try, backing off from 5 ms to 200 ms.
func (r *retryState) retrying(ctx context.Context, call func() error) error {
	err := call()
	if r.for_ <= 0 || err == nil || !errors.Is(err, ErrServerUnavailable) {
		return err
	}
	deadline := time.Now().Add(r.for_)
	backoff := 5 * time.Millisecond
	for err != nil && errors.Is(err, ErrServerUnavailable) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
		err = call()
	}
	return err
}
