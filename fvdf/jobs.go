package fvdf

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/falconml/falcon/coflow"
)

// JobConfig is the job model around each coflow (ours: Swallow reports JCT
// but its job model is not public). A job is a map stage that ends when its
// coflow arrives, the shuffle (the coflow) and a reduce stage:
//
//	map    = MapBase    + MapPerMiB    · (coflow MiB / #mappers)  · ε_m
//	reduce = ReduceBase + ReducePerMiB · (coflow MiB / #reducers) · ε_r
//	JCT    = map + CCT + reduce
//
// with ε log-normal noise of σ = Noise (median 1), drawn from a seeded
// source in coflow order, so both schedulers see the same stages.
type JobConfig struct {
	// MapBase and ReduceBase are the fixed cost of a stage (task launch).
	// Zero means 1 s.
	MapBase, ReduceBase time.Duration
	// MapPerMiB and ReducePerMiB are the compute time per MiB one task
	// processes. Zero means 10 ms (≈ 100 MiB/s per task; ours).
	MapPerMiB, ReducePerMiB time.Duration
	// Noise is σ of the log-normal noise. Zero means 0.3; negative none.
	Noise float64
	// Seed seeds the noise.
	Seed uint64
}

// DefaultJobConfig returns the defaults.
func DefaultJobConfig() JobConfig {
	return JobConfig{MapBase: time.Second, ReduceBase: time.Second, MapPerMiB: 10 * time.Millisecond, ReducePerMiB: 10 * time.Millisecond, Noise: 0.3, Seed: 1}
}

// Validate fills zero fields with defaults and reports invalid ones.
func (c *JobConfig) Validate() error {
	d := DefaultJobConfig()
	if c.MapBase == 0 {
		c.MapBase = d.MapBase
	}
	if c.ReduceBase == 0 {
		c.ReduceBase = d.ReduceBase
	}
	if c.MapPerMiB == 0 {
		c.MapPerMiB = d.MapPerMiB
	}
	if c.ReducePerMiB == 0 {
		c.ReducePerMiB = d.ReducePerMiB
	}
	if c.Noise == 0 {
		c.Noise = d.Noise
	}
	if c.MapBase < 0 || c.ReduceBase < 0 || c.MapPerMiB < 0 || c.ReducePerMiB < 0 {
		return fmt.Errorf("%w: negative job durations", ErrConfig)
	}
	return nil
}

// Jobs builds the job of every coflow with cfg.
func Jobs(cfs []coflow.Coflow, cfg JobConfig) ([]coflow.Job, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6a6f6273))
	noise := func() float64 {
		if cfg.Noise <= 0 {
			return 1
		}
		return math.Exp(cfg.Noise * rng.NormFloat64())
	}
	out := make([]coflow.Job, len(cfs))
	for i := range cfs {
		c := &cfs[i]
		src, dst := map[int]bool{}, map[int]bool{}
		for _, f := range c.Flows {
			src[f.Src], dst[f.Dst] = true, true
		}
		mib := c.TotalBytes() / coflow.MiB
		mp := float64(cfg.MapBase) + float64(cfg.MapPerMiB)*mib/float64(max(1, len(src)))*noise()
		rd := float64(cfg.ReduceBase) + float64(cfg.ReducePerMiB)*mib/float64(max(1, len(dst)))*noise()
		out[i] = coflow.Job{Coflow: *c, MapDuration: time.Duration(mp), ReduceDuration: time.Duration(rd)}
	}
	return out, nil
}
