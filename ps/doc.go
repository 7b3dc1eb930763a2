// Package ps is Falcon's parameter server: a key-value API in the
// vocabulary of ps-lite and Bösen, a pure parameter Store with server-side
// optimizers, and the server, coordinator and worker roles as thin
// concurrent shells over transport.Transport.
//
// # Overview
//
// Keys are uint64, values float32. Every call takes keys sorted and unique
// (ErrUnsortedKeys otherwise) and their values back to back; lens gives
// each key's value length, or nil for the client's fixed Width:
//
//	cl.Push(ctx, keys, grads, lens)    // one optimizer step per key on its server
//	cl.Pull(ctx, keys, vals, lens)     // fills the caller's buffer
//	cl.PushPull(ctx, keys, grads, vals, lens)
//
// Servers own key ranges chosen by a Partitioner (KeyRange by default, as in
// ps-lite; Hash spreads dense small keys); a value longer than MaxSegment is
// split across servers. The Client validates a request completely before it
// sends anything (every key must be known — Init creates keys — with the
// right length), and every server validates its part again before applying
// it, so a refused request changes nothing anywhere.
//
// The Store is one server's shard: values, optimizer state (SGD, Momentum,
// Adam behind the Optimizer interface) and per-clock gradient buffers for
// barrier-style policies (Accumulate, then Flush applies the sample-weighted
// mean). It is pure and deterministic, and the ps/sim simulator runs the
// same apply step in virtual time.
//
// The Coordinator role wraps an epsp.Coordinator: workers ask it to admit
// pushes and tell it when they finish a clock; it carries out the policy's
// orders (flushes on every server before releases, parallelism and batch
// changes, task transfers). The Worker role runs the training loop:
// pull, compute the mini-batch with p goroutines (p set by the coordinator,
// "parallelism as an infrastructure"), push, clock, wait for release; it
// reports progress and gives away or takes over sample ranges so that every
// sample of a clock is computed exactly once.
//
// # Wire format
//
// One binary format for every ps message: a version byte, an op byte, then
// little-endian fields and float32 values as IEEE-754 bits (see wire.go).
// Errors travel as one-byte codes and come back as the package's sentinel
// errors. Start-up is bounded: Start waits at most StartTimeout and says who
// is missing (ErrStartTimeout).
//
// # Usage
//
// pstest.NewCluster starts a whole cluster in-process for tests. A
// multi-process deployment joins each role to a TCP transport under its
// node name: NewServer + Join, NewCoordinator + Start, NewWorker + Start,
// then Worker.Train with a Model and a Sampler.
package ps
