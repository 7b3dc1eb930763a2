//go:build !amd64 || purego

package codec

// AxpyNeg computes w[i] −= a·g[i] (len(g) ≥ len(w)).
func AxpyNeg(w, g []float32, a float32) { axpyNegGo(w, g, a) }
