//go:build linux

package testbed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/live"
	"github.com/falconml/falcon/fvdf/codecprof"
	"github.com/falconml/falcon/transport"
)

// HelperEnv is the environment variable that turns a program into a bed
// agent: Replay re-runs its executable (ReplayConfig.Exe) in each port's
// namespace and cgroup with HelperEnv=agent and the agent's spec in
// SpecEnv. A program that replays must call RunHelper first thing in main.
const (
	HelperEnv = "FALCON_TESTBED_HELPER"
	SpecEnv   = "FALCON_TESTBED_SPEC"
)

// RunHelper runs this process as a bed agent if HelperEnv says "agent":
// it returns true and the agent's error (the caller exits, nonzero on an
// error). Otherwise it returns false, nil at once.
//
// With HelperEnv=spin it is ProbeQuota's spinner instead: two goroutines
// spin for the seconds in SpecEnv and the process prints its CPU seconds.
func RunHelper() (bool, error) {
	switch os.Getenv(HelperEnv) {
	case "agent":
		return true, runAgent(os.Getenv(SpecEnv))
	case "spin":
		return true, spin(os.Getenv(SpecEnv))
	}
	return false, nil
}

// spin keeps two goroutines busy for secs seconds of wall time (at most
// a minute) and prints the process's CPU seconds.
func spin(secs string) error {
	d, err := strconv.ParseFloat(secs, 64)
	if err != nil || !(d > 0 && d <= 60) {
		return fmt.Errorf("testbed: spin %q: want seconds in (0, 60]", secs)
	}
	c0, _ := cpu0()
	burn(time.Now().Add(time.Duration(d * float64(time.Second))))
	c1, _ := cpu0()
	fmt.Printf("%s%.6f\n", cpuPrefix, (c1 - c0).Seconds())
	return nil
}

// ProbeQuota checks that the bed keeps its CPU promise under the
// machine's present load: a process spinning two threads in every port's
// cgroup at once for d (exe: this program, or the given one; it must call
// RunHelper first in main), and for each port the CPU time it got over
// the quota's promise, CPU / (Cores(k)·d) (1: the quota was had in full;
// NaN for a port without a quota). The ports must be idle.
func ProbeQuota(ctx context.Context, b *Bed, exe string, d time.Duration) ([]float64, error) {
	if !(d > 0 && d <= time.Minute) {
		return nil, fmt.Errorf("testbed: probe of %v (want (0, 1 min])", d)
	}
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	outs := make([]strings.Builder, b.Ports())
	errs := make([]error, b.Ports())
	var wg sync.WaitGroup
	for k := range b.Ports() {
		cmd := b.Command(k, exe)
		cmd.Env = append(os.Environ(), HelperEnv+"=spin", SpecEnv+"="+strconv.FormatFloat(d.Seconds(), 'f', -1, 64))
		cmd.Stdout = &outs[k]
		if err := cmd.Start(); err != nil {
			errs[k] = err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case errs[k] = <-done:
			case <-ctx.Done():
				cmd.Process.Kill()
				errs[k] = fmt.Errorf("%v: %w", <-done, ctx.Err())
			}
		}()
	}
	wg.Wait()
	var got []float64
	for k := range b.Ports() {
		if errs[k] != nil {
			return nil, fmt.Errorf("testbed: probe port %d: %w", k, errs[k])
		}
		cpu := math.NaN()
		for _, line := range strings.Split(outs[k].String(), "\n") {
			if v, ok := strings.CutPrefix(line, cpuPrefix); ok {
				cpu, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		}
		if q := b.Cores(k); q > 0 && !math.IsNaN(cpu) {
			got = append(got, cpu/(q*d.Seconds()))
		} else {
			got = append(got, math.NaN())
		}
	}
	return got, nil
}

// cpu0 is the process's CPU time so far (user + system, getrusage).
func cpu0() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// agentSpec is what an agent process needs: its port, every node's
// address, the secret, the workload and the common start time.
type agentSpec struct {
	Port    int
	Addrs   map[transport.NodeID]string
	Secret  []byte
	Coflows []specCoflow
	// Classes maps a flow's class (fabric class index) to the codecprof
	// class its bytes are drawn from.
	Classes []codecprof.Class
	StartNS int64
	// Limit bounds the agent's whole run.
	Limit time.Duration
	// GrantedSpeeds is live.AgentConfig.SpeedPerGrantedCore.
	GrantedSpeeds bool `json:",omitempty"`
}

type specCoflow struct {
	ArrivalMS int
	Flows     []coflow.Flow
}

const coordID = transport.NodeID("coord")

// cpuPrefix starts the line on which an agent process reports the CPU
// seconds (user + system) it used in all.
const cpuPrefix = "agent_cpu_s="

func agentName(k int) transport.NodeID { return transport.NodeID(fmt.Sprintf("a%d", k)) }

// corpusBytes is the size of each class's corpus in every process.
const corpusBytes = 4 << 20

// corpora draws each class's corpus from a seed of its own, the same in
// every process.
func corpora(classes []codecprof.Class) ([][]byte, error) {
	var out [][]byte
	for _, c := range classes {
		b, err := codecprof.Sample(c, corpusBytes, rand.New(rand.NewPCG(uint64(c), 28)))
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// flowData is flow j of coflow i's bytes: its class's corpus read from an
// offset of its own, wrapping around (64 KiB chunks of it compress as the
// corpus does). Making it is a copy, so it costs the agent almost no CPU.
func flowData(corpus []byte, i, j, n int) []byte {
	out := make([]byte, n)
	off := (i*7919 + j*104729) % len(corpus)
	for k := 0; k < n; {
		c := copy(out[k:], corpus[off:])
		k += c
		off = 0
	}
	return out
}

// runAgent is the agent process: it joins, port 0 registers the coflows at
// their arrival times (so coflow i gets id i), every agent sends the flows
// it is the source of from their arrival on and receives (and checks) those
// it is the destination of; it exits when all are done.
func runAgent(specJSON string) error {
	var sp agentSpec
	if err := json.Unmarshal([]byte(specJSON), &sp); err != nil {
		return err
	}
	me := agentName(sp.Port)
	acfg := live.DefaultAgentConfig()
	acfg.Coordinator = coordID
	acfg.AnnounceTimeout = 10 * time.Second
	acfg.SpeedPerGrantedCore = sp.GrantedSpeeds
	a, err := live.NewAgent(acfg)
	if err != nil {
		return err
	}
	defer a.Close()
	peers := map[transport.NodeID]string{}
	for n, addr := range sp.Addrs {
		if n != me {
			peers[n] = addr
		}
	}
	tr, err := transport.NewTCP(transport.TCPConfig{ID: me, ListenAddr: sp.Addrs[me], Peers: peers, Secret: sp.Secret}, a)
	if err != nil {
		return err
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), sp.Limit)
	defer cancel()
	for { // the coordinator may not listen yet
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		err = a.Start(sctx, tr)
		scancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	// Each flow's bytes are a copy out of its class's corpus, made when it
	// starts (send) and compared when it ends (receive): cheap, so the
	// application's own CPU hardly competes with the agent's under the
	// quota (generating the bytes there, or hashing them, did).
	corp, err := corpora(sp.Classes)
	if err != nil {
		return err
	}
	data := func(i, j int) []byte {
		f := sp.Coflows[i].Flows[j]
		return flowData(corp[f.Class], i, j, int(f.Bytes))
	}
	cpuStart := time.Duration(-1)
	if c, ok := cpu0(); ok {
		cpuStart = c
	}
	start := time.Unix(0, sp.StartNS)
	if late := time.Since(start); late > 0 {
		return fmt.Errorf("agent %d ready %v after the common start: give it a longer lead", sp.Port, late)
	}
	at := func(ms int) { time.Sleep(time.Until(start.Add(time.Duration(ms) * time.Millisecond))) }
	errs := make(chan error, 1+2*len(sp.Coflows)*8)
	var wg sync.WaitGroup
	if sp.Port == 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, c := range sp.Coflows {
				at(c.ArrivalMS)
				if id, err := a.Register(ctx, c.Flows, 0); err != nil || int(id) != i {
					errs <- fmt.Errorf("register %d: id %d, %v", i, id, err)
					return
				}
			}
		}()
	}
	var mu sync.Mutex
	var all []error
	report := func(err error) {
		mu.Lock()
		all = append(all, err)
		mu.Unlock()
	}
	for i, c := range sp.Coflows {
		for j, f := range c.Flows {
			if f.Src == sp.Port {
				wg.Add(1)
				go func() {
					defer wg.Done()
					at(c.ArrivalMS)
					if err := a.Send(ctx, live.CoflowID(i), j, data(i, j)); err != nil {
						report(fmt.Errorf("send %d/%d: %w", i, j, err))
					}
				}()
			}
			if f.Dst == sp.Port {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got, err := a.Receive(ctx, live.CoflowID(i), j)
					if err != nil {
						report(fmt.Errorf("receive %d/%d: %w", i, j, err))
					} else if !bytes.Equal(got, data(i, j)) {
						report(fmt.Errorf("receive %d/%d: bytes differ", i, j))
					}
				}()
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		all = append(all, err)
	}
	// Stay up until every coflow is done (the parent closes our stdin),
	// not only our own flows: an agent that leaves is dead to the
	// coordinator after AgentTimeout, and every coflow still running with
	// a flow at its port fails with it. Leave at once on an error of our
	// own, or when the run's limit ends.
	if len(all) == 0 {
		eof := make(chan struct{})
		go func() { io.Copy(io.Discard, os.Stdin); close(eof) }()
		select {
		case <-eof:
		case <-ctx.Done():
		}
	}
	time.Sleep(300 * time.Millisecond) // the last reports land
	if c0, ok := cpu0(); ok && cpuStart >= 0 {
		fmt.Printf("%s%.6f\n", cpuPrefix, (c0 - cpuStart).Seconds())
	}
	return errors.Join(all...)
}

// ReplayConfig is one scheduler's live run on a bed.
type ReplayConfig struct {
	// Sched names the scheduler (NewScheduler).
	Sched string
	// Coflows is the workload: arrivals from 0, flows on the bed's ports,
	// each flow's Class an index into Classes. Required.
	Coflows []coflow.Coflow
	// Classes are the codecprof classes the flows' bytes are drawn from
	// (and the fabric's data classes). Required.
	Classes []codecprof.Class
	// Bandwidth (bytes/s each way) and Cores are what the scheduler is told
	// a port has: the bed's rate limit and quota. Required.
	Bandwidth, Cores float64
	// Lead is the time the agents get to start, join and build their
	// corpora before the first arrival. Zero means 30 s.
	Lead time.Duration
	// Limit bounds each agent process's run. Zero means 10 min.
	Limit time.Duration
	// Sim configures the simulation of the same coflows (on the live
	// arrivals, with the codec profiles the coordinator measured). Nil
	// means coflow.DefaultConfig().
	Sim *coflow.Config
	// Exe is the program Replay runs as the agents; it must call RunHelper
	// first in main. Empty means this process's executable.
	Exe string
	// GrantedSpeeds makes the agents report codec speeds per granted
	// core-second (live.AgentConfig.SpeedPerGrantedCore). False: per
	// CPU-second of the codec thread.
	GrantedSpeeds bool
}

// ReplayResult is one scheduler's live run and its simulation.
type ReplayResult struct {
	// Live holds the coordinator's results, one per coflow in order.
	Live []live.Result
	// Sim is coflow.Sim's run of the same coflows (Coflows[i].Arrival the
	// live arrival of coflow i, from the first).
	Sim *coflow.Result
	// Coflows are the coflows simulated.
	Coflows []coflow.Coflow
	// Profiles are the lz4 profiles the coordinator measured, one per
	// class (per entry of ReplayConfig.Classes).
	Profiles []coflow.CodecProfile
	// SimFabric is the fabric the simulation ran on.
	SimFabric *coflow.Fabric
	// AgentCPU is each port's agent process's CPU time (user + system,
	// getrusage) from just before the common start (after joining and
	// making its corpora) to its end, seconds: the runtime's whole cost
	// under the port's quota (codecs, TCP, the transport, Go's runtime);
	// NaN where it did not say.
	AgentCPU []float64
}

// Averages returns the live and simulated average CCT (ms) and the wire
// and raw bytes the live run moved.
func (r *ReplayResult) Averages() (liveMS, simMS, wire, raw float64) {
	for _, l := range r.Live {
		liveMS += l.CCT.Seconds() * 1e3
		wire += l.WireBytes
		raw += l.Bytes
	}
	liveMS /= float64(len(r.Live))
	simMS = coflow.Summarize(r.Sim).Mean.Seconds() * 1e3
	return liveMS, simMS, wire, raw
}

// Line is the one-line report "sched=NAME live_avg_cct_ms=X
// sim_avg_cct_ms=Y wire_bytes=W raw_bytes=R".
func (r *ReplayResult) Line(name string) string {
	l, s, w, raw := r.Averages()
	return fmt.Sprintf("sched=%s live_avg_cct_ms=%.1f sim_avg_cct_ms=%.1f wire_bytes=%.0f raw_bytes=%.0f", name, l, s, w, raw)
}

// Resimulate runs coflow.Sim again on r's coflows and fabric with cfg
// (for calibration: the same live run against other simulator constants).
func (r *ReplayResult) Resimulate(sched string, cfg coflow.Config) (*coflow.Result, error) {
	s, err := NewScheduler(sched)
	if err != nil {
		return nil, err
	}
	sim, err := coflow.NewSim(cfg, r.SimFabric, s)
	if err != nil {
		return nil, err
	}
	return sim.Run(r.Coflows)
}

// Replay runs cfg.Coflows live on b under cfg.Sched: the coordinator in
// this process on the control link, one agent process per port (this
// program, or cfg.Exe, re-run with HelperEnv) in the port's namespace and
// cgroup, over TCP with a shared secret; every receiver checks its bytes.
// Then it simulates the same coflows on the live arrivals with the codec
// profiles the coordinator measured. The bed's ports must be free (one run
// at a time) and ctx ends the run by killing the agents.
func Replay(ctx context.Context, b *Bed, cfg ReplayConfig) (*ReplayResult, error) {
	if len(cfg.Coflows) == 0 || len(cfg.Classes) == 0 || !(cfg.Bandwidth > 0) || !(cfg.Cores > 0) {
		return nil, fmt.Errorf("testbed: replay needs coflows, classes, bandwidth and cores")
	}
	if cfg.Lead == 0 {
		cfg.Lead = 30 * time.Second
	}
	if cfg.Limit == 0 {
		cfg.Limit = 10 * time.Minute
	}
	simCfg := coflow.DefaultConfig()
	if cfg.Sim != nil {
		simCfg = *cfg.Sim
	}
	exe := cfg.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	var wl []specCoflow
	for _, c := range cfg.Coflows {
		wl = append(wl, specCoflow{ArrivalMS: int(c.Arrival.Milliseconds()), Flows: c.Flows})
	}
	sched, err := NewScheduler(cfg.Sched)
	if err != nil {
		return nil, err
	}
	lc := live.DefaultConfig()
	for k := range b.Ports() {
		lc.Agents = append(lc.Agents, agentName(k))
	}
	lc.Fabric, lc.Scheduler = Fabric(b.Ports(), cfg.Classes, cfg.Bandwidth, cfg.Cores), sched
	coord, err := live.NewCoordinator(lc)
	if err != nil {
		return nil, err
	}
	defer coord.Close()
	secret := []byte("testbed secret, 32 bytes long...")
	addrs := map[transport.NodeID]string{coordID: ControlAddr + ":7200"}
	for k := range b.Ports() {
		addrs[agentName(k)] = b.Addr(k) + ":7200"
	}
	peers := map[transport.NodeID]string{}
	for n, a := range addrs {
		if n != coordID {
			peers[n] = a
		}
	}
	ctr, err := transport.NewTCP(transport.TCPConfig{ID: coordID, ListenAddr: addrs[coordID], Peers: peers, Secret: secret}, coord)
	if err != nil {
		return nil, err
	}
	defer ctr.Close()
	if err := coord.Start(ctr); err != nil {
		return nil, err
	}
	startAt := time.Now().Add(cfg.Lead)
	var wg sync.WaitGroup
	type out struct{ out, err strings.Builder }
	outs := make([]*out, b.Ports())
	errs := make([]error, b.Ports())
	cmds := make([]*exec.Cmd, b.Ports())
	var stdins []io.WriteCloser
	// An agent that fails ends the run: the others would wait for coflows
	// that cannot finish until their Limit, so they are killed and the
	// first failure is the error.
	failed := make(chan struct{})
	var failOnce sync.Once
	first := -1
	for k := range b.Ports() {
		spec, err := json.Marshal(agentSpec{Port: k, Addrs: addrs, Secret: secret, Coflows: wl, Classes: cfg.Classes, StartNS: startAt.UnixNano(), Limit: cfg.Limit, GrantedSpeeds: cfg.GrantedSpeeds})
		if err != nil {
			return nil, err
		}
		cmd := b.Command(k, exe)
		cmd.Env = append(os.Environ(), HelperEnv+"=agent", SpecEnv+"="+string(spec))
		o := &out{}
		cmd.Stdout, cmd.Stderr = &o.out, &o.err
		outs[k], cmds[k] = o, cmd
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdins = append(stdins, in)
		if err := cmd.Start(); err != nil {
			errs[k] = err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = cmd.Wait()
			if errs[k] != nil {
				failOnce.Do(func() { first = k; close(failed) })
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// Agents stay up until every coflow is done: then close their stdin.
	go func() {
		defer func() {
			for _, in := range stdins {
				in.Close()
			}
		}()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for len(coord.Results()) < len(wl) {
			select {
			case <-tick.C:
			case <-done:
				return
			}
		}
	}()
	kill := func() {
		for _, c := range cmds {
			if c.Process != nil {
				c.Process.Kill()
			}
		}
		<-done
	}
	select {
	case <-done:
	case <-failed:
		kill()
		return nil, fmt.Errorf("agent %d: %w\n%s%s", first, errs[first], outs[first].out.String(), outs[first].err.String())
	case <-ctx.Done():
		kill()
		return nil, ctx.Err()
	}
	for k, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("agent %d: %w\n%s%s", k, err, outs[k].out.String(), outs[k].err.String())
		}
	}
	res := coord.Results()
	if len(res) != len(wl) {
		return nil, fmt.Errorf("testbed: %d results for %d coflows", len(res), len(wl))
	}
	r := &ReplayResult{Live: res}
	for k := range b.Ports() {
		cpu := math.NaN()
		for _, line := range strings.Split(outs[k].out.String(), "\n") {
			if v, ok := strings.CutPrefix(line, cpuPrefix); ok {
				if x, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					cpu = x
				}
			}
		}
		r.AgentCPU = append(r.AgentCPU, cpu)
	}
	t0 := res[0].Arrival
	for i, l := range res {
		if l.Err != nil {
			return nil, fmt.Errorf("coflow %d: %w", i, l.Err)
		}
		r.Coflows = append(r.Coflows, coflow.Coflow{ID: i, Arrival: l.Arrival - t0, Flows: slices.Clone(wl[i].Flows)})
	}
	// The simulator on the live arrivals, with the profile the coordinator
	// measured.
	r.SimFabric = Fabric(b.Ports(), cfg.Classes, cfg.Bandwidth, cfg.Cores)
	for c := range r.SimFabric.Classes {
		r.SimFabric.Classes[c].Codecs[0] = coord.Profile(c, 1)
	}
	if len(r.SimFabric.Classes) == 0 {
		r.SimFabric.Codecs[0] = coord.Profile(0, 1)
	}
	for c := range cfg.Classes {
		r.Profiles = append(r.Profiles, coord.Profile(min(c, max(0, len(r.SimFabric.Classes)-1)), 1))
	}
	if r.Sim, err = r.Resimulate(cfg.Sched, simCfg); err != nil {
		return nil, err
	}
	return r, nil
}

// burn keeps two goroutines busy until end (the bed's spinner: two
// threads, more than any port's quota).
func burn(end time.Time) {
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			x := 0
			for time.Now().Before(end) {
				for i := range 1000 {
					x += i
				}
			}
			_ = x
		})
	}
	wg.Wait()
}
