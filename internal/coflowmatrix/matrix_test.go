package main

import (
	"math/rand/v2"
	"regexp"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// TestCells_RunAndCompress runs every cell of the matrix on a small
// synthetic trace with multi-stage jobs: every run completes (the
// simulator validates capacities and cores at each call), raw cells put
// their raw bytes on the wire, always-compress cells fewer, and the
// shifted run of a cell gives the same CCTs.
func TestCells_RunAndCompress(t *testing.T) {
	cfg := coflow.DefaultSynthConfig()
	cfg.Coflows, cfg.Ports, cfg.MaxWidth = 25, 12, 6
	cfg.MeanInterArrival = 500 * time.Millisecond
	tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(2, 0)))
	if err != nil {
		t.Fatal(err)
	}
	o := options{seeds: 1, only: regexp.MustCompile(""), protocol: "full", settings: []int{1}, resched: Rescheduling, coalesce: CoalesceWindow}
	m, err := newMatrix(tr, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(Rescheduling) * (len(Schedulers)*len(Compression) + 1 + len(Isolating)); len(m.cells) != want {
		t.Fatalf("%d cells, want %d", len(m.cells), want)
	}
	for _, c := range m.cells {
		r, err := m.runOne(c, m.work[0], 0, c.Sched == "fvdf")
		if err != nil {
			t.Fatal(err)
		}
		switch c.Comp {
		case "none":
			if r.wire < r.raw*(1-1e-9) || r.wire > r.raw*(1+1e-9) {
				t.Fatalf("%s: wire %v raw %v", c.key(), r.wire, r.raw)
			}
		case "lz4", "snappy", "write-lz4":
			if r.wire > 0.5*r.raw {
				t.Fatalf("%s: wire %v of raw %v: not compressed", c.key(), r.wire, r.raw)
			}
		}
		if want := m.work[0].plan.RawBytes(); r.raw < want*(1-1e-9) || r.raw > want*(1+1e-9) {
			t.Fatalf("%s: raw %v, want the plan's %v", c.key(), r.raw, want)
		}
		if len(r.jct) != len(tr.Coflows) || len(r.cct) != len(m.work[0].plan.Coflows) {
			t.Fatalf("%s: %d JCTs, %d CCTs", c.key(), len(r.jct), len(r.cct))
		}
		if c.Resched == "timers" && c.Sched == "sebf" && c.Comp == "lz4" {
			s, err := m.runOne(c, m.work[0], 3*GuardPeriod, false)
			if err != nil {
				t.Fatal(err)
			}
			for i := range s.cct {
				if s.cct[i] != r.cct[i] {
					t.Fatalf("%s: shifted CCT %v, unshifted %v (coflow %d)", c.key(), s.cct[i], r.cct[i], i)
				}
			}
		}
	}
}

func TestBootstrap(t *testing.T) {
	iv := bootstrap([]float64{1.1, 1.2, 1.3, 1.25, 1.15})
	if iv.med != 1.2 || iv.lo < 1.1 || iv.hi > 1.3 || iv.lo > iv.med || iv.hi < iv.med || iv.excludes1() != "win" {
		t.Fatalf("bootstrap = %+v", iv)
	}
	if got := bootstrap([]float64{0.9, 1.1, 1.0, 0.95, 1.05}).excludes1(); got != "tie" {
		t.Fatalf("verdict %q, want tie", got)
	}
}

// TestSmallProtocol_Unchanged: the small protocol's cells are those it
// named when it was committed (none of the Isolating cells): at Varys'
// rule 13 cells per setting, at T/δ timers 7 at two settings, at every
// flow completion 3 at one.
func TestSmallProtocol_Unchanged(t *testing.T) {
	n := 0
	for _, set := range Settings {
		for _, rs := range Rescheduling {
			for _, s := range Schedulers {
				for _, c := range Compression {
					if SmallProtocol(Cell{s, c, rs, set, ""}) {
						n++
					}
				}
			}
			if SmallProtocol(Cell{"fvdf", "fvdf", rs, set, ""}) {
				n++
			}
			for _, b := range Isolating {
				if SmallProtocol(Cell{b.Sched, b.Comp, rs, set, ""}) {
					t.Errorf("%s/%s/%s in the small protocol", b.Sched, b.Comp, rs)
				}
			}
		}
	}
	if want := 13*len(Settings) + 7*2 + 3; n != want {
		t.Fatalf("%d small-protocol cells, want %d", n, want)
	}
}
