package etcd

import (
	"context"
	"fmt"

	"github.com/falconml/falcon/ps"
)

// DefaultStateName is the key, under the Backend's prefix, where
// RunStandby keeps the coordinator's state.
const DefaultStateName = "coordinator/state"

// Store is a ps.CoordinatorStore on one etcd key, fenced by a
// Leadership: Save and Load are transactions that etcd applies only
// while the leadership holds, so a coordinator that lost it (its lease
// expired while it was stopped or cut off, and a standby took over)
// neither overwrites its successor's state nor reads one it must not
// act on: both return an error wrapping ErrNotLeader.
//
// One Save is one etcd write: atomic, and durable on a quorum of etcd's
// members when it returns nil. A state larger than Config.MaxValue is
// refused (etcd refuses requests over its --max-request-bytes).
type Store struct {
	l    *Leadership
	name string
}

var _ ps.CoordinatorStore = (*Store)(nil)

// NewStore returns the Store of the key name (relative to the Backend's
// prefix; DefaultStateName for a coordinator) fenced by l.
func NewStore(l *Leadership, name string) *Store { return &Store{l: l, name: name} }

// Leadership returns the leadership that fences the store.
func (s *Store) Leadership() *Leadership { return s.l }

// Load returns the state last saved, or (nil, nil) when none was saved.
// It fails with ErrNotLeader once the leadership is lost.
func (s *Store) Load(ctx context.Context) ([]byte, error) {
	kv, ok, err := s.l.Get(ctx, s.name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, nil
	}
	if max := s.l.e.b.cfg.MaxValue; len(kv.Value) > max {
		return nil, fmt.Errorf("%w: %s holds %d bytes, more than Config.MaxValue (%d)", ps.ErrCoordinatorState, s.l.e.b.Key(s.name), len(kv.Value), max)
	}
	if kv.Value == nil {
		return []byte{}, nil // saved empty: not "none saved"
	}
	return kv.Value, nil
}

// Save replaces the state while the leadership holds; it fails with
// ErrNotLeader once it is lost, writing nothing.
func (s *Store) Save(ctx context.Context, state []byte) error {
	if max := s.l.e.b.cfg.MaxValue; len(state) > max {
		return fmt.Errorf("%w: %d bytes, more than Config.MaxValue (%d)", ps.ErrCoordinatorState, len(state), max)
	}
	return s.l.Put(ctx, s.name, state)
}
