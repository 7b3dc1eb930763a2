package ps

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// stallServer returns a durable server holding n values of Adam (12 bytes
// each: value and two moments) in keys of 1<<16 values, and the ids of
// windows client windows.
func stallServer(tb testing.TB, n, windows int) *Server {
	tb.Helper()
	s, err := NewServer("server-0", ServerConfig{Store: StoreConfig{Optimizer: Adam{LR: 0.01}}, Durable: DurableConfig{Dir: tb.TempDir()}})
	if err != nil {
		tb.Fatal(err)
	}
	const klen = 1 << 16
	var keys []uint64
	var lens []int
	for k := 0; k*klen < n; k++ {
		keys, lens = append(keys, uint64(k)), append(lens, klen)
	}
	if err := s.store.InitValues(keys, lens, make([]float32, klen*len(keys))); err != nil {
		tb.Fatal(err)
	}
	for i := range windows {
		s.dur.windows[uint64(i)*0x9E3779B97F4A7C15|1] = &ClientWindow{Client: uint64(i)*0x9E3779B97F4A7C15 | 1, Max: 3}
	}
	return s
}

// pullReq is a pull of the first value of key 0.
func pullReq() []byte {
	cl := &Client{}
	return cl.encode(nil, opPull, []piece{{key: 0, n: 1 << 16}}, 0, nil, pushArgs{})
}

// BenchmarkCheckpoint_PullDuring measures a checkpoint of a 96 MiB Adam
// shard (8 Mi values) and 40k client windows, and the longest a pull of
// key 0 and a push waited while it ran (metrics max-pull-ms and
// max-push-ms). Numbers, not asserts: see the package doc, Durability.
func BenchmarkCheckpoint_PullDuring(b *testing.B) {
	s := stallServer(b, 8<<20, 40000)
	defer s.Close()
	pull := pullReq()
	push := idPush(0, 0, 0) // key 1, not held: refused after the lock, still takes it
	ctx := context.Background()
	var maxPull, maxPush, ck time.Duration
	for range b.N {
		var done atomic.Bool
		var wg sync.WaitGroup
		var mp, mu time.Duration
		wg.Add(2)
		go func() {
			defer wg.Done()
			for !done.Load() {
				t := time.Now()
				if _, err := s.HandleRequest(ctx, "c", pull); err != nil {
					b.Error(err)
					return
				}
				mp = max(mp, time.Since(t))
			}
		}()
		go func() {
			defer wg.Done()
			for !done.Load() {
				t := time.Now()
				s.HandleRequest(ctx, "c", push)
				mu = max(mu, time.Since(t))
				time.Sleep(time.Millisecond)
			}
		}()
		time.Sleep(5 * time.Millisecond)
		t := time.Now()
		if err := s.Checkpoint(); err != nil {
			b.Fatal(err)
		}
		ck = max(ck, time.Since(t))
		done.Store(true)
		wg.Wait()
		maxPull, maxPush = max(maxPull, mp), max(maxPush, mu)
	}
	b.ReportMetric(float64(ck.Microseconds())/1000, "ckpt-ms")
	b.ReportMetric(float64(maxPull.Microseconds())/1000, "max-pull-ms")
	b.ReportMetric(float64(maxPush.Microseconds())/1000, "max-push-ms")
}
