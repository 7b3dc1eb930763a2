package ps

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/transport"
)

// # Failures
//
// (This part of the package documentation sits beside the code it
// describes; the package doc in doc.go is the map.)
//
// Nothing waits without a bound: Start waits at most StartTimeout for its
// peers and names who is missing; every request has a RequestTimeout (a
// hung peer cannot block a caller whose ctx has no deadline); a worker
// that fails after training began reports it, and a coordinator that cannot
// flush tells every worker, so the others return ErrAborted instead of
// waiting at a barrier forever (one it cannot release is lost, below).
//
// Peers that die without a word are found by leases (lease.go): workers
// heartbeat the coordinator every WorkerConfig.Heartbeat (500 ms), the
// coordinator pings every server every LeaseConfig.Interval, and a peer
// silent for LeaseConfig.Timeout (10 s; counted from the coordinator's
// Start, and at least StartTimeout, for a peer never heard from) is lost,
// declared within Timeout + Interval of its last sign of life. Measured
// with a 1 s lease (ps/internal/faulttest, separate processes on
// loopback): a worker killed with kill -9 in the middle of a clock, or
// stopped with SIGSTOP, ends the coordinator and every other worker
// 1.04–1.16 s later with an error naming it (through a Cluster, the
// servers' too: the abort carries its cause to every node). A worker the
// coordinator cannot send to (a release, a task) is declared lost at the
// next check rather than failing the run, and so is a worker alive but
// cut off from one server: workers ping every server each Heartbeat and
// report in their heartbeats the one they heard from least recently, and
// a worker that has not heard a server for Timeout (max(Timeout,
// ServerRestart)) while the coordinator heard it within Timeout/2 is lost,
// the error naming both (measured: 1.11 s after the worker-0 ↔ server-0
// link was blackholed, with a 1 s lease, instead of the 30 s request
// timeout). A server silent to the coordinator too is the server's fault,
// not the workers'. A link that fails fast (a reset) fails the worker's
// request at once instead, and the worker's failure aborts the run naming
// it and the server. A lost server aborts the run
// with ErrPeerLost naming it, unless it comes back within
// LeaseConfig.ServerRestart (see Durability). A lost worker aborts the
// run naming it (AbortRun, the default) or, with ContinueWithout, leaves
// the run (epsp.EventLeave) once the samples of its current clock it had
// not processed — the prefix of its batch it had not given away, unless its
// own push of the clock was already admitted — have been computed by a
// survivor and stored, so each sample counts exactly once (a push admitted
// but not stored when it died is lost, never counted twice). A push is
// admitted once for all servers and then sent to each: a worker lost
// between them (killed, or cut off from one server mid-push) leaves that
// clock with its samples stored on some servers and not the others — a
// partial update, each shard's samples counted at most once. With servers
// that keep each sender's pushes apart (StoreConfig.Deterministic) the
// push is dropped everywhere at the clock's flush and its samples handed
// over, so each counts once; otherwise the partial update is reported at
// the clock's flush, naming the worker and each server's weight
// (partial.go). The hand-over is an order in the epsp core's transfer ledger
// (epsp.Coordinator.HandOver), so the survivor's push of those samples is
// admitted once, and the lost worker's own push of them never; transfer
// orders the lost worker had not answered, and any the policy makes of it
// or to it while it leaves, count as refused. What it owed as a taker is
// settled the same way: a range it pushed but never reported done is
// reported done for it, and every range it still owed — accepted transfers
// and hand-overs not pushed, orders to it not yet answered, samples
// assigned to it at its release — goes to a survivor that is not the
// range's giver (epsp.Coordinator.Retarget), which computes and pushes it
// like a transfer, so the clock's barrier passes with each sample counted
// once (with no such survivor the range is lost, counted in
// epsp.Stats.SamplesAbandoned, and no barrier waits for it). A worker that
// hears nothing from the coordinator for CoordinatorTimeout (10 s) fails
// with ErrPeerLost naming it; one whose request fails because the
// coordinator is gone fails at once with ErrCoordinatorUnavailable naming
// it.
//
// Incarnations: each Worker draws a random 64-bit incarnation id that its
// hello and heartbeats carry; the coordinator binds the first one it
// hears, and a restarted process under the same name is refused at Start
// with ErrRestarted instead of running its clocks a second time, as long
// as the name is a member of the run (under AbortRun its first
// incarnation's expired lease then ends the run naming it). Once the name
// has left the run — it quit, or was lost under ContinueWithout — a new
// process may rejoin after the cooldown (see Membership).

// Failure detection. Every worker holds a lease at the coordinator that it
// renews with a heartbeat request every WorkerConfig.Heartbeat; the
// coordinator pings every server every LeaseConfig.Interval. A peer is
// lost when the coordinator has heard nothing from it for
// LeaseConfig.Timeout — counting from the coordinator's Start for a peer
// it has never heard from (a worker that never said hello, a server never
// reached), with StartTimeout as the least wait then. A worker is lost as
// well when a send to it failed (unreachable), or when its heartbeats say
// it has not heard from a server for Timeout that the coordinator heard
// within Timeout/2 (a cut link; pingServer, leastReached). The coordinator
// checks every Interval, so a lost peer is declared within
//
//	Timeout + Interval (+ the delivery of the abort)
//
// of its last sign of life. Then the policy of LeaseConfig.OnWorkerLost
// decides for a worker: AbortRun stops the run and every worker returns an
// ErrAborted error that names the lost one; ContinueWithout lets the run
// go on as if the worker had quit (epsp.EventLeave with Quit), the pushes
// it made kept (but one that may have reached some servers only, dropped
// from all where the servers keep senders apart: partial.go) and the
// samples it had not processed of its current clock
// handed to a survivor first, as an order recorded in the core's transfer
// ledger (serveLost, epsp.Coordinator.HandOver; a sample is never counted
// twice), and the ranges it still owed as a taker given to survivors the
// same way (epsp.Coordinator.Retarget), so no barrier waits for it; it
// may rejoin after the cooldown (membership.go). A lost server
// always aborts the run, naming it. A worker
// that hears nothing from the coordinator for its CoordinatorTimeout
// fails with ErrCoordinatorUnavailable naming it, so no role waits
// forever for a dead peer.
//
// Incarnations: every Worker draws a random 64-bit incarnation id when it
// is created and sends it in its hello and its heartbeats. The coordinator
// binds a worker's name to the first incarnation it hears; a restarted
// process (a new incarnation under the same name) is refused with an
// ErrRestarted error instead of re-running the clocks its first run
// already pushed.

// LostAction is what the coordinator does when a worker's lease expires.
type LostAction uint8

const (
	// AbortRun stops the run: every worker returns ErrAborted naming the
	// lost worker, and Coordinator.Err reports it.
	AbortRun LostAction = iota
	// ContinueWithout treats the lost worker as having left
	// (epsp.EventLeave): the others go on; its unprocessed samples of its
	// current clock are handed to a survivor first (epsp.Coordinator.
	// HandOver), and it leaves once they are stored; the ranges it owed
	// as a taker go to survivors (epsp.Coordinator.Retarget).
	ContinueWithout
)

// LeaseConfig configures the coordinator's failure detection: how a
// silent worker or server, or a worker cut off from a server, is found
// lost and what follows. Its zero value means 10 s leases and a run that
// aborts on a lost worker, naming it on every node.
type LeaseConfig struct {
	// Timeout is how long a worker or server may stay silent before it
	// is declared lost, and how long a worker may go without an answer
	// from a server the coordinator still reaches (a cut link); zero
	// means 10 s, negative turns detection off.
	Timeout time.Duration
	// Interval is how often servers are pinged and leases checked; zero
	// means Timeout/4.
	Interval time.Duration
	// OnWorkerLost says what a lost worker does to the run.
	OnWorkerLost LostAction
	// ServerRestart is how long a server may stay unreachable while it
	// restarts from its checkpoint (DurableConfig): the coordinator
	// resends flushes that long, and declares the server lost only after
	// max(Timeout, ServerRestart). Workers need ClientConfig.Retry as long.
	// Zero: a silent server is lost after Timeout.
	ServerRestart time.Duration
}

// DefaultLeaseConfig returns a 10 s timeout checked every 2.5 s, aborting
// the run on a lost worker.
func DefaultLeaseConfig() LeaseConfig {
	return LeaseConfig{Timeout: 10 * time.Second, Interval: 2500 * time.Millisecond}
}

// Validate checks the configuration.
func (c *LeaseConfig) Validate() error {
	if c.Interval < 0 || c.ServerRestart < 0 {
		return errors.New("ps: negative LeaseConfig.Interval")
	}
	if c.Timeout > 0 && c.Interval > c.Timeout {
		return fmt.Errorf("ps: lease interval %v exceeds the timeout %v", c.Interval, c.Timeout)
	}
	if c.OnWorkerLost > ContinueWithout {
		return fmt.Errorf("ps: unknown LostAction %d", c.OnWorkerLost)
	}
	return nil
}

func (c LeaseConfig) withDefaults() LeaseConfig {
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Interval == 0 && c.Timeout > 0 {
		c.Interval = c.Timeout / 4
	}
	return c
}

// newIncarnation draws a random nonzero incarnation id.
func newIncarnation() uint64 {
	var b [8]byte
	for {
		rand.Read(b[:])
		if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}

// leases is the coordinator's view of its peers' liveness.
type leases struct {
	cfg   LeaseConfig
	mu    sync.Mutex
	start time.Time
	inc   []uint64    // worker → bound incarnation (0: none yet)
	seen  []time.Time // worker → last heartbeat or request
	done  []bool      // worker left or was declared lost: not watched
	lost  []bool      // worker was declared lost: refused
	fresh []bool      // worker joined mid-run and has not started a clock
	srv   []time.Time // server → last answered ping
	// unreach: worker → why the coordinator could not send to it (a
	// release, an order, a task); the next check declares it lost.
	unreach []error
	// reach: worker → when it last heard from every server, by the
	// coordinator's clock (from its heartbeats; zero: not reported), and
	// the server it has heard from least recently.
	reach    []time.Time
	reachSrv []int
	// lostWhy: the workers declared lost, in order, each with its cause
	lostWhy []string

	stop chan struct{}
	once sync.Once
}

// newLeases watches the first workers of slots (the others are free
// slots: not watched until they join) and servers servers.
func newLeases(cfg LeaseConfig, workers, slots, servers int) *leases {
	l := &leases{cfg: cfg, inc: make([]uint64, slots), seen: make([]time.Time, slots),
		done: make([]bool, slots), lost: make([]bool, slots), fresh: make([]bool, slots), srv: make([]time.Time, servers), stop: make(chan struct{}),
		unreach: make([]error, slots), reach: make([]time.Time, slots), reachSrv: make([]int, slots)}
	for w := workers; w < slots; w++ {
		l.done[w] = true
	}
	return l
}

// bind checks a worker's incarnation (inc, from a hello or a heartbeat;
// 0 for other requests): the first one is bound; another is a restart,
// refused. A worker declared lost is refused. It renews the lease. A
// hello from a worker out of the run (a free slot, or one that left or
// was lost) is a join: it passes, unless it is the lost incarnation
// itself, and the loop rebinds the lease if the join is admitted (rejoin).
func (l *leases) bind(c *Coordinator, w epsp.WorkerID, inc uint64, hello bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if hello && l.done[w] && (inc != l.inc[w] || !l.lost[w]) {
		return nil
	}
	switch {
	case inc == 0:
	case l.inc[w] == 0:
		l.inc[w] = inc
	case l.inc[w] != inc:
		return fmt.Errorf("%w: %s came back as incarnation %016x, the run knows it as %016x; a restarted worker cannot rejoin this run (its first incarnation's pushes are already counted)",
			ErrRestarted, c.cfg.Workers[w], inc, l.inc[w])
	}
	if l.lost[w] {
		return fmt.Errorf("%w: %s was declared lost", ErrRejected, c.cfg.Workers[w])
	}
	l.seen[w] = time.Now()
	return nil
}

// isLost reports whether worker w was declared lost (and has not rejoined).
func (l *leases) isLost(w epsp.WorkerID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost[w]
}

// leave stops watching worker w (it left the run).
func (l *leases) leave(w epsp.WorkerID) {
	l.mu.Lock()
	l.done[w] = true
	l.mu.Unlock()
}

// rejoin watches worker w again, under incarnation inc: it joined.
func (l *leases) rejoin(w epsp.WorkerID, inc uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inc[w], l.done[w], l.lost[w], l.fresh[w], l.seen[w] = inc, false, false, true, time.Now()
	l.unreach[w], l.reach[w] = nil, time.Time{}
}

// unreachable records that a send to worker w failed with err: the next
// check declares it lost (with leases on; it reports false with leases
// off, and the caller must then abort the run itself, nobody else would
// notice).
func (l *leases) unreachable(w epsp.WorkerID, err error) bool {
	if l.cfg.Timeout < 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unreach[w] == nil && !l.done[w] {
		l.unreach[w] = err
	}
	return true
}

// reached records a worker's heartbeat report: stale ago (by its clock)
// it last heard from server srv, the one of all it has heard from least
// recently.
func (l *leases) reached(w epsp.WorkerID, srv int, stale time.Duration) {
	l.mu.Lock()
	l.reach[w], l.reachSrv[w] = time.Now().Add(-stale), srv
	l.mu.Unlock()
}

// started records that worker w computes (it pushed or clocked): a
// joiner can take hand-overs from then on.
func (l *leases) started(w epsp.WorkerID) {
	l.mu.Lock()
	l.fresh[w] = false
	l.mu.Unlock()
}

// departed reports whether worker w was in the run and is no more.
func (l *leases) departed(w epsp.WorkerID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done[w] && l.inc[w] != 0
}

// startLeases begins failure detection (from Coordinator.Start).
func (c *Coordinator) startLeases() {
	l := c.lease
	if l.cfg.Timeout < 0 {
		return
	}
	l.mu.Lock()
	l.start = time.Now()
	for s := range l.srv {
		// Start has just had every server answer a ping (waitServers):
		// a server that dies before its first lease ping is then lost
		// within Timeout, not only after StartTimeout.
		l.srv[s] = l.start
	}
	l.mu.Unlock()
	for s := range c.cfg.Servers {
		c.wg.Add(1)
		go c.pingServer(s)
	}
	c.wg.Add(1)
	go c.watchLeases()
}

// stopLeases ends failure detection.
func (l *leases) close() { l.once.Do(func() { close(l.stop) }) }

func (c *Coordinator) pingServer(s int) {
	defer c.wg.Done()
	l := c.lease
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(c.runCtx, l.cfg.Timeout)
		err := c.client.Ping(ctx, s)
		cancel()
		if err == nil {
			l.mu.Lock()
			l.srv[s] = time.Now()
			l.mu.Unlock()
		}
		select {
		case <-t.C:
		case <-l.stop:
			return
		case <-c.quit:
			return
		}
	}
}

func (c *Coordinator) watchLeases() {
	defer c.wg.Done()
	l := c.lease
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-l.stop:
			return
		case <-c.quit:
			return
		}
		if c.Err() != nil {
			l.close()
			return
		}
		now := time.Now()
		l.mu.Lock()
		// a peer never heard from is waited for at least StartTimeout
		first := l.start.Add(max(c.cfg.StartTimeout, l.cfg.Timeout) - l.cfg.Timeout)
		var lostW []epsp.WorkerID
		var whyW []string
		active := 0
		for w := range l.seen {
			if l.done[w] {
				continue
			}
			active++
			last := l.seen[w]
			if last.IsZero() {
				last = first
			}
			why := ""
			switch {
			case now.Sub(last) > l.cfg.Timeout:
				why = silence(l.seen[w], now)
			case l.unreach[w] != nil:
				why = fmt.Sprintf("unreachable: %v", l.unreach[w])
			case !l.reach[w].IsZero() && now.Sub(l.reach[w]) > max(l.cfg.Timeout, l.cfg.ServerRestart) &&
				!l.srv[l.reachSrv[w]].IsZero() && now.Sub(l.srv[l.reachSrv[w]]) <= l.cfg.Timeout/2:
				// alive, but cut off from a server the coordinator still
				// reaches (within half a lease: a dead or restarting
				// server, silent to everyone, is the server's fault, not
				// the worker's): its pushes and pulls would wait for the
				// request timeout, and hold every barrier that long
				why = fmt.Sprintf("cannot reach server %s: no answer for %v", c.cfg.Servers[l.reachSrv[w]], now.Sub(l.reach[w]).Round(time.Millisecond))
			}
			if why != "" {
				l.done[w], l.lost[w] = true, true
				lostW = append(lostW, epsp.WorkerID(w))
				whyW = append(whyW, why)
			}
		}
		lostS := -1
		var lastS time.Time
		if active > 0 {
			for s, last := range l.srv {
				if last.IsZero() {
					last = first
				}
				if now.Sub(last) > max(l.cfg.Timeout, l.cfg.ServerRestart) {
					lostS, lastS = s, l.srv[s]
					break
				}
			}
		}
		if active == 0 && !c.Paused() {
			l.mu.Unlock()
			l.close() // every worker left: the run is over
			return
		}
		l.mu.Unlock()
		if lostS >= 0 {
			c.leaseMiss("server", c.cfg.Servers[lostS])
			c.setFatal(fmt.Errorf("%w: server %s: %s (lease timeout %v)", ErrPeerLost, c.cfg.Servers[lostS], silence(lastS, now), l.cfg.Timeout))
			l.close()
			return
		}
		for i, w := range lostW {
			c.workerLost(w, whyW[i])
		}
	}
}

// lostNote says which workers the run lost and went on without
// (ContinueWithout), each with its cause; "" for none. The end-of-run
// notice carries it to every node (Cluster.Wait).
func (c *Coordinator) lostNote() string {
	c.lease.mu.Lock()
	defer c.lease.mu.Unlock()
	if len(c.lease.lostWhy) == 0 {
		return ""
	}
	return "the run went on without lost workers: " + strings.Join(c.lease.lostWhy, "; ")
}

// silence describes how long a peer has been silent.
func silence(last, now time.Time) string {
	if last.IsZero() {
		return "never answered"
	}
	return fmt.Sprintf("silent for %v", now.Sub(last).Round(time.Millisecond))
}

// workerLost applies the lost-worker policy.
func (c *Coordinator) workerLost(w epsp.WorkerID, why string) {
	err := fmt.Errorf("%w: worker %s: %s (lease timeout %v)", ErrPeerLost, c.cfg.Workers[w], why, c.lease.cfg.Timeout)
	c.leaseMiss("worker", c.cfg.Workers[w])
	c.opts.emit(event.Event{Kind: event.WorkerLost, Node: "coordinator", Worker: w})
	if c.lease.cfg.OnWorkerLost == AbortRun {
		c.setFatal(err)
		return
	}
	c.opts.log.Warn("ps: worker lost; the run goes on without it", "worker", c.cfg.Workers[w], "err", err)
	c.lease.mu.Lock()
	c.lease.lostWhy = append(c.lease.lostWhy, err.Error())
	c.lease.mu.Unlock()
	// ContinueWithout: the loop treats it as a leave; tell the worker (if
	// it can still hear) that it is out.
	e := wire.NewMsg(nil, wire.OpAbort)
	e.Str(err.Error())
	c.send(w, e.B)
	select {
	case c.reqs <- &coordReq{op: wire.OpLost, worker: w, reason: err.Error()}:
	case <-c.quit:
	}
}

// everyWorkerLost (on the loop, after a lost worker left) aborts the run
// when no member is left and every worker that left was lost: under
// ContinueWithout the run goes on with survivors, and here none is left
// and none finished, so ending it as done would report a run nobody
// completed. With epsp.Config.MinWorkers ≥ 1 the membership pause waits
// for joiners instead (and aborts after MembershipConfig.PauseTimeout).
func (c *Coordinator) everyWorkerLost() error {
	if c.cfg.EPSP.MinWorkers >= 1 || len(c.core.Members()) > 0 {
		return nil
	}
	c.lease.mu.Lock()
	why := slices.Clone(c.lease.lostWhy)
	c.lease.mu.Unlock()
	if c.Stats().Left > len(why) {
		return nil // someone left having finished: the run went on without the lost
	}
	err := fmt.Errorf("%w: every worker was lost and none finished: %s", ErrPeerLost, strings.Join(why, "; "))
	c.setFatal(err)
	return err
}

// serveLost (on the loop) settles what the lost worker lw owed, through
// the core's transfer ledger, so that no clock waits for it and no sample
// is counted twice, and makes it leave:
//
//   - as a taker: a range it pushed but never reported done is reported
//     done for it (its push was admitted: stored, or lost with it, never
//     counted twice; a pushed hand-over's lost giver leaves now); every
//     range it still owes — accepted transfers and hand-overs not
//     pushed, orders to it not yet answered, samples assigned to it at
//     its release (Output.Assign) — goes to a survivor that is not the
//     range's giver (epsp.Coordinator.Retarget), which is sent the
//     accepted ones as tasks like a hand-over; the core refuses lw's
//     push of them from then on;
//   - as a giver: transfer orders of its samples it never answered count
//     as refused (and execute refuses the policy's later orders from or
//     to a lost worker at once), then its unprocessed samples of the clock
//     it was computing are handed to a survivor (epsp.Coordinator.
//     HandOver: the prefix [0, end) of its batch, end being the lowest
//     start of a range it gave away in that clock; the rest is the
//     takers'), and it leaves once they are stored; if it had nothing
//     unprocessed (it was waiting, or its own push of the clock was
//     admitted), it leaves now.
//
// A survivor is a member that is not lost. The hand-over never goes to a
// joiner that has not started (it may be waiting at its join clock behind
// the barrier the hand-over holds), and Retarget gives such a joiner a
// range only when no other survivor can take it. What no survivor can
// take (no survivor at all, or only the range's giver) is given up
// (epsp.Coordinator.Abandon): lost, counted in epsp.Stats.SamplesAbandoned,
// and no clock waits for it. A push admitted but not stored when the
// worker died is lost, never counted twice.
func (c *Coordinator) serveLost(lw epsp.WorkerID, orders map[uint64]epsp.TransferOrder) error {
	l := c.lease
	l.mu.Lock()
	// takers: the survivors, joiners that have not started last (they
	// only take what lw owed as a taker when nobody else can)
	var takers, fresh []epsp.WorkerID
	for w := range l.done {
		if !l.done[w] && c.isMember(epsp.WorkerID(w)) {
			if l.fresh[w] {
				fresh = append(fresh, epsp.WorkerID(w))
			} else {
				takers = append(takers, epsp.WorkerID(w))
			}
		}
	}
	l.mu.Unlock()
	// Ranges lw pushed as a taker but never reported done.
	for _, ts := range c.core.Transfers() {
		if ts.Order.To != lw || !ts.Pushed {
			continue
		}
		var err error
		if ts.HandOver {
			err = c.leaveLost(ts.Order.From, orders)
		} else {
			err = c.step(epsp.Event{Kind: epsp.EventTransferDone, Worker: lw, Transfer: epsp.TransferResult{ID: ts.Order.ID}}, orders)
		}
		if err != nil {
			return err
		}
	}
	// Transfer orders of lw's samples that lw has not answered never
	// will be: they count as refused (the policy sees the refusals)
	// before its samples are handed over, so no late answer can give a
	// range of them to a second taker (the core would refuse it now).
	var unanswered []uint64
	for id, o := range orders {
		if o.From == lw {
			unanswered = append(unanswered, id)
		}
	}
	slices.Sort(unanswered)
	for _, id := range unanswered {
		delete(orders, id)
		if err := c.step(epsp.Event{Kind: epsp.EventTransferResult, Transfer: epsp.TransferResult{ID: id}}, orders); err != nil {
			return err
		}
	}
	// What lw still owes as a taker goes to survivors.
	if all := append(slices.Clip(takers), fresh...); len(all) > 0 {
		moved, err := c.coreRetarget(lw, all)
		if err != nil {
			err = fmt.Errorf("ps: moving what %s owed to survivors: %w", c.cfg.Workers[lw], err)
			c.setFatal(err)
			return err
		}
		c.snapshot()
		for _, o := range moved {
			ts, _ := c.core.Transfer(o.ID)
			// a moved transfer or hand-over keeps its ID, and observers
			// saw it ordered; an assigned piece is a new order
			if err := c.sendTask(o, ts.Batch, ts.Assigned); err != nil {
				return err
			}
		}
	}
	// What no survivor could take (a range whose giver is the only one)
	// is given up: lost, and no clock waits for it.
	if _, err := c.coreAbandon(lw); err != nil {
		c.setFatal(err)
		return err
	}
	c.snapshot()
	// Hand-overs to lw no survivor could take: their lost workers leave
	// now (the leave ends the hand-over in the core, which refuses a
	// push of it from then on).
	for _, h := range c.core.HandOvers() {
		if h.To == lw {
			if err := c.leaveLost(h.From, orders); err != nil {
				return err
			}
		}
	}
	// A push of lw's that may have reached some servers only is taken
	// back, so that the hand-over below recomputes its samples, when a
	// survivor can take them (partial.go); what remains is checked at its
	// flush.
	if len(takers) > 0 {
		if err := c.dropLost(lw); err != nil {
			err = fmt.Errorf("ps: taking back %s's push: %w", c.cfg.Workers[lw], err)
			c.setFatal(err)
			return err
		}
	}
	c.noteLost(lw)
	if len(takers) == 0 {
		return c.leaveLost(lw, orders)
	}
	taker := takers[0]
	o, ok, err := c.coreHandOver(lw, taker)
	if err != nil {
		err = fmt.Errorf("ps: handing %s's samples to %s: %w", c.cfg.Workers[lw], c.cfg.Workers[taker], err)
		c.setFatal(err)
		return err
	}
	if !ok {
		return c.leaveLost(lw, orders)
	}
	c.snapshot()
	return c.sendTask(o, c.core.View().Batch(lw), true)
}

// sendTask sends accepted order o — a transfer, a hand-over, or a range
// Retarget moved — to its taker as a task: compute [Lo, Hi) of o.From's
// batch (batch samples) of o.Clock and push it with Owner = o.From. A
// taker that cannot be reached is declared lost at the lease's next check
// (unreachable), and what it owed, this range among it, goes to a
// survivor; with leases off it aborts the run. emit reports the order to
// observers (EvTransferOrdered).
func (c *Coordinator) sendTask(o epsp.TransferOrder, batch int, emit bool) error {
	e := wire.NewMsg(nil, wire.OpTransferTask)
	e.U64(o.ID)
	e.I64(int64(o.From))
	e.I64(int64(o.Clock))
	e.I64(int64(o.Lo))
	e.I64(int64(o.Hi))
	e.I64(int64(batch))
	e.U64(c.core.View().Version())
	if emit {
		c.opts.emit(event.Event{Kind: event.TransferOrdered, Node: "coordinator", Worker: o.From, Clock: o.Clock, Lo: o.Lo, Hi: o.Hi, Transfer: o})
	}
	if err := c.send(o.To, e.B); err != nil {
		// the taker is unreachable: the lease declares it lost, and what
		// it owed (this task among it) goes to a survivor (serveLost), or
		// the run aborts naming it (AbortRun, or leases off)
		c.unreachable(o.To, fmt.Errorf("ps: task %d (worker %s's clock %d [%d,%d)) to %s: %w", o.ID, c.cfg.Workers[o.From], o.Clock, o.Lo, o.Hi, c.cfg.Workers[o.To], err))
	}
	return c.Err()
}

// handedOver finishes hand-over h, which its taker reports done: the lost
// worker leaves now that its samples are stored (the leave ends the
// hand-over in the core).
func (c *Coordinator) handedOver(h epsp.TransferOrder, orders map[uint64]epsp.TransferOrder) error {
	if st, _ := c.core.Transfer(h.ID); !st.Pushed {
		return fmt.Errorf("%w: worker %d reports hand-over %d done before its push was admitted", ErrRejected, h.To, h.ID)
	}
	return c.leaveLost(h.From, orders)
}

func (c *Coordinator) leaveLost(lw epsp.WorkerID, orders map[uint64]epsp.TransferOrder) error {
	old, clock := len(c.core.Members()), c.core.View().Clock(lw)
	err := c.step(epsp.Event{Kind: epsp.EventLeave, Worker: lw, Quit: true}, orders)
	if err == nil {
		c.opts.emit(event.Event{Kind: event.Leave, Node: "coordinator", Worker: lw})
		c.changed(Lost, lw, old, clock)
	}
	return err
}

// heartbeat answers a worker's heartbeat outside the coordinator's loop
// (a busy loop must not make live workers look dead).
func (c *Coordinator) heartbeat(from transport.NodeID, body []byte) []byte {
	w, ok := c.names[from]
	if !ok {
		return wire.ErrResponse(fmt.Errorf("%w: heartbeat from %q refused by the coordinator: not a worker of this cluster", ErrForbidden, from))
	}
	d := decoder{B: body}
	inc := d.U64()
	srv, stale := -1, 0
	if len(d.B) > 0 { // the worker's reach of the servers (pingServers)
		srv = d.Int(0, int64(len(c.cfg.Servers)-1), "server")
		stale = d.Int(0, 1<<62, "server silence")
	}
	if err := d.End(); err != nil {
		return wire.ErrResponse(err)
	}
	if err := c.lease.bind(c, w, inc, false); err != nil {
		return wire.ErrResponse(err)
	}
	if srv >= 0 {
		c.lease.reached(w, srv, time.Duration(stale))
	}
	if err := c.Err(); err != nil {
		return wire.ErrResponse(fmt.Errorf("%w: %v", ErrAborted, err))
	}
	return wire.OKResponse(nil)
}

// WorkerConfig heartbeat defaults.
const (
	defaultHeartbeat          = 500 * time.Millisecond
	defaultCoordinatorTimeout = 10 * time.Second
)

// heartbeats renews the worker's lease until it leaves or closes, and fails it
// when the coordinator has not answered for CoordinatorTimeout, or
// answers that the run is aborted or this incarnation refused.
func (w *Worker) heartbeats() {
	defer w.wg.Done()
	every := w.cfg.Heartbeat
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-t.C:
		case <-w.quit:
			return
		}
		if w.left.Load() {
			return // out of the run: its coordinator may go away now
		}
		e := wire.NewMsg(nil, wire.OpHeartbeat)
		e.U64(w.incarnation)
		if srv, stale := w.leastReached(); srv >= 0 {
			e.I64(int64(srv))
			e.I64(int64(stale))
		}
		ctx, cancel := context.WithTimeout(w.ctx, max(every, w.cfg.CoordinatorTimeout/4))
		_, err := w.coordCall(ctx, e.B)
		cancel()
		switch {
		case err == nil:
			last = time.Now()
		case w.ctx.Err() != nil:
			return
		case errors.Is(err, ErrAborted), errors.Is(err, ErrRestarted), errors.Is(err, ErrRejected):
			w.setFatal(err)
			return
		case time.Since(last) > max(w.cfg.CoordinatorTimeout, w.coordWait()):
			w.leaseMiss()
			w.setFatal(fmt.Errorf("%w: %s: %s: no answer for %v (timeout %v, CoordinatorWait %v): %v", ErrPeerLost, w.name, w.cfg.Coordinator,
				time.Since(last).Round(time.Millisecond), w.cfg.CoordinatorTimeout, w.coordWait(), err))
			return
		}
	}
}

// startHeartbeats starts the heartbeat goroutine (from Worker.Start),
// and the pings of every server whose answers the heartbeats report.
func (w *Worker) startHeartbeats() {
	if w.cfg.Heartbeat < 0 || !w.track() {
		return
	}
	w.mu.Lock()
	cl := w.client
	w.mu.Unlock()
	if cl != nil {
		w.reach = make([]atomic.Int64, len(cl.servers))
		now := time.Now().UnixNano() // Start has just reached them all
		for s := range w.reach {
			w.reach[s].Store(now)
			if w.track() {
				go w.pingServer(cl, s)
			}
		}
	}
	go w.heartbeats()
}

// pingServer pings server s every Heartbeat (each ping bounded like a
// heartbeat) and records its answers, until the worker leaves or closes:
// a worker cut off from one server (a partitioned link) says so in its
// heartbeats, and the coordinator declares it lost within its lease
// instead of letting its requests hold every barrier for their
// RequestTimeout. Any answer counts, an error answer too.
func (w *Worker) pingServer(cl *Client, s int) {
	defer w.wg.Done()
	every := w.cfg.Heartbeat
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-w.quit:
			return
		}
		if w.left.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(w.ctx, max(every, w.cfg.CoordinatorTimeout/4))
		err := cl.Ping(ctx, s)
		cancel()
		var re *transport.RemoteError
		if err == nil || errors.As(err, &re) {
			w.reach[s].Store(time.Now().UnixNano())
		}
	}
}

// leastReached returns the server the worker has heard from least
// recently and how long ago (-1 without pings).
func (w *Worker) leastReached() (srv int, stale time.Duration) {
	srv = -1
	var oldest int64
	for s := range w.reach {
		if t := w.reach[s].Load(); srv < 0 || t < oldest {
			srv, oldest = s, t
		}
	}
	if srv < 0 {
		return -1, 0
	}
	return srv, max(0, time.Since(time.Unix(0, oldest)))
}

// helloMsg is the hello request: incarnation u64.
func (w *Worker) helloMsg() []byte {
	e := wire.NewMsg(nil, wire.OpHello)
	e.I64(int64(w.cfg.ID)) // the coordinator checks it against this node's name
	e.U64(w.incarnation)
	return e.B
}
