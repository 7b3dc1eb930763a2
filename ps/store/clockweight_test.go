package store

import (
	"errors"
	"testing"
)

// TestClockWeight: the largest per-key weight buffered in a clock, with
// and without per-sender buffers, 0 once flushed or never pushed; a key
// pushed by fewer senders does not lower it.
func TestClockWeight(t *testing.T) {
	for _, det := range []bool{false, true} {
		s, err := New(Config{Optimizer: SGD{LR: 0.1}, Deterministic: det})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Init([]uint64{1, 2}, []int{2, 3}, Zeros{}); err != nil {
			t.Fatal(err)
		}
		push := func(clock int, sender string, keys []uint64, lens []int, w float64) {
			t.Helper()
			n := 0
			for _, l := range lens {
				n += l
			}
			if err := s.AccumulateFrom(clock, sender, keys, lens, make([]float32, n), w); err != nil {
				t.Fatal(err)
			}
		}
		push(0, "a", []uint64{1, 2}, []int{2, 3}, 8)
		push(0, "b", []uint64{1, 2}, []int{2, 3}, 8)
		push(0, "c", []uint64{2}, []int{3}, 5) // a sparse push: key 2 only
		push(1, "a", []uint64{1, 2}, []int{2, 3}, 7)
		for _, c := range []struct {
			clock int
			want  float64
		}{{0, 21}, {1, 7}, {2, 0}} {
			if got := s.ClockWeight(c.clock); got != c.want {
				t.Errorf("det=%v: ClockWeight(%d) = %v, want %v", det, c.clock, got, c.want)
			}
		}
		if _, err := s.Flush(0, 1); err != nil {
			t.Fatal(err)
		}
		if got := s.ClockWeight(0); got != 0 {
			t.Errorf("det=%v: ClockWeight of a flushed clock = %v, want 0", det, got)
		}
	}
}

// TestFlushExcept: with Config.Deterministic a flush leaving a sender out
// applies the others' pushes only, exactly as a store that never had the
// left-out push (bit for bit), and drops its buffer with the clock's;
// without it, leaving a sender out is refused and changes nothing.
func TestFlushExcept(t *testing.T) {
	run := func(det bool, withC bool, except []string) ([]float32, error) {
		s, err := New(Config{Optimizer: SGD{LR: 0.1}, Deterministic: det})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Init([]uint64{1}, []int{3}, Zeros{}); err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct {
			sender string
			g      []float32
			w      float64
		}{{"a", []float32{1, 2, 3}, 4}, {"b", []float32{0.5, -1, 1e-3}, 4}, {"c", []float32{9, 9, 9}, 4}} {
			if p.sender == "c" && !withC {
				continue
			}
			if err := s.AccumulateFrom(0, p.sender, []uint64{1}, nil, p.g, p.w); err != nil {
				t.Fatal(err)
			}
		}
		if w := s.ClockWeight(0, except...); det && w != 8 {
			t.Errorf("ClockWeight without %q = %v, want 8", except, w)
		}
		if _, err := s.FlushExcept(0, 1, except); err != nil {
			return nil, err
		}
		if err := s.AccumulateFrom(0, "c", []uint64{1}, nil, []float32{1, 1, 1}, 4); !errors.Is(err, ErrClockNotOpen) {
			t.Errorf("a late push into the flushed clock: %v, want ErrClockNotOpen", err)
		}
		v, _ := s.Value(nil, 1)
		return v, nil
	}
	got, err := run(true, true, []string{"c"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := run(true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(got, want) {
		t.Errorf("flush leaving c out %v, want %v (as if c never pushed)", got, want)
	}
	if _, err := run(false, true, []string{"c"}); !errors.Is(err, ErrNotDeterministic) {
		t.Errorf("FlushExcept without Deterministic: %v, want ErrNotDeterministic", err)
	}
}
