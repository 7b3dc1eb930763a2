package straggler

import (
	"errors"
	"math"
	"testing"
	"time"
)

const tol = 1e-9

func near(a, b float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func TestAmdahl_Speedup(t *testing.T) {
	for _, tc := range []struct {
		serial, p, want float64
	}{
		{0, 4, 4},         // linear
		{1, 8, 1},         // fully serial
		{0.1, 1, 1},       // S(1) = 1 always
		{0.5, 2, 1 / .75}, // 1/(0.5+0.25)
		{0.1, 0.5, 1 / (0.1 + 0.9/0.5)},
	} {
		if got := (Amdahl{tc.serial}).Speedup(tc.p); !near(got, tc.want) {
			t.Errorf("Amdahl{%v}.Speedup(%v) = %v, want %v", tc.serial, tc.p, got, tc.want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Speedup(0) did not panic")
		}
	}()
	Amdahl{}.Speedup(0)
}

func TestHeteroConfig_Validate(t *testing.T) {
	ok := DefaultHeteroConfig(3)
	for _, tc := range []struct {
		name string
		mod  func(c *HeteroConfig)
		want error
	}{
		{"ok", func(*HeteroConfig) {}, nil},
		{"no workers", func(c *HeteroConfig) { c.NumWorkers = 0 }, ErrConfig},
		{"speed len", func(c *HeteroConfig) { c.Speed = []float64{1} }, ErrConfig},
		{"speed zero", func(c *HeteroConfig) { c.Speed = []float64{1, 0, 1} }, ErrConfig},
		{"jitter", func(c *HeteroConfig) { c.SpeedJitter = 1 }, ErrConfig},
		{"hosts len", func(c *HeteroConfig) { c.Hosts = []int{0} }, ErrConfig},
		{"cores short", func(c *HeteroConfig) { c.Hosts = []int{0, 1, 2}; c.Cores = []int{4} }, ErrConfig},
		{"serial", func(c *HeteroConfig) { c.Serial = []float64{0, 2, 0} }, ErrConfig},
		{"persistent worker", func(c *HeteroConfig) { c.Persistent = map[int]float64{5: .5} }, ErrWorker},
		{"persistent factor", func(c *HeteroConfig) { c.Persistent = map[int]float64{1: 1.5} }, ErrConfig},
		{"transient period", func(c *HeteroConfig) { c.Transient = TransientConfig{Prob: .1, Factor: .5} }, ErrConfig},
		{"transient factor", func(c *HeteroConfig) {
			c.Transient = TransientConfig{Prob: .1, Period: time.Second, Duration: time.Second}
		}, ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			err := c.Validate()
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Validate() = %v, want %v", err, tc.want)
			}
			if _, err2 := NewHetero(c); (err == nil) != (err2 == nil) {
				t.Fatalf("NewHetero error %v disagrees with Validate %v", err2, err)
			}
		})
	}
}

func TestHetero_Rate(t *testing.T) {
	m, err := NewHetero(HeteroConfig{
		NumWorkers: 3, BaseRate: 100, Speed: []float64{1, 2, 1},
		Hosts: []int{0, 0, 1}, Cores: []int{4, 2},
		Serial:     []float64{0, 0, 0.5},
		Persistent: map[int]float64{2: 0.5},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		w, p int
		want float64
	}{
		{0, 1, 100},
		{0, 3, 300},                  // linear speed-up
		{1, 2, 400},                  // factor 2
		{0, 9, 400},                  // clamped at host cores 4
		{2, 2, 100 * .5 * (1 / .75)}, // persistent 0.5, Amdahl 0.5 at p=2
		{2, 5, 100 * .5 * (1 / .75)}, // host 1 has 2 cores
	} {
		if got := m.Rate(tc.w, tc.p, 0); !near(got, tc.want) {
			t.Errorf("Rate(%d,%d) = %v, want %v", tc.w, tc.p, got, tc.want)
		}
	}
	// Oversubscribed host 0 (4 cores, 3+3 goroutines): each gets 2 cores.
	got := m.RateAll([]int{3, 3, 1}, 0, nil)
	if !near(got[0], 200) || !near(got[1], 400) || !near(got[2], 50) {
		t.Errorf("RateAll = %v, want [200 400 50]", got)
	}
}

func TestHetero_TransientDeterministicAndPiecewise(t *testing.T) {
	cfg := DefaultHeteroConfig(4)
	cfg.Transient = TransientConfig{Prob: 0.3, Period: time.Second, Duration: 2500 * time.Millisecond, Factor: 0.25}
	cfg.Seed = 7
	a, _ := NewHetero(cfg)
	b, _ := NewHetero(cfg)
	slowed := 0
	const horizon = 60 * time.Second
	for w := range 4 {
		// Walk the change points: the rate must be constant on [now, next).
		for now := time.Duration(0); now < horizon; {
			next := a.NextChange(w, now)
			if next <= now {
				t.Fatalf("NextChange(%d,%v) = %v, not after now", w, now, next)
			}
			r := a.Rate(w, 1, now)
			for _, f := range []float64{0.25, 0.5, 0.999} {
				at := now + time.Duration(f*float64(next-now))
				if at < next && a.Rate(w, 1, at) != r {
					t.Fatalf("worker %d: rate changes at %v inside [%v,%v)", w, at, now, next)
				}
			}
			if b.Rate(w, 1, now) != r {
				t.Fatalf("same seed, different rate at %v", now)
			}
			if a.Slowed(w, now) {
				slowed++
			}
			now = next
		}
	}
	if slowed == 0 {
		t.Fatal("no transient slowdown in 4 workers x 60 s at p=0.3/s")
	}
	// A query in reverse order gives the same answers (purity).
	for now := horizon; now >= 0; now -= 333 * time.Millisecond {
		if a.Rate(2, 1, now) != b.Rate(2, 1, now) {
			t.Fatal("rate depends on query order")
		}
	}
}
