package store

import "testing"

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
