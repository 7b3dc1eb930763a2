package ps

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Durability. A server with DurableConfig.Dir set keeps its state on disk
// so that a process killed with kill -9 and started again resumes where it
// stopped:
//
//   - a checkpoint (checkpoint.go), written atomically every
//     CheckpointEvery flushes, after CheckpointPeriod, and on demand
//     (Server.Checkpoint), as
//     <Dir>/<name>.ckpt;
//   - with Log, a request log <Dir>/<name>.log.<generation>: every
//     update applied since that checkpoint (init, push, flush), appended
//     as one record (length u32, CRC-32C u32, the request's bytes) before
//     the update is acknowledged. A checkpoint starts a new generation and
//     removes the old log.
//
// NewServer restores the checkpoint and replays the log of its
// generation, so the restarted store is bit for bit the one that was
// killed (records are replayed in the order they were applied, under the
// same lock). A record torn by the kill (never acknowledged) ends the
// replay; a damaged record before the end refuses the start with
// ErrCorruptCheckpoint. The log is written to the page cache, which a
// killed process cannot lose; LogSync adds an fsync per record against a
// power loss, at its cost.
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
	// CheckpointEvery is the number of flushes between checkpoints; zero
	// means none counted by flushes.
	CheckpointEvery int
	// CheckpointPeriod, when positive, also checkpoints after the first
	// update applied at least this long after the last checkpoint (for
	// policies that never flush, ASP and SSP). With neither, checkpoints
	// are taken only on demand (Server.Checkpoint).
	CheckpointPeriod time.Duration
	// Log records every update between checkpoints (see above).
	Log bool
	// LogSync fsyncs each log record.
	LogSync bool
}

// Validate checks the configuration.
func (c *DurableConfig) Validate() error {
	if c.CheckpointEvery < 0 || c.CheckpointPeriod < 0 {
		return errors.New("ps: negative DurableConfig.CheckpointEvery or CheckpointPeriod")
	}
	if (c.Log || c.CheckpointEvery > 0 || c.CheckpointPeriod > 0) && c.Dir == "" {
		return errors.New("ps: DurableConfig needs a Dir")
	}
	return nil
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
// server's write lock.
type durable struct {
	cfg       DurableConfig
	ckPath    string
	gen       uint64
	log       *os.File
	flushed   int
	flushes   int
	replaying bool
	windows   map[uint64]*ClientWindow
	lastCk    time.Time // when the last checkpoint was written (or the server started)
}

func (s *Server) logPath(gen uint64) string {
	return filepath.Join(s.dur.cfg.Dir, fmt.Sprintf("%s.log.%d", s.name, gen))
}

// openDurable restores the server's state from its directory and opens
// the log. It runs in NewServer, before the server serves anything.
func (s *Server) openDurable(cfg DurableConfig) error {
	s.dur = &durable{cfg: cfg, flushed: -1, windows: map[uint64]*ClientWindow{}, lastCk: time.Now()}
	if cfg.Dir == "" {
		return nil
	}
	s.dur.ckPath = filepath.Join(cfg.Dir, s.name+".ckpt")
	ck, err := ReadCheckpointFile(s.dur.ckPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("ps: %s: restore: %w", s.name, err)
	default:
		if err := s.store.Restore(ck); err != nil {
			return fmt.Errorf("ps: %s: restore %s: %w", s.name, s.dur.ckPath, err)
		}
		s.dur.gen, s.dur.flushed = ck.LogGen, ck.Flushed
		for _, w := range ck.Clients {
			s.dur.windows[w.Client] = &ClientWindow{Client: w.Client, Max: w.Max, Window: w.Window}
		}
	}
	if !cfg.Log {
		return nil
	}
	if err := s.replay(s.logPath(s.dur.gen)); err != nil {
		return fmt.Errorf("ps: %s: %w", s.name, err)
	}
	f, err := os.OpenFile(s.logPath(s.dur.gen), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	s.dur.log = f
	return nil
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
	if p := s.dur.cfg.CheckpointPeriod; p > 0 && time.Since(s.dur.lastCk) >= p {
		// the checkpoint holds this update: nothing to log
		return s.checkpointLocked()
	}
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
	if s.dur.cfg.LogSync {
		return s.dur.log.Sync()
	}
	return nil
}

// flushed applies a flush: the store's, then the bookkeeping, the log and
// the periodic checkpoint.
func (s *Server) flush(req []byte, clock int, scale float32) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.store.Flush(clock, scale)
	if err != nil {
		return 0, err
	}
	s.dur.flushed = max(s.dur.flushed, clock)
	if err := s.applied(reqID{}, req, nil); err != nil {
		return n, err
	}
	if s.dur.replaying {
		return n, nil
	}
	s.dur.flushes++
	if e := s.dur.cfg.CheckpointEvery; e > 0 && s.dur.flushes%e == 0 {
		return n, s.checkpointLocked()
	}
	return n, nil
}

// Checkpoint writes the server's state to its checkpoint file now (see
// DurableConfig) and starts a new log generation. Updates wait while it
// runs.
func (s *Server) Checkpoint() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkpointLocked()
}

// Snapshot returns the server's state as a Checkpoint (for Reshard, or a
// copy kept elsewhere).
func (s *Server) Snapshot() *Checkpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

func (s *Server) snapshotLocked() *Checkpoint {
	ck := s.store.Checkpoint()
	ck.Flushed, ck.LogGen = s.dur.flushed, s.dur.gen
	for _, w := range s.dur.windows {
		ck.Clients = append(ck.Clients, *w)
	}
	sortWindows(ck.Clients)
	return ck
}

func sortWindows(ws []ClientWindow) {
	for i := 1; i < len(ws); i++ {
		for j := i; j > 0 && ws[j].Client < ws[j-1].Client; j-- {
			ws[j], ws[j-1] = ws[j-1], ws[j]
		}
	}
}

func (s *Server) checkpointLocked() error {
	if s.dur.cfg.Dir == "" {
		return fmt.Errorf("ps: %s: no DurableConfig.Dir to checkpoint into", s.name)
	}
	ck := s.snapshotLocked()
	ck.LogGen = s.dur.gen + 1
	if err := WriteCheckpointFile(s.dur.ckPath, ck); err != nil {
		return fmt.Errorf("ps: %s: checkpoint: %w", s.name, err)
	}
	old := s.dur.gen
	s.dur.gen++
	s.dur.lastCk = time.Now()
	if s.dur.log == nil {
		return nil
	}
	s.dur.log.Close()
	f, err := os.OpenFile(s.logPath(s.dur.gen), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		s.dur.log = nil
		return err
	}
	s.dur.log = f
	os.Remove(s.logPath(old))
	return nil
}

// Close closes the server's log file. The server serves nothing after.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dur.log == nil {
		return nil
	}
	err := s.dur.log.Close()
	s.dur.log = nil
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
