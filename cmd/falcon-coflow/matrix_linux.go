//go:build linux

package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/internal/testbed"
)

// runMatrix runs the plan: per slice and cell a fresh bed and a quota
// probe, then the cell's schedulers in the plan's order; a failed run is
// rerun once on a fresh bed. Every attempt is a CSV row (-live-csv), every
// successful run a JSON line (-live-json, for -refit).
func runMatrix(o options, runs []planRun, w io.Writer) error {
	l, m := o.live, o.matrix
	testbed.LockWait = 20 * time.Minute // other sessions' beds come first
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	f, err := os.OpenFile(l.csv, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	cw := csv.NewWriter(f)
	if st, _ := f.Stat(); st != nil && st.Size() == 0 {
		cw.Write(rowHeader)
		cw.Flush()
	}
	var js *os.File
	if l.json != "" {
		if js, err = os.OpenFile(l.json, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			return err
		}
		defer js.Close()
	}
	simCfg := coflow.DefaultConfig()
	simCfg.WireEfficiency, simCfg.CompletionDelay = l.wireEff, l.doneDelay
	simCfg.FlowWindowBytes, simCfg.ChunkRoundTrip = l.window, l.chunkRTT
	simCfg.CodecCoreEfficiency = l.codecEff
	if err := simCfg.Validate(); err != nil {
		return err
	}
	for i := 0; i < len(runs); {
		j := i
		for j < len(runs) && runs[j].Skip == runs[i].Skip && runs[j].Cell == runs[i].Cell {
			j++
		}
		block := runs[i:j]
		i = j
		c := block[0].Cell
		mb := m.mbPerMbit * c.Mbit
		cfs, classes, err := liveSlice(o, block[0].Skip, mb)
		if err != nil {
			return err
		}
		bcfg := testbed.Config{Ports: l.ports, RateBits: []float64{c.Mbit * 1e6}, Cores: []float64{c.Cores}, Period: c.period(), Shares: m.shares}
		fmt.Fprintf(w, "# slice %d, cell %v (period %v, %.1f MB): %d runs\n", block[0].Skip, c, c.period(), mb, len(block))
		var b *testbed.Bed
		var probe []float64
		fresh := func() error {
			if b != nil {
				b.Close()
			}
			var err error
			if b, err = testbed.New(bcfg); err != nil {
				return err
			}
			probe = nil
			if m.probe > 0 {
				if probe, err = testbed.ProbeQuota(ctx, b, "", m.probe); err != nil {
					return err
				}
			}
			return nil
		}
		for _, pr := range block {
			for attempt := 1; attempt <= 2; attempt++ {
				row := runRow{UTC: time.Now().UTC().Format("15:04:05"), Skip: pr.Skip, Cell: c, PeriodMS: float64(c.period().Milliseconds()),
					Sched: pr.Sched, Pos: pr.Pos, Attempt: attempt, LoadBefore: loadAvg()}
				var rec *liveRecord
				err := func() error {
					if b == nil || attempt > 1 {
						if err := fresh(); err != nil {
							return err
						}
					}
					if len(probe) > 0 {
						row.ProbeMin, row.ProbeMed = slices.Min(probe), median(probe)
					}
					var th0 int64
					for k := range b.Ports() {
						n, _ := b.Throttled(k)
						th0 += n
					}
					start := time.Now()
					r, err := testbed.Replay(ctx, b, testbed.ReplayConfig{Sched: pr.Sched, Coflows: cfs, Classes: classes,
						Bandwidth: c.Mbit * 1e6 / 8 * l.payload, Cores: c.Cores, Lead: l.lead, Sim: &simCfg, GrantedSpeeds: l.grantedSpeeds})
					row.WallS = time.Since(start).Seconds()
					if err != nil {
						return err
					}
					for k := range b.Ports() {
						n, _ := b.Throttled(k)
						row.Throttled += n
					}
					row.Throttled -= th0
					row.LiveMS, row.SimMS, row.Wire, row.Raw = r.Averages()
					var ratios []float64
					for i, lr := range r.Live {
						ratios = append(ratios, lr.CCT.Seconds()/r.Sim.Coflows[i].CCT.Seconds())
					}
					row.CoflowMedian = median(ratios)
					s0, err := r.Resimulate(pr.Sched, coflow.DefaultConfig())
					if err != nil {
						return err
					}
					row.Sim0MS = coflow.Summarize(s0).Mean.Seconds() * 1e3
					for _, c := range r.AgentCPU {
						if !math.IsNaN(c) {
							row.AgentCPU += c
						}
					}
					rec = &liveRecord{Sched: pr.Sched, Skip: pr.Skip, Ports: l.ports, Bandwidth: c.Mbit * 1e6 / 8 * l.payload, Cores: c.Cores,
						Classes: classes, Profiles: r.Profiles, Coflows: r.Coflows, Load: row.LoadBefore}
					for _, lr := range r.Live {
						rec.LiveMS = append(rec.LiveMS, lr.CCT.Seconds()*1e3)
					}
					return nil
				}()
				row.LoadAfter = loadAvg()
				row.Status = "ok"
				if err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					row.Status, row.Err = "failed", oneLine(err.Error())
				}
				cw.Write(row.record())
				cw.Flush()
				if err := cw.Error(); err != nil {
					return err
				}
				fmt.Fprintf(w, "%s slice=%d cell=%v sched=%s attempt=%d status=%s live_avg_cct_ms=%.1f sim_avg_cct_ms=%.1f load=%s probe_min=%.2f wall_s=%.0f %s\n",
					row.UTC, row.Skip, c, row.Sched, attempt, row.Status, row.LiveMS, row.SimMS, row.LoadBefore, row.ProbeMin, row.WallS, row.Err)
				if err == nil {
					if js != nil {
						b, err := json.Marshal(rec)
						if err != nil {
							return err
						}
						if _, err := js.Write(append(b, '\n')); err != nil {
							return err
						}
					}
					break
				}
			}
		}
		if b != nil {
			b.Close()
		}
	}
	return nil
}
