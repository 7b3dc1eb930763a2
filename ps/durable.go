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

	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
)

// # Durability
//
// (This part of the package documentation sits beside the code it
// describes; the package doc in doc.go is the map.)
//
// A server with ServerConfig.Durable set keeps a checkpoint (checkpoint.go:
// a header naming the run, the server and the layout, then key layout,
// per-key versions, values, optimizer state, buffered clocks, the last
// flushed clock and the request-id windows; a versioned format with a
// CRC-32C over the content, written atomically every CheckpointEvery
// flushes, after CheckpointPeriod, once the log holds LogMaxBytes
// (default 64 MiB, so a log never grows without bound) and by
// Server.Checkpoint) and, with Log, a log of every update since
// (durable.go), and restores both at NewServer. A truncated or
// bit-flipped checkpoint is refused with ErrCorruptCheckpoint naming the
// file; an intact one of another server, another run (DurableConfig.RunID:
// NewCluster picks a random one unless given the id of the run to
// resume), another layout (LayoutHash of the partitioner and servers) or
// another format version is refused with ErrCheckpointMismatch naming
// both sides (TestCheckpoint_CopiedFileRefused, _StaleRunRefused,
// _OldVersionRefused, _LayoutAndReshard). Temporary files of interrupted
// checkpoint writes are removed at start. The log is write-ahead: an
// update is logged (and fsynced, with LogSync) before it is applied and
// its request id marked, and an update answered with an error — the log
// could not take it (a full disk: ErrLogFailed), or the store refused it —
// has changed nothing, in memory or on disk, and is not marked, so its
// resend is served as new. Every log record's length and body carry a
// CRC-32C; a record that fails them is cut only when no complete record
// follows (a torn last write, never acknowledged), and otherwise refuses
// the start naming its offset; a log of another format version is refused
// naming both. The replay reads one record at a time.
//
// Checkpoints do not stall requests: the write lock is held to rotate the
// log and begin a copy-on-write snapshot (O(keys + buffered values +
// client windows)) and then per slice of 128 Ki values with their state;
// updates copy what the snapshot lacks of a key before writing it; the
// windows are sorted and the file encoded, fsynced and renamed without
// the lock, in the background for scheduled checkpoints. A 96 MiB Adam
// shard with 40k client windows: the checkpoint took 1.2–1.5 s and a
// one-value pull waited as long; now 0.15–0.69 s, holding the lock
// 1.9–3.5 ms to begin (the windows' copy, most of it) and 0.075 ms per
// slice (median), and the longest pull wait during it, 6–85 ms over six
// runs, is of the order of the loaded 2-core test machine's own without
// a checkpoint, 3–47 ms (BenchmarkCheckpoint_PullDuring, _LockHolds;
// TestCheckpoint_RequestsServedDuring, _SnapshotIsCopyOnWrite).
//
// With ClientConfig.Retry
// workers resend requests a restarting server does not answer, and pushes
// carry request ids, so a resent push is applied once (servers keep at
// most DurableConfig.DedupClients request-id windows, least recently used
// evicted first, and forget one unused for DedupIdle, which a Cluster sets
// from its Retry: dedup.go says why, and what an evicted client's late
// resend meets); LeaseConfig.
// ServerRestart makes the coordinator resend flushes as long. A BSP run
// whose server is killed with kill -9 and restarted mid-clock ends with
// parameters bit-identical to the fault-free run
// (TestDurable_ServerRestartBitIdentical in-process,
// TestMultiProcess_ServerRestartBitIdentical across processes) when a
// clock's pushes are summed in the same order: always with two workers
// (two pushes commute), with any number under StoreConfig.Deterministic
// (TestDeterministicBSP_ServerRestart; package store's doc, Deterministic
// flushes, says when it holds and what it costs). Without it a clock of
// three or more pushes is summed in arrival order, which differs from run
// to run over a network, restart or not. Reshard
// moves the checkpoints of N servers onto any number of servers, every
// value, state element and version bit for bit, and gives them the new
// layout's header (write them as the new servers' <Dir>/<name>.ckpt and
// start the cluster with the same RunID); it needs checkpoints without
// buffered clocks. Policies that count steps rather than clocks
// (Sync-opt) can leave a worker waiting once the others have run their
// last clock; stop it with its ctx.
//
// WriteFileAtomic writes a file so that a crash leaves the old one or the
// new one whole.

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
//     as one record before the update is applied (write-ahead, below). A
//     checkpoint starts a new generation when it begins and removes the
//     older logs once it is written.
//
// The request log's format, version 3 (little-endian; version 1, written
// before, had no file header and no checksum over the length; version 2
// had no sender-tagged bodies):
//
//	file header: magic "FLCNPSLG" | version u32 = 3 | salt u32
//	each record: length n u32 | CRC-32C(salt ‖ the 4 length bytes) u32 |
//	             CRC-32C(salt ‖ body) u32 | body, n bytes
//	body: the request, or, for an accumulating push to a
//	      StoreConfig.Deterministic server, logFromTag u8 |
//	      sender: m u8, m bytes | the request
//
// (a request starts with the wire version, never logFromTag; the sender
// is the pushing worker's node name, so a replay sums each worker's
// pushes in the buffer they went to: see store.Config.Deterministic)
//
// with 1 ≤ n ≤ maxLogRecord. The length has its own checksum, so a damaged
// length is recognised as damage before it is used to find the body. The
// salt is drawn at random when the file is created and never leaves the
// server: a torn write is told from damage by looking for a complete
// record after it (below), and a push's values are arbitrary bytes, so
// without the salt a client could write inside its values a record that
// passes its checks, and a crash tearing that push would refuse the start.
//
// Write-ahead. An update is served under the server's write lock in this
// order: a resent push already applied is answered and nothing else; the
// request is appended to the log (and fsynced, with LogSync); it is
// applied; its request id is marked in its client's window. A request the
// log cannot take (a full disk: ENOSPC) is refused with ErrLogFailed
// before it is applied, and the log is cut back to its last complete
// record; a request the store refuses (an unknown key, a non-finite
// result) has its record cut off again. So a request answered with an
// error has changed nothing, in memory or on disk, and is not marked: its
// resend is served as new. A log that cannot be cut back (or an fsync that
// failed, after which the file's contents are unknown) makes the server
// refuse every later update with ErrLogFailed naming the cause, until it
// is restarted or a checkpoint (which holds every applied update) starts
// a new log; a checkpoint that fails after an update does not fail the
// update (it is in the log) and is logged as a warning.
//
// NewServer removes the temporary files of checkpoint writes a crash
// interrupted and logs older than the checkpoint, restores the checkpoint
// and replays the log of its generation and every later one (those of
// checkpoints begun but never written), record by record (one record in
// memory at a time), so the restarted store is bit for bit the one that
// was killed (records are replayed in the order they were applied). A record that fails its checks (a length
// or body checksum, a length past the end of the file) is a torn write
// only if no complete record follows it: then it was the last write, made
// before the update it carries was applied and so never acknowledged, and
// the log is cut there. A damaged record with a complete record anywhere
// after it refuses the start with ErrCorruptCheckpoint naming its offset,
// and the log is left as it was. An intact record the store refuses is
// one refused when it was served (the process was killed before its
// record was cut off): it is skipped, as it changed nothing. A log of
// another format version is refused naming both versions. The log is written to the page cache,
// which a killed process cannot lose; LogSync adds an fsync per record
// against a power loss, at its cost.
//
// Request ids make retries safe: a client with ClientConfig.Retry set
// stamps every push with (its random id, a sequence number) and resends a
// request its server did not answer (a server restarting) until Retry
// has passed. Servers remember, per client, the highest sequence applied
// and a bitmap of the 64 below it (in the checkpoint too), and answer a
// push they have applied without applying it again; a pushpull then
// returns the values as they are. So no update is applied twice, and none
// acknowledged is lost. At most DedupClients windows are held, the least
// recently used evicted first, and with DedupIdle a window unused that
// long is forgotten (dedup.go says why each is safe, and what a client
// whose window was evicted sees).

// DurableConfig configures a server's durable state: the checkpoints and
// the request log that let a server restart where it stopped. Its zero
// value is not durable.
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
	// DedupClients bounds the request-id windows a server holds, one per
	// client, the least recently used evicted first (see dedup.go); zero
	// means DefaultDedupClients. It applies with or without Dir.
	DedupClients int
	// DedupIdle, when positive, forgets a client's window unused for this
	// long: a client whose process ended sends nothing more. Safe when it
	// exceeds every client's ClientConfig.Retry + RequestTimeout (with a
	// margin for requests delayed in transit; dedup.go says why); a
	// Cluster sets 2·(Retry + 30 s). Zero: windows go only by count.
	DedupIdle time.Duration
}

// Validate checks the configuration.
func (c *DurableConfig) Validate() error {
	if c.CheckpointEvery < 0 || c.CheckpointPeriod < 0 || c.LogMaxBytes < 0 || c.DedupClients < 0 || c.DedupIdle < 0 {
		return errors.New("ps: negative DurableConfig.CheckpointEvery, CheckpointPeriod, LogMaxBytes, DedupClients or DedupIdle")
	}
	if (c.Log || c.CheckpointEvery > 0 || c.CheckpointPeriod > 0) && c.Dir == "" {
		return errors.New("ps: DurableConfig needs a Dir")
	}
	if len(c.RunID) > store.MaxCheckpointName {
		return fmt.Errorf("ps: DurableConfig.RunID of %d bytes (at most %d)", len(c.RunID), store.MaxCheckpointName)
	}
	return nil
}

// NewRunID returns a random run id: 16 hex digits from crypto/rand.
func NewRunID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// reqID identifies one push of one client; zero means none.
type reqID struct{ client, seq uint64 }

// durable is a server's durable state; its fields are guarded by the
// server's write lock, except ckMu, ckWG and hook.
type durable struct {
	cfg       DurableConfig
	ckPath    string
	gen       uint64  // the generation of the log being written
	ckGen     uint64  // the LogGen of the checkpoint on disk: logs from it on are live
	log       logFile // nil: no log (or closed)
	logSize   int64   // the end of the log's last complete record: where the next goes
	logBase   int64   // logSize when the last checkpoint began (or failed to): LogMaxBytes counts from it
	logErr    error   // non-nil: updates are refused, for this reason (wraps ErrLogFailed)
	logSeed   uint32  // the CRC state of the log's salt (logSeed)
	rec       []byte  // the record being written, reused
	pre       []byte  // the sender tag of the record being written, reused
	flushed   int
	flushes   int
	replaying bool
	windows   *dedupWindows
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

// logFile is the request log's file: an *os.File, or in tests one whose
// writes fail as a full disk's do.
type logFile interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

// The request log's format (see above).
const (
	logMagic     = "FLCNPSLG"
	logVersion   = 3   // the version this build writes and reads
	logFromTag   = 0   // first byte of a record body that names its sender
	maxLogSender = 255 // the longest sender name a record can carry
	logHeaderLen = 16  // magic, version, salt
	recHeaderLen = 12  // length, its CRC, the body's CRC
	// maxLogRecord bounds one log record: a request is at most a frame,
	// whose length field is a u32. Replay allocates a record only once
	// its length has passed its checksum and fits in what is left of the
	// file, so no input makes it allocate more than the file holds.
	maxLogRecord = 1<<32 - 1
	// maxKeptRecord is the largest record buffer kept for the next update.
	maxKeptRecord = 1 << 20
)

// logHeader is the file header of a log with salt.
func logHeader(salt uint32) []byte {
	b := binary.LittleEndian.AppendUint32([]byte(logMagic), logVersion)
	return binary.LittleEndian.AppendUint32(b, salt)
}

// logSeed is the CRC-32C state after a log's salt, which every checksum
// of its records starts from.
func logSeed(salt uint32) uint32 {
	return crc32.Checksum(binary.LittleEndian.AppendUint32(nil, salt), castagnoli)
}

// appendLogRecord appends to dst the record of a request (req followed
// by tail) for a log whose salt gives seed.
func appendLogRecord(dst []byte, seed uint32, req, tail []byte) []byte {
	return appendLogRecordFrom(dst, seed, nil, req, tail)
}

// appendLogRecordFrom is appendLogRecord with the body prefixed by pre
// (a sender tag, fromTag; nil for none).
func appendLogRecordFrom(dst []byte, seed uint32, pre, req, tail []byte) []byte {
	n := len(pre) + len(req) + len(tail)
	at := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Update(seed, castagnoli, dst[at:at+4]))
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Update(crc32.Update(crc32.Update(seed, castagnoli, pre), castagnoli, req), castagnoli, tail))
	return append(append(append(dst, pre...), req...), tail...)
}

// fromTag is the prefix of a record body naming sender, appended to dst.
func fromTag(dst []byte, sender string) []byte {
	return append(append(dst, logFromTag, byte(len(sender))), sender...)
}

// splitFromTag returns the sender a record body names and the request
// after its tag; a body without a tag is the request, of sender "".
func splitFromTag(rec []byte) (sender string, req []byte, err error) {
	if len(rec) == 0 || rec[0] != logFromTag {
		return "", rec, nil
	}
	if len(rec) < 2 || len(rec)-2 < int(rec[1]) {
		return "", nil, fmt.Errorf("%w: a sender tag in a record of %d bytes", ErrMalformed, len(rec))
	}
	m := int(rec[1])
	return string(rec[2 : 2+m]), rec[2+m:], nil
}

func (s *Server) logPath(gen uint64) string {
	return filepath.Join(s.dur.cfg.Dir, fmt.Sprintf("%s.log.%d", s.name, gen))
}

// openDurable restores the server's state from its directory and opens
// the log. It runs in NewServer, before the server serves anything.
// Temporary files of checkpoints that a crash interrupted are removed,
// and logs older than the checkpoint; the checkpoint must be this
// server's (checkHeader).
func (s *Server) openDurable(cfg DurableConfig) error {
	if cfg.Log && cfg.LogMaxBytes == 0 {
		cfg.LogMaxBytes = DefaultLogMaxBytes
	}
	s.dur = &durable{cfg: cfg, flushed: -1, windows: newDedupWindows(cfg.DedupClients, cfg.DedupIdle), lastCk: time.Now()}
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
		if err := checkHeader(ck, s.name, cfg); err != nil {
			return fmt.Errorf("ps: %s: restore %s: %w", s.name, s.dur.ckPath, err)
		}
		s.dur.cfg.RunID = ck.RunID
		if err := s.store.Restore(ck); err != nil {
			return fmt.Errorf("ps: %s: restore %s: %w", s.name, s.dur.ckPath, err)
		}
		s.dur.gen, s.dur.ckGen, s.dur.flushed = ck.LogGen, ck.LogGen, ck.Flushed
		s.dur.windows.restore(ck.Clients)
		s.removeStaleLogs(ck.LogGen) // a crash after the checkpoint's rename left them
	}
	if !cfg.Log {
		return nil
	}
	// The checkpoint's generation and every later one (a checkpoint
	// begun, which opened the next log, but not written: see
	// beginCheckpoint) are replayed in order; the last is appended to.
	path := s.logPath(s.dur.gen)
	end, seed, err := s.replay(path)
	for err == nil {
		if _, serr := os.Stat(s.logPath(s.dur.gen + 1)); serr != nil {
			break
		}
		s.dur.gen++
		path = s.logPath(s.dur.gen)
		end, seed, err = s.replay(path)
	}
	if err != nil {
		return fmt.Errorf("ps: %s: %w", s.name, err)
	}
	if end == 0 { // no log, or one torn while its header was written
		return s.startLog(s.dur.gen)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	s.dur.log, s.dur.logSize, s.dur.logSeed = f, end, seed
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

// createLog creates the log of generation gen, empty but for its header
// (synced with LogSync), and returns it with its checksums' seed.
func (s *Server) createLog(gen uint64) (logFile, uint32, error) {
	salt := uint32(newIncarnation()) // random
	f, err := os.OpenFile(s.logPath(gen), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, 0, err
	}
	_, err = f.Write(logHeader(salt))
	if err == nil && s.dur.cfg.LogSync {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, logSeed(salt), nil
}

// useLog makes f, just created by createLog with seed, the server's log,
// and lets updates in again if a failed log had stopped them.
func (s *Server) useLog(f logFile, seed uint32) {
	s.dur.log, s.dur.logSize, s.dur.logBase, s.dur.logErr, s.dur.logSeed = f, logHeaderLen, logHeaderLen, nil, seed
}

// startLog creates the log of generation gen and makes it the server's
// log. If it cannot, the server has no log and refuses updates with
// ErrLogFailed saying why, until it restarts or a checkpoint starts a new
// log.
func (s *Server) startLog(gen uint64) error {
	s.dur.log = nil
	f, seed, err := s.createLog(gen)
	if err != nil {
		s.dur.logErr = fmt.Errorf("%w: %s: request log %s could not be started (%v); updates are refused until the server restarts or a checkpoint (Server.Checkpoint) starts a new log", ErrLogFailed, s.name, s.logPath(gen), err)
		return s.dur.logErr
	}
	s.useLog(f, seed)
	return nil
}

// logAhead appends the record of an update (req followed by tail) to the
// log, synced with LogSync, before the update is applied; it returns
// where the record starts, for settle. Nothing is written while replaying
// or without a log (mark −1). A failed write is cut back off the log and
// refuses the update with ErrLogFailed. Under the write lock.
func (s *Server) logAhead(req, tail []byte) (mark int64, err error) {
	return s.logAheadFrom("", req, tail)
}

// logAheadFrom is logAhead of a request whose record names sender (none
// when "").
func (s *Server) logAheadFrom(sender string, req, tail []byte) (mark int64, err error) {
	if s.dur.replaying || !s.dur.cfg.Log {
		return -1, nil
	}
	if s.dur.logErr != nil {
		return -1, s.dur.logErr
	}
	if s.dur.log == nil {
		return -1, fmt.Errorf("%w: %s: the server was closed", ErrClosed, s.name)
	}
	var pre []byte
	if sender != "" {
		if len(sender) > maxLogSender {
			return -1, fmt.Errorf("%w: sender name of %d bytes; a deterministic server's log holds at most %d", ErrMalformed, len(sender), maxLogSender)
		}
		pre = fromTag(s.dur.pre[:0], sender)
		s.dur.pre = pre
	}
	n := len(pre) + len(req) + len(tail)
	if int64(n) > maxLogRecord {
		return -1, fmt.Errorf("%w: request of %d bytes", ErrMalformed, n)
	}
	rec := appendLogRecordFrom(s.dur.rec[:0], s.dur.logSeed, pre, req, tail)
	if cap(rec) <= maxKeptRecord {
		s.dur.rec = rec
	} else {
		s.dur.rec = nil
	}
	mark = s.dur.logSize
	if _, err := s.dur.log.Write(rec); err != nil {
		s.cutLog(mark, false)
		if s.dur.logErr != nil {
			return -1, s.dur.logErr
		}
		return -1, fmt.Errorf("%w: %s: request log %s: %v; the update was refused and changed nothing", ErrLogFailed, s.name, s.logPath(s.dur.gen), err)
	}
	s.dur.logSize += int64(len(rec))
	if s.dur.cfg.LogSync {
		if err := s.dur.log.Sync(); err != nil {
			// After a failed fsync the file's pages may or may not reach
			// the disk: stop taking updates rather than guess.
			s.cutLog(mark, false)
			s.dur.logErr = fmt.Errorf("%w: %s: request log %s: fsync failed (%v); updates are refused until the server restarts or a checkpoint (Server.Checkpoint) starts a new log", ErrLogFailed, s.name, s.logPath(s.dur.gen), err)
			return -1, s.dur.logErr
		}
	}
	return mark, nil
}

// cutLog cuts the log back to mark, the end of its last complete record
// (synced with LogSync when sync). If it cannot, the server refuses every
// later update, saying why. Under the write lock.
func (s *Server) cutLog(mark int64, sync bool) {
	err := s.dur.log.Truncate(mark)
	if err == nil && sync && s.dur.cfg.LogSync {
		err = s.dur.log.Sync()
	}
	if err != nil {
		s.dur.logErr = fmt.Errorf("%w: %s: request log %s holds a record of a refused update that could not be cut off (%v); updates are refused until the server restarts or a checkpoint (Server.Checkpoint) starts a new log", ErrLogFailed, s.name, s.logPath(s.dur.gen), err)
		return
	}
	s.dur.logSize = mark
}

// settle ends an update whose record logAhead wrote at mark and whose
// application returned err: a refused update has its record cut off the
// log again (it changed nothing), an applied one has its request id
// marked and may start a checkpoint the schedule says is due. It
// returns err. Under the write lock.
func (s *Server) settle(mark int64, rid reqID, err error) error {
	if err != nil {
		if mark >= 0 {
			s.cutLog(mark, true)
		}
		return err
	}
	s.mark(rid)
	s.dueLocked()
	return nil
}

// readLogHeader checks the file header of the log at path (size bytes,
// the first of them in h) and returns the checksums' seed: ok is false
// when the log holds no complete header (new, or torn while its header
// was written), and a log of another format is refused naming both
// versions.
func readLogHeader(path string, h []byte, size int64) (seed uint32, ok bool, err error) {
	format1 := fmt.Errorf("%w: request log %s has no format header: it is in format 1, written by an earlier build; this build reads format %d (replay it with the build that wrote it and take a checkpoint, which starts a new log)", ErrCorruptCheckpoint, path, logVersion)
	m := min(len(h), len(logMagic))
	if string(h[:m]) != logMagic[:m] {
		return 0, false, format1
	}
	if len(h) >= len(logMagic)+4 {
		if v := binary.LittleEndian.Uint32(h[len(logMagic):]); v != logVersion {
			return 0, false, fmt.Errorf("%w: request log %s is in format %d; this build reads format %d", ErrCorruptCheckpoint, path, v, logVersion)
		}
	}
	if size < logHeaderLen {
		return 0, false, nil
	}
	return logSeed(binary.LittleEndian.Uint32(h[len(logMagic)+4:])), true, nil
}

// replay applies the records of the log at path, one at a time, and
// returns the end of its last complete record (0 when it holds none, not
// even its header) and its checksums' seed. A torn tail is cut off;
// damage before a complete record refuses the start (see above).
func (s *Server) replay(path string) (end int64, seed uint32, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	h := make([]byte, min(fi.Size(), logHeaderLen))
	if _, err := f.ReadAt(h, 0); err != nil {
		return 0, 0, err
	}
	seed, ok, err := readLogHeader(path, h, fi.Size())
	if !ok || err != nil {
		return 0, 0, err
	}
	lr := logReader{r: f, size: fi.Size(), seed: seed}
	obs, access := s.opts.obs, s.access
	s.opts.obs = nil    // the replayed updates were observed before
	s.access = Access{} // and passed the role checks before
	s.dur.replaying = true
	defer func() { s.opts.obs, s.access, s.dur.replaying = obs, access, false }()
	off := int64(logHeaderLen)
	for off < lr.size {
		rec, ok, err := lr.record(off)
		if err != nil {
			return 0, 0, fmt.Errorf("request log %s: %w", path, err)
		}
		if !ok {
			next, found, err := lr.next(off + 1)
			if err != nil {
				return 0, 0, fmt.Errorf("request log %s: %w", path, err)
			}
			if found {
				return 0, 0, fmt.Errorf("%w: request log %s: the record at offset %d is damaged (its length or body fails its checksum, or its length runs past the end) and a complete record follows at offset %d; the log is left as it is", ErrCorruptCheckpoint, path, off, next)
			}
			break // torn: the last write, never applied nor acknowledged
		}
		from, req, err := splitFromTag(rec)
		if err == nil {
			_, err = s.serve(transport.NodeID(from), req, nil, nil)
		}
		if err != nil {
			// An intact record the store refuses was refused when it was
			// served too (the store is the one it met then): a kill came
			// between its write and its cut (settle). It changed nothing
			// then and changes nothing now.
			s.opts.log.Warn("ps: request log: a record refused when it was served is skipped", "server", s.name, "log", path, "offset", off, "err", err)
		}
		off += recHeaderLen + int64(len(rec))
	}
	if off < lr.size {
		if err := os.Truncate(path, off); err != nil {
			return 0, 0, err
		}
	}
	return off, seed, nil
}

// logReader reads the records of a log of size bytes from r.
type logReader struct {
	r    io.ReaderAt
	size int64
	seed uint32 // logSeed of the log's salt
	buf  []byte // the last record's body
	win  []byte // next's window
}

// record reads the record at off: its body (valid until the next call)
// and whether it is complete and intact. A length is trusted for an
// allocation only once it passed its checksum and fits in the file.
func (l *logReader) record(off int64) ([]byte, bool, error) {
	if l.size-off < recHeaderLen {
		return nil, false, nil
	}
	var h [recHeaderLen]byte
	if _, err := l.r.ReadAt(h[:], off); err != nil {
		return nil, false, err
	}
	n := int64(binary.LittleEndian.Uint32(h[:]))
	if crc32.Update(l.seed, castagnoli, h[:4]) != binary.LittleEndian.Uint32(h[4:]) ||
		n == 0 || n > maxLogRecord || n > l.size-off-recHeaderLen {
		return nil, false, nil
	}
	if int64(cap(l.buf)) < n {
		l.buf = make([]byte, n)
	}
	body := l.buf[:n]
	if _, err := l.r.ReadAt(body, off+recHeaderLen); err != nil {
		return nil, false, err
	}
	if crc32.Update(l.seed, castagnoli, body) != binary.LittleEndian.Uint32(h[8:]) {
		return nil, false, nil
	}
	return body, true, nil
}

// next finds the first offset at or after from where a complete, intact
// record starts. It reads the file in windows of 64 KiB, checking each
// offset's length checksum before reading a body.
func (l *logReader) next(from int64) (int64, bool, error) {
	const window = 64 << 10
	if l.win == nil {
		l.win = make([]byte, window)
	}
	for p := from; l.size-p >= recHeaderLen; {
		w := l.win[:min(int64(window), l.size-p)]
		if _, err := l.r.ReadAt(w, p); err != nil {
			return 0, false, err
		}
		last := len(w) - recHeaderLen
		for i := 0; i <= last; i++ {
			if crc32.Update(l.seed, castagnoli, w[i:i+4]) != binary.LittleEndian.Uint32(w[i+4:]) {
				continue
			}
			if _, ok, err := l.record(p + int64(i)); err != nil || ok {
				return p + int64(i), ok, err
			}
		}
		p += int64(last + 1)
	}
	return 0, false, nil
}

// duplicate reports whether the push rid was applied already, and counts
// the resend as a use of its client's window. Under the write lock.
func (s *Server) duplicate(rid reqID) bool {
	if rid.client == 0 {
		return false
	}
	w := s.dur.windows.use(rid.client)
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

// mark records the request id of an applied push in its client's window.
// Under the write lock.
func (s *Server) mark(rid reqID) {
	if rid.client == 0 {
		return
	}
	w := s.dur.windows.add(rid.client)
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

// flush applies a flush, write-ahead (see above): the log, the store's
// flush, then the bookkeeping and the checkpoint schedule.
// It leaves out the pushes of the senders in except (Store.FlushExcept),
// and returns the keys updated, the clock's weight without them and the
// weight left out (Store.ClockWeight: the samples pushed, for dense
// pushes).
func (s *Server) flush(req []byte, clock int, scale float32, except []string) (n int, weight, out float64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mark, err := s.logAhead(req, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	weight = s.store.ClockWeight(clock, except...)
	if len(except) > 0 {
		out = s.store.ClockWeight(clock) - weight
	}
	n, err = s.store.FlushExcept(clock, scale, except)
	if err != nil {
		return 0, 0, 0, s.settle(mark, reqID{}, err) // refused: its record is cut off again
	}
	s.dur.flushed = max(s.dur.flushed, clock)
	if !s.dur.replaying {
		s.dur.flushes++
	}
	return n, weight, out, s.settle(mark, reqID{}, nil)
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
//     store begins (Store.BeginSnapshot: the keys and gradient buffers
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
		c.LogMaxBytes > 0 && d.log != nil && d.logSize-d.logBase >= c.LogMaxBytes
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

// errCheckpointClosed: a checkpoint found the server closed before it
// began. A background one queued as Close began ends quietly on it; an
// explicit Checkpoint after Close returns it.
var errCheckpointClosed = errors.New("server closed")

// background runs due checkpoints until none is.
func (s *Server) background() {
	defer s.dur.ckWG.Done()
	for {
		err := s.checkpoint(true)
		if errors.Is(err, errCheckpointClosed) {
			err = nil // cut by Close before it began: nothing failed
		}
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
func (s *Server) checkpoint(background bool) (err error) {
	defer s.checkpointed(time.Now(), &err)
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
		return nil, errCheckpointClosed
	}
	var f logFile
	var seed uint32
	if d.cfg.Log {
		var err error
		if f, seed, err = s.createLog(d.gen + 1); err != nil {
			// the schedule tries again a period, CheckpointEvery flushes
			// or LogMaxBytes of log later, not at every update
			d.lastCk, d.ckFlushes, d.logBase = time.Now(), d.flushes, d.logSize
			return nil, err
		}
	}
	ck := s.snapshotLocked(vals, state)
	d.gen++
	ck.LogGen = d.gen
	if d.log != nil {
		d.log.Close()
	}
	d.log = nil
	if f != nil {
		s.useLog(f, seed) // a log that had failed is replaced: updates are let in again
	}
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
	n, slots := s.store.Size(), s.store.Optimizer().Slots()
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
	ck := s.store.BeginSnapshot(vals, state)
	ck.RunID, ck.Server, ck.Layout = s.dur.cfg.RunID, s.name, s.dur.cfg.Layout
	ck.Flushed = s.dur.flushed
	if n := s.dur.windows.len(); n > 0 {
		ck.Clients = s.dur.windows.appendTo(make([]ClientWindow, 0, n))
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
		done = s.store.SnapshotSlice(snapSlice)
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
	case wire.OpPushID:
		return wire.OpPush, reqID{d.U64(), d.U64()}
	case wire.OpPushPullID:
		return wire.OpPushPull, reqID{d.U64(), d.U64()}
	}
	return o, reqID{}
}

var _ io.Closer = (*Server)(nil)

// castagnoli is the CRC-32C table of the request log (the checkpoint
// format in package store uses the same polynomial).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkHeader refuses a checkpoint that is not server name's in the run
// and layout of cfg: another server's name, another run id (when cfg
// names one) or another layout (when cfg has one). Errors wrap
// ErrCheckpointMismatch and name both sides.
func checkHeader(ck *Checkpoint, name string, cfg DurableConfig) error {
	if ck.Server != name {
		return fmt.Errorf("%w: taken on server %q, this is server %q (a file copied or renamed?)", ErrCheckpointMismatch, ck.Server, name)
	}
	if cfg.RunID != "" && ck.RunID != cfg.RunID {
		return fmt.Errorf("%w: of run %q, this server runs %q (a checkpoint left by an earlier run; set DurableConfig.RunID %q to resume that run, or remove the file to start afresh)",
			ErrCheckpointMismatch, ck.RunID, cfg.RunID, ck.RunID)
	}
	if cfg.Layout != 0 && ck.Layout != cfg.Layout {
		return fmt.Errorf("%w: taken under layout %016x, this server runs under layout %016x (another partitioner or number of servers; move the state with Reshard)",
			ErrCheckpointMismatch, ck.Layout, cfg.Layout)
	}
	return nil
}
