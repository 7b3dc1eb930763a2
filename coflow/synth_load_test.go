package coflow

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestSynthetic_Load: with Load set, the trace's offered load
// (OfferedLoad) is the one asked for (within the millisecond rounding),
// the same seed gives the same trace, another seed another, and the
// coflows are those drawn without Load (only arrivals scale).
func TestSynthetic_Load(t *testing.T) {
	for _, load := range []float64{0.1, 0.5, 2} {
		cfg := DefaultSynthConfig()
		cfg.Coflows, cfg.Ports = 200, 40
		cfg.Load, cfg.PortBps = load, 125e6
		a, err := Synthetic(cfg, rand.New(rand.NewPCG(5, 1)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Synthetic(cfg, rand.New(rand.NewPCG(5, 1)))
		c, _ := Synthetic(cfg, rand.New(rand.NewPCG(6, 1)))
		if !reflect.DeepEqual(a, b) || reflect.DeepEqual(a, c) {
			t.Fatalf("load %v: not deterministic per seed", load)
		}
		if got := OfferedLoad(a, cfg.PortBps); got < load*0.99 || got > load*1.01 {
			t.Fatalf("load %v: offered load %v", load, got)
		}
		plain := cfg
		plain.Load = 0
		p, _ := Synthetic(plain, rand.New(rand.NewPCG(5, 1)))
		for i := range p.Coflows {
			p.Coflows[i].ArrivalMS = a.Coflows[i].ArrivalMS
		}
		if !reflect.DeepEqual(a, p) {
			t.Fatalf("load %v: the coflows differ from the unscaled trace's", load)
		}
	}
	bad := DefaultSynthConfig()
	bad.Load = 0.5
	if _, err := Synthetic(bad, rand.New(rand.NewPCG(1, 1))); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("load without bandwidth: %v", err)
	}
}
