package record

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/falconml/falcon/predictor"
	"github.com/golang/snappy"
	"go.uber.org/goleak"
)

func TestSchedule_DeterministicWithChanges(t *testing.T) {
	cfg := Config{Chunks: 1000, Seed: 3, MaxBusy: 2}
	a, b := Schedule(cfg), Schedule(cfg)
	classes, busy, changes := map[int]bool{}, map[int]bool{}, 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("step %d differs between two schedules with the same seed", i)
		}
		classes[a[i].Class], busy[a[i].Busy] = true, true
		if a[i].Busy < 0 || a[i].Busy > 2 || a[i].Class < 1 || a[i].Class > NumClasses {
			t.Fatalf("step %d out of range: %+v", i, a[i])
		}
		if i > 0 && a[i] != a[i-1] {
			changes++
		}
	}
	if len(classes) != NumClasses || len(busy) != 3 || changes < 10 {
		t.Fatalf("%d classes, %d contention levels, %d changes", len(classes), len(busy), changes)
	}
	if c := Schedule(Config{Chunks: 1000, Seed: 4, MaxBusy: 2}); c[500] == a[500] && c[100] == a[100] && c[900] == a[900] {
		t.Log("different seeds agree at three probes (possible but unlikely)")
	}
}

// TestGenerator_Compressibility checks that the data classes span the
// intended range: sparse and text compress well, float32 gradients, int8
// values and random bytes barely or not at all (LZ codecs find few repeated
// substrings in high-entropy bytes).
func TestGenerator_Compressibility(t *testing.T) {
	g := newGenerator(rand.New(rand.NewPCG(1, 2)))
	b := make([]byte, 64<<10)
	tests := []struct {
		class  int
		lo, hi float64 // bounds on the snappy ratio (ours, with margin)
	}{
		{ClassFloat32, 0.9, 1.01},
		{ClassSparse, 0.05, 0.3},
		{ClassInt8, 0.8, 1.01},
		{ClassText, 0.1, 0.5},
		{ClassRandom, 0.99, 1.01},
	}
	for _, tc := range tests {
		t.Run(ClassName(tc.class), func(t *testing.T) {
			g.fill(b, tc.class)
			r := float64(len(snappy.Encode(nil, b))) / float64(len(b))
			if r < tc.lo || r > tc.hi {
				t.Fatalf("snappy ratio %.3f not in [%v, %v]", r, tc.lo, tc.hi)
			}
		})
	}
}

func TestRecord_SmallRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	cfg := Config{Chunks: 30, ChunkSize: 4096, ClassRun: [2]int{3, 5}, ContentionRun: [2]int{4, 8}, MaxBusy: 1, Seed: 1}
	var recs []predictor.Record
	if err := Record(context.Background(), cfg, func(r predictor.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 60 {
		t.Fatalf("%d records, want 30 chunks × 2 codecs", len(recs))
	}
	sched := Schedule(cfg)
	for i, r := range recs {
		st := sched[i/2]
		if r.Class != st.Class || r.RawBytes != 4096 || r.CompressNs <= 0 || r.DecompressNs <= 0 || r.CompressedBytes <= 0 {
			t.Fatalf("record %d: %+v (schedule %+v)", i, r, st)
		}
		if i > 0 && r.At < recs[i-1].At {
			t.Fatalf("record %d: time went back", i)
		}
		if m := r.Measurement(); !(m.CompressSpeed > 0 && m.Ratio > 0) {
			t.Fatalf("record %d: measurement %+v", i, m)
		}
	}
}

func TestRecord_CancelAndSinkError(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := Config{Chunks: 1000, ChunkSize: 4096, MaxBusy: 1}
	n := 0
	err := Record(ctx, cfg, func(predictor.Record) error {
		if n++; n == 5 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	boom := errors.New("disk full")
	if err := Record(context.Background(), cfg, func(predictor.Record) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("error = %v, want the sink's error", err)
	}
}

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"chunks", Config{Chunks: -1}},
		{"chunk size", Config{ChunkSize: 10}},
		{"class run", Config{ClassRun: [2]int{5, 2}}},
		{"contention run", Config{ContentionRun: [2]int{0, 2}}},
		{"busy", Config{MaxBusy: -1}},
		{"codec", Config{Codecs: []string{"zstd"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); !errors.Is(err, ErrConfig) {
				t.Fatalf("Validate = %v, want ErrConfig", err)
			}
		})
	}
	if err := (&Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
}
