package ps

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/transport"
)

// # Membership
//
// (This part of the package documentation sits beside the code it
// describes; the package doc in doc.go is the map.)
//
// Workers join and leave while training runs (membership.go; the rules are
// the epsp core's, see the epsp package doc). epsp.Config.MaxWorkers gives
// the worker slots (CoordinatorConfig.Workers names them all; a Cluster
// names them worker-<i> and its servers' role checks admit them). A hello
// from a worker that is not a member — a new slot, or a worker that left —
// is a join: it is admitted at the join clock J, the clock the next release
// goes into (under BSP the next barrier's clock, never the one in
// progress), waits for its release into J, pulls the parameters then and
// runs the clocks J .. TrainConfig.Clocks-1 only (Worker.JoinClock).
// Worker.Quit (or TrainConfig.Quit) leaves mid-run; a worker lost under
// ContinueWithout leaves too; barriers never wait for a departed worker.
// Below epsp.Config.MinWorkers (and while no worker has finished its
// schedule) the run pauses — clocks every member finished are still
// flushed, no worker is released into a new clock — and resumes when joins
// bring the count back; a pause longer than MembershipConfig.PauseTimeout
// (60 s) aborts the run with ErrBelowMinimum naming the members and the
// departed. A departed worker rejoins only epsp.Config.RejoinAfter after it
// left (ErrRejoinTooSoon before, saying how long is left); a join under a
// policy that does not accept joins is ErrJoinRefused naming it (BSP, SSP
// and ASP accept them; EPSP v2 and the other policies size per-worker
// state at the start and refuse). MembershipConfig.OnChange sees every
// change (kind, who, old and new size, clock, paused) so a program can
// rescale its learning rate: Coordinator.SetLRScale multiplies the scale
// of every update ordered from then on (flushes, ApplyNow pushes), e.g.
// by members/initial under the linear scaling rule
// (TestElastic_HookRescalesLR).
// Cluster.AddWorker starts a joiner in process; over TCP a joiner is a
// process like any worker, whose address the coordinator's Peers must
// hold. A hand-over of a lost worker's samples never goes to a joiner that
// has not started its first clock. Every sample counts once across joins
// and leaves (TestElastic_*: scale-up 2→3, scale-down 3→2, pause and
// resume, cooldown, asserted from the server's counts). The simulator
// (ps/sim) does not model membership changes.

// Elastic membership: workers join and leave while a run goes on. The
// rules are the epsp core's (see the epsp package doc, "Membership"); the
// coordinator adds the runtime around them:
//
//   - a hello from a worker that is not a member — a slot beyond
//     EPSP.NumWorkers (up to EPSP.MaxWorkers, named by
//     CoordinatorConfig.Workers), or a worker that left or was lost — is a
//     join (epsp.EventJoin): the worker is admitted at the join clock J,
//     waits for its release into J, pulls the current parameters then and
//     runs the clocks J .. TrainConfig.Clocks-1 only;
//   - a worker that quits mid-run (Worker.Quit, TrainConfig.Quit) or is
//     lost under ContinueWithout leaves the set; barriers never wait for it;
//   - below EPSP.MinWorkers the run pauses (no release, no clock starts)
//     and resumes when joins bring the count back; a pause longer than
//     MembershipConfig.PauseTimeout aborts the run with ErrBelowMinimum
//     naming the members, the minimum and the departed;
//   - a departed worker may rejoin, as a new process (a new incarnation)
//     or the same one, only EPSP.RejoinAfter after it left: earlier its
//     Start fails with ErrRejoinTooSoon; a new process under the name of a
//     worker that is still a member is refused with ErrRestarted, as before;
//   - MembershipConfig.OnChange sees every change (old size, new size,
//     who), so a program can rescale its learning rate.

// MembershipConfig configures the coordinator's side of elastic
// membership, workers that join and leave mid-run; the rules themselves
// (slots, minimum, cooldown) are epsp.Config's MaxWorkers, MinWorkers and
// RejoinAfter. Its zero value means a 60 s pause below
// epsp.Config.MinWorkers and no callback.
type MembershipConfig struct {
	// PauseTimeout bounds a pause below epsp.Config.MinWorkers: then the
	// run aborts with ErrBelowMinimum. Zero means 60 s.
	PauseTimeout time.Duration
	// OnChange, if set, is called after every change of the set of
	// members, on the coordinator's loop, in order; it must not block
	// (hand the change to another goroutine for slow work).
	OnChange func(MembershipChange)
}

// Validate checks the configuration.
func (c *MembershipConfig) Validate() error {
	if c.PauseTimeout < 0 {
		return errors.New("ps: negative MembershipConfig.PauseTimeout")
	}
	return nil
}

func (c MembershipConfig) withDefaults() MembershipConfig {
	if c.PauseTimeout == 0 {
		c.PauseTimeout = 60 * time.Second
	}
	return c
}

// ChangeKind says how the set of members changed.
type ChangeKind uint8

const (
	// Joined: a worker joined (a new slot, or a rejoin).
	Joined ChangeKind = iota + 1
	// Finished: a worker left having finished its schedule.
	Finished
	// Quit: a worker left mid-run on its own (Worker.Quit).
	Quit
	// Lost: the coordinator lost a worker (its lease expired) and went on
	// without it (ContinueWithout).
	Lost
)

func (k ChangeKind) String() string {
	switch k {
	case Joined:
		return "joined"
	case Finished:
		return "finished"
	case Quit:
		return "quit"
	case Lost:
		return "lost"
	}
	return fmt.Sprintf("ChangeKind(%d)", uint8(k))
}

// MembershipChange is one change of the set of members, as
// MembershipConfig.OnChange sees it. A program that keeps the global batch
// fixed rescales its learning rate by New/Old (the linear scaling rule,
// as Horovod's elastic mode asks of its users).
type MembershipChange struct {
	Kind     ChangeKind
	Worker   epsp.WorkerID
	Node     transport.NodeID
	Old, New int // members before and after
	// Clock is the joiner's first clock (Joined), or the last clock the
	// worker had reached (the others).
	Clock int
	// Paused reports whether the run is paused below the minimum after
	// the change.
	Paused bool
}

// isMember reports whether w is in the run (on the loop).
func (c *Coordinator) isMember(w epsp.WorkerID) bool {
	m, ok := c.core.View().(epsp.Membership)
	return !ok || m.Member(w)
}

// serveJoin (on the loop) admits a hello from a worker that is not a
// member: epsp.EventJoin, then its lease is renewed under the hello's
// incarnation.
func (c *Coordinator) serveJoin(r *coordReq, orders map[uint64]epsp.TransferOrder) coordResp {
	w := r.worker
	old := len(c.core.Members())
	out, err := c.coreStep(c.now(), epsp.Event{Kind: epsp.EventJoin, Worker: w})
	switch {
	case errors.Is(err, epsp.ErrRejoinTooSoon):
		return coordResp{err: fmt.Errorf("%w: %s: %v", ErrRejoinTooSoon, c.cfg.Workers[w], err)}
	case errors.Is(err, epsp.ErrJoinRefused):
		return coordResp{err: fmt.Errorf("%w: %s: %v", ErrJoinRefused, c.cfg.Workers[w], err)}
	case err != nil:
		return coordResp{err: fmt.Errorf("%w: %s: %v", ErrRejected, c.cfg.Workers[w], err)}
	}
	c.lease.rejoin(w, r.inc)
	c.mu.Lock()
	c.joined[w] = true
	c.mu.Unlock()
	v := c.core.View()
	h := helloInfo{clock: v.Clock(w), version: v.Version(), batch: v.Batch(w), par: v.Parallelism(w), join: true}
	c.snapshot()
	c.opts.emit(event.Event{Kind: event.Join, Node: "coordinator", Worker: w, Clock: h.clock})
	c.changed(Joined, w, old, h.clock)
	if err := c.execute(out, orders); err != nil {
		return coordResp{err: err}
	}
	return coordResp{hello: h}
}

// changed reports a membership change to the hook and the logger, and
// starts or ends the pause (on the loop).
func (c *Coordinator) changed(k ChangeKind, w epsp.WorkerID, old, clock int) {
	n := len(c.core.Members())
	paused := c.core.Paused()
	c.mu.Lock()
	was := c.paused
	c.paused = paused
	c.mu.Unlock()
	switch {
	case paused && !was:
		c.pauseTimer = time.NewTimer(c.cfg.Membership.PauseTimeout)
		c.pauseSince = time.Now()
		c.opts.log.Warn("ps: run paused: too few workers", "members", n, "min", c.cfg.EPSP.MinWorkers,
			"after", fmt.Sprintf("%s %s", c.cfg.Workers[w], k), "timeout", c.cfg.Membership.PauseTimeout)
	case !paused && was:
		c.pauseTimer.Stop()
		c.pauseTimer = nil
		c.opts.log.Info("ps: run resumed", "members", n, "paused", time.Since(c.pauseSince).Round(time.Millisecond))
	}
	if f := c.cfg.Membership.OnChange; f != nil && n != old {
		f(MembershipChange{Kind: k, Worker: w, Node: c.cfg.Workers[w], Old: old, New: n, Clock: clock, Paused: paused})
	}
}

// pauseC is the channel of the pause's deadline (nil when not paused).
func (c *Coordinator) pauseC() <-chan time.Time {
	if c.pauseTimer == nil {
		return nil
	}
	return c.pauseTimer.C
}

// pauseExpired aborts a run paused for PauseTimeout (on the loop).
func (c *Coordinator) pauseExpired() {
	c.pauseTimer = nil
	var in, out []string
	for w := range c.cfg.Workers {
		if c.isMember(epsp.WorkerID(w)) {
			in = append(in, string(c.cfg.Workers[w]))
		} else if c.lease.departed(epsp.WorkerID(w)) {
			out = append(out, string(c.cfg.Workers[w]))
		}
	}
	c.setFatal(fmt.Errorf("%w: paused for %v with %d members (%s), below the minimum of %d; departed: %s",
		ErrBelowMinimum, time.Since(c.pauseSince).Round(time.Millisecond), len(in), strings.Join(in, ", "),
		c.cfg.EPSP.MinWorkers, strings.Join(out, ", ")))
}

// SetLRScale multiplies the scale of every update ordered from now on —
// each flush, and each push the policy applies at once — by f (> 0,
// finite; 1 undoes it). With SGD or momentum that is the learning rate
// times f; with Adam it scales the gradient, which Adam's normalisation
// mostly cancels. Call it from MembershipConfig.OnChange to follow the
// linear scaling rule when the global batch changes with the members
// (f = members / initial members): an update already sent keeps its
// scale. Safe to call from any goroutine, the hook included.
func (c *Coordinator) SetLRScale(f float64) error {
	if !(f > 0) || math.IsInf(f, 0) {
		return fmt.Errorf("ps: SetLRScale(%v): want a finite factor > 0", f)
	}
	c.lrScale.Store(math.Float64bits(f))
	return nil
}

// LRScale returns SetLRScale's factor (1 if never set).
func (c *Coordinator) LRScale() float64 {
	if b := c.lrScale.Load(); b != 0 {
		return math.Float64frombits(b)
	}
	return 1
}

// Paused reports whether the run is paused below epsp.Config.MinWorkers.
func (c *Coordinator) Paused() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused
}
