package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Backoff between retries of a transient failure: retryFirst, doubling,
// at most retryMax.
const (
	retryFirst = 50 * time.Millisecond
	retryMax   = time.Second
)

// transient reports whether err is a failure that a retry of the same
// request may not meet: etcd without a leader or changing it, a request
// that timed out (RequestTimeout, not the caller's ctx), a connection
// lost or refused, too many requests. Refusals (a fenced write refused,
// a request too large, a compacted revision, a closed client) are not.
func transient(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil || errors.Is(err, ErrNotLeader) || errors.Is(err, ErrClosed) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true // the request's own timeout: ctx is not done
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return transientCode(ee.Code())
	}
	if s, ok := status.FromError(errors.Unwrap(err)); ok {
		return transientCode(s.Code())
	}
	if s, ok := status.FromError(err); ok {
		return transientCode(s.Code())
	}
	return false
}

func transientCode(c codes.Code) bool {
	switch c {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

// retry runs op until it succeeds, fails with an error that is not
// transient, the leadership ends, or ctx is done. Transient failures
// (transient) are retried with a backoff of 50 ms doubling to 1 s for at
// most one lease TTL from the first one: a leader cut off from etcd
// loses its lease within 9/10 of it anyway (Session), and a leader whose
// etcd refuses its writes for that long is no better than a standby.
// Then retry gives the leadership up (Lost closes, the lease is revoked
// if etcd answers, so a standby leads at once) and returns an error
// wrapping ErrNotLeader: the Store's caller, a ps coordinator, stops as
// a crash would (ps.ErrSuperseded) instead of aborting the run. Retries
// are safe because every Store transaction is fenced and idempotent
// (puts of given values and deletes, under the same leader key).
func (l *Leadership) retry(ctx context.Context, what string, op func() error) error {
	var (
		first time.Time
		wait  = retryFirst
		tries int
	)
	for {
		err := op()
		if !transient(ctx, err) {
			return err
		}
		tries++
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		left := l.s.TTL() - now.Sub(first)
		if left <= 0 {
			cause := fmt.Errorf("etcd failed %s for %v (%d tries, the lease TTL): giving the leadership up: %w", what, now.Sub(first).Round(time.Millisecond), tries, err)
			l.giveUp(cause)
			return l.Err()
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-t.C:
		case <-l.lost:
			t.Stop()
			return errors.Join(l.Err(), err)
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (after %d transient failures, the last: %w)", ctx.Err(), tries, err)
		}
		wait = min(2*wait, retryMax)
	}
}

// giveUp ends the leadership with cause, then revokes its lease (best
// effort, within RequestTimeout) so that a standby leads at once.
func (l *Leadership) giveUp(cause error) {
	l.lose(cause)
	l.stop()
	ctx, cancel := context.WithTimeout(context.Background(), l.e.b.cfg.RequestTimeout)
	defer cancel()
	_ = l.s.Close(ctx)
}

// txn is l.Txn retried on transient failures (retry).
func (s *Store) txn(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	var r *clientv3.TxnResponse
	err := s.l.retry(ctx, "a fenced write of "+s.l.e.b.Key(s.name), func() error {
		var err error
		r, err = s.l.Txn(ctx, ops...)
		return err
	})
	return r, err
}
