//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/fvdf/codecprof"
	"github.com/falconml/falcon/internal/testbed"
)

func runHelper() (bool, error) { return testbed.RunHelper() }

// calibEffs are the wire efficiencies every -live run also simulates (with
// no completion delay) for the per-coflow CSV, so constants can be fitted
// on stored runs: CompletionDelay only adds to each CCT.
var calibEffs = []float64{1, 0.95, 0.9, 0.85, 0.8}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], "/")
}

// liveSlice folds the slice of -trace after skip coflows onto the bed's
// ports, mb MB in all, each coflow's bytes one of codecprof's classes
// (seeded).
func liveSlice(o options, skip int, mb float64) ([]coflow.Coflow, []codecprof.Class, error) {
	l := o.live
	tr, _, err := loadTrace(o)
	if err != nil {
		return nil, nil, err
	}
	cfs, err := testbed.Slice(tr, testbed.SliceConfig{Ports: l.ports, Skip: skip, Coflows: l.coflows, TotalBytes: mb * 1e6, Span: l.span})
	if err != nil {
		return nil, nil, err
	}
	classes := []codecprof.Class{codecprof.TPCHRows, codecprof.SortRecords, codecprof.Text, codecprof.GoStdlib}
	if _, err := codecprof.GoSourceCorpus(); err != nil {
		classes = classes[:3] // no Go source tree here
	}
	if err := coflow.AssignClasses(cfs, slices.Repeat([]float64{1}, len(classes)), 28); err != nil {
		return nil, nil, err
	}
	return cfs, classes, nil
}

// runBed builds the bed, folds the slice onto it and replays it under each
// scheduler, live and simulated.
func runBed(o options, names []string, w io.Writer) error {
	l := o.live
	cfs, classes, err := liveSlice(o, l.skip, l.mb)
	if err != nil {
		return err
	}
	b, err := testbed.New(testbed.Config{Ports: l.ports, RateBits: []float64{l.linkBits}, Cores: []float64{l.cores}, Period: l.period, Shares: o.matrix.shares})
	if err != nil {
		return err
	}
	defer b.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var csv io.Writer
	if l.csv != "" {
		f, err := os.OpenFile(l.csv, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		if st, _ := f.Stat(); st != nil && st.Size() == 0 {
			fmt.Fprint(f, "sched,skip,index,trace_id,arrival_ms,raw_bytes,wire_bytes,live_cct_ms,sim_cct_ms")
			for _, e := range calibEffs {
				fmt.Fprintf(f, ",sim_eff%.2f_ms", e)
			}
			fmt.Fprintln(f, ",load")
		}
		csv = f
	}
	var raw float64
	for _, c := range cfs {
		for _, f := range c.Flows {
			raw += f.Bytes
		}
	}
	fmt.Fprintf(w, "# bed: %d ports at %.4g bit/s each way (schedulers told %.4g bit/s), %.3g-core quotas; slice: coflows %d..%d of %s (arrival order), ports folded p mod %d, %.0f bytes, arrivals over %v; classes %v\n",
		l.ports, l.linkBits, l.linkBits*l.payload, l.cores, l.skip, l.skip+l.coflows-1, o.trace, l.ports, raw, l.span, classes)
	simCfg := coflow.DefaultConfig()
	simCfg.WireEfficiency, simCfg.CompletionDelay = l.wireEff, l.doneDelay
	simCfg.FlowWindowBytes, simCfg.ChunkRoundTrip = l.window, l.chunkRTT
	simCfg.CodecCoreEfficiency = l.codecEff
	if err := simCfg.Validate(); err != nil {
		return err
	}
	var js *os.File
	if l.json != "" {
		if js, err = os.OpenFile(l.json, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			return err
		}
		defer js.Close()
	}
	for _, name := range names {
		before := loadAvg()
		start := time.Now()
		r, err := testbed.Replay(ctx, b, testbed.ReplayConfig{Sched: name, Coflows: cfs, Classes: classes,
			Bandwidth: l.linkBits / 8 * l.payload, Cores: l.cores, Lead: l.lead, Sim: &simCfg, GrantedSpeeds: l.grantedSpeeds})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		var ratios []float64
		for i, lr := range r.Live {
			ratios = append(ratios, lr.CCT.Seconds()/r.Sim.Coflows[i].CCT.Seconds())
		}
		slices.Sort(ratios)
		var profs []string
		for c, p := range r.Profiles {
			profs = append(profs, fmt.Sprintf("%v s=%.0fMB/s u=%.0fMB/s ρ=%.3f", classes[c], p.CompressSpeed/1e6, p.DecompressSpeed/1e6, p.Ratio))
		}
		_, _, wire, _ := r.Averages()
		var cpu float64
		var cpus []string
		for _, c := range r.AgentCPU {
			cpu += c
			cpus = append(cpus, fmt.Sprintf("%.2f", c))
		}
		fmt.Fprintf(w, "# %s: %.0f s; load average before %s after %s; per-coflow live/sim median %.3f; measured lz4 per core: %s; agent CPU s per port %s (%.1f ms per wire MB)\n",
			name, time.Since(start).Seconds(), before, loadAvg(), ratios[len(ratios)/2], strings.Join(profs, "; "), strings.Join(cpus, " "), cpu/wire*1e9)
		fmt.Fprintln(w, r.Line(name))
		if js != nil {
			rec := liveRecord{Sched: name, Skip: l.skip, Ports: l.ports, Bandwidth: l.linkBits / 8 * l.payload, Cores: l.cores,
				Classes: classes, Profiles: r.Profiles, Coflows: r.Coflows, Load: before}
			for _, lr := range r.Live {
				rec.LiveMS = append(rec.LiveMS, lr.CCT.Seconds()*1e3)
			}
			b, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			if _, err := js.Write(append(b, '\n')); err != nil {
				return err
			}
		}
		if csv != nil {
			var effs []*coflow.Result
			for _, e := range calibEffs {
				c := coflow.DefaultConfig()
				c.WireEfficiency = e
				res, err := r.Resimulate(name, c)
				if err != nil {
					return err
				}
				effs = append(effs, res)
			}
			for i, lr := range r.Live {
				fmt.Fprintf(csv, "%s,%d,%d,%d,%.0f,%.0f,%.0f,%.3f,%.3f", name, l.skip, i, cfs[i].ID, r.Coflows[i].Arrival.Seconds()*1e3,
					lr.Bytes, lr.WireBytes, lr.CCT.Seconds()*1e3, r.Sim.Coflows[i].CCT.Seconds()*1e3)
				for _, e := range effs {
					fmt.Fprintf(csv, ",%.3f", e.Coflows[i].CCT.Seconds()*1e3)
				}
				fmt.Fprintf(csv, ",%s\n", loadAvg())
			}
		}
	}
	return nil
}
