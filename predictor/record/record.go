package record

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/falconml/falcon/predictor"
	"github.com/golang/snappy"
	"github.com/pierrec/lz4/v4"
)

// ErrConfig is returned for an invalid Config.
var ErrConfig = errors.New("record: invalid config")

// ErrRoundTrip is returned if a codec does not give back the input (a codec bug).
var ErrRoundTrip = errors.New("record: decompressed chunk differs from input")

// Data classes, as ids (1-based; 0 means unknown in predictor.Measurement).
const (
	ClassFloat32 = 1 + iota // float32 gradients: normal small floats
	ClassSparse             // sparse float32 gradients: mostly zeros
	ClassInt8               // quantized int8 values
	ClassText               // text / log records
	ClassRandom             // already-compressed (random) bytes
	NumClasses   = ClassRandom
)

// ClassName returns the name of class id c ("float32", "sparse", "int8",
// "text", "random"), or "unknown".
func ClassName(c int) string {
	switch c {
	case ClassFloat32:
		return "float32"
	case ClassSparse:
		return "sparse"
	case ClassInt8:
		return "int8"
	case ClassText:
		return "text"
	case ClassRandom:
		return "random"
	}
	return "unknown"
}

// Codecs the recorder knows.
var Codecs = []string{"lz4", "snappy"}

// Config configures a recording. Zero fields take DefaultConfig's value.
type Config struct {
	// Chunks is the number of chunks; each is measured once per codec.
	// Zero means 2000.
	Chunks int
	// ChunkSize is the chunk size in bytes. Zero means 256 KiB.
	ChunkSize int
	// Codecs lists the codecs to measure, from Codecs. Nil means all.
	Codecs []string
	// ClassRun is the [min, max] number of chunks a data class lasts before
	// the next (drawn uniformly). Zero means [20, 100].
	ClassRun [2]int
	// ContentionRun is the [min, max] number of chunks a contention level
	// lasts. Zero means [30, 150].
	ContentionRun [2]int
	// MaxBusy is the largest number of background busy threads. Levels are
	// drawn uniformly from 0..MaxBusy. Zero means runtime.NumCPU().
	MaxBusy int
	// Seed seeds the class and contention schedule and the chunk contents.
	Seed uint64
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Chunks: 2000, ChunkSize: 256 << 10, Codecs: Codecs,
		ClassRun: [2]int{20, 100}, ContentionRun: [2]int{30, 150}, MaxBusy: runtime.NumCPU()}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Chunks == 0 {
		c.Chunks = d.Chunks
	}
	if c.ChunkSize == 0 {
		c.ChunkSize = d.ChunkSize
	}
	if c.Codecs == nil {
		c.Codecs = d.Codecs
	}
	if c.ClassRun == [2]int{} {
		c.ClassRun = d.ClassRun
	}
	if c.ContentionRun == [2]int{} {
		c.ContentionRun = d.ContentionRun
	}
	if c.MaxBusy == 0 {
		c.MaxBusy = d.MaxBusy
	}
	return c
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	e := c.withDefaults()
	switch {
	case e.Chunks < 1:
		return fmt.Errorf("%w: Chunks %d", ErrConfig, c.Chunks)
	case e.ChunkSize < 64 || e.ChunkSize > 64<<20:
		return fmt.Errorf("%w: ChunkSize %d must be in [64, 64 MiB]", ErrConfig, c.ChunkSize)
	case e.ClassRun[0] < 1 || e.ClassRun[1] < e.ClassRun[0]:
		return fmt.Errorf("%w: ClassRun %v", ErrConfig, c.ClassRun)
	case e.ContentionRun[0] < 1 || e.ContentionRun[1] < e.ContentionRun[0]:
		return fmt.Errorf("%w: ContentionRun %v", ErrConfig, c.ContentionRun)
	case e.MaxBusy < 0 || e.MaxBusy > 256:
		return fmt.Errorf("%w: MaxBusy %d must be in [0, 256]", ErrConfig, c.MaxBusy)
	}
	for _, name := range e.Codecs {
		if codecByName(name) == nil {
			return fmt.Errorf("%w: unknown codec %q (known: %v)", ErrConfig, name, Codecs)
		}
	}
	return nil
}

// Step is one chunk of the seeded schedule.
type Step struct {
	Class int // data class id
	Busy  int // background busy threads
}

// Schedule returns the seeded schedule of classes and contention levels for
// c: piecewise-constant runs whose lengths are drawn uniformly from
// ClassRun and ContentionRun; each new run draws a class (or level) that
// differs from the previous one. It is deterministic for c.Seed.
func Schedule(c Config) []Step {
	c = c.withDefaults()
	rng := rand.New(rand.NewPCG(c.Seed, 0x5eed))
	out := make([]Step, c.Chunks)
	class, busy := 1+rng.IntN(NumClasses), rng.IntN(c.MaxBusy+1)
	classLeft := c.ClassRun[0] + rng.IntN(c.ClassRun[1]-c.ClassRun[0]+1)
	busyLeft := c.ContentionRun[0] + rng.IntN(c.ContentionRun[1]-c.ContentionRun[0]+1)
	for i := range out {
		if classLeft == 0 {
			class = 1 + (class-1+1+rng.IntN(NumClasses-1))%NumClasses
			classLeft = c.ClassRun[0] + rng.IntN(c.ClassRun[1]-c.ClassRun[0]+1)
		}
		if busyLeft == 0 {
			if c.MaxBusy > 0 {
				busy = (busy + 1 + rng.IntN(c.MaxBusy)) % (c.MaxBusy + 1)
			}
			busyLeft = c.ContentionRun[0] + rng.IntN(c.ContentionRun[1]-c.ContentionRun[0]+1)
		}
		out[i] = Step{Class: class, Busy: busy}
		classLeft--
		busyLeft--
	}
	return out
}

// Record measures real compression and decompression of a stream of chunks
// whose data class and background CPU contention follow Schedule(cfg), and
// calls sink with one predictor.Record per chunk and codec, in order.
//
// Speeds are per core: CompressNs and DecompressNs are the CPU time of the
// measuring thread (CLOCK_THREAD_CPUTIME_ID on Linux; the wall clock on other
// systems), so a chunk during which the thread was descheduled is not
// counted as slow. Contention still lowers them, through the caches and
// memory bandwidth the busy threads share; its other effect, fewer free
// cores, is what the contention column reports. The wall-clock times are
// recorded too (CompressWallNs, DecompressWallNs).
//
// Contention is made by background goroutines locked to OS threads that spin
// on arithmetic. So that they compete with the measuring goroutine through
// the operating system's scheduler (as other processes on a host would), and
// not only through Go's run queues, Record raises GOMAXPROCS to
// NumCPU+MaxBusy for its duration and restores it on return; do not run it
// concurrently with work that depends on GOMAXPROCS. The measuring goroutine
// is locked to its thread too. Record returns ctx.Err() if ctx is cancelled
// (the records already passed to sink stay valid), and stops all background
// goroutines before it returns.
func Record(ctx context.Context, cfg Config, sink func(predictor.Record) error) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	sched := Schedule(cfg)
	codecs := make([]codec, len(cfg.Codecs))
	for i, n := range cfg.Codecs {
		codecs[i] = *codecByName(n)
	}

	prev := runtime.GOMAXPROCS(runtime.NumCPU() + cfg.MaxBusy)
	defer runtime.GOMAXPROCS(prev)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	var bg background
	defer bg.set(0)

	gen := newGenerator(rand.New(rand.NewPCG(cfg.Seed, 0xc0ffee)))
	chunk := make([]byte, cfg.ChunkSize)
	dst := make([]byte, max(lz4.CompressBlockBound(cfg.ChunkSize), snappy.MaxEncodedLen(cfg.ChunkSize)))
	back := make([]byte, cfg.ChunkSize)
	ncpu := float64(runtime.NumCPU())
	start := time.Now()
	for i, st := range sched {
		if err := ctx.Err(); err != nil {
			return err
		}
		if bg.n != st.Busy {
			bg.set(st.Busy)
			time.Sleep(2 * time.Millisecond) // let the new threads get scheduled
		}
		gen.fill(chunk, st.Class)
		for _, c := range codecs {
			t0, u0 := time.Now(), threadCPU()
			comp, err := c.compress(dst, chunk)
			t1, u1 := time.Now(), threadCPU()
			if err != nil {
				return fmt.Errorf("record: %s compress chunk %d: %w", c.name, i, err)
			}
			out, err := c.decompress(back, comp)
			t2, u2 := time.Now(), threadCPU()
			if err != nil {
				return fmt.Errorf("record: %s decompress chunk %d: %w", c.name, i, err)
			}
			if string(out) != string(chunk) {
				return fmt.Errorf("%w: %s chunk %d", ErrRoundTrip, c.name, i)
			}
			rec := predictor.Record{
				At: t2.Sub(start), Codec: c.name, Class: st.Class, ClassName: ClassName(st.Class),
				Contention: float64(st.Busy) / ncpu, RawBytes: len(chunk), CompressedBytes: len(comp),
				CompressNs: max(1, (u1 - u0).Nanoseconds()), DecompressNs: max(1, (u2 - u1).Nanoseconds()),
				CompressWallNs: max(1, t1.Sub(t0).Nanoseconds()), DecompressWallNs: max(1, t2.Sub(t1).Nanoseconds()),
			}
			if err := sink(rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// background runs n busy goroutines locked to OS threads.
type background struct {
	n    int
	stop []*atomic.Bool
	done []chan struct{}
}

// set changes the number of busy goroutines to n, waiting for stopped ones
// to exit.
func (b *background) set(n int) {
	for len(b.stop) < n {
		s := new(atomic.Bool)
		d := make(chan struct{})
		b.stop = append(b.stop, s)
		b.done = append(b.done, d)
		go func() {
			defer close(d)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			// Stream through a buffer larger than a core's L2 so the thread
			// competes for the shared cache and memory bandwidth as well as
			// for CPU time (the size is ours).
			buf := make([]uint64, busyBufWords)
			var x uint64 = 1
			for !s.Load() {
				for j := 0; j < len(buf); j += 8 {
					x = x*6364136223846793005 + buf[j]
					buf[j] = x
					if j&(1<<13-1) == 0 && s.Load() {
						break
					}
				}
			}
			sink.Store(x)
		}()
	}
	if len(b.stop) > n {
		for _, s := range b.stop[n:] {
			s.Store(true)
		}
		for _, d := range b.done[n:] {
			<-d
		}
		b.stop, b.done = b.stop[:n], b.done[:n]
	}
	b.n = n
}

// busyBufWords is the size of a busy thread's buffer: 8 MiB.
const busyBufWords = 1 << 20

// sink keeps the spin loops' result alive so the compiler cannot drop them.
var sink atomic.Uint64

type codec struct {
	name       string
	compress   func(dst, src []byte) ([]byte, error)
	decompress func(dst, src []byte) ([]byte, error)
}

func codecByName(name string) *codec {
	switch name {
	case "lz4":
		c := new(lz4.Compressor) // reused: its hash table is not re-zeroed per chunk
		return &codec{
			name: "lz4",
			compress: func(dst, src []byte) ([]byte, error) {
				n, err := c.CompressBlock(src, dst)
				if err != nil {
					return nil, err
				}
				if n == 0 { // cannot happen with len(dst) >= CompressBlockBound
					return nil, errIncompressible
				}
				return dst[:n], nil
			},
			decompress: func(dst, src []byte) ([]byte, error) {
				n, err := lz4.UncompressBlock(src, dst)
				if err != nil {
					return nil, err
				}
				return dst[:n], nil
			},
		}
	case "snappy":
		return &codec{
			name:       "snappy",
			compress:   func(dst, src []byte) ([]byte, error) { return snappy.Encode(dst, src), nil },
			decompress: func(dst, src []byte) ([]byte, error) { return snappy.Decode(dst, src) },
		}
	}
	return nil
}

var errIncompressible = errors.New("record: lz4 reported incompressible block")
