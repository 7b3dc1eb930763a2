package store

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// detPush is one worker's push of a clock.
type detPush struct {
	sender string
	grad   []float32
	weight float64
}

// detRun accumulates the pushes of each clock in the order perm(clock)
// gives and flushes each clock, on a store of one key of n values; it
// returns the final values.
func detRun(t *testing.T, cfg Config, clocks [][]detPush, order func(c int, ps []detPush) []detPush) []float32 {
	t.Helper()
	n := len(clocks[0][0].grad)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Init([]uint64{7}, []int{n}, Uniform{Lo: -1, Hi: 1, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	for c, ps := range clocks {
		for _, p := range order(c, ps) {
			if err := s.AccumulateFrom(c, p.sender, []uint64{7}, nil, p.grad, p.weight); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Flush(c, 1); err != nil {
			t.Fatal(err)
		}
	}
	v, _ := s.Value(nil, 7)
	return v
}

// detClocks makes clocks clocks of pushes from workers workers, n values
// each, gradients spanning several binades so that float32 sums depend on
// their order.
func detClocks(workers, clocks, n int) [][]detPush {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([][]detPush, clocks)
	for c := range out {
		for w := range workers {
			g := make([]float32, n)
			for i := range g {
				g[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(4))))
			}
			out[c] = append(out[c], detPush{sender: fmt.Sprintf("worker-%d", w), grad: g, weight: float64(16 + r.IntN(48))})
		}
	}
	return out
}

func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// TestDeterministicOrderFree: with Config.Deterministic, 3 and 4 workers'
// pushes accumulated in any order give bit-identical parameters; without
// it the same runs differ (the failure the option removes is real).
func TestDeterministicOrderFree(t *testing.T) {
	for _, workers := range []int{3, 4} {
		for _, opt := range []Optimizer{SGD{LR: 0.1}, Adam{LR: 1e-3}} {
			t.Run(fmt.Sprintf("%dworkers/%s", workers, opt.Name()), func(t *testing.T) {
				clocks := detClocks(workers, 5, 512)
				inOrder := func(_ int, ps []detPush) []detPush { return ps }
				reversed := func(_ int, ps []detPush) []detPush { q := slices.Clone(ps); slices.Reverse(q); return q }
				shuffled := func(seed uint64) func(int, []detPush) []detPush {
					r := rand.New(rand.NewPCG(seed, 9))
					return func(_ int, ps []detPush) []detPush {
						q := slices.Clone(ps)
						r.Shuffle(len(q), func(i, j int) { q[i], q[j] = q[j], q[i] })
						return q
					}
				}
				orders := []func(int, []detPush) []detPush{reversed, shuffled(1), shuffled(2), shuffled(3)}
				det := Config{Optimizer: opt, Deterministic: true}
				want := detRun(t, det, clocks, inOrder)
				for i, o := range orders {
					if got := detRun(t, det, clocks, o); !sameBits(got, want) {
						t.Errorf("deterministic: order %d ends with other bits than in-order", i)
					}
				}
				plain := Config{Optimizer: opt}
				ref := detRun(t, plain, clocks, inOrder)
				differ := false
				for _, o := range orders {
					if !sameBits(detRun(t, plain, clocks, o), ref) {
						differ = true
					}
				}
				if !differ {
					t.Errorf("without Deterministic every order gave the same bits: the test shows nothing")
				}
				// Deterministic sums senders in name order: the same as
				// the plain store fed in that order.
				if !sameBits(want, ref) {
					t.Errorf("deterministic in-order run differs from the plain in-order run")
				}
			})
		}
	}
}

// TestDeterministicCheckpoint: a deterministic store checkpointed (encoded
// and decoded) with some senders' pushes of a clock buffered, restored into
// a new store that gets the rest in another order, ends bit-identical to
// an uninterrupted run; the checkpoint keeps one buffer per sender.
func TestDeterministicCheckpoint(t *testing.T) {
	clocks := detClocks(4, 4, 256)
	cfg := Config{Optimizer: Momentum{LR: 0.05, Mu: 0.9}, Deterministic: true}
	want := detRun(t, cfg, clocks, func(_ int, ps []detPush) []detPush { return ps })
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Init([]uint64{7}, []int{256}, Uniform{Lo: -1, Hi: 1, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	for c, ps := range clocks {
		q := slices.Clone(ps)
		slices.Reverse(q)
		for i, p := range q {
			if c == 2 && i == 2 {
				ck := s.Checkpoint()
				if len(ck.Pending) != 2 || ck.Pending[0].Sender != "worker-2" || ck.Pending[1].Sender != "worker-3" {
					t.Fatalf("pending %+v, want one buffer for each of worker-2 and worker-3", ck.Pending)
				}
				dec, err := DecodeCheckpoint(EncodeCheckpoint(nil, ck))
				if err != nil {
					t.Fatal(err)
				}
				if s, err = New(cfg); err != nil {
					t.Fatal(err)
				}
				if err := s.Restore(dec); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.AccumulateFrom(c, p.sender, []uint64{7}, nil, p.grad, p.weight); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Flush(c, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := s.Value(nil, 7); !sameBits(got, want) {
		t.Fatal("restored run ends with other bits than the uninterrupted one")
	}
}

// TestDeterministicOverflow: the overflow check covers the senders' sums
// added at Flush: two senders whose buffers are each finite but whose
// total would overflow float32 get the second push refused with
// ErrNonFinite, changing nothing; the window still refuses a closed clock.
func TestDeterministicOverflow(t *testing.T) {
	s, err := New(Config{Deterministic: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Init([]uint64{1}, []int{2}, nil); err != nil {
		t.Fatal(err)
	}
	big := []float32{3e38, 1}
	if err := s.AccumulateFrom(0, "a", []uint64{1}, nil, big, 1); err != nil {
		t.Fatal(err)
	}
	err = s.AccumulateFrom(0, "b", []uint64{1}, nil, big, 1)
	if !errors.Is(err, ErrNonFinite) {
		t.Fatalf("second sender's push: err %v, want ErrNonFinite", err)
	}
	ck := s.Checkpoint()
	if len(ck.Pending) != 1 || ck.Pending[0].Sender != "a" {
		t.Fatalf("pending %+v after the refused push, want only a's", ck.Pending)
	}
	if _, err := s.Flush(0, 1); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Value(nil, 1); math.IsInf(float64(v[0]), 0) || !(v[0] < 0) {
		t.Fatalf("value %v after the flush", v)
	}
	if err := s.AccumulateFrom(0, "a", []uint64{1}, nil, big, 1); !errors.Is(err, ErrClockNotOpen) {
		t.Fatalf("push into flushed clock 0: err %v, want ErrClockNotOpen", err)
	}
}

// TestPlainFlushUnchanged: without Config.Deterministic, accumulates and
// flushes give the bits they gave before the option existed: a run of 6
// clocks of 4 pushes over 3 keys with SGD, Momentum and Adam hashes to the
// value the build without the option computed (FNV-64a of the final
// values' bits). The simulator (ps/sim), which uses the Store, relies on
// it for its outputs.
func TestPlainFlushUnchanged(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	h := fnv.New64a()
	for _, opt := range []Optimizer{SGD{LR: 0.1}, Momentum{LR: 0.05, Mu: 0.9}, Adam{LR: 1e-3}} {
		s, _ := New(Config{Optimizer: opt})
		keys, lens := []uint64{1, 5, 9}, []int{64, 1, 300}
		s.Init(keys, lens, Uniform{Lo: -1, Hi: 1, Seed: 4})
		for c := range 6 {
			for range 4 {
				g := make([]float32, 365)
				for i := range g {
					g[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(4))))
				}
				if err := s.Accumulate(c, keys, nil, g, float64(1+r.IntN(64))); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Flush(c, 1); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range keys {
			v, _ := s.Value(nil, k)
			for _, x := range v {
				fmt.Fprintf(h, "%08x", math.Float32bits(x))
			}
		}
	}
	if got, want := h.Sum64(), uint64(0xcc08f9a4193191be); got != want {
		t.Fatalf("final values hash to %016x, the build before Deterministic gave %016x", got, want)
	}
}

// TestDeterministicMemory: with Config.Deterministic the buffers of a
// clock pushed by S senders take at most S·(8·V + 128·K + 256) bytes (the
// package doc's formula), and after its flush the spares at most S+1
// buffers' worth; the next clock reuses them (no growth over clocks).
func TestDeterministicMemory(t *testing.T) {
	const S, n = 5, 1000
	s, err := New(Config{Deterministic: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Init([]uint64{1, 2}, []int{n, 1}, nil); err != nil {
		t.Fatal(err)
	}
	g := make([]float32, n+1)
	per := 8*(n+1) + 128*2 + 256
	var spare0 int
	for c := range 4 {
		for w := range S {
			if err := s.AccumulateFrom(c, fmt.Sprint("w", w), []uint64{1, 2}, nil, g, 1); err != nil {
				t.Fatal(err)
			}
		}
		if open, _ := s.BufferedBytes(); open > S*per {
			t.Fatalf("clock %d: %d bytes buffered for %d senders, the formula allows %d", c, open, S, S*per)
		}
		if _, err := s.Flush(c, 1); err != nil {
			t.Fatal(err)
		}
		open, spare := s.BufferedBytes()
		if open != 0 || spare > (S+1)*per {
			t.Fatalf("after flush %d: %d open, %d spare bytes (at most %d)", c, open, spare, (S+1)*per)
		}
		if c == 0 {
			spare0 = spare
		} else if spare != spare0 {
			t.Fatalf("after flush %d: %d spare bytes, %d after the first: buffers not reused", c, spare, spare0)
		}
	}
}
