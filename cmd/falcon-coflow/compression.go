package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/fvdf"
	"github.com/falconml/falcon/fvdf/codecprof"
)

// compressionOptions are the flags of the compression-aware replay: they
// run the schedulers through fvdf.Run, whose fabric has per-machine cores,
// codec profiles for a data mix and a codec-speed predictor.
type compressionOptions struct {
	bandwidthGbps float64 // 0: the -port-bps capacity
	cores         float64
	data          string
	predictor     string
	resched       string        // "": each scheduler's own rule
	coalesce      time.Duration // -resched every: coalescing window
}

// wantsCompression reports whether a run needs the compression-aware
// replay: a scheduler only fvdf knows, or one of its flags set.
func wantsCompression(names []string, c compressionOptions, set map[string]bool) bool {
	for _, f := range []string{"bandwidth", "cores", "data", "predictor", "resched"} {
		if set[f] {
			return true
		}
	}
	for _, n := range names {
		if slices.Contains(fvdf.SchedulerNames(), n) && !slices.Contains(coflow.SchedulerNames(), n) {
			return true
		}
	}
	return false
}

// runCompression replays the trace under each scheduler with compression
// in the model and prints, per scheduler,
//
//	sched=<name> mode=exact coflows=<n> avg_cct_ms=<f> p95_cct_ms=<f> avg_jct_ms=<f> wire_bytes=<n> raw_bytes=<n> max_wait_ms=<f> wall_ms=<f>
func runCompression(tr *coflow.Trace, names []string, o options, w io.Writer) error {
	if o.mode != "exact" {
		return fmt.Errorf("compression-aware replay (-sched fvdf, -bandwidth, -cores, -data, -predictor, -resched) needs -mode exact")
	}
	if r := o.comp.resched; r != "" && !slices.Contains(fvdf.ReschedulingRules(), r) {
		return fmt.Errorf("-resched %q: want one of %s", r, strings.Join(fvdf.ReschedulingRules(), ", "))
	}
	if o.comp.coalesce < 0 {
		return fmt.Errorf("-coalesce %v must not be negative", o.comp.coalesce)
	}
	for _, n := range names {
		if !slices.Contains(fvdf.SchedulerNames(), n) {
			return fmt.Errorf("scheduler %q is not available with compression; use one of %s", n, strings.Join(fvdf.SchedulerNames(), ", "))
		}
	}
	mix, err := codecprof.ParseMix(o.comp.data)
	if err != nil {
		return err
	}
	cfs, err := tr.ToCoflows()
	if err != nil {
		return err
	}
	bw := o.portBits / 8
	if o.comp.bandwidthGbps > 0 {
		bw = o.comp.bandwidthGbps * 125e6
	}
	cfg := fvdf.ReplayConfig{Bandwidth: bw, Cores: o.comp.cores, Mix: mix, Predictor: o.comp.predictor, Seed: o.seed, Rescheduling: o.comp.resched}
	cfg.Jobs.Seed = o.seed
	rule := o.comp.resched
	if rule == "" {
		rule = "default"
	}
	if rule == fvdf.ReschedEvery {
		sc := coflow.DefaultConfig()
		sc.CoalesceFlowEvents = o.comp.coalesce
		cfg.Sim = &sc
		rule += fmt.Sprintf(" (coalesced %v)", o.comp.coalesce)
	}
	fmt.Fprintf(w, "compression-aware replay: %d ports, %d coflows, %.4g Gbit/s ports, %g cores, data %s, predictor %s, rescheduling %s\n",
		tr.Ports, len(cfs), bw*8/1e9, o.comp.cores, o.comp.data, o.comp.predictor, rule)
	for _, n := range names {
		start := time.Now()
		m, err := fvdf.Run(n, cfs, tr.Ports, cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		wall := time.Since(start)
		fmt.Fprintf(w, "sched=%s mode=exact coflows=%d avg_cct_ms=%.3f p95_cct_ms=%.3f avg_jct_ms=%.3f wire_bytes=%.0f raw_bytes=%.0f max_wait_ms=%.3f wall_ms=%.1f\n",
			m.Sched, m.Coflows, ms(m.AvgCCT), ms(m.P95CCT), ms(m.AvgJCT), m.WireBytes, m.RawBytes, ms(m.MaxWait), float64(wall)/float64(time.Millisecond))
	}
	return nil
}
