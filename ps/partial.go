package ps

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/event"
)

// # Partial updates: dropped, or reported
//
// A push is admitted once and then sent to each server that holds a part
// of its keys: a worker lost between those sends (killed, or cut off from
// one server mid-push) leaves its push stored on some servers and not on
// the others, or on none. Under ContinueWithout the run goes on.
//
// With servers that keep each sender's pushes of a clock apart
// (StoreConfig.Deterministic; CoordinatorConfig.SendersApart tells the
// coordinator, and a Cluster sets it from its Store) the push is taken
// back: when the coordinator loses a worker whose own push of its current
// clock was admitted and not clocked, that push is the worker's only one
// in a buffer not yet flushed, and a survivor can take its samples, it
// revokes it in the core
// (epsp.Coordinator.Revoke, logged for a restart as entRevoke), the
// clock's flush names the worker's node and every server leaves its
// pushes out (store.Store.FlushExcept; a push arriving after the flush is
// refused, the clock being closed), and the hand-over gives the worker's
// samples to a survivor: each sample of the clock counts once on every
// server (TestPartialFlush, apart=true: a push stored on one server of
// two, and on none). Cost: the per-sender buffers, S senders' copies of a
// clock's keys (package store's doc, Deterministic flushes). Not taken
// back, and so only reported: a lost worker with more than one push open
// (a range it took in the clock besides its own batch), a push with Parts
// (assigned samples), an applied push.
//
// Otherwise a partial update is reported. Each server answers a
// flush with the clock's weight before it (store.Store.ClockWeight: the
// samples pushed into the clock, for pushes that name every key a server
// holds, as Worker.Train's do), and the coordinator, for a buffer clock in
// which a worker it declared lost had pushes admitted, compares those
// weights with each other and with the samples it admitted into the clock.
// A difference is logged as a warning naming the clock, the lost worker
// and each server's weight, and emitted as event.PartialFlush: weights
// that differ are a partial update; weights equal to each other but short
// of what was admitted are a push stored on no server (its samples are
// lost, never counted twice). Servers that answer 0 hold none of the
// clock's keys (or flushed it already) and are not compared. Apply-mode
// pushes (ASP-like policies) are not covered: they change the parameters
// at once and leave no buffer to compare. The record of admitted pushes is
// rebuilt from the coordinator's state on a restart (coordstate.go), and a
// flush carried out again after a restart is not checked.

// openPush is an admitted push into a buffer clock not yet flushed.
type openPush struct {
	worker  epsp.WorkerID
	samples int
	own     bool // of the pusher's own samples only (no Parts)
}

// noteAdmit records an admitted push into its buffer clock (loop-owned,
// and on replay).
func (c *Coordinator) noteAdmit(p epsp.Push, d epsp.PushDecision) {
	if d.Action != epsp.Accumulate {
		return
	}
	if c.open == nil {
		c.open = map[int][]openPush{}
	}
	c.open[d.Clock] = append(c.open[d.Clock], openPush{p.Worker, p.Samples, p.Owner == p.Worker && len(p.Parts) == 0})
}

// dropLost (on the loop, before the hand-over, when a survivor can take
// lw's samples; CoordinatorConfig.SendersApart only) takes back lost worker lw's push of its current
// clock, admitted and not clocked (epsp.Coordinator.Revoke), when it is
// lw's only push into a buffer not yet flushed: that buffer's flush then
// leaves lw's pushes out on every server, and the hand-over gives lw's
// samples to a survivor. A lost worker with more pushes open (a range it
// took of the clock) keeps them, as without SendersApart.
func (c *Coordinator) dropLost(lw epsp.WorkerID) error {
	if !c.cfg.SendersApart {
		return nil
	}
	n, own := 0, false
	for _, ps := range c.open {
		for _, p := range ps {
			if p.worker == lw {
				n, own = n+1, p.own
			}
		}
	}
	if n != 1 || !own {
		return nil
	}
	buf, samples, ok, err := c.coreRevoke(lw)
	if ok {
		c.opts.log.Info("ps: a lost worker's push taken back: the flush leaves it out on every server, and its samples go to a survivor",
			"worker", c.cfg.Workers[lw], "clock", buf, "samples", samples)
	}
	return err
}

// revoked records that w's push into buffer clock buf was taken back: the
// flush of buf leaves w out, and the push is no longer open.
func (c *Coordinator) revoked(w epsp.WorkerID, buf int) {
	c.open[buf] = slices.DeleteFunc(c.open[buf], func(p openPush) bool { return p.worker == w })
	if c.drop == nil {
		c.drop = map[int][]string{}
	}
	c.drop[buf] = append(c.drop[buf], string(c.cfg.Workers[w]))
}

// noteLost marks the open buffer clocks in which lost worker lw had
// pushes admitted: their flushes are checked (checkFlush).
func (c *Coordinator) noteLost(lw epsp.WorkerID) {
	for k, ps := range c.open {
		if slices.ContainsFunc(ps, func(p openPush) bool { return p.worker == lw }) {
			if c.doubt == nil {
				c.doubt = map[int][]epsp.WorkerID{}
			}
			if !slices.Contains(c.doubt[k], lw) {
				c.doubt[k] = append(c.doubt[k], lw)
			}
		}
	}
}

// flushedClock forgets the pushes of a flushed buffer clock.
func (c *Coordinator) flushedClock(k int) {
	delete(c.open, k)
	delete(c.doubt, k)
}

// checkFlush compares the servers' weights of buffer clock k (answered by
// its flush) when a lost worker had pushes in it, and reports a partial
// update.
func (c *Coordinator) checkFlush(k int, weights []float64) {
	lost := c.doubt[k]
	if len(lost) == 0 {
		return
	}
	admitted, fromLost := 0, map[epsp.WorkerID]int{}
	for _, p := range c.open[k] {
		admitted += p.samples
		if slices.Contains(lost, p.worker) {
			fromLost[p.worker] += p.samples
		}
	}
	var per []string
	lo, hi := math.Inf(1), 0.0
	for s, w := range weights {
		if math.IsNaN(w) || w == 0 {
			continue
		}
		lo, hi = min(lo, w), max(hi, w)
		per = append(per, fmt.Sprintf("%s %g", c.cfg.Servers[s], w))
	}
	var what string
	switch {
	case len(per) == 0:
		return
	case lo != hi:
		what = "partial update"
	case hi < float64(admitted):
		what = "push stored on no server"
	default:
		return
	}
	names := make([]string, len(lost))
	for i, w := range lost {
		names[i] = fmt.Sprintf("%s had %d", c.cfg.Workers[w], fromLost[w])
		c.opts.emit(event.Event{Kind: event.PartialFlush, Node: "coordinator", Worker: w, Clock: k, Samples: fromLost[w]})
	}
	c.opts.log.Warn(fmt.Sprintf("ps: %s of clock %d: lost %s of the clock's %d admitted samples; servers' weights: %s",
		what, k, strings.Join(names, ", "), admitted, strings.Join(per, ", ")))
}
