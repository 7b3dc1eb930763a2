package etcd

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// ErrStopTimeout: after leadership was lost, a RunFunc did not return
// within Config.StopTimeout. Its Saves are refused all the same (the
// Store is fenced), but the process should exit.
var ErrStopTimeout = errors.New("etcd: coordinator did not stop in time after losing leadership")

// RunFunc runs the coordinator while this process leads: state is what
// the last leader saved (nil for a new run), store is where to save from
// now on (give it to ps as CoordinatorConfig.Store or
// ClusterConfig.CoordinatorStore). It must return promptly when ctx is
// done, which happens the moment leadership is lost.
//
// Once leadership is lost the coordinator must stop as if its process
// had crashed: when ctx is done, RunFunc calls Abandon on it
// (ps.Coordinator.Abandon, or ps.Cluster.Abandon on the coordinator's
// node, which also closes its transport) and returns, and must not Close
// it first (a ps coordinator that closes answers its workers' requests
// with "closed", and Cluster.Close tells every node the run is aborted;
// either ends the run its successor is taking over). Abandon sends
// nothing and answers no request: the workers and servers wait for the
// successor at the coordinator's address, as after a crash. A
// coordinator that has not noticed yet stops by itself at its next save,
// which the store refuses with an error wrapping ps.ErrSuperseded (and
// ErrNotLeader).
type RunFunc func(ctx context.Context, store *Store, state []byte) error

// RunStandby makes this process a standby coordinator: it campaigns in
// election and, once it leads, loads the state kept under stateName
// (DefaultStateName) and calls run with a store fenced by its
// leadership. When run returns, RunStandby resigns (the next standby
// leads at once) and returns run's error. When leadership is lost first,
// run's ctx is canceled at once and RunStandby returns an error wrapping
// ErrNotLeader, after run returned or Config.StopTimeout passed (then
// also wrapping ErrStopTimeout). A panic in run is recovered and
// returned as an error. When ctx is done before leadership is won,
// RunStandby returns ctx's error. A process whose RunStandby returned
// ErrNotLeader may call it again to stand by once more.
func RunStandby(ctx context.Context, e *Election, stateName string, run RunFunc) error {
	l, err := e.Campaign(ctx)
	if err != nil {
		return err
	}
	b := e.b
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.RequestTimeout)
		_ = l.Resign(rctx) // best effort: otherwise the lease expires after its TTL
		cancel()
	}()
	store := NewStore(l, stateName)
	state, err := store.Load(ctx)
	if err != nil {
		return fmt.Errorf("etcd: load the coordinator's state: %w", err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("etcd: coordinator panicked: %v\n%s", p, debug.Stack())
			}
		}()
		done <- run(rctx, store, state)
	}()
	select {
	case err := <-done:
		if lerr := l.Err(); err != nil && lerr != nil && !errors.Is(err, ErrNotLeader) {
			err = errors.Join(lerr, err) // it failed because the leadership ended
		}
		return err
	case <-l.Lost():
	}
	cancel()
	t := time.NewTimer(b.cfg.StopTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			return errors.Join(l.Err(), err)
		}
		return l.Err()
	case <-t.C:
		return errors.Join(l.Err(), fmt.Errorf("%w (%v)", ErrStopTimeout, b.cfg.StopTimeout))
	}
}
