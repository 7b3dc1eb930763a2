//go:build amd64 && !purego

package ps

// anyNonFinite reports whether some value of v is NaN or ±Inf, 16 lanes at
// a time with SSE2 (part of every amd64 CPU).
func anyNonFinite(v []float32) bool {
	if len(v) == 0 {
		return false
	}
	return anyNonFiniteSSE(&v[0], len(v))
}

//go:noescape
func anyNonFiniteSSE(x *float32, n int) bool
