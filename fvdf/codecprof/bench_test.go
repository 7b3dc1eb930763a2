package codecprof

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/golang/snappy"
	"github.com/pierrec/lz4/v4"
)

// BenchmarkCompress measures per-core compression of 64 KiB blocks of each
// class (b.SetBytes: the MB/s column is the raw throughput s).
func BenchmarkCompress(b *testing.B) {
	for _, k := range Classes() {
		src := Generate(k, 64<<10, rand.New(rand.NewPCG(1, uint64(k))))
		b.Run(fmt.Sprintf("codec=lz4/class=%s", k), func(b *testing.B) {
			var c lz4.Compressor
			dst := make([]byte, lz4.CompressBlockBound(len(src)))
			b.SetBytes(int64(len(src)))
			for range b.N {
				if _, err := c.CompressBlock(src, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("codec=snappy/class=%s", k), func(b *testing.B) {
			dst := make([]byte, snappy.MaxEncodedLen(len(src)))
			b.SetBytes(int64(len(src)))
			for range b.N {
				snappy.Encode(dst, src)
			}
		})
	}
}
