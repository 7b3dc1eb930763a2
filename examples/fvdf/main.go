// Command fvdf replays a coflow trace under FVDF (Swallow) and SEBF (Varys)
// in package coflow's exact simulator and prints one line per scheduler:
//
//	sched=<name> mode=exact coflows=<n> avg_cct_ms=<f> p95_cct_ms=<f> avg_jct_ms=<f> wire_bytes=<n> raw_bytes=<n> max_wait_ms=<f> wall_ms=<f>
//
// Usage:
//
//	go run ./examples/fvdf -trace FB2010-1Hr-150-0.txt -bandwidth 1 -cores 4 -data shuffle -predictor ewma
//	go run ./examples/fvdf -synth 526 -sweep          # bandwidth × cores and per-class sweeps
//	go run ./examples/fvdf -calibrate                 # measure codecs here, print Go source
//
// -bandwidth is in Gbit/s per port; -data is a codecprof mix ("shuffle",
// a class name, or class=weight,...); -predictor is oracle, last, ewma, ar,
// lstm or gru.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/fvdf"
	"github.com/falconml/falcon/fvdf/codecprof"
)

func main() {
	var (
		calibrate  = flag.Bool("calibrate", false, "measure lz4/snappy on this machine and print the profiles as Go source")
		tracePath  = flag.String("trace", "", "coflow-benchmark trace file (empty: synthetic, see -synth)")
		synthN     = flag.Int("synth", 526, "coflows of the synthetic trace when -trace is empty")
		ports      = flag.Int("ports", 150, "ports of the synthetic trace")
		seed       = flag.Uint64("seed", 1, "seed of the synthetic trace, the speed drift and the job model")
		scheds     = flag.String("sched", "fvdf,sebf", "comma-separated schedulers: "+strings.Join(fvdf.SchedulerNames(), ", "))
		bw         = flag.Float64("bandwidth", 1, "port bandwidth in Gbit/s (10^9 bit/s)")
		cores      = flag.Float64("cores", 4, "cores per machine usable by codecs")
		data       = flag.String("data", "shuffle", "data mix: shuffle, a class (float32, sparse, int8, text, random) or class=w,...")
		pred       = flag.String("predictor", "oracle", "codec-speed predictor: oracle, last, ewma, ar, lstm, gru")
		static     = flag.Bool("static", false, "constant true codec speeds (no contention drift)")
		sweep      = flag.Bool("sweep", false, "sweep bandwidth 1,10,40 × cores 1,4,16 and each data class alone")
		sequential = flag.Bool("sequential", false, "sequential (non-pipelined) compression stages in the simulator")
		noDerate   = flag.Bool("noderate", false, "FVDF plans with predicted codec speeds as they are (no derating by recent error)")
		noHeadroom = flag.Bool("noheadroom", false, "FVDF does not hand leftover cores to compressed flows")
		whole      = flag.Bool("wholecores", false, "FVDF reserves whole cores per compressed flow")
		cpuprofile = flag.String("cpuprofile", "", "write a CPU profile to this file")
	)
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	if *calibrate {
		ps, err := codecprof.Calibrate(context.Background(), codecprof.DefaultCalibrateConfig())
		if err != nil {
			fail(err)
		}
		for _, p := range ps.Entries {
			fmt.Fprintln(os.Stderr, p)
		}
		fmt.Print(codecprof.GoSource(ps))
		return
	}
	cfs, np, err := load(*tracePath, *synthN, *ports, *seed)
	if err != nil {
		fail(err)
	}
	mix, err := codecprof.ParseMix(*data)
	if err != nil {
		fail(err)
	}
	base := fvdf.ReplayConfig{Bandwidth: *bw * 125e6, Cores: *cores, Mix: mix, Predictor: *pred, Static: *static, Seed: *seed}
	base.Jobs.Seed = *seed
	base.FVDF.WholeCores = *whole
	base.FVDF.NoCoreHeadroom = *noHeadroom
	base.FVDF.NoDerate = *noDerate
	if *sequential {
		sc := coflow.Config{Pipelining: false}
		base.Sim = &sc
	}
	names := strings.Split(*scheds, ",")
	if !*sweep {
		run(cfs, np, names, base, "")
		return
	}
	for _, b := range []float64{1, 10, 40} {
		for _, c := range []float64{1, 4, 16} {
			cfg := base
			cfg.Bandwidth, cfg.Cores = b*125e6, c
			run(cfs, np, names, cfg, fmt.Sprintf("bandwidth_gbps=%g cores=%g data=%s", b, c, *data))
		}
	}
	for _, k := range codecprof.Classes() {
		cfg := base
		cfg.Mix = codecprof.Only(k)
		run(cfs, np, names, cfg, fmt.Sprintf("bandwidth_gbps=%g cores=%g data=%s", *bw, *cores, k))
	}
}

func run(cfs []coflow.Coflow, ports int, names []string, cfg fvdf.ReplayConfig, label string) {
	var ms []fvdf.Metrics
	for _, n := range names {
		start := time.Now()
		m, err := fvdf.Run(strings.TrimSpace(n), cfs, ports, cfg)
		if err != nil {
			fail(err)
		}
		wall := time.Since(start)
		ms = append(ms, m)
		if label != "" {
			fmt.Print(label, " ")
		}
		fmt.Printf("sched=%s mode=exact coflows=%d avg_cct_ms=%.3f p95_cct_ms=%.3f avg_jct_ms=%.3f wire_bytes=%.0f raw_bytes=%.0f max_wait_ms=%.3f wall_ms=%.1f\n",
			m.Sched, m.Coflows, ms3(m.AvgCCT), ms3(m.P95CCT), ms3(m.AvgJCT), m.WireBytes, m.RawBytes, ms3(m.MaxWait), float64(wall.Microseconds())/1000)
	}
	if len(ms) >= 2 {
		a, b := ms[0], ms[1]
		if label != "" {
			fmt.Print(label, " ")
		}
		fmt.Printf("ratio %s/%s: cct=%.3f jct=%.3f p95=%.3f traffic_reduction=%.2f%% cpu_s=%.0f\n", b.Sched, a.Sched,
			float64(b.AvgCCT)/float64(a.AvgCCT), float64(b.AvgJCT)/float64(a.AvgJCT), float64(b.P95CCT)/float64(a.P95CCT),
			100*a.TrafficReduction(), a.CPUSeconds)
	}
}

func ms3(d time.Duration) float64 { return float64(d) / 1e6 }

func load(path string, n, ports int, seed uint64) ([]coflow.Coflow, int, error) {
	var tr *coflow.Trace
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, 0, err
		}
		defer f.Close()
		if tr, err = coflow.ReadTrace(f); err != nil {
			return nil, 0, err
		}
	} else {
		cfg := coflow.DefaultSynthConfig()
		cfg.Coflows, cfg.Ports = n, ports
		var err error
		if tr, err = coflow.Synthetic(cfg, rand.New(rand.NewPCG(seed, 0))); err != nil {
			return nil, 0, err
		}
	}
	cfs, err := tr.ToCoflows()
	return cfs, tr.Ports, err
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fvdf:", err)
	os.Exit(1)
}
