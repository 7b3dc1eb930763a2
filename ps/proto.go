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
	// wait is how long the coordinator asks its workers to wait for it
	// when it stops answering (CoordinatorConfig.Wait; 0: do not wait)
	wait time.Duration
}

// encodePush appends a push (an admit's body):
//
//	worker i64 | owner i64 | clock i64 | base version u64 | samples i64 | batch samples i64 |
//	busy i64 (ns) | n u32 | n × (owner i64, clock i64, samples i64)
//
// the n triples being Push.Parts (n = 0 for a push of one owner).
func encodePush(e *encoder, p epsp.Push) {
	e.I64(int64(p.Worker))
	e.I64(int64(p.Owner))
	e.I64(int64(p.Clock))
	e.U64(p.BaseVersion)
	e.I64(int64(p.Samples))
	e.I64(int64(p.BatchSamples))
	e.I64(int64(p.Busy))
	e.U32(uint32(len(p.Parts)))
	for _, x := range p.Parts {
		e.I64(int64(x.Owner))
		e.I64(int64(x.Clock))
		e.I64(int64(x.Samples))
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
		Worker:       epsp.WorkerID(d.Int(0, maxInt32, "worker")),
		Owner:        epsp.WorkerID(d.Int(0, maxInt32, "owner")),
		Clock:        d.Int(0, 1<<62, "clock"),
		BaseVersion:  d.U64(),
		Samples:      d.Int(0, 1<<62, "samples"),
		BatchSamples: d.Int(0, 1<<62, "batch samples"),
		Busy:         time.Duration(d.Int(0, 1<<62, "busy")),
	}
	n := d.U32()
	if d.Err == nil && uint64(n)*partBytes > uint64(len(d.B)) {
		d.Err = fmt.Errorf("%w: %d push parts in %d bytes", ErrMalformed, n, len(d.B))
	}
	if d.Err != nil || n == 0 {
		return p
	}
	p.Parts = make([]epsp.PushPart, n)
	for i := range p.Parts {
		p.Parts[i] = epsp.PushPart{Owner: epsp.WorkerID(d.Int(0, maxInt32, "part owner")), Clock: d.Int(0, 1<<62, "part clock"), Samples: d.Int(1, maxWireBatch, "part samples")}
	}
	return p
}

// decodeHello decodes the coordinator's answer to a hello.
func decodeHello(resp []byte) (helloInfo, error) {
	d := decoder{B: resp}
	h := helloInfo{clock: d.Int(0, 1<<62, "clock"), version: d.U64(), batch: d.Int(1, maxWireBatch, "batch"), par: d.Int(1, maxInt32, "parallelism")}
	switch d.U8() {
	case 0:
	case 1:
		h.join = true
	default:
		if d.Err == nil {
			d.Err = fmt.Errorf("%w: hello join flag", ErrMalformed)
		}
	}
	h.wait = time.Duration(d.Int(0, int64(24*time.Hour), "coordinator wait"))
	return h, d.End()
}

// decodeDecision decodes the coordinator's answer to an admit.
func decodeDecision(resp []byte) (epsp.PushDecision, error) {
	d := decoder{B: resp}
	dec := epsp.PushDecision{Action: epsp.PushAction(d.U8()), Scale: d.F64(), Clock: d.Int(-1<<62, 1<<62, "clock")}
	return dec, d.End()
}

func encodeProgress(e *encoder, r epsp.ProgressReport) {
	e.I64(int64(r.Worker))
	e.I64(int64(r.Clock))
	e.I64(int64(r.Done))
	e.I64(int64(r.Assigned))
	e.I64(int64(r.Parallelism))
	e.I64(int64(r.Elapsed))
	e.I64(int64(r.Claimed))
	e.I64(int64(r.Extra))
	e.I64(int64(r.ExtraDone))
}

func decodeProgress(d *decoder) epsp.ProgressReport {
	return epsp.ProgressReport{
		Worker:      epsp.WorkerID(d.Int(0, maxInt32, "worker")),
		Clock:       d.Int(0, 1<<62, "clock"),
		Done:        d.Int(0, 1<<62, "done"),
		Assigned:    d.Int(0, 1<<62, "assigned"),
		Parallelism: d.Int(0, maxInt32, "parallelism"),
		Elapsed:     time.Duration(d.I64()),
		Claimed:     d.Int(0, 1<<62, "claimed"),
		Extra:       d.Int(0, 1<<62, "extra"),
		ExtraDone:   d.Int(0, 1<<62, "extra done"),
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
