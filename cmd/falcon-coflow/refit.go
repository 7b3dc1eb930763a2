package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/fvdf/codecprof"
	"github.com/falconml/falcon/internal/testbed"
)

// liveRecord is one scheduler's live run as -live-json keeps it: enough to
// simulate it again under other calibration constants (-refit).
type liveRecord struct {
	Sched string
	// Skip is the slice's first coflow (arrival order); Ports, Bandwidth
	// (bytes/s the schedulers were told) and Cores the bed's.
	Skip, Ports      int
	Bandwidth, Cores float64
	Classes          []codecprof.Class
	// Profiles are the lz4 profiles the coordinator measured, one per class.
	Profiles []coflow.CodecProfile
	// Coflows carry the live arrivals (from the first).
	Coflows []coflow.Coflow
	LiveMS  []float64
	// Load is the load average (1/5/15 min) before the run.
	Load string
}

func (r *liveRecord) fabric() *coflow.Fabric {
	fab := testbed.Fabric(r.Ports, r.Classes, r.Bandwidth, r.Cores)
	for c := range fab.Classes {
		fab.Classes[c].Codecs[0] = r.Profiles[c]
	}
	if len(fab.Classes) == 0 {
		fab.Codecs[0] = r.Profiles[0]
	}
	return fab
}

func (r *liveRecord) simulate(cfg coflow.Config) ([]float64, error) {
	s, err := testbed.NewScheduler(r.Sched)
	if err != nil {
		return nil, err
	}
	sim, err := coflow.NewSim(cfg, r.fabric(), s)
	if err != nil {
		return nil, err
	}
	res, err := sim.Run(r.Coflows)
	if err != nil {
		return nil, err
	}
	var out []float64
	for _, c := range res.Coflows {
		out = append(out, c.CCT.Seconds()*1e3)
	}
	return out, nil
}

// readRecords reads -live-json's lines (gzip-compressed when path ends in
// .gz); a line is at most 64 MiB.
func readRecords(path string) ([]liveRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var in io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer z.Close()
		in = z
	}
	var out []liveRecord
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		var r liveRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if len(r.LiveMS) != len(r.Coflows) || len(r.Profiles) != len(r.Classes) || len(r.Classes) == 0 || r.Ports < 2 {
			return nil, fmt.Errorf("%s:%d: inconsistent record", path, n)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

func mean(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

func median(x []float64) float64 {
	y := slices.Clone(x)
	sort.Float64s(y)
	if n := len(y); n%2 == 1 {
		return y[n/2]
	} else {
		return (y[n/2-1] + y[n/2]) / 2
	}
}

// runRefit simulates every stored live run (-refit FILE, written by
// -live-json) without calibration and with the -sim-* constants, and
// prints the calibration table: per slice (fit when its skip is in
// -fit-skips, validation otherwise) and scheduler, the live average CCT,
// the simulated one before and after, their ratios and the per-coflow
// median of live/sim before and after.
func runRefit(o options, w io.Writer) error {
	recs, err := readRecords(o.refit)
	if err != nil {
		return err
	}
	fit := map[int]bool{}
	for _, s := range strings.Split(o.fitSkips, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		k, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("-fit-skips %q: %w", o.fitSkips, err)
		}
		fit[k] = true
	}
	after := coflow.DefaultConfig()
	after.WireEfficiency, after.CompletionDelay = o.live.wireEff, o.live.doneDelay
	after.FlowWindowBytes, after.ChunkRoundTrip = o.live.window, o.live.chunkRTT
	after.CodecCoreEfficiency = o.live.codecEff
	if err := after.Validate(); err != nil {
		return err
	}
	fmt.Fprintf(w, "calibration: WireEfficiency %g, CompletionDelay %v, FlowWindowBytes %g, ChunkRoundTrip %v, CodecCoreEfficiency %g\n\n",
		after.WireEfficiency, after.CompletionDelay, after.FlowWindowBytes, after.ChunkRoundTrip, after.CodecCoreEfficiency)
	fmt.Fprintln(w, "| slice | skip | scheduler | coflows | live avg ms | sim before ms | sim after ms | live/sim avg before | after | per-coflow median live/sim before | after | load before |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, kind := range []string{"fit", "validation"} {
		for _, r := range recs {
			if fit[r.Skip] != (kind == "fit") {
				continue
			}
			b, err := r.simulate(coflow.DefaultConfig())
			if err != nil {
				return err
			}
			a, err := r.simulate(after)
			if err != nil {
				return err
			}
			rb, ra := make([]float64, len(b)), make([]float64, len(a))
			for i := range b {
				rb[i], ra[i] = r.LiveMS[i]/b[i], r.LiveMS[i]/a[i]
			}
			l := mean(r.LiveMS)
			fmt.Fprintf(w, "| %s | %d | %s | %d | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %s |\n",
				kind, r.Skip, r.Sched, len(r.Coflows), l, mean(b), mean(a), l/mean(b), l/mean(a), median(rb), median(ra), r.Load)
		}
	}
	return nil
}
