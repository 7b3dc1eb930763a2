package fvdf

import "math"

// Stage times of one compressed transfer of v raw bytes, with sendCores·s
// compression throughput at the sender, wire rate r and recvCores·u
// decompression throughput at the receiver (all bytes/s; ρ = compressed/raw).
//
// Reference: Swallow (Zhou et al., TC 2019) §"stage pipelining"; the
// formulas below are our reconstruction (research/swallow.md §3).

// PipelinedTime returns the time to dispose of v raw bytes when compress →
// transmit → decompress overlap perfectly (infinitely small chunks):
//
//	T = max(v/(k_s·s), ρ·v/r, v/(k_r·u))
//
// i.e. the flow disposes at D = min(k_s·s, r/ρ, k_r·u).
func PipelinedTime(v, s, u, rho, r, ks, kr float64) float64 {
	return math.Max(v/(ks*s), math.Max(rho*v/r, v/(kr*u)))
}

// SequentialTime returns the time when the three stages run one after the
// other on the whole volume (no pipelining):
//
//	T = v/(k_s·s) + ρ·v/r + v/(k_r·u)
func SequentialTime(v, s, u, rho, r, ks, kr float64) float64 {
	return v/(ks*s) + rho*v/r + v/(kr*u)
}

// ChunkedTime returns the time of a three-stage pipeline over v raw bytes
// cut into chunks of b raw bytes (the last chunk may be shorter): with
// per-chunk stage times a_i (a_1 = b/(k_s·s), a_2 = ρb/r, a_3 = b/(k_r·u))
// and n = ⌈v/b⌉ chunks, a classic flow-shop with identical jobs finishes at
//
//	T = Σ_i a_i(first chunk) + (n−1)·max_i a_i   (approximately, with a short last chunk handled exactly)
//
// computed exactly here by the flow-shop recurrence
// C[j][i] = max(C[j−1][i], C[j][i−1]) + a_i(j). Bounded by PipelinedTime
// below and SequentialTime above. b ≤ 0 means one chunk (sequential).
func ChunkedTime(v, b, s, u, rho, r, ks, kr float64) float64 {
	if v <= 0 {
		return 0
	}
	if b <= 0 || b >= v {
		return SequentialTime(v, s, u, rho, r, ks, kr)
	}
	n := int(math.Ceil(v / b))
	rates := [3]float64{ks * s, r / rho, kr * u} // raw bytes/s of each stage
	var done [3]float64                          // completion time of the previous chunk at each stage
	left := v
	for j := 0; j < n; j++ {
		c := math.Min(b, left)
		left -= c
		prev := 0.0 // completion of this chunk at the previous stage
		for i := 0; i < 3; i++ {
			start := math.Max(prev, done[i])
			done[i] = start + c/rates[i]
			prev = done[i]
		}
	}
	return done[2]
}
