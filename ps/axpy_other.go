//go:build !amd64 || purego

package ps

// axpyNeg computes w[i] −= a·g[i] (len(g) ≥ len(w)).
func axpyNeg(w, g []float32, a float32) { axpyNegGo(w, g, a) }
