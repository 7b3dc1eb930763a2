package ps

import (
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Durability. A server with DurableConfig.Dir set keeps its state on disk
// so that a process killed with kill -9 and started again resumes where it
// stopped:
//
//   - a checkpoint (checkpoint.go), written atomically every
//     CheckpointEvery flushes, after CheckpointPeriod, once the log holds
//     LogMaxBytes (the schedule, below: in the background, without
//     stalling requests) and on demand (Server.Checkpoint), as
//     <Dir>/<name>.ckpt. Its header names the run, the server and the
//     layout; a server restores only its own (ErrCheckpointMismatch);
//   - with Log, a request log <Dir>/<name>.log.<generation>: every
//     update applied since that checkpoint (init, push, flush), appended
//     as one record (length u32, CRC-32C u32, the request's bytes) before
//     the update is acknowledged. A checkpoint starts a new generation
//     when it begins and removes the older logs once it is written.
//
// NewServer removes the temporary files of checkpoint writes a crash
// interrupted and logs older than the checkpoint, restores the
// checkpoint and replays the log of its generation and every later one
// (those of checkpoints begun but never written), so the restarted store
// is bit for bit the one that was killed (records are replayed in the
// order they were applied, under the same lock). A record torn by the
// kill (never acknowledged) ends the replay; a damaged record before the
// end refuses the start with ErrCorruptCheckpoint. The log is written to
// the page cache, which a killed process cannot lose; LogSync adds an
// fsync per record against a power loss, at its cost.
//
// Request ids make retries safe: a client with ClientConfig.Retry set
// stamps every push with (its random id, a sequence number) and resends a
// request its server did not answer (a server restarting) until Retry
// has passed. Servers remember, per client, the highest sequence applied
// and a bitmap of the 64 below it (in the checkpoint too), and answer a
// push they have applied without applying it again; a pushpull then
// returns the values as they are. So no update is applied twice, and none
// acknowledged is lost.

// DurableConfig configures a server's durable state.
type DurableConfig struct {
	// Dir holds the checkpoint and the log; empty means no durability.
	Dir string
	// RunID names the run the server's state belongs to. It is written
	// into every checkpoint, and a checkpoint of another run is refused
	// with ErrCheckpointMismatch naming both ids. Empty: the server
	// adopts the id of the checkpoint it finds (a server alone cannot tell
	// its restart from a new run) or, finding none, picks a random one
	// (Server.RunID). NewCluster picks a random one when it is empty, so
	// a new cluster over an earlier run's files refuses them; a cluster
	// whose processes restart resumes its run when given the run's id
	// (logged when the cluster starts and named in the refusal; the
	// cluster binary's -run-id).
	RunID string
	// Layout is LayoutHash of the partitioner and number of servers of
	// the cluster the server belongs to; a checkpoint taken under another
	// layout is refused (ErrCheckpointMismatch: move it with Reshard).
	// Zero means unchecked (a server outside a cluster); a Cluster sets it.
	Layout uint64
	// CheckpointEvery is the number of flushes between checkpoints; zero
	// means none counted by flushes.
	CheckpointEvery int
	// CheckpointPeriod, when positive, also checkpoints after the first
	// update applied at least this long after the last checkpoint began
	// (for policies that never flush, ASP and SSP).
	CheckpointPeriod time.Duration
	// LogMaxBytes, with Log, also checkpoints once the current log holds
	// this many bytes, which bounds the log and the replay at a restart
	// to about LogMaxBytes plus one request whatever the other schedule
	// (or with none). Zero means DefaultLogMaxBytes.
	LogMaxBytes int64
	// Log records every update between checkpoints (see above).
	Log bool
	// LogSync fsyncs each log record.
	LogSync bool
}

// DefaultLogMaxBytes is the request log size that triggers a checkpoint
// when DurableConfig.LogMaxBytes is zero: 64 MiB (our choice: replayed in
// well under a second, small beside a shard worth checkpointing).
const DefaultLogMaxBytes = 64 << 20

// Validate checks the configuration.
func (c *DurableConfig) Validate() error {
	if c.CheckpointEvery < 0 || c.CheckpointPeriod < 0 || c.LogMaxBytes < 0 {
		return errors.New("ps: negative DurableConfig.CheckpointEvery, CheckpointPeriod or LogMaxBytes")
	}
	if (c.Log || c.CheckpointEvery > 0 || c.CheckpointPeriod > 0) && c.Dir == "" {
		return errors.New("ps: DurableConfig needs a Dir")
	}
	if len(c.RunID) > maxCheckpointName {
		return fmt.Errorf("ps: DurableConfig.RunID of %d bytes (at most %d)", len(c.RunID), maxCheckpointName)
	}
	return nil
}

// NewRunID returns a random run id: 16 hex digits from crypto/rand.
func NewRunID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Server-side ops carrying a request id (client u64, seq u64) before the
// push body. Numbers set apart from the other ops.
const (
	opPushID     op = 66
	opPushPullID op = 67
)

// reqID identifies one push of one client; zero means none.
type reqID struct{ client, seq uint64 }

// durable is a server's durable state; its fields are guarded by the
// server's write lock, except ckMu, ckWG and hook.
type durable struct {
	cfg       DurableConfig
	ckPath    string
	gen       uint64 // the generation of the log being written
	ckGen     uint64 // the LogGen of the checkpoint on disk: logs from it on are live
	log       *os.File
	logBytes  int64 // bytes in log generation gen (since a failed begin, when one failed)
	flushed   int
	flushes   int
	replaying bool
	windows   map[uint64]*ClientWindow
	lastCk    time.Time // when the last checkpoint began (or the server started)
	ckFlushes int       // flushes when the last checkpoint began

	ckMu    sync.Mutex     // one checkpoint or snapshot at a time; taken before the write lock
	ckWG    sync.WaitGroup // the background checkpoint
	ckState int            // ckIdle, ckQueued (started, not begun), ckBegun
	ckAgain bool           // one came due after the running one began
	ckErr   error          // the last background checkpoint's error
	closed  bool
	hook    func(stage string) // tests: called outside the lock ("begun", "copied")
}

const (
	ckIdle = iota
	ckQueued
	ckBegun
)

func (s *Server) logPath(gen uint64) string {
	return filepath.Join(s.dur.cfg.Dir, fmt.Sprintf("%s.log.%d", s.name, gen))
}

// openDurable restores the server's state from its directory and opens
// the log. It runs in NewServer, before the server serves anything.
// Temporary files of checkpoints that a crash interrupted are removed,
// and logs older than the checkpoint; the checkpoint must be this
// server's (Checkpoint.checkHeader).
func (s *Server) openDurable(cfg DurableConfig) error {
	if cfg.Log && cfg.LogMaxBytes == 0 {
		cfg.LogMaxBytes = DefaultLogMaxBytes
	}
	s.dur = &durable{cfg: cfg, flushed: -1, windows: map[uint64]*ClientWindow{}, lastCk: time.Now()}
	if cfg.Dir == "" {
		return nil
	}
	s.dur.ckPath = filepath.Join(cfg.Dir, s.name+".ckpt")
	if err := s.removeOrphans(); err != nil {
		return fmt.Errorf("ps: %s: %w", s.name, err)
	}
	ck, err := ReadCheckpointFile(s.dur.ckPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if s.dur.cfg.RunID == "" {
			s.dur.cfg.RunID = NewRunID()
		}
	case err != nil:
		return fmt.Errorf("ps: %s: restore: %w", s.name, err)
	default:
		if err := ck.checkHeader(s.name, cfg); err != nil {
			return fmt.Errorf("ps: %s: restore %s: %w", s.name, s.dur.ckPath, err)
		}
		s.dur.cfg.RunID = ck.RunID
		if err := s.store.Restore(ck); err != nil {
			return fmt.Errorf("ps: %s: restore %s: %w", s.name, s.dur.ckPath, err)
		}
		s.dur.gen, s.dur.ckGen, s.dur.flushed = ck.LogGen, ck.LogGen, ck.Flushed
		for _, w := range ck.Clients {
			s.dur.windows[w.Client] = &ClientWindow{Client: w.Client, Max: w.Max, Window: w.Window}
		}
		s.removeStaleLogs(ck.LogGen) // a crash after the checkpoint's rename left them
	}
	if !cfg.Log {
		return nil
	}
	// The checkpoint's generation and every later one (a checkpoint
	// begun, which opened the next log, but not written: see
	// beginCheckpoint) are replayed in order.
	for {
		if err := s.replay(s.logPath(s.dur.gen)); err != nil {
			return fmt.Errorf("ps: %s: %w", s.name, err)
		}
		if _, err := os.Stat(s.logPath(s.dur.gen + 1)); err != nil {
			break
		}
		s.dur.gen++
	}
	f, err := os.OpenFile(s.logPath(s.dur.gen), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err == nil {
		s.dur.logBytes = fi.Size()
	}
	s.dur.log = f
	return nil
}

// removeOrphans removes the temporary files of this server's checkpoints
// (".<name>.ckpt.tmp-*", see WriteFileAtomic) that a crash during a write
// left behind. Other servers' files in the directory are left alone.
func (s *Server) removeOrphans() error {
	tmps, err := filepath.Glob(filepath.Join(s.dur.cfg.Dir, "."+globEscape(s.name)+".ckpt.tmp-*"))
	if err != nil {
		return err
	}
	for _, t := range tmps {
		if err := os.Remove(t); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing the orphan %s: %w", t, err)
		}
	}
	return nil
}

// globEscape escapes the metacharacters of filepath.Match in s.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// removeStaleLogs removes this server's logs of generations below gen.
func (s *Server) removeStaleLogs(gen uint64) {
	logs, _ := filepath.Glob(filepath.Join(s.dur.cfg.Dir, globEscape(s.name)+".log.*"))
	for _, l := range logs {
		g, err := strconv.ParseUint(strings.TrimPrefix(filepath.Base(l), s.name+".log."), 10, 64)
		if err == nil && g < gen {
			os.Remove(l)
		}
	}
}

// removeLogs removes this server's logs of generations [from, to).
func (s *Server) removeLogs(from, to uint64) {
	for g := from; g < to; g++ {
		os.Remove(s.logPath(g))
	}
}

// maxLogRecord bounds one log record (a request is at most a frame).
const maxLogRecord = 1 << 30

// replay applies the records of the log at path; a torn last record is
// cut off.
func (s *Server) replay(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	obs, access := s.opts.obs, s.access
	s.opts.obs = nil    // the replayed updates were observed before
	s.access = Access{} // and passed the role checks before
	s.dur.replaying = true
	defer func() { s.opts.obs, s.access, s.dur.replaying = obs, access, false }()
	off := 0
	for off < len(b) {
		if len(b)-off < 8 {
			break // torn header
		}
		n := int(binary.LittleEndian.Uint32(b[off:]))
		sum := binary.LittleEndian.Uint32(b[off+4:])
		if n > maxLogRecord {
			return fmt.Errorf("%w: %s: record of %d bytes at offset %d", ErrCorruptCheckpoint, path, n, off)
		}
		if len(b)-off-8 < n {
			break // torn body
		}
		rec := b[off+8 : off+8+n]
		if crc32.Checksum(rec, castagnoli) != sum {
			if off+8+n == len(b) {
				break // torn in place: the last record
			}
			return fmt.Errorf("%w: %s: record at offset %d fails its checksum", ErrCorruptCheckpoint, path, off)
		}
		if _, err := s.serve("", rec, nil, nil); err != nil {
			return fmt.Errorf("%w: %s: record at offset %d: %v", ErrCorruptCheckpoint, path, off, err)
		}
		off += 8 + n
	}
	if off < len(b) {
		return os.Truncate(path, int64(off))
	}
	return nil
}

// duplicate reports whether the push rid was applied already. Under the
// write lock.
func (s *Server) duplicate(rid reqID) bool {
	if rid.client == 0 {
		return false
	}
	w := s.dur.windows[rid.client]
	if w == nil {
		return false
	}
	if rid.seq > w.Max {
		return false
	}
	d := w.Max - rid.seq
	if d == 0 {
		return true
	}
	if d > 64 {
		return true // older than the window: assumed applied
	}
	return w.Window&(1<<(d-1)) != 0
}

// applied records an applied update: the request id in its client's
// window, and the request in the log. Under the write lock.
func (s *Server) applied(rid reqID, req, tail []byte) error {
	if rid.client != 0 {
		w := s.dur.windows[rid.client]
		if w == nil {
			w = &ClientWindow{Client: rid.client}
			s.dur.windows[rid.client] = w
		}
		switch {
		case rid.seq > w.Max:
			shift := rid.seq - w.Max
			win := uint64(0)
			if shift < 64 {
				win = w.Window << shift
			}
			if w.Max != 0 && shift <= 64 { // sequence numbers start at 1
				win |= 1 << (shift - 1)
			}
			w.Window, w.Max = win, rid.seq
		case rid.seq < w.Max && w.Max-rid.seq <= 64:
			w.Window |= 1 << (w.Max - rid.seq - 1)
		}
	}
	if s.dur.replaying {
		return nil
	}
	defer s.dueLocked()
	if s.dur.log == nil {
		return nil
	}
	n := len(req) + len(tail)
	rec := make([]byte, 8, 8+n)
	rec = append(append(rec, req...), tail...)
	binary.LittleEndian.PutUint32(rec, uint32(n))
	binary.LittleEndian.PutUint32(rec[4:], crc32.Checksum(rec[8:], castagnoli))
	if _, err := s.dur.log.Write(rec); err != nil {
		return fmt.Errorf("ps: %s: request log: %w", s.name, err)
	}
	s.dur.logBytes += int64(len(rec))
	if s.dur.cfg.LogSync {
		return s.dur.log.Sync()
	}
	return nil
}

// flushed applies a flush: the store's, then the bookkeeping, the log and
// the checkpoint schedule.
func (s *Server) flush(req []byte, clock int, scale float32) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.store.Flush(clock, scale)
	s.dur.flushed = max(s.dur.flushed, clock)
	if !s.dur.replaying {
		s.dur.flushes++
	}
	return n, s.applied(reqID{}, req, nil)
}

// The checkpoint schedule. A checkpoint is due after CheckpointEvery
// flushes, after CheckpointPeriod, or once the log holds LogMaxBytes,
// each counted from when the last checkpoint began. A due checkpoint runs
// in the background (one at a time; one that comes due while another
// is running runs after it), so no request waits for it: the update that
// made it due is answered at once (it is in the log, or in the
// checkpoint). An error is logged and kept (Server.Close returns it);
// the log then keeps growing until a later checkpoint succeeds, and the
// state on disk stays restorable: the last checkpoint and every log
// generation since.
//
// A checkpoint holds the write lock only briefly (checkpoint):
//
//  1. begin, under the write lock: the log is rotated (a new generation,
//     which the checkpoint names) and a copy-on-write snapshot of the
//     store begins (Store.beginSnapshot: the keys and gradient buffers
//     are copied, O(keys + buffered values)); the client windows are
//     copied, O(windows);
//  2. the values and optimizer state are copied snapSlice values at a
//     time, each slice under the write lock; between slices requests run,
//     and an update first copies what the snapshot lacks of the keys it
//     writes (Store.cow), so the snapshot is the state at 1 exactly;
//  3. without any lock, the windows are sorted (O(n log n)) and the
//     checkpoint is written (WriteCheckpointFile: encode, fsync, rename);
//     then the logs before its generation are removed.
//
// A crash at any point leaves the previous checkpoint and every log
// since it (the rotated one too), which openDurable replays in order.
// Memory: the snapshot is one copy of the shard's values and state while
// it runs (the file is written through a 64 KiB buffer).

// snapSlice is the number of values (each with its optimizer state)
// copied per hold of the write lock while a checkpoint is taken: 128 Ki
// values, 512 KiB of values and 1 MiB of Adam state: 0.075 ms (median)
// on the 2-core test machine (BenchmarkCheckpoint_LockHolds).
const snapSlice = 1 << 17

// dueLocked starts a checkpoint in the background when the schedule says
// one is due. Under the write lock.
func (s *Server) dueLocked() {
	d := s.dur
	if d.replaying || d.closed || d.cfg.Dir == "" {
		return
	}
	c := d.cfg
	due := c.CheckpointEvery > 0 && d.flushes-d.ckFlushes >= c.CheckpointEvery ||
		c.CheckpointPeriod > 0 && time.Since(d.lastCk) >= c.CheckpointPeriod ||
		c.LogMaxBytes > 0 && d.log != nil && d.logBytes >= c.LogMaxBytes
	if !due {
		return
	}
	switch d.ckState {
	case ckIdle:
		d.ckState = ckQueued
		d.ckWG.Add(1)
		go s.background()
	case ckBegun:
		d.ckAgain = true
	}
}

// background runs due checkpoints until none is.
func (s *Server) background() {
	defer s.dur.ckWG.Done()
	for {
		err := s.checkpoint(true)
		s.mu.Lock()
		if err != nil {
			s.dur.ckErr = err
		}
		again := s.dur.ckAgain && !s.dur.closed
		s.dur.ckAgain = false
		s.dur.ckState = ckIdle
		if again {
			s.dur.ckState = ckQueued
		}
		s.mu.Unlock()
		if err != nil {
			s.logger().Warn("ps: checkpoint failed; the request log keeps every update until one succeeds", "node", s.name, "err", err)
		}
		if !again {
			return
		}
	}
}

func (s *Server) logger() *slog.Logger {
	if s.opts.log != nil {
		return s.opts.log
	}
	return slog.Default()
}

// Checkpoint writes the server's state to its checkpoint file now (see
// DurableConfig), after any checkpoint running in the background, and
// starts a new log generation. Requests are served while it runs (see
// the schedule above).
func (s *Server) Checkpoint() error {
	if s.dur.cfg.Dir == "" {
		return fmt.Errorf("ps: %s: no DurableConfig.Dir to checkpoint into", s.name)
	}
	return s.checkpoint(false)
}

// RunID is the run the server's checkpoints belong to
// (DurableConfig.RunID, or the one it adopted or picked); empty without
// a DurableConfig.Dir.
func (s *Server) RunID() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.dur.cfg.RunID
}

// checkpoint takes a checkpoint (steps 1–3 above); background says the
// schedule started it.
func (s *Server) checkpoint(background bool) error {
	d := s.dur
	d.ckMu.Lock()
	defer d.ckMu.Unlock()
	ck, err := s.beginCheckpoint(background)
	if err != nil {
		return fmt.Errorf("ps: %s: checkpoint: %w", s.name, err)
	}
	s.completeSnapshot(ck)
	if err := WriteCheckpointFile(d.ckPath, ck); err != nil {
		return fmt.Errorf("ps: %s: checkpoint: %w", s.name, err)
	}
	s.mu.Lock()
	prev := d.ckGen
	d.ckGen = ck.LogGen
	s.mu.Unlock()
	s.removeLogs(prev, ck.LogGen)
	return nil
}

// beginCheckpoint is step 1: it rotates the log and begins the snapshot,
// under the write lock. The snapshot's storage is allocated before the
// lock is taken.
func (s *Server) beginCheckpoint(background bool) (*Checkpoint, error) {
	d := s.dur
	vals, state := s.snapStorage()
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.closed {
		return nil, errors.New("server closed")
	}
	var f *os.File
	if d.cfg.Log {
		var err error
		if f, err = os.OpenFile(s.logPath(d.gen+1), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
			// the schedule tries again a period, CheckpointEvery flushes
			// or LogMaxBytes of log later, not at every update
			d.lastCk, d.ckFlushes, d.logBytes = time.Now(), d.flushes, 0
			return nil, err
		}
	}
	ck := s.snapshotLocked(vals, state)
	d.gen++
	ck.LogGen = d.gen
	if d.log != nil {
		d.log.Close()
	}
	d.log, d.logBytes = f, 0
	d.lastCk, d.ckFlushes = time.Now(), d.flushes
	if background {
		d.ckState = ckBegun
	}
	return ck, nil
}

// snapStorage allocates the storage of a snapshot of the store's current
// size, without the write lock (a large allocation may have to clear its
// memory).
func (s *Server) snapStorage() (vals, state []float32) {
	s.mu.RLock()
	n, slots := s.store.Size(), s.store.slots
	s.mu.RUnlock()
	if n == 0 {
		return nil, nil
	}
	vals, state = make([]float32, n), make([]float32, n*slots)
	prefault(vals)
	prefault(state)
	return vals, state
}

// prefault writes one element of every 4 KiB page of v, so that the
// page faults of fresh memory are taken here rather than under the lock
// while the snapshot is copied into it.
func prefault(v []float32) {
	for i := 0; i < len(v); i += 1024 {
		v[i] = 0
	}
}

// Snapshot returns the server's state as a Checkpoint (for Reshard, or a
// copy kept elsewhere), taken as a checkpoint is (steps 1 and 2 above,
// without the log rotation): requests are served while it is copied.
func (s *Server) Snapshot() *Checkpoint {
	s.dur.ckMu.Lock()
	defer s.dur.ckMu.Unlock()
	vals, state := s.snapStorage()
	s.mu.Lock()
	ck := s.snapshotLocked(vals, state)
	ck.LogGen = s.dur.gen
	s.mu.Unlock()
	s.completeSnapshot(ck)
	return ck
}

// snapshotLocked begins a snapshot: the store's (copy-on-write), the
// header, the flushed clock and a copy of the client windows (sorted
// later, without the lock). Under the write lock and ckMu.
func (s *Server) snapshotLocked(vals, state []float32) *Checkpoint {
	ck := s.store.beginSnapshot(vals, state)
	ck.RunID, ck.Server, ck.Layout = s.dur.cfg.RunID, s.name, s.dur.cfg.Layout
	ck.Flushed = s.dur.flushed
	if len(s.dur.windows) > 0 {
		ck.Clients = make([]ClientWindow, 0, len(s.dur.windows))
	}
	for _, w := range s.dur.windows {
		ck.Clients = append(ck.Clients, *w)
	}
	return ck
}

// completeSnapshot is step 2 and the sort of step 3. Under ckMu, without
// the write lock.
func (s *Server) completeSnapshot(ck *Checkpoint) {
	if h := s.dur.hook; h != nil {
		h("begun")
	}
	for done := false; !done; {
		s.mu.Lock()
		done = s.store.snapshotSlice(snapSlice)
		s.mu.Unlock()
	}
	sortWindows(ck.Clients)
	if h := s.dur.hook; h != nil {
		h("copied")
	}
}

// sortWindows sorts windows by client id (O(n log n)).
func sortWindows(ws []ClientWindow) {
	slices.SortFunc(ws, func(a, b ClientWindow) int { return cmp.Compare(a.Client, b.Client) })
}

// Close waits for a checkpoint running in the background and closes the
// server's log file. The server serves nothing after. It returns the
// error of the last background checkpoint, if it failed.
func (s *Server) Close() error {
	s.mu.Lock()
	s.dur.closed = true
	s.mu.Unlock()
	s.dur.ckWG.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.dur.ckErr
	s.dur.ckErr = nil
	if s.dur.log != nil {
		err = errors.Join(err, s.dur.log.Close())
		s.dur.log = nil
	}
	return err
}

// readReqID reads the request id of an id-carrying push and returns the
// plain op.
func readReqID(d *decoder, o op) (op, reqID) {
	switch o {
	case opPushID:
		return opPush, reqID{d.u64(), d.u64()}
	case opPushPullID:
		return opPushPull, reqID{d.u64(), d.u64()}
	}
	return o, reqID{}
}

var _ io.Closer = (*Server)(nil)
