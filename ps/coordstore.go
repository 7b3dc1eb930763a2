package ps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/falconml/falcon/internal/atomicfile"
)

// CoordinatorStore keeps a coordinator's durable state (one opaque blob;
// ClusterConfig.CoordinatorStore, CoordinatorConfig.Store), so that a
// coordinator killed and started again resumes the run, its workers and
// servers waiting for it CoordinatorWait (DefaultCoordinatorWait) and then
// failing naming it. Nil is not durable: a dead coordinator ends the run.
// One superseded by a standby (ErrSuperseded, Coordinator.Abandon) stops as
// a crash would. DirCoordinatorStore keeps it in a directory.
type CoordinatorStore interface {
	// Load returns the state last saved, or (nil, nil) when none was saved.
	Load(ctx context.Context) ([]byte, error)
	// Save replaces the state atomically; it is durable when Save returns nil.
	Save(ctx context.Context, state []byte) error
}

// CoordinatorAppender is a CoordinatorStore that can add to the state it
// holds without rewriting it. A coordinator whose store is one saves its
// state whole once per process and then appends what each later save
// adds, so a run writes O(its log) bytes rather than O(log²).
// DirCoordinatorStore is one.
type CoordinatorAppender interface {
	CoordinatorStore
	// Append adds tail at the end of the state last saved or appended; it
	// is durable when Append returns nil. After an error, or a crash
	// during it, the state is the previous one, possibly followed by a
	// part of tail (the coordinator detects and cuts such a torn end).
	Append(ctx context.Context, tail []byte) error
}

// coordinatorStateFile is the file a DirCoordinatorStore keeps in its
// directory.
const coordinatorStateFile = "coordinator.state"

// DirCoordinatorStore returns a CoordinatorStore keeping the state in
// dir/coordinator.state (dir is created at the first Save). Save writes a
// temporary file in dir, fsyncs it, renames it over the state and fsyncs
// dir (WriteFileAtomic), so a crash at any moment leaves the previous
// state or the new one whole. Saves of one store are serialised by the
// caller (the coordinator saves from one goroutine); concurrent Saves are
// safe but the last rename wins.
//
// It is also a CoordinatorAppender: Append writes at the end of the file
// and fsyncs it.
func DirCoordinatorStore(dir string) CoordinatorStore { return dirCoordStore{dir: dir} }

var _ CoordinatorAppender = dirCoordStore{}

type dirCoordStore struct{ dir string }

func (s dirCoordStore) path() string { return filepath.Join(s.dir, coordinatorStateFile) }

func (s dirCoordStore) Load(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// temporary files of Saves a crash interrupted (WriteFileAtomic's
	// names): never the state, removed best effort
	if tmps, err := filepath.Glob(filepath.Join(globEscape(s.dir), "."+coordinatorStateFile+".tmp-*")); err == nil {
		for _, t := range tmps {
			os.Remove(t)
		}
	}
	f, err := os.Open(s.path())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > MaxCoordinatorState {
		return nil, fmt.Errorf("%w: %s holds %d bytes, more than MaxCoordinatorState (%d)", ErrCoordinatorState, s.path(), st.Size(), MaxCoordinatorState)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxCoordinatorState+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxCoordinatorState {
		return nil, fmt.Errorf("%w: %s grew past MaxCoordinatorState while read", ErrCoordinatorState, s.path())
	}
	return b, nil
}

func (s dirCoordStore) Save(ctx context.Context, state []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(state) > MaxCoordinatorState {
		return fmt.Errorf("%w: %d bytes, more than MaxCoordinatorState (%d)", ErrCoordinatorState, len(state), MaxCoordinatorState)
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(s.path(), 0o644, func(w io.Writer) error {
		_, err := io.Copy(w, bytes.NewReader(state))
		return err
	})
}

func (s dirCoordStore) Append(ctx context.Context, tail []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := os.OpenFile(s.path(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err // no state to append to: Save first
	}
	st, err := f.Stat()
	if err == nil && st.Size()+int64(len(tail)) > MaxCoordinatorState {
		err = fmt.Errorf("%w: appending %d bytes to %d would pass MaxCoordinatorState (%d)", ErrCoordinatorState, len(tail), st.Size(), MaxCoordinatorState)
	}
	if err == nil {
		_, err = f.Write(tail)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
