package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/pstest"
	"github.com/falconml/falcon/ps/store"
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

// BenchmarkBSPRun: one 3-worker, 30-clock BSP run in process (pstest)
// with the coordinator's state kept nowhere, in a directory
// (ps.DirCoordinatorStore) or in the embedded etcd (fsync off), so the
// three are measured side by side on the same machine.
func BenchmarkBSPRun(b *testing.B) {
	if testEtcd.err != nil {
		b.Skipf("embedded etcd server could not start (%v)", testEtcd.err)
	}
	const workers, clocks = 3, 30
	for _, where := range []string{"none", "dir", "etcd"} {
		b.Run("store="+where, func(b *testing.B) {
			for b.Loop() {
				opts := []pstest.Option{pstest.Servers(2), pstest.Workers(workers), pstest.Batch(8), pstest.Chunk(8),
					pstest.Policy(epsp.NewBSP()), pstest.NoLeakCheck()}
				var l *Leadership
				switch where {
				case "dir":
					opts = append(opts, pstest.CoordinatorStore(ps.DirCoordinatorStore(b.TempDir())))
				case "etcd":
					cfg := DefaultConfig()
					cfg.Endpoints = []string{testEtcd.endpoint}
					cfg.Prefix = fmt.Sprintf("/falcon-bench/run-%d/", time.Now().UnixNano())
					cfg.TTL = testTTL
					cfg.Logger = zap.NewNop()
					be, err := Open(cfg)
					if err != nil {
						b.Fatal(err)
					}
					defer be.Close()
					if l, err = be.Election("e").Campaign(context.Background()); err != nil {
						b.Fatal(err)
					}
					opts = append(opts, pstest.CoordinatorStore(NewStore(l, DefaultStateName)))
				}
				c := pstest.NewCluster(b, opts...)
				_, err := c.Train(context.Background(), counting{}, ps.ShardSampler{N: 96, Workers: workers},
					ps.TrainConfig{Keys: []uint64{0}, Lens: []int{96}, Init: store.Zeros{}, Clocks: clocks})
				if err != nil {
					b.Fatal(err)
				}
				c.PS.Close()
				if l != nil {
					l.Resign(context.Background())
				}
			}
		})
	}
}
