package ps

import (
	"fmt"
	"time"

	"github.com/falconml/falcon/epsp"
)

// Coordinator ↔ worker messages. Workers send requests (hello, admit,
// clock, transfer result, transfer done) and one-way progress reports; the
// coordinator sends one-way orders (release, parallelism, batch, transfer
// order, transfer task).

type helloInfo struct {
	clock   int
	version uint64
	batch   int
	par     int
	join    bool // admitted mid-run: wait for the release into clock
}

// encodePush appends a push (an admit's body):
//
//	worker i64 | owner i64 | clock i64 | base version u64 | samples i64 | batch samples i64 |
//	busy i64 (ns) | n u32 | n × (owner i64, clock i64, samples i64)
//
// the n triples being Push.Parts (n = 0 for a push of one owner).
func encodePush(e *encoder, p epsp.Push) {
	e.i64(int64(p.Worker))
	e.i64(int64(p.Owner))
	e.i64(int64(p.Clock))
	e.u64(p.BaseVersion)
	e.i64(int64(p.Samples))
	e.i64(int64(p.BatchSamples))
	e.i64(int64(p.Busy))
	e.u32(uint32(len(p.Parts)))
	for _, x := range p.Parts {
		e.i64(int64(x.Owner))
		e.i64(int64(x.Clock))
		e.i64(int64(x.Samples))
	}
}

// partBytes is the wire size of one push part.
const partBytes = 24

const maxInt32 = 1<<31 - 1

// maxWireBatch bounds a batch size read from the wire (a release, a set
// batch, a transfer task): a worker allocates per sample of its batch, so a
// crafted size must not make it allocate without limit. 2^24 samples a
// clock is far above any data-parallel mini-batch.
const maxWireBatch = 1 << 24

// decodePush decodes a push; the part count is checked against the bytes
// that remain before the parts are allocated, and a part holds at most one
// batch (maxWireBatch samples), so sums over the parts cannot overflow.
func decodePush(d *decoder) epsp.Push {
	p := epsp.Push{
		Worker:       epsp.WorkerID(d.int(0, maxInt32, "worker")),
		Owner:        epsp.WorkerID(d.int(0, maxInt32, "owner")),
		Clock:        d.int(0, 1<<62, "clock"),
		BaseVersion:  d.u64(),
		Samples:      d.int(0, 1<<62, "samples"),
		BatchSamples: d.int(0, 1<<62, "batch samples"),
		Busy:         time.Duration(d.int(0, 1<<62, "busy")),
	}
	n := d.u32()
	if d.err == nil && uint64(n)*partBytes > uint64(len(d.b)) {
		d.err = fmt.Errorf("%w: %d push parts in %d bytes", ErrMalformed, n, len(d.b))
	}
	if d.err != nil || n == 0 {
		return p
	}
	p.Parts = make([]epsp.PushPart, n)
	for i := range p.Parts {
		p.Parts[i] = epsp.PushPart{Owner: epsp.WorkerID(d.int(0, maxInt32, "part owner")), Clock: d.int(0, 1<<62, "part clock"), Samples: d.int(1, maxWireBatch, "part samples")}
	}
	return p
}

// decodeHello decodes the coordinator's answer to a hello.
func decodeHello(resp []byte) (helloInfo, error) {
	d := decoder{b: resp}
	h := helloInfo{clock: d.int(0, 1<<62, "clock"), version: d.u64(), batch: d.int(1, maxWireBatch, "batch"), par: d.int(1, maxInt32, "parallelism")}
	switch d.u8() {
	case 0:
	case 1:
		h.join = true
	default:
		if d.err == nil {
			d.err = fmt.Errorf("%w: hello join flag", ErrMalformed)
		}
	}
	return h, d.end()
}

// decodeDecision decodes the coordinator's answer to an admit.
func decodeDecision(resp []byte) (epsp.PushDecision, error) {
	d := decoder{b: resp}
	dec := epsp.PushDecision{Action: epsp.PushAction(d.u8()), Scale: d.f64(), Clock: d.int(-1<<62, 1<<62, "clock")}
	return dec, d.end()
}

func encodeProgress(e *encoder, r epsp.ProgressReport) {
	e.i64(int64(r.Worker))
	e.i64(int64(r.Clock))
	e.i64(int64(r.Done))
	e.i64(int64(r.Assigned))
	e.i64(int64(r.Parallelism))
	e.i64(int64(r.Elapsed))
	e.i64(int64(r.Claimed))
	e.i64(int64(r.Extra))
	e.i64(int64(r.ExtraDone))
}

func decodeProgress(d *decoder) epsp.ProgressReport {
	return epsp.ProgressReport{
		Worker:      epsp.WorkerID(d.int(0, maxInt32, "worker")),
		Clock:       d.int(0, 1<<62, "clock"),
		Done:        d.int(0, 1<<62, "done"),
		Assigned:    d.int(0, 1<<62, "assigned"),
		Parallelism: d.int(0, maxInt32, "parallelism"),
		Elapsed:     time.Duration(d.i64()),
		Claimed:     d.int(0, 1<<62, "claimed"),
		Extra:       d.int(0, 1<<62, "extra"),
		ExtraDone:   d.int(0, 1<<62, "extra done"),
	}
}

// transferTask tells a taker to compute [Lo, Hi) of Owner's batch (of
// Batch samples) for Clock.
type transferTask struct {
	id      uint64
	owner   epsp.WorkerID
	clock   int
	lo, hi  int
	batch   int
	version uint64
}
