package main

import (
	"io"
	"strings"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowsim"
)

// runCompat replays tr with package coflowsim, which reproduces the
// reference Java simulator's semantics (10,240 ms admission epochs, 8 ms
// quanta, static SEBF order). Its times are simulator milliseconds, 1024 to
// a simulated second; the table, the one-line summary and the CSV convert
// them to real milliseconds (×1000/1024) so the two modes compare directly,
// while -format coflowsim prints the reference output unchanged. The port
// rate is coflowsim's constant (-port-bps is ignored in this mode).
func runCompat(tr *coflow.Trace, name string, o options, w, csvOut io.Writer) (summary, error) {
	cfg := coflowsim.DefaultConfig()
	start := time.Now()
	ref := strings.ToUpper(name)
	if ref == "DCLAS" || ref == "AALO" {
		ref = "DARK" // coflowsim's name for its Aalo-like scheduler
	}
	res, err := coflowsim.Run(tr, ref, cfg)
	wall := time.Since(start)
	if err != nil {
		return summary{}, err
	}
	if o.format == "coflowsim" {
		if err := coflowsim.WriteReference(w, res); err != nil {
			return summary{}, err
		}
	}
	cfs, err := tr.ToCoflows()
	if err != nil {
		return summary{}, err
	}
	scale := func(simMs int64) time.Duration {
		return time.Duration(float64(simMs) * 1000 / float64(cfg.SecondMs) * float64(time.Millisecond))
	}
	out := &coflow.Result{Scheduler: strings.ToLower(name), Coflows: make([]coflow.CoflowResult, len(res.Records))}
	for i, r := range res.Records {
		c := &cfs[i]
		out.Coflows[i] = coflow.CoflowResult{
			Index: i, ID: r.ID, Arrival: c.Arrival, Start: scale(r.StartMs), Finish: scale(r.FinishMs),
			CCT: scale(r.FinishMs - r.StartMs), Width: c.Width(), Bytes: r.TotalBytes, MaxFlowBytes: c.MaxFlowBytes(),
			WireBytes: r.TotalBytes,
		}
	}
	if csvOut != nil {
		if err := writeCSV(csvOut, out.Scheduler, out); err != nil {
			return summary{}, err
		}
	}
	bins := coflow.SummarizeBins(out)
	return summary{name: out.Scheduler, n: len(out.Coflows), cct: coflow.Summarize(out), bins: &bins,
		wallMs: float64(wall) / float64(time.Millisecond), res: out}, nil
}
