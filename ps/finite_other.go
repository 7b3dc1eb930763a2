//go:build !amd64 || purego

package ps

// anyNonFinite reports whether some value of v is NaN or ±Inf.
func anyNonFinite(v []float32) bool { return anyNonFiniteGo(v) }
