package ps

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/falconml/falcon/ps/internal/wire"
)

// accShard is the layout of the accumulation-window tests: key 0 of one
// value and key 1 of 64 Ki values, so that a buffer of the whole shard
// (the finding) is 256 KiB while one of key 0 is a few bytes.
var accKeys, accLens = []uint64{0, 1}, []int{1, 1 << 16}

func newAccShard(t *testing.T) wireStore {
	t.Helper()
	w := newWireStore(t, SGD{LR: 1})
	if err := w.cl.Init(context.Background(), accKeys, make([]float32, 1+1<<16), accLens); err != nil {
		t.Fatal(err)
	}
	return w
}

// accOne pushes a 1-value gradient of key 0 into clock: the 48-byte
// accumulate of the finding.
func accOne(w wireStore, clock int) error {
	return w.cl.do(context.Background(), wire.OpPush, accKeys[:1], []float32{1}, nil, accLens[:1], pushArgs{mode: wire.ModeAccumulate, clock: clock, scale: 1, weight: 1})
}

// buffered returns the bytes of the open clocks' buffers and of the spare,
// and the number of clocks buffered.
func buffered(w wireStore) (open, spare, pending int) {
	w.srv.View(func(s *Store) { open, spare = s.BufferedBytes(); pending = len(s.Pending()) })
	return
}

// TestServer_AccumulateUnopenedClock (issue 25, finding 4): 256
// accumulates of one value into clocks the coordinator never opened are
// refused with ErrClockNotOpen and allocate nothing: no buffer, and less
// than 4 MiB allocated in all (the requests and error messages, about
// 0.43 MB measured); before the fix each
// allocated a buffer of the whole shard (256 KiB, 64 MiB in all) kept
// until a flush that never comes. The same push into an open clock is
// accepted and buffers only what it pushed.
func TestServer_AccumulateUnopenedClock(t *testing.T) {
	w := newAccShard(t)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	for i := range 256 {
		clock := 1000 + 7919*i
		if i%2 == 1 {
			clock = -1 - i // negative clocks: never open either
		}
		if err := accOne(w, clock); !errors.Is(err, ErrClockNotOpen) {
			t.Fatalf("push into clock %d: err %v, want ErrClockNotOpen", clock, err)
		}
	}
	runtime.ReadMemStats(&ms)
	if got := ms.TotalAlloc - before; got > 4<<20 {
		t.Errorf("256 refused pushes allocated %d bytes, want < 4 MiB", got)
	}
	if n, sp, p := buffered(w); n != 0 || sp != 0 || p != 0 {
		t.Errorf("after refused pushes: %d bytes buffered in %d clocks (spare %d), want none", n, p, sp)
	}
	// the legitimate twin: clock 0 is open before the first flush
	if err := accOne(w, 0); err != nil {
		t.Fatal(err)
	}
	if n, _, p := buffered(w); p != 1 || n == 0 || n > 1024 {
		t.Errorf("one value pushed into clock 0: %d bytes buffered in %d clocks, want 1 clock of at most 1 KiB", n, p)
	}
}

// TestServer_AccumulateWindow: the open clocks are F+1 … F+W with F the
// last flushed clock and W the window (DefaultAccumulateWindow); an
// accumulate and flush of an open clock apply the weighted mean, the
// buffer is released by the flush (its memory kept as the one spare the
// next clock reuses, no larger than it was), and the window moves with it.
func TestServer_AccumulateWindow(t *testing.T) {
	w := newAccShard(t)
	ctx := context.Background()
	W := DefaultAccumulateWindow
	for c := range W {
		if err := accOne(w, c); err != nil {
			t.Fatalf("clock %d of the first window: %v", c, err)
		}
	}
	if err := accOne(w, W); !errors.Is(err, ErrClockNotOpen) {
		t.Fatalf("clock %d past the window: err %v, want ErrClockNotOpen", W, err)
	}
	// a second push into clock 0 with another weight: mean (1·1 + 3·5)/4 = 4
	if err := w.cl.do(ctx, wire.OpPush, accKeys[:1], []float32{5}, nil, accLens[:1], pushArgs{mode: wire.ModeAccumulate, clock: 0, scale: 1, weight: 3}); err != nil {
		t.Fatal(err)
	}
	open0, _, _ := buffered(w)
	if err := w.flush(0, 1); err != nil {
		t.Fatal(err)
	}
	if open, spare, p := buffered(w); p != W-1 || spare == 0 || spare > open0/(W) || open >= open0 {
		t.Errorf("after the flush of clock 0: %d clocks buffered in %d bytes, spare %d; before it %d bytes in %d clocks", p, open, spare, open0, W)
	}
	out := make([]float32, 1)
	if err := w.cl.Pull(ctx, accKeys[:1], out, accLens[:1]); err != nil {
		t.Fatal(err)
	}
	if out[0] != -4 {
		t.Errorf("key 0 after the flush of clock 0 = %v, want −4 (SGD lr 1, mean 4)", out[0])
	}
	if err := accOne(w, 0); !errors.Is(err, ErrClockNotOpen) {
		t.Errorf("clock 0 after its flush: err %v, want ErrClockNotOpen", err)
	}
	if err := accOne(w, W); err != nil {
		t.Errorf("clock %d once clock 0 is flushed: %v", W, err)
	}
	for c := 1; c <= W; c++ {
		if err := w.flush(c, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n, sp, p := buffered(w); n != 0 || p != 0 || sp == 0 || sp > 1024 {
		t.Errorf("after every flush: %d bytes buffered in %d clocks, spare %d; want none and one small spare", n, p, sp)
	}
	// the next clock reuses the spare
	if err := accOne(w, 2*W); err != nil {
		t.Fatal(err)
	}
	if n, sp, p := buffered(w); n == 0 || p != 1 || sp != 0 {
		t.Errorf("after a push into a new clock: %d bytes in %d clocks, spare %d; want the spare reused", n, p, sp)
	}
}

// TestStore_AccumulateWindowConfig: the window is configurable and
// validated.
func TestStore_AccumulateWindowConfig(t *testing.T) {
	if _, err := NewStore(StoreConfig{AccumulateWindow: -1}); err == nil {
		t.Error("negative window accepted")
	}
	s, err := NewStore(StoreConfig{AccumulateWindow: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Init([]uint64{1}, []int{2}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Accumulate(0, []uint64{1}, nil, []float32{1, 2}, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Accumulate(1, []uint64{1}, nil, []float32{1, 2}, 1); !errors.Is(err, ErrClockNotOpen) {
		t.Fatalf("clock 1 with window 1: err %v", err)
	}
	if n, err := s.Flush(0, 1); n != 1 || err != nil || s.Flushed() != 0 {
		t.Fatalf("flush: %d, %v, flushed %d", n, err, s.Flushed())
	}
	if err := s.Accumulate(1, []uint64{1}, nil, []float32{1, 2}, 1); err != nil {
		t.Fatal(err)
	}
}
