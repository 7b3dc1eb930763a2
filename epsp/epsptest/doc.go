// Package epsptest holds fakes and drivers for testing synchronization
// policies (implementations of [epsp.Policy]) in a few lines, the way the
// SDK tests its own.
//
// # Overview
//
//   - [FakeView] is a scripted [epsp.View]: set clocks, waiting flags,
//     progress, version and pending transfers by hand and call a policy's
//     Admit or Step directly. [FakeView.Apply] carries out an Output the
//     way a coordinator would, for quick multi-step tests.
//   - [Driver] plays events and pushes against a policy through a real
//     [epsp.Coordinator] (so the coordinator's validation applies) and
//     records every decision. [Driver.Run] reads a small text script
//     (one command per line) and [Driver.Trace] prints the decisions, so
//     two policies can be compared on the same script.
//   - [Loop] is a tiny seeded virtual-time cluster: workers compute at
//     rates from a [straggler.Model], report progress, push, clock, answer
//     and carry out transfers, all through a real Coordinator, with a hook
//     to check invariants after every step. It is for property tests of
//     policies, not a simulator (see ps/sim for that).
//
// The fakes' fields and output formats are for tests and not a stable API.
//
// # Usage
//
//	d, _ := epsptest.NewDriver(epsp.Config{NumWorkers: 2, Batch: 8}, myPolicy)
//	err := d.Run(`
//	  push w=0
//	  clock w=0
//	  push w=1
//	  clock w=1
//	`)
//	fmt.Print(d.Trace())
package epsptest
