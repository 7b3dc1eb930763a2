package etcd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/falconml/falcon/ps"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultStateName is the key, under the Backend's prefix, where
// RunStandby keeps the coordinator's state.
const DefaultStateName = "coordinator/state"

// chunkSize is the size of a state's chunks (the last may be shorter).
// An Append rewrites the last chunk: etcd's history grows by half a chunk
// an append on average until it is compacted, so chunks are small; a
// transaction of txnBytes holds txnBytes/chunkSize = 64 of them, within
// etcd's --max-txn-ops (128 by default).
const chunkSize = 16 << 10

// txnBytes bounds the chunk bytes one transaction writes or one read
// returns: etcd refuses requests over --max-request-bytes, 1.5 MiB by
// default.
const txnBytes = 1 << 20

// headMagic starts a state's head record.
var headMagic = [4]byte{'F', 'C', 'S', '1'}

// headSize is magic | generation u64 | size u64 | chunk u32 | CRC-32C u32.
const headSize = 4 + 8 + 8 + 4 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruptState: a stored state's head or chunks do not agree (wrong
// magic, missing or short chunk, checksum mismatch). It also wraps
// ps.ErrCoordinatorState.
var ErrCorruptState = fmt.Errorf("%w: etcd state corrupt", ps.ErrCoordinatorState)

// Store is a ps.CoordinatorStore in etcd, fenced by a Leadership: every
// write is a transaction that etcd applies only while the leadership
// holds, so a coordinator that lost it (its lease expired while it was
// paused or cut off, and a standby took over) never overwrites its
// successor's state; Load, Save and Append then return an error
// wrapping ErrNotLeader and ps.ErrSuperseded, on which a ps coordinator
// stops as a crash would (ps.Coordinator.Abandon) instead of aborting
// the run its successor takes over.
//
// Layout: the state is cut into chunks of 16 KiB under
// "<name>/<generation>/<index>", and the key <name> holds a head record
// (generation, size, chunk size, CRC-32C of the whole state). A Save
// writes only the chunks that differ from the state it last saved or
// loaded (for the coordinator's state, a log that grows at its end: the
// last chunk and the new ones), together with the head, in one
// transaction: atomic, and durable on a quorum of etcd's members when
// Save returns nil. When those chunks exceed 1 MiB (etcd's request
// limit is 1.5 MiB by default), or after a Save that failed, it writes
// the whole state under a new generation in transactions of at most
// 1 MiB, then switches the head to it and deletes the old generation in
// one last transaction: a reader sees the old state or the new one,
// never a mix. A state is at most Config.MaxValue bytes.
//
// etcd keeps every overwritten chunk in its history until compaction:
// run etcd with auto-compaction (--auto-compaction-mode and
// --auto-compaction-retention) so that a long run's saves do not fill
// its space quota.
//
// It is a ps.CoordinatorAppender: Append writes the last chunk and the
// new ones without comparing the rest.
//
// A Store is safe for concurrent use; its Saves are serialized.
type Store struct {
	l    *Leadership
	name string

	mu    sync.Mutex
	known bool   // last, gen and crc are what etcd holds
	last  []byte // the state last saved or loaded (owned)
	gen   uint64 // its generation (0: no state saved)
	crc   uint32 // CRC-32C of last
}

var _ ps.CoordinatorAppender = (*Store)(nil)

// NewStore returns the Store kept under name (relative to the Backend's
// prefix; DefaultStateName for a coordinator), fenced by l. Two Stores
// of one name must not be used by one leader at once.
func NewStore(l *Leadership, name string) *Store { return &Store{l: l, name: name} }

// Leadership returns the leadership that fences the store.
func (s *Store) Leadership() *Leadership { return s.l }

type head struct {
	gen, size uint64
	chunk     uint32
	crc       uint32
}

func (h head) encode() []byte {
	b := make([]byte, 0, headSize)
	b = append(b, headMagic[:]...)
	b = binary.BigEndian.AppendUint64(b, h.gen)
	b = binary.BigEndian.AppendUint64(b, h.size)
	b = binary.BigEndian.AppendUint32(b, h.chunk)
	return binary.BigEndian.AppendUint32(b, h.crc)
}

func decodeHead(b []byte) (head, error) {
	if len(b) != headSize || !bytes.Equal(b[:4], headMagic[:]) {
		return head{}, fmt.Errorf("%w: head of %d bytes is not a state head", ErrCorruptState, len(b))
	}
	h := head{
		gen:   binary.BigEndian.Uint64(b[4:]),
		size:  binary.BigEndian.Uint64(b[12:]),
		chunk: binary.BigEndian.Uint32(b[20:]),
		crc:   binary.BigEndian.Uint32(b[24:]),
	}
	if h.chunk == 0 || h.chunk > txnBytes {
		return head{}, fmt.Errorf("%w: chunk size %d", ErrCorruptState, h.chunk)
	}
	return h, nil
}

func (s *Store) chunkKey(gen uint64, i int) string {
	return s.l.e.b.Key(fmt.Sprintf("%s/%016x/%08d", s.name, gen, i))
}

func (s *Store) genPrefix(gen uint64) string {
	return s.l.e.b.Key(fmt.Sprintf("%s/%016x/", s.name, gen))
}

func chunks(size, chunk int) int { return (size + chunk - 1) / chunk }

// readHead reads the head while the leadership holds; ok is false when no
// state was saved. rev is the revision it was read at.
func (s *Store) readHead(ctx context.Context) (h head, ok bool, rev int64, err error) {
	r, err := s.txn(ctx, clientv3.OpGet(s.l.e.b.Key(s.name)))
	if err != nil {
		return head{}, false, 0, err
	}
	kvs := r.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return head{}, false, r.Header.Revision, nil
	}
	h, err = decodeHead(kvs[0].Value)
	if err != nil {
		return head{}, false, 0, err
	}
	if max := s.l.e.b.cfg.MaxValue; h.size > uint64(max) {
		return head{}, false, 0, fmt.Errorf("%w: %s holds %d bytes, more than Config.MaxValue (%d)", ps.ErrCoordinatorState, s.l.e.b.Key(s.name), h.size, max)
	}
	return h, true, r.Header.Revision, nil
}

// Load returns the state last saved, or (nil, nil) when none was saved.
// It reads the head while the leadership holds, then the chunks at the
// head's revision (a consistent snapshot), at most 1 MiB a request. It
// fails with ErrNotLeader once the leadership is lost, and with
// ErrCorruptState when chunks and head disagree.
func (s *Store) Load(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := s.load(ctx)
	return b, superseded(err)
}

// load is Load with s.mu held.
func (s *Store) load(ctx context.Context) ([]byte, error) {
	s.known = false
	h, ok, rev, err := s.readHead(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		s.known, s.last, s.gen, s.crc = true, nil, 0, 0
		return nil, nil
	}
	b := s.l.e.b
	size, chunk := int(h.size), int(h.chunk)
	n := chunks(size, chunk)
	out := make([]byte, 0, size)
	per := max(1, txnBytes/chunk)
	for i := 0; i < n; i += per {
		j := min(i+per, n)
		var r *clientv3.GetResponse
		err := s.l.retry(ctx, "a read of "+b.Key(s.name), func() error {
			rctx, cancel := b.reqCtx(ctx)
			defer cancel()
			var err error
			r, err = b.cli.Get(rctx, s.chunkKey(h.gen, i), clientv3.WithRange(s.chunkKey(h.gen, j)), clientv3.WithRev(rev))
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("etcd: load %s chunks %d-%d: %w", b.Key(s.name), i, j-1, err)
		}
		if len(r.Kvs) != j-i {
			return nil, fmt.Errorf("%w: %s: %d of chunks %d-%d present", ErrCorruptState, b.Key(s.name), len(r.Kvs), i, j-1)
		}
		for k, kv := range r.Kvs {
			want := min(chunk, size-(i+k)*chunk)
			if string(kv.Key) != s.chunkKey(h.gen, i+k) || len(kv.Value) != want {
				return nil, fmt.Errorf("%w: %s: chunk %d is %q of %d bytes, want %d", ErrCorruptState, b.Key(s.name), i+k, kv.Key, len(kv.Value), want)
			}
			out = append(out, kv.Value...)
		}
	}
	if crc32.Checksum(out, castagnoli) != h.crc {
		return nil, fmt.Errorf("%w: %s: checksum mismatch", ErrCorruptState, b.Key(s.name))
	}
	s.known, s.last, s.gen, s.crc = true, bytes.Clone(out), h.gen, h.crc
	return out, nil
}

// Save replaces the state while the leadership holds; once it is lost,
// Save fails at once with an error wrapping ErrNotLeader and
// ps.ErrSuperseded, writing nothing. A state whose head is unreadable
// (ErrCorruptState) is replaced whole.
func (s *Store) Save(ctx context.Context, state []byte) error {
	s.mu.Lock()
	err := s.save(ctx, state, false)
	s.mu.Unlock()
	return superseded(err)
}

// Append adds tail at the end of the state last saved or appended
// (ps.CoordinatorAppender): it writes the last chunk and the new ones,
// with the head, in one fenced transaction (or as Save does when more
// than 1 MiB changed), so the state is the previous one or the new one,
// never a torn end. After an error, it first loads what etcd holds.
// Deposed: as Save.
func (s *Store) Append(ctx context.Context, tail []byte) error {
	s.mu.Lock()
	err := s.appendTail(ctx, tail)
	s.mu.Unlock()
	return superseded(err)
}

func (s *Store) appendTail(ctx context.Context, tail []byte) error {
	if !s.known {
		if _, err := s.load(ctx); err != nil {
			return err
		}
	}
	// s.last's spare capacity is the store's own: the state saved stays
	// s.last[:len(s.last)] until the save succeeds
	return s.save(ctx, append(s.last, tail...), true)
}

// superseded adds ps.ErrSuperseded to an error wrapping ErrNotLeader: a
// successor leads (or will, once the lease expires), and the ps
// coordinator that gets it must stop as a crash would.
func superseded(err error) error {
	if errors.Is(err, ErrNotLeader) && !errors.Is(err, ps.ErrSuperseded) {
		return fmt.Errorf("%w (%w)", err, ps.ErrSuperseded)
	}
	return err
}

// save writes state (s.mu held). appended means state is s.last with a
// tail (Append), in a buffer the store owns: only the tail is compared
// and checksummed.
func (s *Store) save(ctx context.Context, state []byte, appended bool) error {
	b := s.l.e.b
	if max := b.cfg.MaxValue; len(state) > max {
		return fmt.Errorf("%w: %d bytes, more than Config.MaxValue (%d)", ps.ErrCoordinatorState, len(state), max)
	}
	known := s.known
	s.known = false // until this Save is known to have succeeded
	wipe := false   // the head is unreadable: clear every generation
	if !known {
		h, ok, _, err := s.readHead(ctx)
		if errors.Is(err, ErrCorruptState) {
			wipe, err = true, nil
		}
		if err != nil {
			return err
		}
		s.last, s.gen = nil, 0
		if ok {
			s.gen = h.gen
		}
	}
	var from int   // the chunks before it are unchanged
	var crc uint32 // of state
	if known && appended {
		from, crc = len(s.last)/chunkSize, crc32.Update(s.crc, castagnoli, state[len(s.last):])
	} else {
		crc = crc32.Checksum(state, castagnoli)
	}
	hd := head{gen: s.gen, size: uint64(len(state)), chunk: chunkSize, crc: crc}
	n, old := chunks(len(state), chunkSize), chunks(len(s.last), chunkSize)
	var changed []int
	for i := from; i < n; i++ {
		c := state[i*chunkSize : min((i+1)*chunkSize, len(state))]
		if i >= old || !bytes.Equal(c, s.last[i*chunkSize:min((i+1)*chunkSize, len(s.last))]) {
			changed = append(changed, i)
		}
	}
	put := func(gen uint64, i int) clientv3.Op {
		return clientv3.OpPut(s.chunkKey(gen, i), string(state[i*chunkSize:min((i+1)*chunkSize, len(state))]))
	}
	if known && s.gen > 0 && len(changed)*chunkSize <= txnBytes {
		// in place: the changed chunks, the chunks past the end and the
		// head in one transaction
		ops := make([]clientv3.Op, 0, len(changed)+2)
		for _, i := range changed {
			ops = append(ops, put(s.gen, i))
		}
		if n < old {
			ops = append(ops, clientv3.OpDelete(s.chunkKey(s.gen, n), clientv3.WithRange(clientv3.GetPrefixRangeEnd(s.genPrefix(s.gen)))))
		}
		ops = append(ops, clientv3.OpPut(b.Key(s.name), string(hd.encode())))
		if _, err := s.txn(ctx, ops...); err != nil {
			return fmt.Errorf("etcd: save %s: %w", b.Key(s.name), err)
		}
	} else {
		// a new generation, invisible until the head names it: chunks in
		// transactions of at most txnBytes, the last one also switching
		// the head and deleting the old generation
		hd.gen = s.gen + 1
		// leftovers of a Save that failed half way (etcd refuses a delete
		// and a put of one key in one transaction: this goes first)
		stale := s.genPrefix(hd.gen)
		if wipe {
			stale = b.Key(s.name + "/")
		}
		if _, err := s.txn(ctx, clientv3.OpDelete(stale, clientv3.WithPrefix())); err != nil {
			return fmt.Errorf("etcd: save %s: %w", b.Key(s.name), err)
		}
		for i := 0; ; {
			var ops []clientv3.Op
			for k := 0; i < n && k < txnBytes/chunkSize; k, i = k+1, i+1 {
				ops = append(ops, put(hd.gen, i))
			}
			if i == n {
				ops = append(ops, clientv3.OpPut(b.Key(s.name), string(hd.encode())))
				if s.gen > 0 {
					ops = append(ops, clientv3.OpDelete(s.genPrefix(s.gen), clientv3.WithPrefix()))
				}
			}
			if _, err := s.txn(ctx, ops...); err != nil {
				return fmt.Errorf("etcd: save %s: %w", b.Key(s.name), err)
			}
			if i == n {
				break
			}
		}
	}
	if !appended {
		state = bytes.Clone(state)
	}
	s.known, s.last, s.gen, s.crc = true, state, hd.gen, hd.crc
	return nil
}
