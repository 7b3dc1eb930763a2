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
func RecordedFactors(recs []predictor.Record, codec string) ([]float64, error) {
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
	return out, nil
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
