package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
)

// BenchmarkStore_Append: one Append of a coordinator-sized tail (about
// two log entries) to a state of the given size, on the embedded etcd
// (fsync off: a real etcd adds its disk's sync to each).
func BenchmarkStore_Append(b *testing.B) {
	if testEtcd.err != nil {
		b.Skipf("embedded etcd server could not start (%v)", testEtcd.err)
	}
	for _, size := range []int{0, 1 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("state=%dKiB", size>>10), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Endpoints = []string{testEtcd.endpoint}
			cfg.Prefix = fmt.Sprintf("/falcon-bench/%d-%d/", size, time.Now().UnixNano())
			cfg.TTL = testTTL
			cfg.Logger = zap.NewNop()
			be, err := Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			ctx := context.Background()
			l, err := be.Election("e").Campaign(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Resign(ctx)
			st := NewStore(l, DefaultStateName)
			if err := st.Save(ctx, pat(1, size)); err != nil {
				b.Fatal(err)
			}
			tail := pat(2, 160)
			b.SetBytes(int64(len(tail)))
			b.ResetTimer()
			for b.Loop() {
				if err := st.Append(ctx, tail); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
