package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/falconml/falcon/internal/testbed"
)

// liveOptions are the flags of -live: the slice of the trace replayed on
// the bed, the bed's limits and the simulator's calibration constants.
type liveOptions struct {
	on                    bool
	ports, coflows, skip  int
	mb                    float64
	span, lead, doneDelay time.Duration
	linkBits, cores       float64
	wireEff, payload      float64
	window, codecEff      float64
	chunkRTT              time.Duration
	period                time.Duration
	csv, json             string
	grantedSpeeds         bool
}

func liveFlags(fs *flag.FlagSet, l *liveOptions) {
	fs.BoolVar(&l.on, "live", false, "replay a slice of -trace live on a test bed of network namespaces (root, Linux) and in coflow.Sim; one line per scheduler")
	fs.IntVar(&l.ports, "ports", 10, "with -live: bed ports N; trace port p runs on port p mod N")
	fs.IntVar(&l.coflows, "coflows", 40, "with -live: coflows M in the slice")
	fs.IntVar(&l.skip, "skip", 0, "with -live: coflows skipped (in arrival order) before the slice")
	fs.Float64Var(&l.mb, "mb", 300, "with -live: the slice's raw volume after scaling, MB")
	fs.DurationVar(&l.span, "span", 30*time.Second, "with -live: first to last arrival after scaling")
	fs.DurationVar(&l.lead, "lead", 30*time.Second, "with -live: time the agents get to start before the first arrival")
	fs.Float64Var(&l.linkBits, "link-bps", 40e6, "with -live: each port's rate limit each way, bit/s")
	fs.Float64Var(&l.cores, "port-cores", 0.12, "with -live: each port's CPU quota, cores")
	fs.DurationVar(&l.period, "cfs-period", 10*time.Millisecond, "with -live: the CFS period of the ports' quotas (a quota must be at least 1 ms of it: 20ms for 0.06 core)")
	fs.Float64Var(&l.payload, "link-payload", 1, "with -live: the fraction of -link-bps the schedulers (and the simulator) are told a port carries; below 1 leaves the TCP/IP headers room, so paced payload does not queue at the rate limit")
	fs.Float64Var(&l.wireEff, "sim-wire-eff", 0, "with -live: coflow.Config.WireEfficiency of the simulation (0: the fluid model)")
	fs.DurationVar(&l.doneDelay, "sim-done-delay", 0, "with -live: coflow.Config.CompletionDelay of the simulation")
	fs.Float64Var(&l.codecEff, "sim-codec-eff", 0, "with -live or -refit: coflow.Config.CodecCoreEfficiency of the simulation (0: overhead-free cores)")
	fs.Float64Var(&l.window, "sim-window", 0, "with -live or -refit: coflow.Config.FlowWindowBytes of the simulation (0: no cap; with -sim-chunk-rtt)")
	fs.DurationVar(&l.chunkRTT, "sim-chunk-rtt", 0, "with -live or -refit: coflow.Config.ChunkRoundTrip of the simulation")
	fs.StringVar(&l.json, "live-json", "", "with -live: append each scheduler's run (coflows, live arrivals and CCTs, measured profiles) as a JSON line to this file, for -refit")
	fs.BoolVar(&l.grantedSpeeds, "live-granted-speeds", false, "with -live or -live-matrix: the agents report codec speeds per granted core-second (live.AgentConfig.SpeedPerGrantedCore), stalls under the quota included, instead of per CPU-second of the codec thread")
	fs.StringVar(&l.csv, "live-csv", "", "with -live: append per-coflow live and simulated CCTs to this CSV file")
}

// errNotRoot is -live's refusal without root.
var errNotRoot = errors.New("-live builds network namespaces, tc rate limits and CPU cgroups, so it needs root: run it as root (for example sudo -E go run ./cmd/falcon-coflow -live ...)")

// geteuid is os.Geteuid (a test stands in a non-root user).
var geteuid = os.Geteuid

// liveNames checks -live's options and returns the schedulers' names.
func liveNames(o options) ([]string, error) {
	l := o.live
	if o.trace == "" {
		return nil, errors.New("-live needs -trace (a coflow-benchmark trace such as FB2010-1Hr-150-0.txt)")
	}
	if o.mode != "exact" || o.format != "table" || o.csv != "" {
		return nil, errors.New("-live takes neither -mode, -format nor -csv (use -live-csv)")
	}
	if l.ports < 2 || l.ports > 200 || l.coflows < 1 || l.skip < 0 || !(l.mb > 0) || l.span < 0 || l.lead <= 0 ||
		!(l.linkBits >= 8e3) || !(l.cores > 0) || !(l.payload > 0 && l.payload <= 1) || !(l.wireEff >= 0 && l.wireEff <= 1) || !(l.codecEff >= 0 && l.codecEff <= 1) || l.window < 0 || l.chunkRTT < 0 || l.doneDelay < 0 || l.period < time.Millisecond {
		return nil, fmt.Errorf("-live: bad slice or bed: ports %d (2..200), coflows %d, skip %d, mb %g, span %v, lead %v, link-bps %g, link-payload %g, port-cores %g, sim-wire-eff %g, sim-done-delay %v",
			l.ports, l.coflows, l.skip, l.mb, l.span, l.lead, l.linkBits, l.payload, l.cores, l.wireEff, l.doneDelay)
	}
	var names []string
	for _, n := range strings.Split(o.scheds, ",") {
		n = strings.TrimSpace(n)
		if _, err := testbed.NewScheduler(n); err != nil {
			return nil, fmt.Errorf("-live -sched %q: %w", n, err)
		}
		names = append(names, n)
	}
	return names, nil
}

// runLive checks the options, refuses without root, and runs the bed.
func runLive(o options, w io.Writer) error {
	names, err := liveNames(o)
	if err != nil {
		return err
	}
	if geteuid() != 0 {
		return errNotRoot
	}
	return runBed(o, names, w)
}
