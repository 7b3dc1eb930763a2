package ps_test

import (
	"testing"

	"github.com/falconml/falcon/ps/store"
)

// BenchmarkStore_AccumulateFlush measures the enforced-synchronisation
// path without the network: per iteration four accumulate pushes of one
// key of n values into one clock, then the flush of that clock (SGD).
// Bytes per iteration: 4·4·n (the pushed gradients).
func BenchmarkStore_AccumulateFlush(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			st, err := store.New(store.Config{Optimizer: store.SGD{LR: 0.01}})
			if err != nil {
				b.Fatal(err)
			}
			if err := st.Init([]uint64{1}, []int{sz.n}, store.Uniform{Lo: -1, Hi: 1, Seed: 1}); err != nil {
				b.Fatal(err)
			}
			g := make([]float32, sz.n)
			store.Normal{Std: 1, Seed: 2}.Init(1, 0, g)
			b.SetBytes(int64(4 * 4 * sz.n))
			b.ResetTimer()
			for i := range b.N {
				for range 4 {
					if err := st.Accumulate(i, []uint64{1}, nil, g, 8); err != nil {
						b.Fatal(err)
					}
				}
				st.Flush(i, 1)
			}
		})
	}
}

// BenchmarkStore_AccumulateFlushDeterministic is
// BenchmarkStore_AccumulateFlush with StoreConfig.Deterministic, the four
// pushes from four senders: each sums into a buffer of its own and the
// flush adds the four in sender order (store's package doc, Deterministic
// flushes, gives the ratio measured).
func BenchmarkStore_AccumulateFlushDeterministic(b *testing.B) {
	senders := []string{"worker-0", "worker-1", "worker-2", "worker-3"}
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			st, err := store.New(store.Config{Optimizer: store.SGD{LR: 0.01}, Deterministic: true})
			if err != nil {
				b.Fatal(err)
			}
			if err := st.Init([]uint64{1}, []int{sz.n}, store.Uniform{Lo: -1, Hi: 1, Seed: 1}); err != nil {
				b.Fatal(err)
			}
			g := make([]float32, sz.n)
			store.Normal{Std: 1, Seed: 2}.Init(1, 0, g)
			b.SetBytes(int64(4 * 4 * sz.n))
			b.ResetTimer()
			for i := range b.N {
				for _, from := range senders {
					if err := st.AccumulateFrom(i, from, []uint64{1}, nil, g, 8); err != nil {
						b.Fatal(err)
					}
				}
				st.Flush(i, 1)
			}
		})
	}
}
