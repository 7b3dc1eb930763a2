package etcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrClosed: the Backend was closed.
var ErrClosed = errors.New("etcd: backend closed")

// Backend is a connection to etcd under one key prefix (Config.Prefix).
// It offers the small layer every use of etcd in Falcon is built on: a
// KV (Get, Put, Delete, List) with revisions, Watch, leases (Session)
// and elections (Election). Store, the coordinator's durable state, is
// one user; membership and rendezvous are meant to be others (doc.go).
// Key names given to its methods are relative to the prefix. A Backend
// is safe for concurrent use.
type Backend struct {
	cli *clientv3.Client
	cfg Config
	own bool // Close closes cli
	// failNext, set by tests only, is how many of the next fenced
	// transactions (Leadership.Txn) fail with errInjected before reaching
	// etcd (a transient failure: etcd without a leader, a request timed
	// out, a connection reset).
	failNext atomic.Int64
}

// errInjected is the transient failure the tests inject (failNext): what
// etcd answers while it elects a leader.
var errInjected = rpctypes.ErrGRPCNoLeader

// injected reports whether this call is one of failNext's.
func (b *Backend) injected() bool {
	return b.failNext.Load() > 0 && b.failNext.Add(-1) >= 0
}

// maxSend and maxRecv bound the client's requests and answers: a
// Store's requests carry at most txnBytes of chunks; List's answers are
// refused over maxRecv (give it a limit).
const (
	maxSend = txnBytes + 1<<20
	maxRecv = 16 << 20
)

// Open validates cfg, fills in its defaults and connects to
// cfg.Endpoints; the connection is made within cfg.DialTimeout.
func Open(cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd: Config.Endpoints is empty")
	}
	cfg = cfg.withDefaults()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:          cfg.Endpoints,
		DialTimeout:        cfg.DialTimeout,
		MaxCallRecvMsgSize: maxRecv,
		MaxCallSendMsgSize: maxSend,
		Logger:             cfg.Logger,
		TLS:                cfg.TLS,
		Username:           cfg.Username,
		Password:           cfg.Password,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: connect to %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	return &Backend{cli: cli, cfg: cfg, own: true}, nil
}

// NewBackend returns a Backend on a client the caller made and keeps
// (Close leaves it open); cfg.Endpoints and cfg.DialTimeout are unused.
func NewBackend(cli *clientv3.Client, cfg Config) (*Backend, error) {
	if cli == nil {
		return nil, errors.New("etcd: nil client")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Backend{cli: cli, cfg: cfg.withDefaults()}, nil
}

// Close closes the connection if Open made it. It revokes nothing: as
// after a crash, the leases of its sessions expire after their TTL, and
// until then a standby cannot take over; call Leadership.Resign or
// Session.Close first to hand over at once.
func (b *Backend) Close() error {
	if !b.own {
		return nil
	}
	return b.cli.Close()
}

// Client returns the etcd client, for what this package does not offer.
func (b *Backend) Client() *clientv3.Client { return b.cli }

// Config returns the configuration with its defaults filled in.
func (b *Backend) Config() Config { return b.cfg }

// Key returns the full etcd key of name (the prefix, then name).
func (b *Backend) Key(name string) string { return b.cfg.Prefix + name }

// reqCtx bounds one call by Config.RequestTimeout.
func (b *Backend) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.cfg.RequestTimeout)
}

// KeyValue is one key's value and revisions. Revisions are etcd's: one
// counter for the whole cluster, raised by every write.
type KeyValue struct {
	// Name is the key relative to the Backend's prefix.
	Name string
	// Value is the key's value (a copy the caller may keep).
	Value []byte
	// CreateRev is the revision that created the key; ModRev the one that
	// last changed it.
	CreateRev, ModRev int64
	// Lease is the lease the key is bound to (Session.Put), or 0.
	Lease clientv3.LeaseID
}

func (b *Backend) fromPB(kv *mvccpb.KeyValue) KeyValue {
	return KeyValue{
		Name:      strings.TrimPrefix(string(kv.Key), b.cfg.Prefix),
		Value:     bytes.Clone(kv.Value),
		CreateRev: kv.CreateRevision,
		ModRev:    kv.ModRevision,
		Lease:     clientv3.LeaseID(kv.Lease),
	}
}

// Get returns the key name, and false when it does not exist. The read
// is linearizable: it sees every write that completed before it began.
func (b *Backend) Get(ctx context.Context, name string) (KeyValue, bool, error) {
	ctx, cancel := b.reqCtx(ctx)
	defer cancel()
	r, err := b.cli.Get(ctx, b.Key(name))
	if err != nil {
		return KeyValue{}, false, fmt.Errorf("etcd: get %s: %w", b.Key(name), err)
	}
	if len(r.Kvs) == 0 {
		return KeyValue{}, false, nil
	}
	return b.fromPB(r.Kvs[0]), true, nil
}

// List returns the keys whose names begin with prefix, in key order, at
// most limit of them (0: no limit; the client still refuses an answer
// over 16 MiB), and the revision the list was read at (give it
// to Watch to miss no later change).
func (b *Backend) List(ctx context.Context, prefix string, limit int) ([]KeyValue, int64, error) {
	ctx, cancel := b.reqCtx(ctx)
	defer cancel()
	r, err := b.cli.Get(ctx, b.Key(prefix), clientv3.WithPrefix(), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, 0, fmt.Errorf("etcd: list %s: %w", b.Key(prefix), err)
	}
	out := make([]KeyValue, len(r.Kvs))
	for i, kv := range r.Kvs {
		out[i] = b.fromPB(kv)
	}
	return out, r.Header.Revision, nil
}

// Put writes value under name and returns the revision of the write.
// The key outlives every session; Session.Put writes one that does not.
func (b *Backend) Put(ctx context.Context, name string, value []byte) (int64, error) {
	ctx, cancel := b.reqCtx(ctx)
	defer cancel()
	r, err := b.cli.Put(ctx, b.Key(name), string(value))
	if err != nil {
		return 0, fmt.Errorf("etcd: put %s: %w", b.Key(name), err)
	}
	return r.Header.Revision, nil
}

// Delete removes the key name (nothing when it does not exist).
func (b *Backend) Delete(ctx context.Context, name string) error {
	ctx, cancel := b.reqCtx(ctx)
	defer cancel()
	if _, err := b.cli.Delete(ctx, b.Key(name)); err != nil {
		return fmt.Errorf("etcd: delete %s: %w", b.Key(name), err)
	}
	return nil
}

// Event is one change seen by Watch.
type Event struct {
	// KeyValue is the key after the change (for a deletion: its name and
	// ModRev, the revision of the deletion).
	KeyValue
	// Deleted is true when the key was deleted (or its lease expired).
	Deleted bool
	// Err, when not nil, ends the watch (the last event sent): for
	// example the revision asked for was compacted away.
	Err error
}

// Watch sends every change to a key whose name begins with prefix, from
// revision fromRev on (0: from now), in revision order. The channel is
// closed when ctx is done or the watch fails (its last Event carries the
// error); the caller must drain it until then, or cancel ctx.
func (b *Backend) Watch(ctx context.Context, prefix string, fromRev int64) <-chan Event {
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if fromRev > 0 {
		opts = append(opts, clientv3.WithRev(fromRev))
	}
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	wch := b.cli.Watch(ctx, b.Key(prefix), opts...)
	out := make(chan Event)
	go func() {
		defer close(out)
		defer cancel()
		send := func(e Event) bool {
			select {
			case out <- e:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for r := range wch {
			if err := r.Err(); err != nil {
				send(Event{Err: fmt.Errorf("etcd: watch %s: %w", b.Key(prefix), err)})
				return
			}
			for _, ev := range r.Events {
				e := Event{KeyValue: b.fromPB(ev.Kv), Deleted: ev.Type == clientv3.EventTypeDelete}
				if !send(e) {
					return
				}
			}
		}
		if ctx.Err() == nil {
			send(Event{Err: fmt.Errorf("etcd: watch %s ended", b.Key(prefix))})
		}
	}()
	return out
}
