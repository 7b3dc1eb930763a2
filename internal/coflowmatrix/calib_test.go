package main

import (
	"testing"
	"time"

	"github.com/falconml/falcon/fvdf/codecprof"
	"github.com/falconml/falcon/transport"
)

// calibCCT runs the cell sched/comp of a fractional-core matrix at
// (40 G, 4) with the bed constants eff and delay, and returns its CCTs.
func calibCCT(t *testing.T, sched, comp string, eff float64, delay time.Duration, plannerEta bool) []time.Duration {
	t.Helper()
	m := wholeMatrix(t, -1, 3)
	m.o.codecEff, m.o.doneDelay, m.o.plannerEta = eff, delay, plannerEta
	cells := append(m.cells, Cell{"sebf", "none", "varys", Settings[3], ""})
	for _, c := range cells {
		if c.Sched == sched && c.Comp == comp {
			r, err := m.runOne(c, m.work[0], 0, false)
			if err != nil {
				t.Fatal(err)
			}
			return r.cct
		}
	}
	t.Fatalf("no cell %s/%s", sched, comp)
	return nil
}

func sumCCT(d []time.Duration) time.Duration {
	var s time.Duration
	for _, x := range d {
		s += x
	}
	return s
}

// TestCalibrationFlags: -codec-efficiency and -completion-delay reach
// every run's coflow.Config (amendment v4). The delay adds exactly itself
// to every CCT; η slows a compressing cell and leaves a raw one alone;
// -planner-eta moves η into the fabric the planners see. Fails if either
// constant is dropped on the way to the simulator.
func TestCalibrationFlags(t *testing.T) {
	const delay = 4200 * time.Microsecond
	base := calibCCT(t, "fvdf", "fvdf", 0, 0, false)
	delayed := calibCCT(t, "fvdf", "fvdf", 0, delay, false)
	for i := range base {
		if delayed[i]-base[i] != delay {
			t.Fatalf("coflow %d: CCT %v with the delay, %v without: want +%v", i, delayed[i], base[i], delay)
		}
	}
	for _, cell := range [][2]string{{"sebf", "lz4"}, {"fvdf", "fvdf"}} {
		b := sumCCT(calibCCT(t, cell[0], cell[1], 0, 0, false))
		e := sumCCT(calibCCT(t, cell[0], cell[1], 0.5, 0, false))
		if !(e > b) {
			t.Errorf("%s/%s: total CCT %v at η 0.5, %v at η 1: η changes nothing", cell[0], cell[1], e, b)
		}
	}
	if b, e := sumCCT(calibCCT(t, "sebf", "none", 0, 0, false)), sumCCT(calibCCT(t, "sebf", "none", 0.5, 0, false)); b != e {
		t.Errorf("raw SEBF: total CCT %v at η 0.5, %v at η 1: η must touch codecs only", e, b)
	}
	// -planner-eta: the planners see η·s, the simulator applies no η.
	m := wholeMatrix(t, -1, 3)
	m.o.codecEff, m.o.plannerEta = 0.5, true
	if m.o.simEff() != 0 {
		t.Fatalf("-planner-eta: simulator η %v, want none", m.o.simEff())
	}
	fab, err := m.fabric(Settings[3])
	if err != nil {
		t.Fatal(err)
	}
	p, _ := codecprof.Defaults().Lookup(transport.CodecLZ4, m.classes[0])
	if got := fab.Classes[0].Codecs[0].CompressSpeed; got != 0.5*p.CompressBps {
		t.Fatalf("-planner-eta: lz4 speed %v, want η·s = %v", got, 0.5*p.CompressBps)
	}
	if b, e := sumCCT(calibCCT(t, "sebf", "lz4", 0, 0, false)), sumCCT(calibCCT(t, "sebf", "lz4", 0.5, 0, true)); !(e > b) {
		t.Errorf("-planner-eta: sebf/lz4 total CCT %v, %v at η 1: the true speeds must carry η", e, b)
	}
	m.o.plannerEta = false
	if m.o.simEff() != 0.5 {
		t.Fatalf("simulator η %v, want 0.5", m.o.simEff())
	}
}
