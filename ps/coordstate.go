package ps

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/internal/wire"
)

// # A coordinator that can be restarted
//
// (This part of the package documentation sits beside the code it
// describes; the package doc in doc.go is the map.)
//
// With CoordinatorConfig.Store (ClusterConfig.CoordinatorStore) the
// coordinator's state survives its process. The state is the log of every
// call the coordinator made on its core (epsp.Coordinator): each Admit
// and Step with the time it was given, each HandOver, Retarget, Abandon
// and Revoke, and two entries of its own: a worker's hello (its incarnation,
// so that a restarted worker is still told apart from the one the run
// knows) and a worker declared lost (so that it stays refused). The core
// and the policy are pure functions of those calls (package epsp has no
// clock, no randomness and no goroutine), so a new coordinator that
// replays the log into a new core and a new policy of the same kind
// holds exactly the state the dead one had: clocks, waits, membership,
// the version, the transfer and assignment ledger, the buffers, the
// counters, and every policy's own state (BSP's next clock to flush,
// Falcon's speed estimates, ...), whichever policy it is, as long as the
// policy is deterministic (every epsp policy is; a user's policy must be,
// given the View and the events). Nothing else is kept: the LR scale
// (SetLRScale) and the membership pause's timer start anew.
//
// Saved when (write-ahead): the log is saved, whole, before anything that
// depends on its last entries leaves the coordinator — before a reply to
// a worker's request, before a flush, before any order or task is sent.
// Entries with no such effect (a progress report or a tick that ordered
// nothing) are saved with the next one that has. So what a worker or a
// server has seen is always in the saved state, and what was lost with
// the process was seen by nobody: the replayed coordinator is in a state
// the dead one passed through. A save that fails aborts the run, unless
// its error wraps ErrSuperseded: a fenced store (contrib/etcd's) refuses
// the saves of a coordinator whose successor has taken over, and that
// coordinator then stops as a crash would (Coordinator.Abandon), so that
// the successor resumes the run.
//
// Restart: NewCoordinator loads the state and replays it (refusing a
// state of another format version or another cluster — other policy,
// workers or servers — with ErrCoordinatorState naming both sides; a torn
// last record, an append the kill cut short and never acknowledged, is
// cut). Start, once the servers answer, completes what the kill may have
// cut short: it carries out again the flushes of the last output that
// had any (a server ignores a flush of a clock it has flushed: the
// buffer is gone), sends every member that is not waiting the release
// into its current clock (a worker ignores a release into a clock it has
// reached), every transfer order not yet answered to its giver and every
// accepted range not yet pushed to its taker (a worker ignores an order
// or task id it has had). Workers wait for the coordinator
// (WorkerConfig.CoordinatorWait) and resend the request they were making;
// a resend whose effect the log already holds is answered without being
// applied again: a clock or a leave already counted, the answer to a
// transfer no longer waiting, and a worker's first admit since the
// restart when it repeats that worker's last admitted push (it gets the
// logged decision). A push whose admit was answered before the kill was
// sent to the servers, whose request ids count it once.
// TestCoordinatorRestart_BSPBitIdentical and _TransfersExactlyOnce (in
// process) and faulttest's TestMultiProcess_CoordinatorRestart (kill -9)
// check that a deterministic BSP run interrupted so ends bit-identical
// to one that was not, and that under FlexRR's transfers every sample is
// counted once. Not covered: a worker that pushes, by hand
// (Worker.PushGradient), two identical pushes in one clock across a
// restart has the second taken for a resend of the first.
//
// Cost: an entry is 21–130 bytes with its record header (an admit 81, a
// progress step 102; 90 on average in a BSP run); a BSP clock of W
// workers with P progress reports each logs W·(2+P)+1 entries and saves
// at most about 2W times (before each admit's and clock's answer; the
// requests queued while a save runs are answered after one save, group
// commit). With a
// CoordinatorAppender (DirCoordinatorStore is one) the state is written
// whole once per process and then appended to, each save writing and
// fsyncing only what it adds; a store that can only Save rewrites the
// whole log each time, O(log²) bytes over a run. Measured on the shared
// 2-core test machine (load 10–15): a 1000-clock 4-worker BSP log is
// 24000 entries, 2.16 MB; appending one clock's entries to a directory
// took 1.4 ms, saving it all 4.8–11.6 ms, replaying it 15–61 ms. A whole
// in-process BSP run of 3 workers, 30 clocks of a toy model, took 7–24
// ms without a store and 103–168 ms with a DirCoordinatorStore on ext4
// (215–288 ms before the group commit): about 3–5 ms a clock, the
// fsyncs, a few percent of a real training clock of 100 ms or more
// (BenchmarkCoordinatorStore_BSPRun). The log
// grows with the run: at most MaxCoordinatorState (64 MiB), about 700k
// entries, after which saves fail and the run aborts naming the limit;
// longer runs need a checkpointed core, not written yet.
// BenchmarkCoordinatorState measures encoding and replay.

// coordStateMagic starts a saved coordinator state.
var coordStateMagic = [8]byte{'F', 'A', 'L', 'C', 'C', 'S', 'T', 'A'}

// coordStateVersion is the format version of the saved state.
const coordStateVersion = 1

// A state is a header — magic (8) | version u32 | fingerprint length
// u32 | fingerprint | CRC-32C of the header u32 — and then one record per
// entry: body length u32 | CRC-32C of the body u32 | body (kind u8 and
// its fields). Records can be appended (CoordinatorAppender); a last
// record cut short or failing its CRC is a torn append, never
// acknowledged, and is cut; any other bad record refuses the state.
const coordStateFixed = 8 + 4 + 4 + 4

// maxEntryBytes bounds a record's body (a retarget to every one of
// 2^20 slots is 8 MiB).
const maxEntryBytes = 9 << 20

// Entry kinds of the log.
const (
	entAdmit    byte = 1 // now i64 | push (encodePush)
	entStep     byte = 2 // now i64 | event
	entHandOver byte = 3 // from i64 | to i64
	entRetarget byte = 4 // from i64 | n u32 | n × to i64
	entAbandon  byte = 5 // from i64
	entHello    byte = 6 // worker i64 | incarnation u64
	entLost     byte = 7 // worker i64 | why str
	entRevoke   byte = 8 // worker i64
)

// maxLostWhy bounds the text of a lost entry.
const maxLostWhy = 1024

// coordLog is the coordinator's log and its store. Entries are appended
// on the loop (and by the lease goroutine's lost workers, through the
// loop); persist may run on any goroutine that is about to send.
type coordLog struct {
	store CoordinatorStore
	fp    string // the cluster's fingerprint (coordFingerprint)

	mu    sync.Mutex
	b     []byte // the records
	n     uint64 // how many
	saved int    // len(b) at the last successful save or append
	// based: the store holds this process's state up to saved, so an
	// appender may take the rest (a restored state is saved whole
	// first, cutting a torn end)
	based bool
	buf   []byte // the state being saved (reused)
	saves int    // successful saves and appends, for the measurements
	bytes int64  // bytes written by them
}

// coordFingerprint names what a saved state belongs to: the policy and
// the cluster's workers and servers.
func coordFingerprint(cfg CoordinatorConfig, policy epsp.Policy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy=%s workers=%d slots=%d", policy.Name(), cfg.EPSP.NumWorkers, len(cfg.Workers))
	b.WriteString(" servers=")
	for i, s := range cfg.Servers {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(string(s))
	}
	return b.String()
}

// begin starts a record (its length and CRC are filled in by end).
func (l *coordLog) begin(kind byte) encoder {
	return encoder{B: append(l.b, 0, 0, 0, 0, 0, 0, 0, 0, kind)}
}

func (l *coordLog) end(e encoder) {
	start := len(l.b)
	body := e.B[start+8:]
	binary.LittleEndian.PutUint32(e.B[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(e.B[start+4:], crc32.Checksum(body, castagnoli))
	l.b = e.B
	l.n++
}

func (l *coordLog) admit(now time.Duration, p epsp.Push) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.begin(entAdmit)
	e.I64(int64(now))
	encodePush(&e, p)
	l.end(e)
}

func (l *coordLog) step(now time.Duration, ev epsp.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.begin(entStep)
	e.I64(int64(now))
	encodeEvent(&e, ev)
	l.end(e)
}

func (l *coordLog) handOver(from, to epsp.WorkerID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.begin(entHandOver)
	e.I64(int64(from))
	e.I64(int64(to))
	l.end(e)
}

func (l *coordLog) retarget(from epsp.WorkerID, to []epsp.WorkerID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.begin(entRetarget)
	e.I64(int64(from))
	e.U32(uint32(len(to)))
	for _, w := range to {
		e.I64(int64(w))
	}
	l.end(e)
}

func (l *coordLog) abandon(from epsp.WorkerID) { l.ofWorker(entAbandon, from) }

func (l *coordLog) revoke(w epsp.WorkerID) { l.ofWorker(entRevoke, w) }

// ofWorker logs an entry whose only field is a worker.
func (l *coordLog) ofWorker(kind byte, w epsp.WorkerID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.begin(kind)
	e.I64(int64(w))
	l.end(e)
}

func (l *coordLog) hello(w epsp.WorkerID, inc uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.begin(entHello)
	e.I64(int64(w))
	e.U64(inc)
	l.end(e)
}

func (l *coordLog) lost(w epsp.WorkerID, why string) {
	if len(why) > maxLostWhy {
		why = why[:maxLostWhy]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.begin(entLost)
	e.I64(int64(w))
	e.Str(why)
	l.end(e)
}

// persist saves the log if it has entries not yet saved; ctx bounds the
// save.
func (l *coordLog) persist(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.b) == l.saved && (l.based || len(l.b) == 0) {
		return nil
	}
	if total := coordStateFixed + len(l.fp) + len(l.b); total > MaxCoordinatorState {
		return fmt.Errorf("%w: the log has grown to %d bytes (%d entries), more than MaxCoordinatorState (%d)", ErrCoordinatorState, total, l.n, MaxCoordinatorState)
	}
	if ap, ok := l.store.(CoordinatorAppender); ok && l.based {
		tail := l.b[l.saved:]
		if err := ap.Append(ctx, tail); err != nil {
			return fmt.Errorf("ps: appending %d bytes to the coordinator's state: %w", len(tail), err)
		}
		l.bytes += int64(len(tail))
	} else {
		l.buf = encodeCoordState(l.buf[:0], l.fp, l.b)
		if err := l.store.Save(ctx, l.buf); err != nil {
			return fmt.Errorf("ps: saving the coordinator's state (%d bytes): %w", len(l.buf), err)
		}
		l.bytes += int64(len(l.buf))
		l.based = true
	}
	l.saved = len(l.b)
	l.saves++
	return nil
}

func encodeEvent(e *encoder, ev epsp.Event) {
	e.U8(uint8(ev.Kind))
	e.I64(int64(ev.Worker))
	e.I64(int64(ev.Clock))
	if ev.Quit {
		e.U8(1)
	} else {
		e.U8(0)
	}
	switch ev.Kind {
	case epsp.EventProgress:
		encodeProgress(e, ev.Progress)
	case epsp.EventTransferResult, epsp.EventTransferDone:
		t := ev.Transfer
		e.U64(t.ID)
		if t.Accepted {
			e.U8(1)
		} else {
			e.U8(0)
		}
		e.I64(int64(t.Lo))
		e.I64(int64(t.Hi))
		e.I64(int64(t.From))
		e.I64(int64(t.To))
		e.I64(int64(t.Clock))
	}
}

func decodeEvent(d *decoder) epsp.Event {
	ev := epsp.Event{Kind: epsp.EventKind(d.U8()), Worker: epsp.WorkerID(d.Int(0, maxInt32, "worker")), Clock: d.Int(-1, 1<<62, "clock")}
	switch d.U8() {
	case 0:
	case 1:
		ev.Quit = true
	default:
		if d.Err == nil {
			d.Err = fmt.Errorf("%w: event quit flag", ErrMalformed)
		}
	}
	switch ev.Kind {
	case epsp.EventProgress:
		ev.Progress = decodeProgress(d)
	case epsp.EventTransferResult, epsp.EventTransferDone:
		ev.Transfer.ID = d.U64()
		ev.Transfer.Accepted = d.U8() != 0
		ev.Transfer.Lo = d.Int(0, 1<<62, "lo")
		ev.Transfer.Hi = d.Int(0, 1<<62, "hi")
		ev.Transfer.From = epsp.WorkerID(d.Int(0, maxInt32, "from"))
		ev.Transfer.To = epsp.WorkerID(d.Int(0, maxInt32, "to"))
		ev.Transfer.Clock = d.Int(0, 1<<62, "transfer clock")
	}
	return ev
}

// encodeCoordState appends a whole state (see coordStateFixed): the
// header, then the records.
func encodeCoordState(dst []byte, fp string, records []byte) []byte {
	start := len(dst)
	dst = append(dst, coordStateMagic[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, coordStateVersion)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(fp)))
	dst = append(dst, fp...)
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
	return append(dst, records...)
}

// coordEntry is one decoded log entry.
type coordEntry struct {
	kind byte
	now  time.Duration
	push epsp.Push
	ev   epsp.Event
	w    epsp.WorkerID // handOver/retarget/abandon's from; hello/lost's worker
	to   []epsp.WorkerID
	inc  uint64
	why  string
}

// decodeCoordState checks a saved state — size, magic, version, header
// CRC, fingerprint, each record's CRC — and decodes its entries; it
// returns the records that are whole (a torn last record cut: cut > 0
// bytes). Every length and count is checked against the bytes that
// remain before anything is allocated, and every worker against slots.
func decodeCoordState(b []byte, fp string, slots int) (entries []coordEntry, records []byte, cut int, err error) {
	if len(b) > MaxCoordinatorState {
		return nil, nil, 0, fmt.Errorf("%w: %d bytes, more than MaxCoordinatorState", ErrCoordinatorState, len(b))
	}
	if len(b) < coordStateFixed || [8]byte(b[:8]) != coordStateMagic {
		return nil, nil, 0, fmt.Errorf("%w: not a coordinator state (%d bytes)", ErrCoordinatorState, len(b))
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != coordStateVersion {
		return nil, nil, 0, fmt.Errorf("%w: format version %d, this build reads %d", ErrCoordinatorState, v, coordStateVersion)
	}
	fl := binary.LittleEndian.Uint32(b[12:])
	if uint64(fl) > uint64(len(b)-coordStateFixed) {
		return nil, nil, 0, fmt.Errorf("%w: header cut short", ErrCoordinatorState)
	}
	hl := 16 + int(fl)
	if crc32.Checksum(b[:hl], castagnoli) != binary.LittleEndian.Uint32(b[hl:]) {
		return nil, nil, 0, fmt.Errorf("%w: header checksum mismatch", ErrCoordinatorState)
	}
	if got := string(b[16:hl]); got != fp {
		return nil, nil, 0, fmt.Errorf("%w: it is the state of another cluster: saved %q, this coordinator is %q", ErrCoordinatorState, got, fp)
	}
	rest := b[hl+4:]
	off := 0
	for off < len(rest) {
		r := rest[off:]
		if len(r) < 8 {
			break // torn
		}
		n := binary.LittleEndian.Uint32(r)
		if n == 0 || n > maxEntryBytes {
			return nil, nil, 0, fmt.Errorf("%w: record %d at byte %d: length %d", ErrCoordinatorState, len(entries), off, n)
		}
		if uint64(n) > uint64(len(r)-8) {
			break // torn
		}
		body := r[8 : 8+n]
		if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(r[4:]) {
			if 8+int(n) == len(r) {
				break // the last record: torn
			}
			return nil, nil, 0, fmt.Errorf("%w: record %d at byte %d: checksum mismatch", ErrCoordinatorState, len(entries), off)
		}
		en, err := decodeEntry(body, slots)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("%w: record %d at byte %d: %w", ErrCoordinatorState, len(entries), off, err)
		}
		entries = append(entries, en)
		off += 8 + int(n)
	}
	return entries, rest[:off], len(rest) - off, nil
}

// decodeEntry decodes one record's body.
func decodeEntry(body []byte, slots int) (coordEntry, error) {
	d := decoder{B: body}
	worker := func(what string) epsp.WorkerID { return epsp.WorkerID(d.Int(0, int64(slots)-1, what)) }
	en := coordEntry{kind: d.U8()}
	switch en.kind {
	case entAdmit:
		en.now = time.Duration(d.Int(0, 1<<62, "time"))
		en.push = decodePush(&d)
	case entStep:
		en.now = time.Duration(d.Int(0, 1<<62, "time"))
		en.ev = decodeEvent(&d)
	case entHandOver:
		en.w = worker("from")
		en.to = []epsp.WorkerID{worker("to")}
	case entRetarget:
		en.w = worker("from")
		k := d.U32()
		if d.Err == nil && uint64(k)*8 > uint64(len(d.B)) {
			d.Err = fmt.Errorf("%w: %d takers in %d bytes", ErrMalformed, k, len(d.B))
		}
		if d.Err == nil {
			en.to = make([]epsp.WorkerID, k)
			for j := range en.to {
				en.to[j] = worker("to")
			}
		}
	case entAbandon:
		en.w = worker("from")
	case entRevoke:
		en.w = worker("worker")
	case entHello:
		en.w = worker("worker")
		en.inc = d.U64()
	case entLost:
		en.w = worker("worker")
		n := d.U32()
		if d.Err == nil && n > maxLostWhy {
			d.Err = fmt.Errorf("%w: lost reason of %d bytes", ErrMalformed, n)
		}
		if d.Err == nil {
			en.why = string(d.Bytes(int(n)))
		}
	default:
		d.Err = fmt.Errorf("%w: entry kind %d", ErrMalformed, en.kind)
	}
	return en, d.End()
}

// now is the coordinator's time as the core sees it: the restored run's
// time at this process's start plus the time since.
func (c *Coordinator) now() time.Duration { return c.nowBase + c.opts.clock() }

// The core's calls, logged when they succeed (a refused call changes
// nothing in the core).

func (c *Coordinator) coreAdmit(now time.Duration, p epsp.Push) (epsp.PushDecision, error) {
	d, err := c.core.Admit(now, p)
	if err == nil {
		c.noteAdmit(p, d)
	}
	if err == nil && c.log != nil {
		c.log.admit(now, p)
	}
	return d, err
}

func (c *Coordinator) coreStep(now time.Duration, ev epsp.Event) (epsp.Output, error) {
	out, err := c.core.Step(now, ev)
	c.noteTransfers(out)
	if err == nil && c.log != nil {
		c.log.step(now, ev)
	}
	return out, err
}

func (c *Coordinator) coreHandOver(from, to epsp.WorkerID) (epsp.TransferOrder, bool, error) {
	o, ok, err := c.core.HandOver(from, to)
	c.maxTransferID = max(c.maxTransferID, o.ID)
	if err == nil && c.log != nil {
		c.log.handOver(from, to)
	}
	return o, ok, err
}

func (c *Coordinator) coreRetarget(from epsp.WorkerID, to []epsp.WorkerID) ([]epsp.TransferOrder, error) {
	moved, err := c.core.Retarget(from, to)
	c.noteTransfers(epsp.Output{Transfers: moved})
	if err == nil && c.log != nil {
		c.log.retarget(from, to)
	}
	return moved, err
}

func (c *Coordinator) coreRevoke(w epsp.WorkerID) (buf, samples int, ok bool, err error) {
	buf, samples, ok, err = c.core.Revoke(w)
	if ok {
		c.revoked(w, buf)
		if c.log != nil {
			c.log.revoke(w)
		}
	}
	return buf, samples, ok, err
}

func (c *Coordinator) coreAbandon(from epsp.WorkerID) (int, error) {
	n, err := c.core.Abandon(from)
	if err == nil && c.log != nil {
		c.log.abandon(from)
	}
	return n, err
}

// answered reports whether transfer id was ordered and has been
// answered (accepted, refused, done or ended): the core no longer waits
// for its answer.
func (c *Coordinator) answered(id uint64) bool {
	if id == 0 || id > c.maxTransferID {
		return false
	}
	ts, live := c.core.Transfer(id)
	return !live || ts.Accepted
}

// noteTransfers records the highest transfer id the core has given out
// (answered needs it: ids are never reused).
func (c *Coordinator) noteTransfers(out epsp.Output) {
	for _, o := range out.Transfers {
		c.maxTransferID = max(c.maxTransferID, o.ID)
	}
}

// resentAdmit answers an admit that repeats, exactly, the last push the
// log admitted for its worker, when it is the worker's first admit since
// this coordinator was restored: a resend of an admit whose answer was
// lost with the coordinator that was killed. It gets that answer again
// and is not admitted twice.
func (c *Coordinator) resentAdmit(r *coordReq) (epsp.PushDecision, bool) {
	if c.lastAdmit == nil {
		return epsp.PushDecision{}, false
	}
	la, ok := c.lastAdmit[r.worker]
	delete(c.lastAdmit, r.worker) // only the first admit since the restart
	if !ok || !samePush(la.push, r.push) {
		return epsp.PushDecision{}, false
	}
	d := la.dec
	if d.Action == epsp.ApplyNow {
		d.Scale = d.EffectiveScale() * c.LRScale()
	}
	c.opts.log.Info("ps: a resent admit is answered as before", "worker", c.cfg.Workers[r.worker], "clock", r.push.Clock)
	return d, true
}

func samePush(a, b epsp.Push) bool {
	if a.Worker != b.Worker || a.Owner != b.Owner || a.Clock != b.Clock || a.BaseVersion != b.BaseVersion ||
		a.Samples != b.Samples || a.BatchSamples != b.BatchSamples || a.Busy != b.Busy || len(a.Parts) != len(b.Parts) {
		return false
	}
	for i := range a.Parts {
		if a.Parts[i] != b.Parts[i] {
			return false
		}
	}
	return true
}

// lastAdmitted is a worker's last admitted push and its decision.
type lastAdmitted struct {
	push epsp.Push
	dec  epsp.PushDecision
}

// persist saves the log (write-ahead, see above); a failed save aborts
// the run, except one refused with ErrSuperseded, after which the
// coordinator stops as a crash would (Abandon).
func (c *Coordinator) persist() error {
	if c.log == nil {
		return nil
	}
	if c.gone.Load() {
		return errGone
	}
	ctx, cancel := c.orderCtx()
	defer cancel()
	if err := c.log.persist(ctx); err != nil {
		if errors.Is(err, ErrSuperseded) {
			c.abandon(err)
			return err
		}
		c.setFatal(err)
		return err
	}
	return nil
}

// advertisedWait is the wait this coordinator asks of the others (Wait).
func (c *Coordinator) advertisedWait() time.Duration {
	switch {
	case c.log == nil || c.cfg.Wait < 0:
		return 0
	case c.cfg.Wait == 0:
		return DefaultCoordinatorWait
	}
	return c.cfg.Wait
}

// restore loads the saved state, if any, and replays it into the core
// (and the leases: incarnations, lost and departed workers).
func (c *Coordinator) restore(policy epsp.Policy) error {
	c.log = &coordLog{store: c.cfg.Store, fp: coordFingerprint(c.cfg, policy)}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.StartTimeout)
	defer cancel()
	b, err := c.cfg.Store.Load(ctx)
	if err != nil {
		return fmt.Errorf("ps: loading the coordinator's state: %w", err)
	}
	if b == nil {
		return nil // a new run
	}
	entries, log, cut, err := decodeCoordState(b, c.log.fp, len(c.joined))
	if err != nil {
		return err
	}
	if cut > 0 {
		// an append the kill tore, never acknowledged: the first save
		// writes the state whole without it
		c.opts.log.Warn("ps: the coordinator's state ends with a torn record; cut", "bytes", cut)
	}
	var last time.Duration
	l := c.lease
	for i, en := range entries {
		var out epsp.Output
		switch en.kind {
		case entAdmit:
			var d epsp.PushDecision
			d, err = c.core.Admit(en.now, en.push)
			if err == nil {
				c.noteAdmit(en.push, d)
			}
			if c.lastAdmit == nil {
				c.lastAdmit = map[epsp.WorkerID]lastAdmitted{}
			}
			c.lastAdmit[en.push.Worker] = lastAdmitted{en.push, d}
		case entStep:
			out, err = c.core.Step(en.now, en.ev)
		case entHandOver:
			var o epsp.TransferOrder
			o, _, err = c.core.HandOver(en.w, en.to[0])
			c.maxTransferID = max(c.maxTransferID, o.ID)
		case entRetarget:
			var moved []epsp.TransferOrder
			moved, err = c.core.Retarget(en.w, en.to)
			c.noteTransfers(epsp.Output{Transfers: moved})
		case entAbandon:
			_, err = c.core.Abandon(en.w)
		case entRevoke:
			var buf int
			var ok bool
			buf, _, ok, err = c.core.Revoke(en.w)
			if err == nil && !ok {
				err = fmt.Errorf("worker %d's push is not there to take back", en.w)
			}
			if ok {
				c.revoked(en.w, buf)
			}
		case entHello:
			l.inc[en.w] = en.inc
			c.joined[en.w] = true
		case entLost:
			l.done[en.w], l.lost[en.w] = true, true
			c.noteLost(en.w)
			if en.why != "" {
				l.lostWhy = append(l.lostWhy, en.why)
			}
		}
		if err != nil {
			// the policy decided otherwise than when the log was written:
			// not deterministic, or another build
			return fmt.Errorf("%w: entry %d of %d does not replay: %v", ErrCoordinatorState, i, len(entries), err)
		}
		c.noteTransfers(out)
		for _, f := range out.Flush {
			c.flushedClock(f.Clock)
		}
		if len(out.Flush) > 0 {
			c.redoFlush = &out
		}
		if len(out.Release) > 0 {
			c.redoRel = &out
		}
		last = max(last, en.now)
	}
	for w := range c.joined {
		if !c.isMember(epsp.WorkerID(w)) {
			l.done[w] = true // left, lost, or a free slot
		}
	}
	c.log.b = append([]byte(nil), log...)
	c.log.n = uint64(len(entries))
	c.log.saved = len(c.log.b) // based is false: the first save is whole
	c.nowBase = last
	c.restored = true
	c.snapshot()
	c.opts.log.Info("ps: coordinator restored from its state", "entries", len(entries), "bytes", len(b), "run time", last)
	return nil
}

// redo completes, after a restart, the output the kill may have cut
// short: the last flushes again (a server ignores a flush of a clock it
// has flushed: the buffer is gone), then every member not waiting is
// sent the release into its current clock (a worker ignores a release
// into a clock it has reached), with the assignments of the last output
// that released it.
func (c *Coordinator) redo(ctx context.Context) error {
	if !c.restored {
		return nil
	}
	if o := c.redoFlush; o != nil {
		for _, f := range o.Flush {
			fctx, cancel := context.WithTimeout(ctx, c.cfg.OrderTimeout)
			_, err := c.client.flushWeights(fctx, f.Clock, epsp.PushDecision{Scale: f.Scale}.EffectiveScale()*c.LRScale(), c.drop[f.Clock])
			cancel()
			if err != nil {
				return fmt.Errorf("ps: restarted coordinator: flush of clock %d again: %w", f.Clock, err)
			}
		}
	}
	v := c.core.View()
	var ra map[epsp.WorkerID]*releaseAssign
	if o := c.redoRel; o != nil {
		ra, _ = releaseAssignments(*o, v)
	}
	for w := range c.joined {
		id := epsp.WorkerID(w)
		if !c.isMember(id) || v.Waiting(id) || c.lease.isLost(id) {
			continue
		}
		e := wire.NewMsg(nil, wire.OpRelease)
		encodeRelease(&e, v.Clock(id), v.Version(), ra[id])
		_ = c.sendNow(id, e.B) // best effort: a worker that is gone is the leases' to find
	}
	// Orders not yet answered go to their givers again, and accepted
	// ranges not yet pushed to their takers as tasks again: the kill may
	// have cut their sends short. A worker ignores an order or a task
	// whose id it has had (Worker.HandleMessage), and a giver's answer or
	// a taker's push cut short is resent to this coordinator.
	for _, ts := range c.core.Transfers() {
		o := ts.Order
		switch {
		case c.lease.isLost(o.From) || c.lease.isLost(o.To):
		case !ts.Accepted:
			e := wire.NewMsg(nil, wire.OpTransferOrder)
			e.U64(o.ID)
			e.I64(int64(o.To))
			e.I64(int64(o.Clock))
			e.I64(int64(o.Lo))
			e.I64(int64(o.Hi))
			_ = c.sendNow(o.From, e.B)
		case !ts.Pushed:
			e := wire.NewMsg(nil, wire.OpTransferTask)
			e.U64(o.ID)
			e.I64(int64(o.From))
			e.I64(int64(o.Clock))
			e.I64(int64(o.Lo))
			e.I64(int64(o.Hi))
			e.I64(int64(ts.Batch))
			e.U64(v.Version())
			_ = c.sendNow(o.To, e.B)
		}
	}
	return nil
}
