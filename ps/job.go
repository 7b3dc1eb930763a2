package ps

import (
	"sync"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/event"
)

// span is a half-open sample range [lo, hi).
type span struct{ lo, hi int }

// job computes the samples [lo0, hi0) of owner's batch of clock with a
// changeable number of goroutines, then the pieces of other workers'
// batches assigned to it at release (extra), in order. Goroutines claim
// chunks under mu with one cursor over [own samples][extra pieces]; a
// chunk that reaches the end of the own samples continues into the first
// piece (and a piece's end into the next), so the boundary costs no
// half-empty round. A range given away (giveAway) is never computed here:
// giveAway only accepts own samples no goroutine has claimed, and a job
// with extra pieces gives nothing (its tail is not its own).
type job struct {
	w      *Worker
	owner  epsp.WorkerID
	clock  int
	size   int // the owner's batch size
	lo0    int
	hi0    int
	own    bool
	doneCh chan struct{}

	mu       sync.Mutex
	started  bool
	finished bool
	params   []float32
	version  uint64
	samples  []int
	cursor   int
	given    []span
	extra    []segment // assigned pieces, computed after the own samples
	xseg     int       // claim cursor in extra: the piece
	xcur     int       // and the position in its owner's batch
	xtotal   int       // Σ extra samples
	xdone    int       // extra samples whose chunk is finished
	p        int
	active   int
	done     int // own samples whose chunk is finished
	chunks   int
	grad     []float32
	loss     float64
	began    time.Time
	lastEnd  time.Time // when the last chunk finished (Push.Busy)
}

// segment is an assigned piece: samples [lo, hi) of owner's batch of
// batch samples, their ids, and how many of them are computed.
type segment struct {
	owner   epsp.WorkerID
	lo, hi  int
	batch   int
	samples []int // ids of [lo, hi)
	done    int   // under job.mu
}

// claim is one part of a claimed chunk: [lo, hi) of the own samples
// (seg < 0) or of extra[seg]'s owner's batch.
type claim struct{ seg, lo, hi int }

func (w *Worker) newJob(owner epsp.WorkerID, clock, size, lo, hi int, own bool) *job {
	return &job{w: w, owner: owner, clock: clock, size: size, lo0: lo, hi0: hi, own: own, cursor: lo, doneCh: make(chan struct{})}
}

// assign adds pieces of other workers' batches, computed after the own
// samples; call it before start.
func (j *job) assign(ps []assignedPiece) {
	for _, p := range ps {
		j.extra = append(j.extra, segment{owner: p.owner, lo: p.lo, hi: p.hi, batch: p.batch})
		j.xtotal += p.hi - p.lo
	}
	if len(j.extra) > 0 {
		j.xcur = j.extra[0].lo
	}
}

// loadExtra computes the sample ids of the assigned pieces: the pieces of
// one owner share one Sampler.Batch call.
func (j *job) loadExtra() {
	ids := map[epsp.WorkerID][]int{}
	for i := range j.extra {
		s := &j.extra[i]
		b, ok := ids[s.owner]
		if !ok || len(b) != s.batch {
			b = j.w.sampler.Batch(s.owner, j.clock, s.batch)
			ids[s.owner] = b
		}
		s.samples = append([]int(nil), b[s.lo:s.hi]...)
	}
}

// start begins computing with p goroutines.
func (j *job) start(params []float32, version uint64, p int) {
	samples := j.w.sampler.Batch(j.owner, j.clock, j.size)
	j.loadExtra()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.started {
		return
	}
	j.started = true
	j.params, j.version, j.samples = params, version, samples
	j.grad = make([]float32, len(params))
	j.began = time.Now()
	j.p = max(p, 1)
	j.spawnLocked(j.p)
}

func (j *job) spawnLocked(n int) {
	for range n {
		if !j.w.track() {
			if j.active == 0 && !j.finished {
				j.finished = true
				close(j.doneCh)
			}
			return
		}
		j.active++
		go j.run()
	}
}

// setP changes the number of goroutines: extra ones are started at once,
// surplus ones stop after their current chunk.
func (j *job) setP(p int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.p = max(p, 1)
	if j.started && !j.finished && j.active < j.p && !j.exhaustedLocked() {
		j.spawnLocked(j.p - j.active)
	}
}

// skipGivenLocked moves the own cursor past the ranges given away.
func (j *job) skipGivenLocked() {
	for moved := true; moved; {
		moved = false
		for _, g := range j.given {
			if j.cursor >= g.lo && j.cursor < g.hi {
				j.cursor = g.hi
				moved = true
			}
		}
	}
}

// exhaustedLocked reports whether nothing is left to claim.
func (j *job) exhaustedLocked() bool {
	j.skipGivenLocked()
	return j.cursor >= j.hi0 && j.xseg >= len(j.extra)
}

// claimOwnLocked takes the next chunk of own samples not given away.
func (j *job) claimOwnLocked(chunk int) (int, int, bool) {
	j.skipGivenLocked()
	if j.cursor >= j.hi0 {
		return 0, 0, false
	}
	lo := j.cursor
	end := min(lo+chunk, j.hi0)
	for _, g := range j.given {
		if g.lo > lo && g.lo < end {
			end = g.lo
		}
	}
	j.cursor = end
	return lo, end, true
}

// claimLocked takes the next chunk of up to chunk samples into buf: own
// samples first, then the assigned pieces in order. A chunk is filled
// across the end of the own samples and across piece boundaries, so it
// has several parts there; it stops short before a range given away.
func (j *job) claimLocked(chunk int, buf []claim) []claim {
	buf = buf[:0]
	n := chunk
	if lo, hi, ok := j.claimOwnLocked(n); ok {
		buf = append(buf, claim{-1, lo, hi})
		n -= hi - lo
		if n > 0 {
			j.skipGivenLocked()
			if j.cursor < j.hi0 {
				return buf // stopped at a given range: the chunk ends there
			}
		}
	}
	for n > 0 && j.xseg < len(j.extra) {
		s := &j.extra[j.xseg]
		hi := min(j.xcur+n, s.hi)
		buf = append(buf, claim{j.xseg, j.xcur, hi})
		n -= hi - j.xcur
		j.xcur = hi
		if j.xcur >= s.hi {
			j.xseg++
			if j.xseg < len(j.extra) {
				j.xcur = j.extra[j.xseg].lo
			}
		}
	}
	return buf
}

// giveAway hands [lo,hi) (trimmed at the front to what is unclaimed) to
// another worker; it refuses when nothing of it is left, it overlaps a
// range already given, or it reaches past the batch.
func (j *job) giveAway(lo, hi int) (bool, int, int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.finished || !j.own || len(j.extra) > 0 {
		return false, 0, 0
	}
	// The accepted range must end at the ordered Hi; an order past this
	// job's batch (the coordinator's view of the batch changed mid-clock)
	// is refused.
	lo = max(lo, j.cursor, j.lo0)
	if hi > j.hi0 || lo >= hi {
		return false, 0, 0
	}
	for _, g := range j.given {
		if lo < g.hi && g.lo < hi {
			return false, 0, 0
		}
	}
	j.given = append(j.given, span{lo, hi})
	return true, lo, hi
}

// assignedLocked is the number of samples the job still owns.
func (j *job) assignedLocked() int {
	n := j.hi0 - j.lo0
	for _, g := range j.given {
		n -= g.hi - g.lo
	}
	return n
}

func (j *job) run() {
	defer j.w.wg.Done()
	w := j.w
	grad := make([]float32, len(j.params))
	loss := 0.0
	var buf []claim
	for {
		j.mu.Lock()
		quit := false
		select {
		case <-w.quit:
			quit = true
		default:
		}
		buf = buf[:0]
		if !quit && j.active <= j.p {
			buf = j.claimLocked(w.cfg.Chunk, buf)
		}
		if len(buf) == 0 {
			j.active--
			for i, g := range grad {
				j.grad[i] += g
			}
			j.loss += loss
			if j.active == 0 && !j.finished && (quit || j.exhaustedLocked()) {
				j.finished = true
				close(j.doneCh)
			}
			j.mu.Unlock()
			return
		}
		j.mu.Unlock()
		own, extra := 0, 0
		for _, c := range buf {
			if c.seg < 0 {
				loss += w.model.Gradient(j.params, j.samples[c.lo:c.hi], grad)
				own += c.hi - c.lo
			} else {
				s := &j.extra[c.seg]
				w.model.Gradient(j.params, s.samples[c.lo-s.lo:c.hi-s.lo], grad)
				extra += c.hi - c.lo
			}
		}
		j.mu.Lock()
		j.lastEnd = time.Now()
		j.done += own
		j.xdone += extra
		for _, c := range buf {
			if c.seg >= 0 {
				j.extra[c.seg].done += c.hi - c.lo
			}
		}
		j.chunks++
		report := j.own && j.chunks%w.cfg.ProgressEvery == 0
		var r epsp.ProgressReport
		if report {
			r = epsp.ProgressReport{Worker: w.cfg.ID, Clock: j.clock, Done: j.done, Claimed: j.claimedLocked(), Assigned: j.assignedLocked(),
				Parallelism: j.p, Elapsed: time.Since(j.began), Extra: j.xtotal, ExtraDone: j.xdone}
		}
		j.mu.Unlock()
		for _, c := range buf {
			owner := j.owner
			if c.seg >= 0 {
				owner = j.extra[c.seg].owner
			}
			w.opts.emit(event.Event{Kind: event.Chunk, Node: w.name, Worker: w.cfg.ID, Owner: owner, Clock: j.clock, Lo: c.lo, Hi: c.hi})
		}
		if report {
			w.sendProgress(r)
		}
	}
}

// busy is the job's compute time: from its start to its last finished
// chunk (zero if it computed nothing). It leaves out the pull before the
// job and the waits after it, so samples/busy is the worker's speed.
func (j *job) busy() time.Duration {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.lastEnd.IsZero() {
		return 0
	}
	return j.lastEnd.Sub(j.began)
}

// claimedLocked is the number of the job's own samples claimed so far
// (computed or being computed): the progress report's Claimed, since a
// transfer can no longer take them.
func (j *job) claimedLocked() int {
	claimed := j.cursor - j.lo0
	for _, g := range j.given {
		if g.hi <= j.cursor {
			claimed -= g.hi - g.lo
		}
	}
	return claimed
}
