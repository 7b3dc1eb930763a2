package ps

import (
	"fmt"

	"github.com/falconml/falcon/epsp"
)

// Clock-start assignments (epsp.Output.Assign) in the live runtime.
//
// A policy may, at the release of several workers into the same clock,
// move the tail of one worker's batch to others (epsp.Assignment). The
// orders ride on the release messages, so planning at clock start costs no
// message and no round trip:
//
//	release: clock i64 | version u64 [| batch i64 | keep i64 | n u32 | n × (owner i64, lo i64, hi i64, batch i64)]
//
// The bracketed tail is present only for a worker named by an assignment
// of that release. batch is the worker's own batch and keep the end of the
// part it computes itself ([0, keep); keep < batch for a giver), and the n
// pieces are what it computes after its own samples, in order: samples
// [lo, hi) of owner's batch of the clock, whose size is batch (the taker
// computes their ids as Sampler.Batch(owner, clock, batch)[lo:hi]).
//
// The taker runs its own samples and the pieces as one job with one
// cursor, pushes them in one push whose Parts say whose samples it holds,
// and clocks after that push (the coordinator refuses a taker that clocks
// owing assigned samples).

// assignedPiece is samples [lo, hi) of owner's batch of batch samples.
type assignedPiece struct {
	owner  epsp.WorkerID
	lo, hi int
	batch  int
}

// releaseAssign is what a release tells one worker about the clock's
// assignments: its own batch, the end of its own part, and the pieces of
// other workers' batches it computes after it.
type releaseAssign struct {
	batch, keep int
	pieces      []assignedPiece
}

// pieceBytes is the wire size of one assigned piece.
const pieceBytes = 32

// encodeRelease appends a release's body; ra is nil for a worker no
// assignment names.
func encodeRelease(e *encoder, clock int, version uint64, ra *releaseAssign) {
	e.I64(int64(clock))
	e.U64(version)
	if ra == nil {
		return
	}
	e.I64(int64(ra.batch))
	e.I64(int64(ra.keep))
	e.U32(uint32(len(ra.pieces)))
	for _, p := range ra.pieces {
		e.I64(int64(p.owner))
		e.I64(int64(p.lo))
		e.I64(int64(p.hi))
		e.I64(int64(p.batch))
	}
}

// decodeRelease decodes a release's body. Sizes are checked before
// anything is allocated: the piece count against the bytes that remain,
// every batch against maxWireBatch, and the assigned samples together
// against maxWireBatch too (a worker allocates per sample).
func decodeRelease(d *decoder) (clock int, version uint64, ra *releaseAssign, err error) {
	clock = d.Int(0, 1<<62, "clock")
	version = d.U64()
	if d.Err != nil || len(d.B) == 0 {
		return clock, version, nil, d.End()
	}
	r := &releaseAssign{batch: d.Int(1, maxWireBatch, "batch")}
	r.keep = d.Int(0, int64(r.batch), "keep")
	n := d.U32()
	if d.Err == nil && uint64(n)*pieceBytes > uint64(len(d.B)) {
		d.Err = fmt.Errorf("%w: %d assigned pieces in %d bytes", ErrMalformed, n, len(d.B))
	}
	if d.Err != nil {
		return 0, 0, nil, d.Err
	}
	if n > 0 {
		r.pieces = make([]assignedPiece, n)
	}
	total := 0
	for i := range r.pieces {
		p := assignedPiece{owner: epsp.WorkerID(d.Int(0, maxInt32, "owner")), lo: d.Int(0, maxWireBatch, "lo"), hi: d.Int(0, maxWireBatch, "hi"), batch: d.Int(1, maxWireBatch, "batch")}
		if d.Err == nil && (p.lo >= p.hi || p.hi > p.batch) {
			d.Err = fmt.Errorf("%w: assigned piece [%d,%d) of batch %d", ErrMalformed, p.lo, p.hi, p.batch)
		}
		total += p.hi - p.lo
		if d.Err == nil && total > maxWireBatch {
			d.Err = fmt.Errorf("%w: %d assigned samples", ErrMalformed, total)
		}
		r.pieces[i] = p
	}
	if err := d.End(); err != nil {
		return 0, 0, nil, err
	}
	return clock, version, r, nil
}

// releaseAssignments turns out.Assign (already validated by the
// epsp.Coordinator against the releases it was recorded with) into what
// each released worker's release carries. v is the view after out was
// recorded: a giver's pieces must end at its batch as the worker will
// compute it, so an output that also changed the giver's batch is refused.
func releaseAssignments(out epsp.Output, v epsp.View) (map[epsp.WorkerID]*releaseAssign, error) {
	if len(out.Assign) == 0 {
		return nil, nil
	}
	m := make(map[epsp.WorkerID]*releaseAssign)
	get := func(w epsp.WorkerID) *releaseAssign {
		r := m[w]
		if r == nil {
			b := v.Batch(w)
			r = &releaseAssign{batch: b, keep: b}
			m[w] = r
		}
		return r
	}
	ends := make(map[epsp.WorkerID]int)
	for _, a := range out.Assign {
		g := get(a.From)
		g.keep = min(g.keep, a.Lo)
		ends[a.From] = max(ends[a.From], a.Hi)
		t := get(a.To)
		t.pieces = append(t.pieces, assignedPiece{owner: a.From, lo: a.Lo, hi: a.Hi, batch: v.Batch(a.From)})
	}
	for g, end := range ends {
		if b := v.Batch(g); end != b {
			return nil, fmt.Errorf("%w: worker %d's assigned pieces end at %d, its batch is %d (batch changed by the same output?)", epsp.ErrPolicyOutput, g, end, b)
		}
	}
	return m, nil
}

// pushParts lists the owners' shares of a job's push: the worker's own
// samples first, then one part per owner of assigned pieces, in the order
// the pieces came. It returns nil for a job without assigned pieces (the
// push covers its owner's samples alone).
func (j *job) pushParts(self epsp.WorkerID) []epsp.PushPart {
	if len(j.extra) == 0 {
		return nil
	}
	var parts []epsp.PushPart
	if j.done > 0 {
		parts = append(parts, epsp.PushPart{Owner: self, Clock: j.clock, Samples: j.done})
	}
	idx := make(map[epsp.WorkerID]int)
	for _, s := range j.extra {
		if s.done == 0 {
			continue
		}
		if i, ok := idx[s.owner]; ok {
			parts[i].Samples += s.done
			continue
		}
		idx[s.owner] = len(parts)
		parts = append(parts, epsp.PushPart{Owner: s.owner, Clock: j.clock, Samples: s.done})
	}
	return parts
}

// setReleasedAssignLocked moves the worker into clock c with a fresh job:
// its own samples [0, batch), or with ra (the release named the worker in
// an assignment) [0, keep) of its batch followed by the assigned pieces.
// A release that assigns the worker a piece of its own batch is
// malformed: it is not applied and the error (ErrMalformed) is returned,
// for the caller to fail the worker rather than leave it waiting forever.
func (w *Worker) setReleasedAssignLocked(c int, version uint64, ra *releaseAssign) error {
	if c <= w.released {
		return nil
	}
	if ra != nil {
		for _, p := range ra.pieces {
			if p.owner == w.cfg.ID {
				return fmt.Errorf("%w: %s released into clock %d with samples [%d,%d) of its own batch assigned to it", ErrMalformed, w.name, c, p.lo, p.hi)
			}
		}
		w.batch = ra.batch
	}
	w.released, w.version = c, version
	keep := w.batch
	if ra != nil {
		keep = ra.keep
	}
	w.cur = w.newJob(w.cfg.ID, c, w.batch, 0, keep, true)
	if ra != nil {
		w.cur.assign(ra.pieces)
	}
	w.broadcastLocked()
	return nil
}
