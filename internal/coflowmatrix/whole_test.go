package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/fvdf/codecprof"
	"github.com/falconml/falcon/transport"
)

func TestChunkSpeed(t *testing.T) {
	const s = 880e6
	want := 65536 / (65536/s + 20e-6)
	if got := ChunkSpeed(s, 20*time.Microsecond); math.Abs(got-want) > 1e-6*want {
		t.Fatalf("ChunkSpeed(880 MB/s, 20 µs) = %v, want %v", got, want)
	}
	if got := ChunkSpeed(s, 0); got != s {
		t.Fatalf("ChunkSpeed(s, 0) = %v, want s", got)
	}
}

// wholeMatrix is a matrix on a small synthetic trace under the whole-core
// model with the given per-chunk overhead (negative: fractional cores).
func wholeMatrix(t *testing.T, over time.Duration, settings ...int) *matrix {
	t.Helper()
	cfg := coflow.DefaultSynthConfig()
	cfg.Coflows, cfg.Ports, cfg.MaxWidth = 40, 20, 12
	cfg.MeanInterArrival = 200 * time.Millisecond
	tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(11, 5)))
	if err != nil {
		t.Fatal(err)
	}
	o := options{seeds: 1, only: regexp.MustCompile(`^(fvdf/fvdf|sebf-order/fvdf|sebf/lz4|sebf-rho/lz4|sebf/write-lz4)/varys/`), protocol: "full",
		settings: settings, resched: []string{"varys"}, coalesce: CoalesceWindow, wholeCores: over >= 0, chunkOverhead: max(0, over)}
	m, err := newMatrix(tr, o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestWholeCores_Matrix: under -whole-cores every compressing cell
// reserves whole cores only, and compresses at (40 G, 4) (3 free cores a
// port); at (10 G, 1) (0.75 free core) no flow compresses on the wire.
// Fails if the whole-core option does not reach a scheduler.
func TestWholeCores_Matrix(t *testing.T) {
	for _, tc := range []struct {
		setting    int
		compresses bool
	}{{3, true}, {1, false}} {
		m := wholeMatrix(t, ChunkOverhead, tc.setting)
		if len(m.cells) != 5 {
			t.Fatalf("%d cells, want 5", len(m.cells))
		}
		for _, c := range m.cells {
			compressed, fractional := 0, 0
			m.check = func(_ time.Duration, _ *coflow.State, al []coflow.Allocation) error {
				for _, a := range al {
					if a.Codec == coflow.Raw || !(a.Rate > 0) {
						continue
					}
					compressed++
					if a.SendCores != math.Trunc(a.SendCores) || a.RecvCores != math.Trunc(a.RecvCores) {
						fractional++
					}
				}
				return nil
			}
			if _, err := m.runOne(c, m.work[0], 0, false); err != nil {
				t.Fatal(err)
			}
			if fractional > 0 {
				t.Errorf("%s: %d of %d compressed allocations with fractional cores", c.key(), fractional, compressed)
			}
			wire := c.Comp != "write-lz4"
			if wire && tc.compresses && compressed == 0 || (!wire || !tc.compresses) && compressed > 0 {
				t.Errorf("%s: %d compressed allocations", c.key(), compressed)
			}
		}
		m.check = nil
	}
}

// TestWholeCores_ChunkOverhead: the fabric's speeds carry the per-chunk
// overhead (every codec, every class, both ends), and the overhead
// changes the results of a compressing cell; fails if it is dropped.
func TestWholeCores_ChunkOverhead(t *testing.T) {
	ps := codecprof.Defaults()
	ref := map[time.Duration]float64{}
	for _, over := range []time.Duration{-1, 0, ChunkOverhead, 100 * time.Microsecond} {
		m := wholeMatrix(t, over, 3)
		fab, err := m.fabric(Settings[3])
		if err != nil {
			t.Fatal(err)
		}
		eff := max(0, over)
		for i, k := range m.classes {
			for j, cd := range []transport.Codec{transport.CodecLZ4, transport.CodecSnappy} {
				p, _ := ps.Lookup(cd, k)
				got := fab.Classes[i].Codecs[j]
				if got.CompressSpeed != ChunkSpeed(p.CompressBps, eff) || got.DecompressSpeed != ChunkSpeed(p.DecompressBps, eff) {
					t.Fatalf("overhead %v, %s/%s: speeds %v/%v, want ChunkSpeed of %v/%v", over, k, cd, got.CompressSpeed, got.DecompressSpeed, p.CompressBps, p.DecompressBps)
				}
			}
		}
		var c Cell
		for _, x := range m.cells {
			if x.Sched == "sebf" && x.Comp == "lz4" {
				c = x
			}
		}
		r, err := m.runOne(c, m.work[0], 0, false)
		if err != nil {
			t.Fatal(err)
		}
		var sum time.Duration
		for _, d := range r.cct {
			sum += d
		}
		ref[over] = sum.Seconds()
	}
	if ref[0] == ref[ChunkOverhead] || ref[ChunkOverhead] == ref[100*time.Microsecond] {
		t.Fatalf("total CCT by overhead %v: the overhead changes nothing", fmt.Sprint(ref))
	}
	m := wholeMatrix(t, -1, 3)
	m.o.fracOverhead, m.o.chunkOverhead = true, ChunkOverhead
	p, _ := ps.Lookup(transport.CodecLZ4, m.classes[0])
	if fab, _ := m.fabric(Settings[3]); fab.Classes[0].Codecs[0].CompressSpeed != ChunkSpeed(p.CompressBps, ChunkOverhead) {
		t.Fatalf("-fractional-overhead: lz4 speed %v carries no overhead", fab.Classes[0].Codecs[0].CompressSpeed)
	}
	if ref[-1] == ref[0] {
		t.Fatalf("total CCT fractional %v = whole cores %v: the rounding changes nothing", ref[-1], ref[0])
	}
}
