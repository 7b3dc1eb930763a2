package pscoflowlab

import (
	"math/rand/v2"
	"time"
)

// sparseModel is a synthetic ps.Model: params floats, of which a fixed
// random fraction density (drawn from seed) receive gradient; each
// sample's gradient there is a pseudo-random value in [−1, 1) from
// (seed, sample, position), elsewhere zero. So a push's bytes are zeros
// with random float32s at the mask (lz4 shrinks them about as the density
// says), and the parameters, starting at zero and moved only at the mask,
// stay as sparse. Each Gradient call also sleeps compute, the emulated
// accelerator time of one batch (no CPU: the machine's two cores are for
// the transport and the codecs).
type sparseModel struct {
	mask    []int32
	seed    uint64
	compute time.Duration
}

func newSparseModel(params int, density float64, seed uint64, compute time.Duration) *sparseModel {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	m := &sparseModel{seed: seed, compute: compute}
	for i := range params {
		if density >= 1 || rng.Float64() < density {
			m.mask = append(m.mask, int32(i))
		}
	}
	return m
}

// Gradient implements ps.Model.
func (m *sparseModel) Gradient(_ []float32, samples []int, grad []float32) float64 {
	if m.compute > 0 {
		time.Sleep(m.compute)
	}
	for _, s := range samples {
		x := m.seed ^ uint64(s)*0x9e3779b97f4a7c15
		for _, i := range m.mask {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			grad[i] += float32(int32(x>>32)) / (1 << 31)
		}
	}
	return 0
}
