package codecprof

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/falconml/falcon/transport"
)

const tol = 1e-9

func TestGenerate_DeterministicAndSized(t *testing.T) {
	for _, k := range Classes() {
		t.Run(k.String(), func(t *testing.T) {
			for _, n := range []int{0, 1, 7, 1001} {
				a := Generate(k, n, rand.New(rand.NewPCG(3, 4)))
				b := Generate(k, n, rand.New(rand.NewPCG(3, 4)))
				if len(a) != n {
					t.Fatalf("len = %d, want %d", len(a), n)
				}
				if !bytes.Equal(a, b) {
					t.Fatalf("same seed gave different bytes")
				}
			}
		})
	}
}

func TestGenerate_SparseZeros(t *testing.T) {
	b := Generate(SparseGrad, 4<<16, rand.New(rand.NewPCG(1, 1)))
	zeros := 0
	for i := 0; i < len(b); i += 4 {
		if b[i]|b[i+1]|b[i+2]|b[i+3] == 0 {
			zeros++
		}
	}
	frac := float64(zeros) / float64(len(b)/4)
	// 65536 Bernoulli(0.9) draws: std ≈ 0.0012, so 0.01 is > 8 sigma.
	if math.Abs(frac-SparseZeroFraction) > 0.01 {
		t.Fatalf("zero fraction = %.4f, want ≈ %.2f", frac, SparseZeroFraction)
	}
}

func TestParseMix(t *testing.T) {
	tests := []struct {
		in      string
		want    Mix
		wantErr error
	}{
		{"shuffle", ShuffleMix(), nil},
		{"text", Mix{Text: 1}, nil},
		{"float32=1, text=3", Mix{Float32Grad: 1, Text: 3}, nil},
		{"bogus", nil, ErrUnknownClass},
		{"text=-1", nil, ErrBadMix},
		{"text=0", nil, ErrBadMix},
		{"text", Mix{Text: 1}, nil},
		{"text=x", nil, ErrBadMix},
		{"text:1,float32=2", nil, ErrBadMix},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMix(tc.in)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && got.String() != tc.want.String() {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestForMix_Formula(t *testing.T) {
	ps := Profiles{Entries: []Profile{
		{Codec: transport.CodecLZ4, Class: Text, CompressBps: 100, DecompressBps: 400, Ratio: 0.2},
		{Codec: transport.CodecLZ4, Class: Random, CompressBps: 300, DecompressBps: 400, Ratio: 1.0},
	}}
	p, err := ps.ForMix(transport.CodecLZ4, Mix{Text: 1, Random: 3})
	if err != nil {
		t.Fatal(err)
	}
	// ρ = 0.25·0.2 + 0.75·1 = 0.8; 1/s = 0.25/100 + 0.75/300 = 0.005 → s = 200.
	if math.Abs(p.Ratio-0.8) > tol || math.Abs(p.CompressBps-200) > tol || math.Abs(p.DecompressBps-400) > tol {
		t.Fatalf("got %+v, want ρ=0.8 s=200 u=400", p)
	}
	if _, err := ps.ForMix(transport.CodecSnappy, Mix{Text: 1}); !errors.Is(err, ErrNoProfile) {
		t.Fatalf("missing codec: err = %v, want ErrNoProfile", err)
	}
}

func TestDefaults_Complete(t *testing.T) {
	ps := Defaults()
	for _, c := range []transport.Codec{transport.CodecLZ4, transport.CodecSnappy} {
		for _, k := range Classes() {
			p, ok := ps.Lookup(c, k)
			if !ok {
				t.Fatalf("no default for %s/%s", c, k)
			}
			if p.CompressBps <= 0 || p.DecompressBps <= 0 || p.Ratio <= 0 {
				t.Fatalf("bad default %v", p)
			}
		}
	}
}

func TestBest(t *testing.T) {
	ps := Defaults()
	// Text over 1 Gbit/s: compressing beats raw.
	if _, ok, err := ps.Best(Only(Text), 125e6); err != nil || !ok {
		t.Fatalf("text at 1 Gbit/s: ok=%v err=%v, want a codec", ok, err)
	}
	// Random data never pays: ratio ≥ 1.
	if p, ok, err := ps.Best(Only(Random), 125e6); err != nil || ok {
		t.Fatalf("random: got %v ok=%v err=%v, want raw", p, ok, err)
	}
}

// TestCalibrate_Small runs a tiny calibration: it checks that ratios match
// the data (sparse and text shrink, random does not), not speeds, which
// depend on the machine.
func TestCalibrate_Small(t *testing.T) {
	cfg := CalibrateConfig{Size: 256 << 10, Block: 32 << 10, MinDuration: time.Millisecond, Repeats: 1,
		Classes: []Class{SparseGrad, Text, Random}}
	ps, err := Calibrate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps.Entries) != 6 {
		t.Fatalf("got %d entries, want 6", len(ps.Entries))
	}
	for _, p := range ps.Entries {
		if p.CompressBps <= 0 || p.DecompressBps <= 0 {
			t.Fatalf("non-positive speed %v", p)
		}
		switch p.Class {
		case SparseGrad, Text:
			if p.Ratio > 0.6 {
				t.Errorf("%v: ratio %.3f, want < 0.6", p, p.Ratio)
			}
		case Random:
			if p.Ratio < 0.99 {
				t.Errorf("%v: ratio %.3f, want ≈ 1", p, p.Ratio)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Calibrate(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: err = %v", err)
	}
	if _, err := Calibrate(context.Background(), CalibrateConfig{Size: -1}); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("bad config: err = %v", err)
	}
}

// TestForMix_Deterministic: the same mix gives bit-identical profiles on
// every call. The weights were once summed in map order, so the profile
// (and every replay built on it) changed in the last bits from call to
// call; a cost-ladder run of FVDF took 562 or 568 Schedule calls.
func TestForMix_Deterministic(t *testing.T) {
	ps := Defaults()
	for _, m := range []Mix{ShuffleMix(), {Float32Grad: 0.1, SparseGrad: 0.7, Text: 0.3, Random: 0.9, TPCHRows: 0.13}} {
		first, err := ps.ForMix(transport.CodecLZ4, m)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			p, err := ps.ForMix(transport.CodecLZ4, m)
			if err != nil {
				t.Fatal(err)
			}
			if p != first {
				t.Fatalf("call %d: %+v, first call %+v", i, p, first)
			}
		}
	}
}
