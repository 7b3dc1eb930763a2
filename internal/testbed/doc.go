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
// The v2 path is written but has only been run on a v1 machine.
package testbed
