package live

import (
	"context"
	"math"
	"runtime"
	"sync"
	"time"
)

// bucket paces one flow's wire bytes at its allocated rate: a token bucket
// kept as a virtual clock. vt is when the bytes taken so far are paid for at
// the rate; a send of n bytes waits until vt + n/rate ≤ now (it pays before
// it goes) and moves vt on by n/rate. The bucket starts empty, so a flow
// that runs at one rate throughout takes bytes/rate, as in the fluid model;
// after idling, vt is kept no further back than burst/rate, so at most burst
// bytes go at once (burst is one chunk: the flow is paced in chunk-sized
// quanta). When the rate changes, the debt still to pay (vt − now) is
// rescaled to the new rate; rate 0 pauses the flow until a positive rate.
type bucket struct {
	mu      sync.Mutex
	rate    float64 // bytes/s
	burst   float64
	vt      time.Time
	changed chan struct{}
}

func newBucket(burst float64) *bucket {
	return &bucket{burst: burst, changed: make(chan struct{})}
}

func (b *bucket) setRate(r float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r == b.rate {
		return
	}
	now := time.Now()
	if b.rate > 0 && r > 0 && b.vt.After(now) {
		debt := b.vt.Sub(now).Seconds() * b.rate / r
		b.vt = now.Add(seconds(debt))
	}
	b.rate = r
	close(b.changed)
	b.changed = make(chan struct{})
}

// wait blocks until n bytes may go, or ctx ends.
func (b *bucket) wait(ctx context.Context, n int) error {
	for {
		b.mu.Lock()
		r, ch := b.rate, b.changed
		var sleep time.Duration
		if r > 0 {
			now := time.Now()
			if b.vt.IsZero() {
				b.vt = now // start empty
			}
			if floor := now.Add(-seconds(b.burst / r)); b.vt.Before(floor) {
				b.vt = floor
			}
			// n bytes may go once they are paid for: vt + n/r ≤ now (a
			// send over the burst needs a full bucket).
			due := b.vt.Add(seconds(math.Min(float64(n), b.burst) / r))
			if !due.After(now) {
				b.vt = b.vt.Add(seconds(float64(n) / r))
				b.mu.Unlock()
				return nil
			}
			sleep = due.Sub(now)
		}
		b.mu.Unlock()
		if r <= 0 {
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		t := time.NewTimer(sleep)
		select {
		case <-t.C:
		case <-ch:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

func seconds(s float64) time.Duration {
	if s > float64(math.MaxInt64)/1e9 {
		return math.MaxInt64
	}
	return time.Duration(s * 1e9)
}

// pool is a codec worker pool sized to the cores the scheduler grants: at
// most ⌈cores⌉ jobs run at once (capped by max), and when cores is not a
// whole number each worker is duty-cycled to cores/⌈cores⌉ of a core (after
// a job that ran t it keeps its slot idle for t·(⌈cores⌉/cores − 1), under
// the grant in force during the wait, while the job's caller goes on), so
// the pool uses at most the granted cores on average. With no cores granted it
// still runs one job at a time, unthrottled: a chunk compressed under an
// earlier grant must still be decompressed.
//
// A job's cost (what its codec measurement divides the raw bytes by) is the
// CPU time of its thread by default; with granted set
// (AgentConfig.SpeedPerGrantedCore) it is the granted core-seconds its slot
// was held: share·(release − start), where start is when the job got its
// slot, release when the slot was freed (after the duty-cycle hold), and
// share = cores/limit the granted cores per slot at the job's start; at
// least the job's CPU time, and its CPU time when the pool had no grant at
// the job's start.
type pool struct {
	mu      sync.Mutex
	limit   int
	duty    float64 // fraction of a core per worker, (0, 1]
	share   float64 // granted cores per slot: cores/limit, or 0 with no grant
	busy    int
	changed chan struct{}
	max     int
	granted bool // cost in granted core-seconds, not CPU time
	// Idle waits run after their job returned (hold); close ends them.
	wg       sync.WaitGroup
	stop     chan struct{}
	stopOnce sync.Once
	closed   bool
}

func newPool(max int, granted bool) *pool {
	return &pool{limit: 1, duty: 1, max: max, granted: granted, changed: make(chan struct{}), stop: make(chan struct{})}
}

func (p *pool) setCores(c float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	limit, duty, share := 1, 1.0, 0.0
	if c > 0 && !math.IsInf(c, 0) {
		limit = int(math.Ceil(c - 1e-9))
		if limit > p.max {
			limit = p.max
		}
		limit = max(limit, 1)
		share = c / float64(limit)
		duty = math.Min(1, share)
	}
	p.share = share
	if limit == p.limit && duty == p.duty {
		return
	}
	p.limit, p.duty = limit, duty
	close(p.changed)
	p.changed = make(chan struct{})
}

// run runs job in a worker slot, waiting for one until ctx ends, and once
// the job's cost is known calls account with it (from another goroutine,
// possibly after run returned; not at all if ctx ended first or the pool
// closed during the hold).
//
// The default cost is the CPU time of the thread that ran the job (the
// goroutine is locked to its thread meanwhile) where the system reports it
// (Linux), its wall time elsewhere; account is called before run returns.
// CPU time is what a per-core codec speed means, and it excludes the time
// the thread waited for a CPU: on a loaded machine or under a CFS quota a
// job's wall time can be many times its CPU time, and a duty cycle computed
// from it would keep the slot idle for that many times too long. The duty
// cycle always uses CPU time.
//
// With p.granted the cost is max(t, share·(release − start)) (see pool),
// known when the slot is released, after the hold: the wall time the job
// kept its slot from other jobs, in the granted cores that slot stands
// for. Time a job queued for a slot is not counted: the slot was then held
// by another job, whose cost counts it. The floor t keeps a hold cut short
// by a grant change (a grown grant, or none) from making a job cheaper
// than its CPU time; with no grant at the job's start (share 0: a paused
// or finished flow's chunks still in the pipeline) the cost is t, the
// default's, since such a job runs on no granted core at all.
func (p *pool) run(ctx context.Context, job func(), account func(cost time.Duration)) error {
	for {
		p.mu.Lock()
		if p.busy < p.limit {
			p.busy++
			p.mu.Unlock()
			break
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.mu.Lock()
	share := p.share
	p.mu.Unlock()
	start := time.Now()
	t := measure(job)
	end := time.Now()
	granted := func(release time.Time) time.Duration {
		return max(seconds(share*release.Sub(start).Seconds()), t, 1)
	}
	if !p.granted {
		account(t)
	}
	p.mu.Lock()
	duty, closed := p.duty, p.closed
	if duty < 1 && !closed {
		p.wg.Add(1) // under mu: never after close's Wait began
	}
	p.mu.Unlock()
	if duty < 1 && !closed {
		// The slot stays idle for t·(1/duty − 1) after the job, under the
		// duty in force while it waits (a grown grant shortens it), but the
		// caller has its result now: a chunk's answer must not wait for the
		// worker's rest.
		go func() {
			defer p.wg.Done()
			full := p.hold(t, end)
			release := time.Now()
			p.release()
			if p.granted && full {
				account(granted(release))
			}
		}()
		return nil
	}
	p.release()
	if p.granted {
		account(granted(time.Now()))
	}
	return nil
}

// hold waits until a job of cost t that ended at end has idled its slot
// for t·(1/duty − 1) under the current duty (re-read when it changes), or
// the pool closes; it reports false when the pool closed.
func (p *pool) hold(t time.Duration, end time.Time) bool {
	for {
		p.mu.Lock()
		duty, ch := p.duty, p.changed
		p.mu.Unlock()
		if duty >= 1 {
			return true
		}
		wait := time.Until(end.Add(seconds(t.Seconds() * (1/duty - 1))))
		if wait <= 0 {
			return true
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
			return true
		case <-ch:
			timer.Stop()
		case <-p.stop:
			timer.Stop()
			return false
		}
	}
}

// release frees a slot.
func (p *pool) release() {
	p.mu.Lock()
	p.busy--
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// close ends the idle waits in progress and waits for them; jobs still
// running finish on their own.
func (p *pool) close() {
	p.stopOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		close(p.stop)
	})
	p.wg.Wait()
}

// measure runs job and returns its cost (see pool.run).
func measure(job func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, ok0 := threadCPU()
	start := time.Now()
	job()
	wall := time.Since(start)
	if c1, ok1 := threadCPU(); ok0 && ok1 && c1 >= c0 {
		return c1 - c0
	}
	return wall
}
