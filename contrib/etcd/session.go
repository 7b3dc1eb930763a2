package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrLeaseLost: a session's lease is gone or can no longer be trusted to
// live (it expired, was revoked, was not renewed in time, the session
// was closed, or its Backend was).
var ErrLeaseLost = errors.New("etcd: lease lost")

// Session is an etcd lease that this process keeps alive: keys written
// with Session.Put, and an Election's candidate key, live as long as it
// does. A process that dies stops renewing it, and the server deletes
// its keys TTL later; that is how a standby learns that a leader died,
// and how membership will learn that a member did (doc.go).
//
// Renewal: every TTL/3 the session renews the lease once
// (KeepAliveOnce); a renewal started at t0 that succeeds proves the
// lease lives on the server until at least t0 + TTL. Lost closes when
// 9/10 of the TTL has passed since the start of the last renewal that
// succeeded (or since the grant), that is before the server can expire
// the lease, so a leader that stops on Lost has stopped before a
// successor can be elected (up to the difference of the two machines'
// clock rates). Lost closes at once when the server answers that the
// lease is gone or when the Backend is closed.
type Session struct {
	b      *Backend
	id     clientv3.LeaseID
	ttl    time.Duration
	ctx    context.Context // done when Close begins
	cancel context.CancelFunc
	done   chan struct{} // closed when keep returns
	lost   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	err    error
	since  time.Time // start of the grant or of the last renewal that succeeded
}

// NewSession grants a lease of Config.TTL and starts keeping it alive.
func (b *Backend) NewSession(ctx context.Context) (*Session, error) {
	t0 := time.Now()
	rctx, cancel := b.reqCtx(ctx)
	r, err := b.cli.Grant(rctx, int64(b.cfg.TTL/time.Second))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("etcd: grant a lease of %v: %w", b.cfg.TTL, err)
	}
	s := &Session{b: b, id: r.ID, ttl: time.Duration(r.TTL) * time.Second, done: make(chan struct{}), lost: make(chan struct{}), since: t0}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.keep(t0.Add(s.ttl))
	return s, nil
}

// ID returns the lease's id.
func (s *Session) ID() clientv3.LeaseID { return s.id }

// TTL returns the TTL the server granted (Config.TTL or its minimum).
func (s *Session) TTL() time.Duration { return s.ttl }

// Lost returns a channel closed when the lease is lost or the session
// closed; Err then says why.
func (s *Session) Lost() <-chan struct{} { return s.lost }

// Err returns nil while the session lives, then an error wrapping
// ErrLeaseLost that says why it ended.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Session) setLost(err error) {
	s.once.Do(func() {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.lost)
	})
}

// keep renews the lease until Close, the Backend's close, or its loss;
// deadline is when the lease can expire at the earliest.
func (s *Session) keep(deadline time.Time) {
	defer close(s.done)
	interval := s.ttl / 3
	retry := max(s.ttl/20, 50*time.Millisecond)
	next := time.Now().Add(interval)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		lostAt := deadline.Add(-s.ttl / 10)
		wake := next
		if lostAt.Before(wake) {
			wake = lostAt
		}
		timer.Reset(time.Until(wake))
		select {
		case <-s.ctx.Done():
			return
		case <-s.b.cli.Ctx().Done():
			s.setLost(fmt.Errorf("%w: lease %x: %w", ErrLeaseLost, int64(s.id), ErrClosed))
			return
		case <-timer.C:
		}
		if !time.Now().Before(lostAt) {
			s.setLost(fmt.Errorf("%w: lease %x not renewed within %v of its TTL %v", ErrLeaseLost, int64(s.id), s.ttl-s.ttl/10, s.ttl))
			return
		}
		t0 := time.Now()
		ctx, cancel := context.WithDeadline(s.ctx, lostAt)
		ctx, cancel2 := s.b.reqCtx(ctx)
		r, err := s.b.cli.KeepAliveOnce(ctx, s.id)
		cancel2()
		cancel()
		switch {
		case err == nil:
			deadline = t0.Add(time.Duration(r.TTL) * time.Second)
			s.mu.Lock()
			s.since = t0
			s.mu.Unlock()
			next = t0.Add(interval)
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.setLost(fmt.Errorf("%w: lease %x expired or was revoked on the server", ErrLeaseLost, int64(s.id)))
			return
		default:
			next = time.Now().Add(retry)
		}
	}
}

// Put writes value under name, bound to the session's lease: the key is
// deleted when the lease ends (Close, or TTL after this process stops
// renewing). It fails with ErrLeaseLost once the session is lost.
func (s *Session) Put(ctx context.Context, name string, value []byte) (int64, error) {
	select {
	case <-s.lost:
		return 0, s.Err()
	default:
	}
	ctx, cancel := s.b.reqCtx(ctx)
	defer cancel()
	r, err := s.b.cli.Put(ctx, s.b.Key(name), string(value), clientv3.WithLease(s.id))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.setLost(fmt.Errorf("%w: lease %x expired or was revoked on the server", ErrLeaseLost, int64(s.id)))
		return 0, s.Err()
	}
	if err != nil {
		return 0, fmt.Errorf("etcd: put %s: %w", s.b.Key(name), err)
	}
	return r.Header.Revision, nil
}

// Close stops renewing and revokes the lease, which deletes its keys at
// once (a standby waiting in Campaign wins without waiting for the TTL).
// Lost is closed when Close returns. A revocation that fails (ctx done,
// etcd unreachable) is returned; the lease then expires after its TTL.
func (s *Session) Close(ctx context.Context) error {
	s.cancel()
	<-s.done // keep returns at once: its waits and calls all end on s.ctx
	s.setLost(fmt.Errorf("%w: session closed", ErrLeaseLost))
	if s.b.cli.Ctx().Err() != nil {
		return fmt.Errorf("etcd: revoke lease %x: %w (it expires after its TTL)", int64(s.id), ErrClosed)
	}
	ctx, cancel := s.b.reqCtx(ctx)
	defer cancel()
	if _, err := s.b.cli.Revoke(ctx, s.id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("etcd: revoke lease %x: %w", int64(s.id), err)
	}
	return nil
}
