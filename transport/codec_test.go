package transport_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/falconml/falcon/transport"
)

// gradientBytes returns n float32 values drawn from N(0, 0.01²), the rough
// magnitude of SGD gradients, as little-endian bytes.
func gradientBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(r.NormFloat64()*0.01)))
	}
	return b
}

var allCodecs = []transport.Codec{transport.CodecNone, transport.CodecLZ4, transport.CodecSnappy}

func TestCompressDecompress_RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	random := make([]byte, 100_000)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	inputs := map[string][]byte{
		"empty":     {},
		"one":       {42},
		"zeros":     make([]byte, 1<<20),
		"random":    random,
		"gradients": gradientBytes(25_000, 1),
		"text":      bytes.Repeat([]byte("parameter server "), 1000),
	}
	for _, c := range allCodecs {
		for name, in := range inputs {
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				prefix := []byte("pre")
				enc, err := transport.Compress(append([]byte{}, prefix...), c, in)
				if err != nil {
					t.Fatalf("Compress: %v", err)
				}
				if !bytes.Equal(enc[:3], prefix) {
					t.Fatalf("Compress clobbered dst's prefix")
				}
				enc = enc[3:]
				if max := transport.MaxCompressedLen(c, len(in)); len(enc) > max {
					t.Fatalf("encoded %d bytes, MaxCompressedLen says at most %d", len(enc), max)
				}
				dec, err := transport.Decompress([]byte("x"), c, enc, len(in), len(in))
				if err != nil {
					t.Fatalf("Decompress: %v", err)
				}
				if dec[0] != 'x' || !bytes.Equal(dec[1:], in) {
					t.Fatalf("round trip changed the data (%d bytes in, %d out)", len(in), len(dec)-1)
				}
			})
		}
	}
	// Zeros must actually shrink with real codecs (guards against a codec
	// silently falling back to a copy). Snappy's best ratio is about 21:1.
	for _, c := range allCodecs[1:] {
		enc, _ := transport.Compress(nil, c, inputs["zeros"])
		if len(enc) > len(inputs["zeros"])/15 {
			t.Errorf("%v: 1 MiB of zeros compressed to %d bytes", c, len(enc))
		}
	}
}

func TestDecompress_Refuses(t *testing.T) {
	in := gradientBytes(1000, 2)
	lz, _ := transport.Compress(nil, transport.CodecLZ4, in)
	sn, _ := transport.Compress(nil, transport.CodecSnappy, in)
	garbage := bytes.Repeat([]byte{0xff, 0x13, 0x00, 0x7f}, 64)
	tests := []struct {
		name   string
		c      transport.Codec
		src    []byte
		rawLen int
		maxLen int
		want   error
	}{
		{"none/length mismatch", transport.CodecNone, in, len(in) + 1, 1 << 20, transport.ErrCorruptFrame},
		{"none/over max", transport.CodecNone, in, len(in), len(in) - 1, transport.ErrFrameTooLarge},
		{"lz4/over max", transport.CodecLZ4, lz, len(in), len(in) - 1, transport.ErrFrameTooLarge},
		{"lz4/short raw", transport.CodecLZ4, lz, len(in) - 1, 1 << 20, transport.ErrCorruptFrame},
		{"lz4/long raw", transport.CodecLZ4, lz, len(in) + 1, 1 << 20, transport.ErrCorruptFrame},
		{"lz4/truncated", transport.CodecLZ4, lz[:len(lz)/2], len(in), 1 << 20, transport.ErrCorruptFrame},
		{"lz4/garbage", transport.CodecLZ4, garbage, 4096, 1 << 20, transport.ErrCorruptFrame},
		// A 4-byte body claiming 1 TiB: refused before allocating.
		{"lz4/absurd raw", transport.CodecLZ4, garbage[:4], 1 << 40, 1 << 50, transport.ErrCorruptFrame},
		{"snappy/absurd raw", transport.CodecSnappy, garbage[:4], 1 << 40, 1 << 50, transport.ErrCorruptFrame},
		{"snappy/short raw", transport.CodecSnappy, sn, len(in) - 1, 1 << 20, transport.ErrCorruptFrame},
		{"snappy/truncated", transport.CodecSnappy, sn[:len(sn)/2], len(in), 1 << 20, transport.ErrCorruptFrame},
		{"snappy/garbage", transport.CodecSnappy, garbage, 200, 1 << 20, transport.ErrCorruptFrame},
		{"unknown codec", transport.Codec(9), in, len(in), 1 << 20, transport.ErrCorruptFrame},
		{"negative raw", transport.CodecNone, nil, -1, 1 << 20, transport.ErrCorruptFrame},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := transport.Decompress(nil, tc.c, tc.src, tc.rawLen, tc.maxLen)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := transport.Compress(nil, transport.Codec(9), in); err == nil {
		t.Error("Compress with an unknown codec succeeded")
	}
}

func TestCodec_String(t *testing.T) {
	for c, want := range map[transport.Codec]string{
		transport.CodecNone: "none", transport.CodecLZ4: "lz4", transport.CodecSnappy: "snappy", 7: "codec(7)",
	} {
		if got := c.String(); got != want {
			t.Errorf("Codec(%d).String() = %q, want %q", c, got, want)
		}
	}
}

func TestPolicies(t *testing.T) {
	small, big := make([]byte, 99), make([]byte, 100)
	tests := []struct {
		name string
		p    transport.CompressionPolicy
		msg  []byte
		want transport.Codec
	}{
		{"never", transport.Never, big, transport.CodecNone},
		{"always lz4", transport.Always(transport.CodecLZ4), small, transport.CodecLZ4},
		{"always snappy", transport.Always(transport.CodecSnappy), big, transport.CodecSnappy},
		{"above/below", transport.AboveSize(100, transport.CodecLZ4), small, transport.CodecNone},
		{"above/at", transport.AboveSize(100, transport.CodecLZ4), big, transport.CodecLZ4},
		{"func", transport.PolicyFunc(func(to transport.NodeID, _ []byte) transport.Codec {
			if to == "n1" {
				return transport.CodecSnappy
			}
			return transport.CodecNone
		}), small, transport.CodecSnappy},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Choose("n1", tc.msg); got != tc.want {
				t.Fatalf("Choose = %v, want %v", got, tc.want)
			}
		})
	}
}

// observingPolicy records what transports report through
// CompressionObserver.
type observingPolicy struct {
	transport.CompressionPolicy
	obs chan observation
}

type observation struct {
	to        transport.NodeID
	c         transport.Codec
	raw, wire int
	elapsed   time.Duration
}

func (p *observingPolicy) Observe(to transport.NodeID, c transport.Codec, raw, wire int, elapsed time.Duration) {
	select {
	case p.obs <- observation{to, c, raw, wire, elapsed}:
	default:
	}
}
