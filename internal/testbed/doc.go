// Package testbed builds a coflow fabric on one Linux machine for live
// experiments: each port a network namespace with a veth link into a bridge
// in a switch namespace (the big switch of the Varys model), a tbf rate limit
// on the link each way (the port's ingress and egress), and a CPU cgroup per
// port holding the port's cores as a CFS quota (cgroup v1
// cpu.cfs_quota_us/cpu.cfs_period_us; v2 cpu.max where v1 is absent), with
// a short period (10 ms by default) so that processes running for seconds
// measure the quota, not the throttler's bursts. The machine's own namespace
// gets one unlimited link (ControlAddr) for a coordinator. New makes it all
// and Close removes it; New needs root and iproute2 and otherwise returns
// ErrUnsupported, which tests turn into a skip.
//
// Scaling rule (issue 28): a 2-core machine must hold every agent, so scale
// bandwidth and cores together: for example 10 ports at 20–100 Mbit/s with
// quotas of 0.1–0.15 core. The sum of the quotas plus the kernel's share
// (veth, bridge and tbf work, charged partly to the sender's cgroup and
// partly to softirq time outside any cgroup) must stay under the machine's
// cores; the package's test measures both that the rate limit holds each way
// and that a port's process gets the CPU its quota promises while traffic
// flows.
//
// # Usage
//
//	b, err := testbed.New(testbed.Config{Ports: 10, RateBits: []float64{40e6}, Cores: []float64{0.12}})
//	if errors.Is(err, testbed.ErrUnsupported) { t.Skip(err) }
//	defer b.Close()                      // after every command has ended
//	cmd := b.Command(k, exe, args...)    // runs in port k's namespace and cgroup
//	// listen on b.Addr(k); the machine itself is testbed.ControlAddr
//
// Slice folds a coflow-benchmark trace onto the bed's ports (ports mod N,
// flows merged per port pair, bytes and arrivals scaled). Replay runs the
// coflow runtime (package coflow/live) on the bed under one scheduler
// (NewScheduler: coflow's names and fvdf.ParseBaseline's with lz4), agents
// as processes in the ports' namespaces (the program re-run: it calls
// RunHelper first in main) and the coordinator in the calling process, then
// simulates the same coflows on the live arrivals with the profiles the
// coordinator measured (ReplayResult: live results, simulation, each
// agent's CPU time). Each agent stays up until every coflow is done (Replay
// then closes its stdin): one that left would be dead to the coordinator.
// An agent that fails ends the run at once: Replay kills the others and
// returns the first failure with its output.
//
// Config.Shares sets the ports' cgroups' CPU weight (v1 cpu.shares, v2
// cpu.weight) so that on a machine busy with other work they still get
// their quotas; ProbeQuota measures whether they do (a spinner in every
// port's cgroup at once: CPU had over CPU promised). cmd/falcon-coflow -live is the command; its
// CALIBRATION.md the calibration of coflow.Sim against it. The tests:
// TestLiveOnBed (a small workload, by default) and TestReplayFB2010 (a slice
// of FB2010 with codecprof's named data classes, minutes), which prints one
// line per scheduler, "sched=NAME live_avg_cct_ms=X sim_avg_cct_ms=Y
// wire_bytes=W raw_bytes=R":
//
//	FALCON_TESTBED_REPLAY=1 go test -run ReplayFB2010 -v -timeout 30m ./internal/testbed
//
// The tests that make a bed skip when not root and under -race (the race
// detector's CPU cost would swamp the quotas).
//
// The v2 path is written but has only been run on a v1 machine.
package testbed
