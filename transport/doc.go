// Package transport moves bytes between named nodes of a Falcon cluster.
//
// # Overview
//
// [Transport] offers request/response calls and one-way messages between
// nodes named by [NodeID]; incoming traffic is served by a [Handler].
// [InmemNetwork] is an in-process implementation with fault seams
// (disconnect, partition, drop, delay, kill) driven by a seeded random
// source; every package's tests use it. Message bodies may be compressed
// per message with a [Codec] chosen by a [CompressionPolicy].
//
// # Usage
//
//	net := transport.NewInmemNetwork()
//	a, _ := net.Join("a", handlerA)
//	b, _ := net.Join("b", handlerB)
//	resp, err := a.Request(ctx, "b", req)
package transport
