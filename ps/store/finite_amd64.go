//go:build amd64 && !purego

package store

// maxHi returns the largest (bits>>16)&0x7fff over v (see hiBound), 16
// lanes at a time with SSE2 (part of every amd64 CPU).
func maxHi(v []float32) uint32 {
	if len(v) == 0 {
		return 0
	}
	return maxHiSSE(&v[0], len(v))
}

//go:noescape
func maxHiSSE(x *float32, n int) uint32
