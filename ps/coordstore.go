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

// CoordinatorStore keeps a coordinator's durable state (one opaque blob).
type CoordinatorStore interface {
	// Load returns the state last saved, or (nil, nil) when none was saved.
	Load(ctx context.Context) ([]byte, error)
	// Save replaces the state atomically; it is durable when Save returns nil.
	Save(ctx context.Context, state []byte) error
}

// MaxCoordinatorState bounds a coordinator's saved state: Save refuses a
// larger one and DirCoordinatorStore's Load refuses a larger file without
// reading it, so a corrupt or hostile file cannot grow memory. A state
// holds O(worker slots + open transfers + servers) fixed-size records
// (coordstate.go), a few KiB for hundreds of workers.
const MaxCoordinatorState = 64 << 20

// ErrCoordinatorState: a coordinator's saved state cannot be used (too
// large, truncated, of another format version, or of another cluster);
// the message names what differs.
var ErrCoordinatorState = errors.New("ps: coordinator state unusable")

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
func DirCoordinatorStore(dir string) CoordinatorStore { return dirCoordStore{dir: dir} }

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
