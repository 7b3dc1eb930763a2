package ps

import (
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/layout"
	"github.com/falconml/falcon/ps/store"
)

// The store, its optimizers and initializers and the checkpoint format
// live in package ps/store, beneath ps; the partitioners in ps/layout. The names below keep programs
// written against earlier releases compiling; each is the store's own
// (a type alias, the same sentinel value, a forwarding function), so
// values pass freely between the two spellings and errors.Is matches
// either.

// Deprecated: use store.Store.
type Store = store.Store

// Deprecated: use store.Config.
type StoreConfig = store.Config

// Deprecated: use store.Optimizer.
type Optimizer = store.Optimizer

// Deprecated: use store.SGD.
type SGD = store.SGD

// Deprecated: use store.Momentum.
type Momentum = store.Momentum

// Deprecated: use store.Adam.
type Adam = store.Adam

// Deprecated: use store.Initializer.
type Initializer = store.Initializer

// Deprecated: use store.Zeros.
type Zeros = store.Zeros

// Deprecated: use store.Constant.
type Constant = store.Constant

// Deprecated: use store.Uniform.
type Uniform = store.Uniform

// Deprecated: use store.Normal.
type Normal = store.Normal

// Deprecated: use store.Checkpoint.
type Checkpoint = store.Checkpoint

// Deprecated: use store.CheckpointKey.
type CheckpointKey = store.CheckpointKey

// Deprecated: use store.PendingClock.
type PendingClock = store.PendingClock

// Deprecated: use store.PendingEntry.
type PendingEntry = store.PendingEntry

// Deprecated: use store.ClientWindow.
type ClientWindow = store.ClientWindow

var (
	// Deprecated: use store.ErrCorruptCheckpoint (the same value).
	ErrCorruptCheckpoint = store.ErrCorruptCheckpoint
	// Deprecated: use store.ErrCheckpointMismatch (the same value).
	ErrCheckpointMismatch = store.ErrCheckpointMismatch
)

// Deprecated: use store.New.
func NewStore(cfg StoreConfig) (*Store, error) { return store.New(cfg) }

// Deprecated: use store.DefaultConfig.
func DefaultStoreConfig() StoreConfig { return store.DefaultConfig() }

// Deprecated: use store.EncodeCheckpoint.
func EncodeCheckpoint(dst []byte, ck *Checkpoint) []byte { return store.EncodeCheckpoint(dst, ck) }

// Deprecated: use store.DecodeCheckpoint.
func DecodeCheckpoint(b []byte) (*Checkpoint, error) { return store.DecodeCheckpoint(b) }

// Deprecated: use store.WriteCheckpointFile.
func WriteCheckpointFile(path string, ck *Checkpoint) error {
	return store.WriteCheckpointFile(path, ck)
}

// Deprecated: use store.ReadCheckpointFile.
func ReadCheckpointFile(path string) (*Checkpoint, error) { return store.ReadCheckpointFile(path) }

// Deprecated: use layout.Segment.
type Segment = layout.Segment

// Deprecated: use layout.Partitioner.
type Partitioner = layout.Partitioner

// Deprecated: use layout.KeyRange.
type KeyRange = layout.KeyRange

// Deprecated: use layout.Hash.
type Hash = layout.Hash

// Deprecated: use layout.Modulo.
type Modulo = layout.Modulo

// Deprecated: use layout.Fingerprint.
func LayoutHash(p Partitioner, servers int) uint64 { return layout.Fingerprint(p, servers) }

// The events the roles report live in package ps/event.

// Deprecated: use event.Kind.
type EventKind = event.Kind

// Deprecated: use event.Event.
type Event = event.Event

// Deprecated: use event.Observer.
type Observer = event.Observer

// Deprecated: use event.Func.
type ObserverFunc = event.Func

// Deprecated: use the constants of packages event, store and layout
// (EvClockStart is event.ClockStart, CheckpointVersion is
// store.CheckpointVersion, and so on).
const (
	// Deprecated: use store.DefaultAccumulateWindow.
	DefaultAccumulateWindow = store.DefaultAccumulateWindow
	// Deprecated: use store.CheckpointVersion.
	CheckpointVersion = store.CheckpointVersion
	// Deprecated: use layout.DefaultMaxSegment.
	DefaultMaxSegment = layout.DefaultMaxSegment
	EvApplied         = event.Applied
	EvBatch           = event.Batch
	EvChunk           = event.Chunk
	EvClockDone       = event.ClockDone
	EvClockStart      = event.ClockStart
	EvComputed        = event.Computed
	EvFlushed         = event.Flushed
	EvJoin            = event.Join
	EvLeave           = event.Leave
	EvParallelism     = event.Parallelism
	EvPulled          = event.Pulled
	EvPushAdmitted    = event.PushAdmitted
	EvPushed          = event.Pushed
	EvRelease         = event.Release
	EvTransferDone    = event.TransferDone
	EvTransferOrdered = event.TransferOrdered
	EvTransferResult  = event.TransferResult
	EvWorkerLost      = event.WorkerLost
)
