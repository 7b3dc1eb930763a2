package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNotLeader: the caller does not hold the leadership (any more): its
// lease was lost, it resigned, or its leader key was deleted. A fenced
// write (Leadership.Put, Store.Save) refused by etcd returns it.
var ErrNotLeader = errors.New("etcd: not the leader")

// Election elects one leader among the processes campaigning under one
// name. Each candidate writes a key bound to its own Session under
// "election/<name>/"; the candidate whose key is oldest (lowest create
// revision) leads, and every other waits for the key just older than its
// own to be deleted. The leader's key's create revision (Leadership.Rev)
// is a fencing token: it grows with each new leader, and a fenced write
// is a transaction that applies only while that key still has it.
type Election struct {
	b    *Backend
	name string
}

// Election returns the election called name (no "/" in it).
func (b *Backend) Election(name string) *Election { return &Election{b: b, name: name} }

func (e *Election) dir() string { return "election/" + e.name + "/" }

// Leader returns the current leader's Config.Name, and false when nobody
// campaigns.
func (e *Election) Leader(ctx context.Context) (string, bool, error) {
	ctx, cancel := e.b.reqCtx(ctx)
	defer cancel()
	r, err := e.b.cli.Get(ctx, e.b.Key(e.dir()), append([]clientv3.OpOption{clientv3.WithPrefix()}, clientv3.WithFirstCreate()...)...)
	if err != nil {
		return "", false, fmt.Errorf("etcd: election %s: %w", e.name, err)
	}
	if len(r.Kvs) == 0 {
		return "", false, nil
	}
	return string(r.Kvs[0].Value), true, nil
}

// Campaign blocks until this process leads the election or ctx is done.
// It grants a new lease (Session) for the leadership; on failure it
// revokes it, so a canceled candidate leaves nothing behind.
func (e *Election) Campaign(ctx context.Context) (*Leadership, error) {
	if strings.Contains(e.name, "/") || e.name == "" {
		return nil, fmt.Errorf("etcd: election name %q is empty or has a \"/\"", e.name)
	}
	s, err := e.b.NewSession(ctx)
	if err != nil {
		return nil, err
	}
	l, err := e.campaign(ctx, s)
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.b.cfg.RequestTimeout)
		_ = s.Close(cctx) // best effort: otherwise the key goes after the TTL
		cancel()
		return nil, err
	}
	return l, nil
}

func (e *Election) campaign(ctx context.Context, s *Session) (*Leadership, error) {
	cli := e.b.cli
	key := e.b.Key(e.dir() + fmt.Sprintf("%016x", int64(s.id)))
	rctx, cancel := e.b.reqCtx(ctx)
	r, err := cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, e.b.cfg.Name, clientv3.WithLease(s.id))).
		Commit()
	cancel()
	if err != nil {
		return nil, fmt.Errorf("etcd: election %s: put candidate key: %w", e.name, err)
	}
	if !r.Succeeded {
		return nil, fmt.Errorf("etcd: election %s: candidate key %s exists for a new lease", e.name, key)
	}
	rev := r.Header.Revision
	for {
		// the newest candidate older than this one: wait for it to go
		rctx, cancel := e.b.reqCtx(ctx)
		g, err := cli.Get(rctx, e.b.Key(e.dir()), append([]clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMaxCreateRev(rev - 1)}, clientv3.WithLastCreate()...)...)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("etcd: election %s: %w", e.name, err)
		}
		if len(g.Kvs) == 0 {
			break
		}
		if err := e.waitDeleted(ctx, s, string(g.Kvs[0].Key), g.Header.Revision+1); err != nil {
			return nil, err
		}
	}
	select {
	case <-s.Lost():
		return nil, fmt.Errorf("%w: election %s: %w", ErrNotLeader, e.name, s.Err())
	default:
	}
	return newLeadership(e, s, key, rev), nil
}

// waitDeleted returns when key is deleted at or after revision from, or
// when the watch ends (the caller checks again), or with an error when
// ctx is done or the session is lost.
func (e *Election) waitDeleted(ctx context.Context, s *Session, key string, from int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := e.b.cli.Watch(wctx, key, clientv3.WithRev(from))
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.Lost():
			return fmt.Errorf("%w: election %s: %w", ErrNotLeader, e.name, s.Err())
		case r, ok := <-wch:
			if !ok || r.Err() != nil {
				// the watch failed (no leader, compaction): look again
				// after a pause so that a failing etcd is not spun on
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(100 * time.Millisecond):
				}
				return nil
			}
			for _, ev := range r.Events {
				if ev.Type == clientv3.EventTypeDelete {
					return nil
				}
			}
		}
	}
}

// Leadership is the leadership won by Campaign, held until Lost closes.
// Its writes (Put, and Store's Save) are fenced: etcd applies them only
// while this leadership's key exists with its revision, so a deposed
// leader that has not noticed yet writes nothing.
type Leadership struct {
	e    *Election
	s    *Session
	key  string
	rev  int64
	lost chan struct{}
	once sync.Once
	mu   sync.Mutex
	err  error
	stop context.CancelFunc
}

func newLeadership(e *Election, s *Session, key string, rev int64) *Leadership {
	l := &Leadership{e: e, s: s, key: key, rev: rev, lost: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	l.stop = cancel
	go l.watch(ctx)
	return l
}

// watch closes Lost when the session is lost or the leader key is
// deleted (by an operator, say) before Resign.
func (l *Leadership) watch(ctx context.Context) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := l.e.b.cli.Watch(wctx, l.key, clientv3.WithRev(l.rev+1))
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.lost:
			return
		case <-l.s.Lost():
			l.lose(l.s.Err())
			return
		case r, ok := <-wch:
			if !ok {
				// Backend closed or watch failed: the session's renewal
				// still bounds how long this leadership is trusted
				wch = nil
				continue
			}
			for _, ev := range r.Events {
				if ev.Type == clientv3.EventTypeDelete {
					l.lose(fmt.Errorf("leader key %s deleted", l.key))
					return
				}
			}
		}
	}
}

func (l *Leadership) lose(cause error) {
	l.once.Do(func() {
		l.mu.Lock()
		l.err = fmt.Errorf("%w: election %s: %w", ErrNotLeader, l.e.name, cause)
		l.mu.Unlock()
		close(l.lost)
	})
}

// Lost returns a channel closed when the leadership ends: the lease is
// lost (see Session for the bound), the leader key was deleted, a fenced
// write was refused, or Resign was called. A coordinator must stop at
// once: a successor may already lead. Call Resign then, to free the
// lease and its keys.
func (l *Leadership) Lost() <-chan struct{} { return l.lost }

// Err returns nil while the leadership holds, then an error wrapping
// ErrNotLeader that says why it ended.
func (l *Leadership) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Rev returns the fencing token: the create revision of this leader's
// key, larger than every earlier leader's of the same election.
func (l *Leadership) Rev() int64 { return l.rev }

// Backend returns the Backend the leadership was won on.
func (l *Leadership) Backend() *Backend { return l.e.b }

// Session returns the session that holds the leadership.
func (l *Leadership) Session() *Session { return l.s }

// Txn applies ops only while this leadership holds; otherwise it applies
// nothing, closes Lost and returns an error wrapping ErrNotLeader.
func (l *Leadership) Txn(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	select {
	case <-l.lost:
		return nil, l.Err()
	default:
	}
	cli := l.e.b.cli
	if l.e.b.injected() {
		return nil, fmt.Errorf("etcd: fenced transaction: %w", errInjected)
	}
	ctx, cancel := l.e.b.reqCtx(ctx)
	defer cancel()
	r, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)).
		Then(ops...).
		Commit()
	if err != nil && cli.Ctx().Err() != nil {
		// the Backend was closed: this process can lead no more
		l.lose(ErrClosed)
		return nil, l.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("etcd: fenced transaction: %w", err)
	}
	if !r.Succeeded {
		l.lose(fmt.Errorf("leader key %s (revision %d) is gone: write refused", l.key, l.rev))
		return nil, l.Err()
	}
	return r, nil
}

// Put writes value under name while this leadership holds (a fenced
// write: see Txn).
func (l *Leadership) Put(ctx context.Context, name string, value []byte) error {
	_, err := l.Txn(ctx, clientv3.OpPut(l.e.b.Key(name), string(value)))
	return err
}

// Get reads name while this leadership holds (see Txn): a leader reads
// what no successor has written yet.
func (l *Leadership) Get(ctx context.Context, name string) (KeyValue, bool, error) {
	r, err := l.Txn(ctx, clientv3.OpGet(l.e.b.Key(name)))
	if err != nil {
		return KeyValue{}, false, err
	}
	kvs := r.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return KeyValue{}, false, nil
	}
	return l.e.b.fromPB(kvs[0]), true, nil
}

// Resign ends the leadership: Lost closes, and the lease is revoked so
// the next candidate leads at once. A revocation that fails is returned
// (the lease then expires after its TTL).
func (l *Leadership) Resign(ctx context.Context) error {
	l.lose(errors.New("resigned"))
	l.stop()
	return l.s.Close(ctx)
}
