package codecprof

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/golang/snappy"
	"github.com/pierrec/lz4/v4"

	"github.com/falconml/falcon/transport"
)

// CalibrateConfig says what [Calibrate] measures.
type CalibrateConfig struct {
	// Size is the bytes of each class generated and measured. Zero means
	// 4 MiB.
	Size int
	// Block is the size of the independent blocks the payload is cut into
	// (shuffle writers and the transport compress per block/message). Zero
	// means 64 KiB.
	Block int
	// MinDuration is the minimum wall time of one timed run; a run repeats
	// the whole payload until it has lasted this long. Zero means 50 ms.
	MinDuration time.Duration
	// Repeats is how many timed runs are made per measurement; the fastest
	// is kept (it is the least disturbed by other processes on the core).
	// Zero means 3.
	Repeats int
	// Seed seeds the payload generators. Zero is a valid seed.
	Seed uint64
	// Classes to measure. Nil means all of [Classes].
	Classes []Class
	// Codecs to measure. Nil means lz4 and snappy.
	Codecs []transport.Codec
}

// DefaultCalibrateConfig returns the configuration used to record
// [Defaults].
func DefaultCalibrateConfig() CalibrateConfig {
	return CalibrateConfig{Size: 4 << 20, Block: 64 << 10, MinDuration: 50 * time.Millisecond, Repeats: 3, Seed: 1}
}

// Validate fills zero fields with defaults and reports invalid ones.
func (c *CalibrateConfig) Validate() error {
	d := DefaultCalibrateConfig()
	if c.Size < 0 || c.Block < 0 || c.MinDuration < 0 || c.Repeats < 0 {
		return fmt.Errorf("%w: negative size, block, duration or repeats", ErrBadConfig)
	}
	if c.Size == 0 {
		c.Size = d.Size
	}
	if c.Block == 0 {
		c.Block = d.Block
	}
	if c.MinDuration == 0 {
		c.MinDuration = d.MinDuration
	}
	if c.Repeats == 0 {
		c.Repeats = d.Repeats
	}
	if c.Classes == nil {
		c.Classes = Classes()
	}
	if c.Codecs == nil {
		c.Codecs = []transport.Codec{transport.CodecLZ4, transport.CodecSnappy}
	}
	for _, k := range c.Classes {
		if k < 0 || k >= numClasses {
			return fmt.Errorf("%w: %v", ErrUnknownClass, k)
		}
	}
	for _, cd := range c.Codecs {
		if cd != transport.CodecLZ4 && cd != transport.CodecSnappy {
			return fmt.Errorf("%w: %v", ErrUnknownCodec, cd)
		}
	}
	return nil
}

// Calibrate measures, on this machine and on one goroutine (so per core),
// the compression and decompression speed and the ratio of every
// configured codec on every configured data class. It reads the wall clock:
// it is a measurement tool, not a pure core. It returns ctx.Err() if ctx is
// cancelled between runs.
func Calibrate(ctx context.Context, cfg CalibrateConfig) (Profiles, error) {
	if err := cfg.Validate(); err != nil {
		return Profiles{}, err
	}
	var out Profiles
	for ki, k := range cfg.Classes {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(ki)+1))
		payload, err := Sample(k, cfg.Size, rng)
		if err != nil {
			return Profiles{}, err
		}
		for _, c := range cfg.Codecs {
			p, err := measure(ctx, cfg, c, payload)
			if err != nil {
				return Profiles{}, err
			}
			p.Class = k
			out.Entries = append(out.Entries, p)
		}
	}
	return out, nil
}

func measure(ctx context.Context, cfg CalibrateConfig, c transport.Codec, payload []byte) (Profile, error) {
	var blocks [][]byte
	for i := 0; i < len(payload); i += cfg.Block {
		blocks = append(blocks, payload[i:min(i+cfg.Block, len(payload))])
	}
	comp := make([][]byte, len(blocks))
	var lzc lz4.Compressor
	compressAll := func() (int, error) {
		wire := 0
		for i, b := range blocks {
			switch c {
			case transport.CodecLZ4:
				dst := comp[i][:cap(comp[i])]
				if len(dst) < lz4.CompressBlockBound(len(b)) {
					dst = make([]byte, lz4.CompressBlockBound(len(b)))
				}
				n, err := lzc.CompressBlock(b, dst)
				if err != nil {
					return 0, fmt.Errorf("codecprof: lz4: %w", err)
				}
				comp[i] = dst[:n]
			case transport.CodecSnappy:
				comp[i] = snappy.Encode(comp[i][:cap(comp[i])], b)
			}
			wire += len(comp[i])
		}
		return wire, nil
	}
	out := make([]byte, cfg.Block)
	decompressAll := func() (int, error) {
		n := 0
		for i, b := range comp {
			switch c {
			case transport.CodecLZ4:
				m, err := lz4.UncompressBlock(b, out[:len(blocks[i])])
				if err != nil {
					return 0, fmt.Errorf("codecprof: lz4 decode: %w", err)
				}
				n += m
			case transport.CodecSnappy:
				d, err := snappy.Decode(out, b)
				if err != nil {
					return 0, fmt.Errorf("codecprof: snappy decode: %w", err)
				}
				n += len(d)
			}
		}
		return n, nil
	}
	wire, err := compressAll()
	if err != nil {
		return Profile{}, err
	}
	if n, err := decompressAll(); err != nil {
		return Profile{}, err
	} else if n != len(payload) {
		return Profile{}, fmt.Errorf("codecprof: %s round trip gave %d bytes, want %d", c, n, len(payload))
	}
	sBps, err := timeRate(ctx, cfg, len(payload), func() error { _, err := compressAll(); return err })
	if err != nil {
		return Profile{}, err
	}
	uBps, err := timeRate(ctx, cfg, len(payload), func() error { _, err := decompressAll(); return err })
	if err != nil {
		return Profile{}, err
	}
	return Profile{Codec: c, CompressBps: sBps, DecompressBps: uBps, Ratio: float64(wire) / float64(len(payload))}, nil
}

// timeRate returns the best, over cfg.Repeats runs, of bytes/second for fn
// processing n bytes, each run lasting at least cfg.MinDuration.
func timeRate(ctx context.Context, cfg CalibrateConfig, n int, fn func() error) (float64, error) {
	best := 0.0
	for r := 0; r < cfg.Repeats; r++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		start := time.Now()
		iters := 0
		for {
			if err := fn(); err != nil {
				return 0, err
			}
			iters++
			if el := time.Since(start); el >= cfg.MinDuration {
				rate := float64(iters) * float64(n) / el.Seconds()
				if rate > best {
					best = rate
				}
				break
			}
		}
	}
	return best, nil
}
