package fvdf

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/falconml/falcon/fvdf/codecprof"
	"github.com/falconml/falcon/transport"
)

func TestPolicy_Choose(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	text := codecprof.Generate(codecprof.Text, 1<<20, rng)
	tests := []struct {
		name      string
		bandwidth float64
		mix       codecprof.Mix
		wantRaw   bool
	}{
		// Text shrinks to ~0.36 and lz4 compresses at ~600 MB/s per core:
		// on 1 Gbit/s (125 MB/s) compression disposes ~2.8x faster.
		{"slow link, compressible", 125e6, codecprof.Only(codecprof.Text), false},
		// At 100 Gbit/s (12.5 GB/s) one core cannot keep up.
		{"fast link, compressible", 12.5e9, codecprof.Only(codecprof.Text), true},
		// Random bytes do not shrink: never worth it.
		{"slow link, incompressible", 125e6, codecprof.Only(codecprof.Random), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPolicy(PolicyConfig{Bandwidth: tc.bandwidth, Mix: tc.mix, ProbeEvery: -1})
			if err != nil {
				t.Fatal(err)
			}
			got := p.Choose("n1", text)
			if (got == transport.CodecNone) != tc.wantRaw {
				t.Fatalf("Choose = %v, want raw=%v", got, tc.wantRaw)
			}
		})
	}
}

// TestPolicy_LearnsIncompressible starts from a text prior (compress) and
// is told by the transport that the data towards n1 does not shrink; it must
// switch to raw for n1 and keep compressing towards n2.
func TestPolicy_LearnsIncompressible(t *testing.T) {
	p, err := NewPolicy(PolicyConfig{Bandwidth: 125e6, Mix: codecprof.Only(codecprof.Text), ProbeEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 64<<10)
	if c := p.Choose("n1", msg); c == transport.CodecNone {
		t.Fatalf("prior: got raw, want a codec")
	}
	for i := 0; i < 20; i++ {
		for _, c := range []transport.Codec{transport.CodecLZ4, transport.CodecSnappy} {
			p.Observe("n1", c, len(msg), len(msg)+200, 50*time.Microsecond)
		}
	}
	if c := p.Choose("n1", msg); c != transport.CodecNone {
		t.Fatalf("after incompressible outcomes: got %v, want raw", c)
	}
	if c := p.Choose("n2", msg); c == transport.CodecNone {
		t.Fatalf("other destination: got raw, want a codec")
	}
	// A slow compressor (10 MB/s) is also learned: slower than a 125 MB/s link.
	for i := 0; i < 20; i++ {
		p.Observe("n2", transport.CodecLZ4, len(msg), len(msg)/3, time.Duration(float64(len(msg))/10e6*1e9))
		p.Observe("n2", transport.CodecSnappy, len(msg), len(msg)/3, time.Duration(float64(len(msg))/10e6*1e9))
	}
	if c := p.Choose("n2", msg); c != transport.CodecNone {
		t.Fatalf("slow codec: got %v, want raw", c)
	}
}

func TestPolicy_ProbesAfterRawStreak(t *testing.T) {
	p, err := NewPolicy(PolicyConfig{Bandwidth: 125e6, Mix: codecprof.Only(codecprof.Random), ProbeEvery: 4})
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 8<<10)
	var got []transport.Codec
	for i := 0; i < 10; i++ {
		got = append(got, p.Choose("n", msg))
	}
	// raw ×4, then a probe on the 5th, raw ×4, probe on the 10th.
	for i, c := range got {
		probe := i == 4 || i == 9
		if (c != transport.CodecNone) != probe {
			t.Fatalf("decision %d = %v, want probe=%v (all: %v)", i, c, probe, got)
		}
	}
	if c := p.Choose("n", msg[:100]); c != transport.CodecNone {
		t.Fatalf("tiny message: got %v, want raw", c)
	}
}

func TestPolicyConfig_Validate(t *testing.T) {
	bad := []PolicyConfig{
		{Bandwidth: -1},
		{Codecs: []transport.Codec{transport.CodecNone}},
		{Predictor: "nope"},
		{Overhead: -time.Second},
		{Bandwidths: map[transport.NodeID]float64{"x": 0}},
	}
	for i, c := range bad {
		if _, err := NewPolicy(c); !errors.Is(err, ErrConfig) {
			t.Errorf("case %d: err = %v, want ErrConfig", i, err)
		}
	}
}

func TestDisposalTimes(t *testing.T) {
	const tol = 1e-9
	// v=100, s=10, u=50, ρ=0.5, r=20, one core each: stages 10, 2.5, 2.
	if got := PipelinedTime(100, 10, 50, 0.5, 20, 1, 1); got != 10 {
		t.Fatalf("pipelined = %v, want 10", got)
	}
	if got := SequentialTime(100, 10, 50, 0.5, 20, 1, 1); got-14.5 > tol || 14.5-got > tol {
		t.Fatalf("sequential = %v, want 14.5", got)
	}
	// 10 chunks of 10: first chunk 1+0.25+0.2, then 9 more at the 1 s
	// bottleneck: 1.45 + 9 = 10.45.
	if got := ChunkedTime(100, 10, 10, 50, 0.5, 20, 1, 1); got-10.45 > tol || 10.45-got > tol {
		t.Fatalf("chunked = %v, want 10.45", got)
	}
	for _, b := range []float64{0, 1, 3, 7, 50, 100, 1000} {
		c := ChunkedTime(100, b, 10, 50, 0.5, 20, 2, 1)
		if c < PipelinedTime(100, 10, 50, 0.5, 20, 2, 1)-tol || c > SequentialTime(100, 10, 50, 0.5, 20, 2, 1)+tol {
			t.Fatalf("chunk %v: %v outside [pipelined, sequential]", b, c)
		}
	}
}
