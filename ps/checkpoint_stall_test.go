package ps

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconml/falcon/ps/internal/codec"
	"github.com/falconml/falcon/ps/internal/wire"
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
	keys, lens = append(keys, 1<<40), append(lens, 1) // the pulled key
	if err := s.store.InitValues(keys, lens, make([]float32, klen*(len(keys)-1)+1)); err != nil {
		tb.Fatal(err)
	}
	for i := range windows {
		s.dur.windows.add(uint64(i)*0x9E3779B97F4A7C15 | 1).Max = 3
	}
	return s
}

// pullReq is a pull of the 1-value key of stallServer.
func pullReq() []byte {
	cl := &Client{}
	return cl.encode(nil, wire.OpPull, []piece{{key: 1 << 40, n: 1}}, 0, nil, pushArgs{})
}

// BenchmarkCheckpoint_PullDuring measures a checkpoint of a 96 MiB Adam
// shard (8 Mi values) and 40k client windows, and the longest a pull of
// one value and a push waited while it ran (metrics max-pull-ms and
// max-push-ms), beside the longest pull wait over as long a time without
// a checkpoint (max-pull-idle-ms: the machine's own noise). Numbers, not
// asserts: see the package doc, Durability.
func BenchmarkCheckpoint_PullDuring(b *testing.B) {
	s := stallServer(b, 8<<20, 40000)
	defer s.Close()
	pull := pullReq()
	push := idPush(0, 0, 0) // key 1, not held: refused after the lock, still takes it
	ctx := context.Background()
	// load runs pulls and pushes until during returns; it reports the
	// longest wait of each.
	load := func(during func()) (maxPull, maxPush time.Duration) {
		var done atomic.Bool
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for !done.Load() {
				t := time.Now()
				if _, err := s.HandleRequest(ctx, "c", pull); err != nil {
					b.Error(err)
					return
				}
				maxPull = max(maxPull, time.Since(t))
			}
		}()
		go func() {
			defer wg.Done()
			for !done.Load() {
				t := time.Now()
				s.HandleRequest(ctx, "c", push)
				maxPush = max(maxPush, time.Since(t))
				time.Sleep(time.Millisecond)
			}
		}()
		time.Sleep(5 * time.Millisecond)
		during()
		done.Store(true)
		wg.Wait()
		return maxPull, maxPush
	}
	var maxPull, maxPush, maxIdle, ck time.Duration
	for range b.N {
		var took time.Duration
		p, u := load(func() {
			t := time.Now()
			if err := s.Checkpoint(); err != nil {
				b.Fatal(err)
			}
			took = time.Since(t)
		})
		ck, maxPull, maxPush = max(ck, took), max(maxPull, p), max(maxPush, u)
		idle, _ := load(func() { time.Sleep(took) })
		maxIdle = max(maxIdle, idle)
	}
	b.ReportMetric(float64(ck.Microseconds())/1000, "ckpt-ms")
	b.ReportMetric(float64(maxPull.Microseconds())/1000, "max-pull-ms")
	b.ReportMetric(float64(maxPush.Microseconds())/1000, "max-push-ms")
	b.ReportMetric(float64(maxIdle.Microseconds())/1000, "max-pull-idle-ms")
}

// TestCheckpoint_SnapshotIsCopyOnWrite: a snapshot begun, then copied a
// slice at a time while updates of every kind (Apply, the wire path
// ApplyBytes, Flush) write keys it has copied, keys it has half copied
// and keys it has not reached, is the state at its beginning, bit for
// bit; the store has every update.
func TestCheckpoint_SnapshotIsCopyOnWrite(t *testing.T) {
	for _, opt := range []Optimizer{SGD{LR: 0.1}, Adam{LR: 0.01}} {
		s := shardedStores(t, 1, KeyRange{Servers: 1}, opt, ckKeys, ckLens, 2, true)[0]
		want := s.Checkpoint()
		ck := s.BeginSnapshot(nil, nil)
		g := func(n int) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(i%3) - 1
			}
			return v
		}
		s.SnapshotSlice(20) // key 1 (3 values) whole, key 5 (40) half
		if err := s.Apply([]uint64{1, 5}, nil, g(43), 1); err != nil {
			t.Fatal(err)
		}
		gb := make([]byte, 4*17)
		codec.Put(gb, g(17))
		if err := s.ApplyBytes([]uint64{1 << 62}, nil, gb, 1); err != nil { // not reached
			t.Fatal(err)
		}
		if _, err := s.Flush(2, 1); err != nil { // every key: the buffered clock
			t.Fatal(err)
		}
		for !s.SnapshotSlice(7) {
		}
		if s.Snapshotting() {
			t.Fatal("snapshot still set when complete")
		}
		if !slices.Equal(f32Bits(ck.Values), f32Bits(want.Values)) || !slices.Equal(f32Bits(ck.State), f32Bits(want.State)) || !reflect.DeepEqual(ck, want) {
			t.Fatalf("%s: the snapshot holds updates made after it began", opt.Name())
		}
		if s.Steps(1) != want.Keys[0].Steps+2 || slices.Equal(f32Bits(s.Checkpoint().Values), f32Bits(want.Values)) {
			t.Fatalf("%s: the store lost the updates", opt.Name())
		}
	}
}

// TestCheckpoint_RequestsServedDuring: while a checkpoint is being taken
// (held at a seam after it began), a pull and a push are served; the
// checkpoint file is the state when it began, and the restart (the
// checkpoint, then the log since) has the push too.
func TestCheckpoint_RequestsServedDuring(t *testing.T) {
	dir := t.TempDir()
	cfg := ServerConfig{Store: StoreConfig{Optimizer: Adam{LR: 0.1}}, Durable: DurableConfig{Dir: dir, Log: true}}
	s, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.store.InitValues([]uint64{1}, []int{1}, []float32{0.5}); err != nil {
		t.Fatal(err)
	}
	before, _ := s.store.Value(nil, 1)
	begun, release := make(chan struct{}), make(chan struct{})
	s.dur.hook = func(stage string) {
		if stage == "begun" {
			close(begun)
			<-release
		}
	}
	ckErr := make(chan error, 1)
	go func() { ckErr <- s.Checkpoint() }()
	<-begun
	served := make(chan error, 1)
	go func() {
		cl := &Client{}
		_, err := s.HandleRequest(ctx, "c", cl.encode(nil, wire.OpPull, []piece{{key: 1, n: 1}}, 0, nil, pushArgs{}))
		if err == nil {
			_, err = s.HandleRequest(ctx, "c", idPush(3, 1, 2))
		}
		served <- err
	}()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // a hang guard, not a speed bound
		close(release)
		t.Fatal("a pull and a push waited for the checkpoint")
	}
	after, _ := s.store.Value(nil, 1)
	close(release)
	if err := <-ckErr; err != nil {
		t.Fatal(err)
	}
	ck, err := ReadCheckpointFile(filepath.Join(dir, "s.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f32Bits(ck.Values), f32Bits(before)) || ck.Keys[0].Steps != 0 {
		t.Fatalf("checkpoint holds %v (%d steps), want the state when it began, %v (0)", ck.Values, ck.Keys[0].Steps, before)
	}
	s.Close()
	r, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, _ := r.store.Value(nil, 1); !slices.Equal(f32Bits(got), f32Bits(after)) || r.store.Steps(1) != 1 {
		t.Fatalf("restart holds %v (%d steps), want %v (1)", got, r.store.Steps(1), after)
	}
}

// BenchmarkCheckpoint_SortWindows40k: sorting the client windows of a
// snapshot, 40k clients with random ids (an insertion sort under the
// write lock took 2.09 s; now a pdqsort, after the lock is released).
func BenchmarkCheckpoint_SortWindows40k(b *testing.B) {
	ws := make([]ClientWindow, 40000)
	for i := range ws {
		ws[i].Client = uint64(i)*0x9E3779B97F4A7C15 | 1
	}
	tmp := make([]ClientWindow, len(ws))
	for b.Loop() {
		copy(tmp, ws)
		sortWindows(tmp)
	}
}

// BenchmarkCheckpoint_LockHolds: the write-lock holds of a checkpoint of
// the 96 MiB shard with 40k client windows: the begin (metric begin-ms:
// keys, buffers and windows copied) and the slices of snapSlice values
// with their Adam state (slice-p50-ms, slice-max-ms over every slice of
// every snapshot; the maximum includes the machine's preemptions).
func BenchmarkCheckpoint_LockHolds(b *testing.B) {
	s := stallServer(b, 8<<20, 40000)
	defer s.Close()
	var begin time.Duration
	var slice []time.Duration
	for range b.N {
		vals, state := s.snapStorage()
		t := time.Now()
		s.snapshotLocked(vals, state)
		begin = max(begin, time.Since(t))
		for done := false; !done; {
			t := time.Now()
			done = s.store.SnapshotSlice(snapSlice)
			slice = append(slice, time.Since(t))
		}
	}
	slices.Sort(slice)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(begin), "begin-ms")
	b.ReportMetric(ms(slice[len(slice)/2]), "slice-p50-ms")
	b.ReportMetric(ms(slice[len(slice)-1]), "slice-max-ms")
}
