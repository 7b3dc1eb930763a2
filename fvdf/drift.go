package fvdf

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/falconml/falcon/predictor"
)

// Drift replayed from measurements: the codec speeds predictor/record
// measured while its data changed class and background tasks started and
// stopped (predictor/testdata/series.csv), turned into a series of speed
// factors the simulator's true speeds follow ([TrueSpeeds]) and the
// predictors learn from.

// RecordedFactors returns one speed factor per record of codec (in
// recording order): the record's wall-clock compression speed (raw bytes
// over compress wall time, which includes the time the measuring thread
// lost to the background tasks) divided by the median wall-clock speed of
// that codec's records of the same data class. The class's own speed is
// the fabric's per-class profile's business; the factor carries what the
// class does not explain: contention, and the variation within a class.
// Records without a positive wall time are skipped.
//
// With window > 1, factor i is instead the harmonic mean of the per-record
// factors i−window+1 … i (fewer at the start): the relative throughput
// of those chunks compressed back to back. A single chunk's wall time
// includes whole scheduler time slices lost to a background thread (a
// 0.3 ms chunk descheduled for 10 ms measures 3 % of its speed); held for
// a simulated step much longer than the recording's ~3 ms per chunk, one
// such chunk would stand for a whole step at 3 %, while the throughput
// over a window is what a codec worker sustains. window ≤ 1 means none.
func RecordedFactors(recs []predictor.Record, codec string, window int) ([]float64, error) {
	byClass := map[int][]float64{}
	type rs struct {
		class int
		speed float64
	}
	var seq []rs
	for _, r := range recs {
		if r.Codec != codec || r.CompressWallNs <= 0 || r.RawBytes <= 0 {
			continue
		}
		v := float64(r.RawBytes) / (float64(r.CompressWallNs) / 1e9)
		byClass[r.Class] = append(byClass[r.Class], v)
		seq = append(seq, rs{r.Class, v})
	}
	if len(seq) == 0 {
		return nil, fmt.Errorf("%w: no %s records with a wall time", ErrBadInput, codec)
	}
	med := map[int]float64{}
	for k, v := range byClass {
		v = slices.Clone(v)
		slices.Sort(v)
		med[k] = v[len(v)/2]
	}
	out := make([]float64, len(seq))
	for i, x := range seq {
		out[i] = x.speed / med[x.class]
	}
	if window <= 1 {
		return out, nil
	}
	sm := make([]float64, len(out))
	var inv float64 // Σ 1/f over the window
	for i, f := range out {
		inv += 1 / f
		if i >= window {
			inv -= 1 / out[i-window]
		}
		sm[i] = float64(min(i+1, window)) / inv
	}
	return sm, nil
}

// NewReplayedContention returns a Contention whose factor at step i
// (steps of step, 1 s when zero) is factors[(start+i) mod len(factors)]:
// a recorded series replayed from start, cycling. factors must be
// non-empty, finite and positive.
func NewReplayedContention(factors []float64, step time.Duration, start int) (*Contention, error) {
	if len(factors) == 0 || step < 0 || start < 0 {
		return nil, fmt.Errorf("%w: replayed contention: %d factors, step %v, start %d", ErrConfig, len(factors), step, start)
	}
	for _, f := range factors {
		if !(f > 0) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%w: replayed contention factor %v", ErrConfig, f)
		}
	}
	if step == 0 {
		step = time.Second
	}
	cfg := DefaultContentionConfig()
	cfg.Step = step
	return &Contention{cfg: cfg, replay: slices.Clone(factors), start: start % len(factors)}, nil
}
