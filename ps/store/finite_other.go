//go:build !amd64 || purego

package store

// maxHi returns the largest (bits>>16)&0x7fff over v (see hiBound).
func maxHi(v []float32) uint32 { return maxHiGo(v) }
