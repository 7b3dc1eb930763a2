//go:build amd64 && !purego

package codec

// AxpyNeg computes w[i] −= a·g[i] (len(g) ≥ len(w)) four lanes at a time
// with SSE (part of every amd64 CPU): per lane the same single-precision
// multiply and subtract, rounded the same way, as axpyNegGo.
func AxpyNeg(w, g []float32, a float32) {
	if len(w) == 0 {
		return
	}
	g = g[:len(w)]
	axpyNegSSE(&w[0], &g[0], len(w), a)
}

//go:noescape
func axpyNegSSE(w, x *float32, n int, a float32)
