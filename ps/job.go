package ps

import (
	"sync"
	"time"

	"github.com/falconml/falcon/epsp"
)

// span is a half-open sample range [lo, hi).
type span struct{ lo, hi int }

// job computes the samples [lo0, hi0) of owner's batch of clock with a
// changeable number of goroutines. Goroutines claim chunks under mu, so a
// range given away (giveAway) is never computed here: giveAway only
// accepts samples no goroutine has claimed.
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
	p        int
	active   int
	done     int // samples computed, summed when goroutines exit
	computed int // own samples whose chunk is finished (progress reports)
	chunks   int
	grad     []float32
	loss     float64
	began    time.Time
}

func (w *Worker) newJob(owner epsp.WorkerID, clock, size, lo, hi int, own bool) *job {
	return &job{w: w, owner: owner, clock: clock, size: size, lo0: lo, hi0: hi, own: own, cursor: lo, doneCh: make(chan struct{})}
}

// start begins computing with p goroutines.
func (j *job) start(params []float32, version uint64, p int) {
	samples := j.w.sampler.Batch(j.owner, j.clock, j.size)
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
	if j.started && !j.finished && j.active < j.p && j.cursor < j.hi0 {
		j.spawnLocked(j.p - j.active)
	}
}

// claimLocked takes the next chunk not given away.
func (j *job) claimLocked(chunk int) (int, int, bool) {
	for {
		moved := false
		for _, g := range j.given {
			if j.cursor >= g.lo && j.cursor < g.hi {
				j.cursor = g.hi
				moved = true
			}
		}
		if !moved {
			break
		}
	}
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

// giveAway hands [lo,hi) (trimmed at the front to what is unclaimed) to
// another worker; it refuses when nothing of it is left, it overlaps a
// range already given, or it reaches past the batch.
func (j *job) giveAway(lo, hi int) (bool, int, int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.finished || !j.own {
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
	done := 0
	for {
		j.mu.Lock()
		quit := false
		select {
		case <-w.quit:
			quit = true
		default:
		}
		var lo, hi int
		ok := false
		if !quit && j.active <= j.p {
			lo, hi, ok = j.claimLocked(w.cfg.Chunk)
		}
		if !ok {
			j.active--
			for i, g := range grad {
				j.grad[i] += g
			}
			j.loss += loss
			j.done += done
			if j.active == 0 && !j.finished && (quit || j.cursor >= j.hi0) {
				j.finished = true
				close(j.doneCh)
			}
			j.mu.Unlock()
			return
		}
		j.mu.Unlock()
		loss += w.model.Gradient(j.params, j.samples[lo:hi], grad)
		done += hi - lo
		w.opts.emit(Event{Kind: EvChunk, Node: w.name, Worker: w.cfg.ID, Owner: j.owner, Clock: j.clock, Lo: lo, Hi: hi})
		if j.own {
			j.mu.Lock()
			j.chunks++
			j.computed += hi - lo
			report := j.chunks%w.cfg.ProgressEvery == 0
			var r epsp.ProgressReport
			if report {
				r = epsp.ProgressReport{Worker: w.cfg.ID, Clock: j.clock, Done: j.computed, Claimed: j.claimedLocked(), Assigned: j.assignedLocked(),
					Parallelism: j.p, Elapsed: time.Since(j.began)}
			}
			j.mu.Unlock()
			if report {
				w.sendProgress(r)
			}
		}
	}
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
