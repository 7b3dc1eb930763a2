// Package fvdf implements Swallow's compression-aware coflow scheduling:
// Fastest-Volume-Disposal-First (FVDF) with stage pipelining, resource
// conservation, starvation freedom and codec-speed prediction in the loop,
// plus a live transport.CompressionPolicy that applies the same rule to
// individual messages.
//
// # Overview
//
// Swallow (Zhou et al., IPDPS 2018; IEEE Trans. Computers 2019) extends
// Varys' SEBF to coflows whose flows may be compressed. Its full text is not
// public; what this package implements beyond the abstract is our
// reconstruction (research note swallow.md §1–§4), consistent with the Varys
// model it extends. Constants that are ours are marked as such and are
// configurable.
//
// A compressed flow passes three stages, compress (sender cores) → transmit
// (wire) → decompress (receiver cores). Pipelined in chunks, it disposes of
// raw volume at D = min(k_s·s, r/ρ, k_r·u) (see [PipelinedTime],
// [ChunkedTime], [SequentialTime]). Compression pays only when D > r.
//
// [Policy] applies that test per message on a live link:
// compress when max(V/s, ρV/B, V/u) + overhead < V/B, with s, u, ρ
// learned online from the transport's outcomes.
//
// # Usage
//
//	pol, err := fvdf.NewPolicy(fvdf.PolicyConfig{Bandwidth: 125e6})
//	// pass pol as the transport's CompressionPolicy
package fvdf
