package testbed

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/fvdf"
	"github.com/falconml/falcon/fvdf/codecprof"
	"github.com/falconml/falcon/transport"
)

// NewScheduler builds the scheduler called name for the bed: a name of
// coflow.NewScheduler ("sebf", "dclas", "fifo", ...) as it is; "fvdf" as
// fvdf.New with its defaults, no starvation guard (runs of seconds: no
// 200 ms fair slice at the start) and the Nominal estimator (the profiles
// the coordinator writes into the fabric); any other name of
// fvdf.ParseBaseline with lz4 ("sebf+lz4", "dclas+lz4", "sincronia+lz4",
// "sebf+policy", "sebf-rho", "sebf-order+fvdf") by fvdf.NewBaseline under
// Varys' rule, the bed's fabric having lz4 as its only codec. Snappy and
// compress-at-write baselines are refused.
func NewScheduler(name string) (coflow.Scheduler, error) {
	if name == "fvdf" {
		fc := fvdf.DefaultConfig()
		fc.StarvationPeriod = -1
		return fvdf.New(fc, nil)
	}
	if slices.Contains(coflow.SchedulerNames(), name) {
		return coflow.NewScheduler(name)
	}
	b, err := fvdf.ParseBaseline(name)
	if err != nil {
		return nil, err
	}
	if strings.Contains(b.Comp, "snappy") || b.WriteCodec() != "" {
		return nil, fmt.Errorf("testbed: scheduler %q: the bed's fabric has lz4 only and no compress-at-write jobs", name)
	}
	fc := fvdf.DefaultConfig()
	fc.StarvationPeriod = -1
	return fvdf.NewBaseline(b, fvdf.BaselineConfig{Codecs: []transport.Codec{transport.CodecLZ4}, FVDF: fc})
}

// Fabric is the bed as a scheduler sees it: ports ports at bps bytes/s
// each way with cores cores each, and lz4 (codec 1) with codecprof's
// recorded profile of each class (one data class per entry of classes;
// with a single class, the fabric's own codec profile and no classes).
func Fabric(ports int, classes []codecprof.Class, bps, cores float64) *coflow.Fabric {
	fab := coflow.NewFabric(ports, bps).SetCores(cores)
	prof := func(c codecprof.Class) coflow.CodecProfile {
		p, _ := codecprof.Defaults().Lookup(transport.CodecLZ4, c)
		return coflow.CodecProfile{Name: "lz4", CompressSpeed: p.CompressBps, DecompressSpeed: p.DecompressBps, Ratio: math.Min(p.Ratio, 1)}
	}
	fab.Codecs = []coflow.CodecProfile{prof(classes[0])}
	if len(classes) > 1 {
		for _, c := range classes {
			fab.Classes = append(fab.Classes, coflow.DataClass{Name: c.String(), Codecs: []coflow.CodecProfile{prof(c)}})
		}
	}
	return fab
}
