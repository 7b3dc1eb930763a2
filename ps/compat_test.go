//lint:file-ignore SA1019 this file is the program written against the names ps had before its core moved out; it must keep compiling

package ps_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/layout"
	"github.com/falconml/falcon/ps/store"
)

// TestDeprecatedNamesCompatible: a program written against the names ps
// had before the store, the partitioners and the events moved to their
// own packages compiles and behaves alike: the aliases are the same types
// (values pass between the two spellings), the sentinels are the same
// values (errors.Is matches either), the constants are equal, and the
// forwarders return what the functions they forward to return.
func TestDeprecatedNamesCompatible(t *testing.T) {
	// Types: each old name is the new type, not a copy of it.
	var (
		_ *store.Store        = (*ps.Store)(nil)
		_ store.Config        = ps.StoreConfig{}
		_ store.Optimizer     = ps.SGD{}
		_ store.Optimizer     = ps.Momentum{}
		_ store.Optimizer     = ps.Adam{}
		_ store.Initializer   = ps.Zeros{}
		_ ps.Initializer      = store.Constant{}
		_ ps.Initializer      = ps.Uniform{}
		_ ps.Initializer      = ps.Normal{}
		_ *store.Checkpoint   = (*ps.Checkpoint)(nil)
		_ store.CheckpointKey = ps.CheckpointKey{}
		_ store.PendingClock  = ps.PendingClock{}
		_ store.PendingEntry  = ps.PendingEntry{}
		_ store.ClientWindow  = ps.ClientWindow{}
		_ layout.Segment      = ps.Segment{}
		_ layout.Partitioner  = ps.KeyRange{Servers: 1}
		_ ps.Partitioner      = layout.Hash{}
		_ layout.Modulo       = ps.Modulo{}
		_ event.Kind          = ps.EventKind(0)
		_ event.Event         = ps.Event{}
		_ event.Observer      = ps.ObserverFunc(func(ps.Event) {})
		_ ps.Observer         = event.Func(func(event.Event) {})
	)
	if ps.DefaultAccumulateWindow != store.DefaultAccumulateWindow || ps.CheckpointVersion != store.CheckpointVersion || ps.DefaultMaxSegment != layout.DefaultMaxSegment {
		t.Error("a moved constant differs from its new home")
	}
	if ps.EvClockStart != event.ClockStart || ps.EvWorkerLost != event.WorkerLost || ps.EvJoin != event.Join || ps.EvTransferDone.String() != event.TransferDone.String() {
		t.Error("a moved event kind differs from its new home")
	}
	for _, e := range []struct{ old, new error }{
		{ps.ErrCorruptCheckpoint, store.ErrCorruptCheckpoint}, {ps.ErrCheckpointMismatch, store.ErrCheckpointMismatch},
		{ps.ErrUnknownKey, store.ErrUnknownKey}, {ps.ErrLengthMismatch, store.ErrLengthMismatch}, {ps.ErrUnsortedKeys, store.ErrUnsortedKeys},
		{ps.ErrNonFinite, store.ErrNonFinite}, {ps.ErrClockNotOpen, store.ErrClockNotOpen}, {ps.ErrMalformed, store.ErrMalformed},
	} {
		if e.old != e.new || !errors.Is(e.new, e.old) {
			t.Errorf("%v: the old sentinel is not the new one", e.old)
		}
	}

	// Forwarders: the old functions do what the new ones do.
	if ps.DefaultStoreConfig() != store.DefaultConfig() {
		t.Error("DefaultStoreConfig differs from store.DefaultConfig")
	}
	s, err := ps.NewStore(ps.StoreConfig{Optimizer: ps.Adam{LR: 0.01}})
	if err != nil {
		t.Fatal(err)
	}
	keys, lens := []uint64{1, 7}, []int{3, 2}
	if err := s.Init(keys, lens, ps.Uniform{Lo: -1, Hi: 1, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(keys, lens, []float32{1, 2, 3, 4, 5}, 1); err != nil {
		t.Fatal(err)
	}
	ck := s.Checkpoint()
	ck.RunID, ck.Server = "run", "server-0"
	b := ps.EncodeCheckpoint(nil, ck)
	if !bytes.Equal(b, store.EncodeCheckpoint(nil, ck)) {
		t.Error("EncodeCheckpoint differs from store.EncodeCheckpoint")
	}
	if _, err := ps.DecodeCheckpoint(b[:len(b)-1]); !errors.Is(err, store.ErrCorruptCheckpoint) {
		t.Errorf("DecodeCheckpoint of a truncated checkpoint: %v, want store.ErrCorruptCheckpoint", err)
	}
	path := filepath.Join(t.TempDir(), "server-0.ckpt")
	if err := ps.WriteCheckpointFile(path, ck); err != nil {
		t.Fatal(err)
	}
	back, err := store.ReadCheckpointFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ps.ReadCheckpointFile(path); err != nil || !bytes.Equal(store.EncodeCheckpoint(nil, got), store.EncodeCheckpoint(nil, back)) {
		t.Errorf("ReadCheckpointFile: %v", err)
	}
	for _, p := range []ps.Partitioner{ps.Modulo{Servers: 3, MaxSegment: 4}, ps.KeyRange{Servers: 3}, ps.Hash{Servers: 2}} {
		if ps.LayoutHash(p, 3) != layout.Fingerprint(p, 3) {
			t.Errorf("LayoutHash(%T) differs from layout.Fingerprint", p)
		}
	}

	// A cluster configured with the old names trains.
	ctx := context.Background()
	var seen atomic.Int64 // the observer is called from several goroutines
	c, err := ps.NewCluster(ctx, ps.ClusterConfig{Servers: 1, Workers: 1, Policy: epsp.NewSSP(1),
		Store:       ps.StoreConfig{Optimizer: ps.SGD{LR: 0.1}},
		Partitioner: ps.Modulo{Servers: 1},
		Observer: ps.ObserverFunc(func(e ps.Event) {
			if e.Kind == ps.EvClockStart {
				seen.Add(1)
			}
		})})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Train(ctx, zeroGrad{}, ps.ShardSampler{N: 8, Workers: 1}, ps.TrainConfig{Keys: []uint64{0}, Lens: []int{2}, Init: ps.Zeros{}, Clocks: 3}); err != nil {
		t.Fatal(err)
	}
	if n := seen.Load(); n != 3 {
		t.Errorf("the old-style observer saw %d clock starts, want 3", n)
	}
}

// zeroGrad is a Model whose gradient is zero.
type zeroGrad struct{}

func (zeroGrad) Gradient(params []float32, samples []int, grad []float32) float64 { return 0 }
