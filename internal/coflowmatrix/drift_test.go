package main

import (
	"math/rand/v2"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/fvdf/codecprof"
)

// smallTrace is a 25-coflow synthetic trace on 12 ports.
func smallTrace(t *testing.T) *coflow.Trace {
	t.Helper()
	cfg := coflow.DefaultSynthConfig()
	cfg.Coflows, cfg.Ports, cfg.MaxWidth = 25, 12, 6
	cfg.MeanInterArrival = 500 * time.Millisecond
	tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(2, 0)))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// hashRun is the golden hash of one run of c on m's first workload.
func hashRun(t *testing.T, m *matrix, c Cell) (string, *result) {
	t.Helper()
	g := newGoldenHasher()
	m.check = g.check
	r, err := m.runOne(c, m.work[0], 0, false)
	m.check = nil
	if err != nil {
		t.Fatal(err)
	}
	g.result(r)
	return g.sum(), r
}

// goldenDrift are the hashes of the prediction-in-the-loop cells (drift
// over DriftWindow)
// (PROTOCOL-v3) on smallTrace at (10 G, 1), Varys' rule, seed 1.
var goldenDrift = map[string]string{
	"fvdf/fvdf/varys/10G-1c/oracle": "94cb99e524015cb5",
	"fvdf/fvdf/varys/10G-1c/last":   "7ae0967ac5575244",
	"fvdf/fvdf/varys/10G-1c/ewma":   "ea611b4d26eca84c",
	"fvdf/fvdf/varys/10G-1c/lstm":   "634fcec9d22e8a07",
}

// TestDriftCells: under -predictors the matrix has FVDF and
// sebf-order+fvdf once per predictor and every other cell once (with the
// oracle); a predictor cell is deterministic (two runs, one hash); the
// drift is applied (FVDF with the oracle under drift differs from FVDF on
// constant speeds) and the predictors differ from the oracle.
func TestDriftCells(t *testing.T) {
	drift, err := loadDrift("../../predictor/testdata/series.csv")
	if err != nil {
		t.Skip("drift recording not available:", err)
	}
	preds := []string{"oracle", "last", "ewma", "lstm"}
	o := options{seeds: 1, only: regexp.MustCompile("varys"), protocol: "full", settings: []int{1}, resched: []string{"varys"}, coalesce: CoalesceWindow, preds: preds, drift: drift}
	m, err := newMatrix(smallTrace(t), o)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(Schedulers)*len(Compression) + 2*len(preds) + len(Isolating) - 1; len(m.cells) != want {
		t.Fatalf("%d cells, want %d", len(m.cells), want)
	}
	o0 := o
	o0.preds, o0.drift = nil, nil
	m0, err := newMatrix(smallTrace(t), o0)
	if err != nil {
		t.Fatal(err)
	}
	fixed, _ := hashRun(t, m0, Cell{"fvdf", "fvdf", "varys", Settings[1], ""})
	hashes := map[string]string{}
	for _, c := range m.cells {
		if c.Sched != "fvdf" {
			continue
		}
		h1, _ := hashRun(t, m, c)
		h2, _ := hashRun(t, m, c)
		if h1 != h2 {
			t.Fatalf("%s: two runs, hashes %s and %s", c.key(), h1, h2)
		}
		hashes[c.Pred] = h1
		if w, ok := goldenDrift[c.key()]; ok && w != h1 {
			t.Errorf("%s: hash %s, want %s", c.key(), h1, w)
		}
		t.Logf("%q: %q,", c.key(), h1)
	}
	if hashes["oracle"] == fixed {
		t.Fatal("FVDF with the oracle under drift equals FVDF on constant speeds: no drift applied")
	}
	for _, p := range preds[1:] {
		if hashes[p] == hashes["oracle"] {
			t.Fatalf("%s plans exactly as the oracle", p)
		}
	}
}

// TestMixes_EveryRegime: the shuffle, ml-ps and media-logs mixes run at
// every setting of the protocol (FVDF and SEBF + lz4, Varys' rule), and
// on media-logs the log class crosses the wire compressed far more than
// the encrypted class (wire/raw per class, SEBF + lz4 at (1 G, 4)).
func TestMixes_EveryRegime(t *testing.T) {
	for _, mix := range []string{"shuffle", "ml-ps", "media-logs"} {
		o := options{seeds: 1, only: regexp.MustCompile(`^(fvdf/fvdf|sebf/lz4)/varys/`), protocol: "full", resched: []string{"varys"}, coalesce: CoalesceWindow, mix: mix}
		for i := range Settings {
			o.settings = append(o.settings, i)
		}
		m, err := newMatrix(smallTrace(t), o)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.cells) != 2*len(Settings) {
			t.Fatalf("%s: %d cells", mix, len(m.cells))
		}
		for _, c := range m.cells {
			r, err := m.runOne(c, m.work[0], 0, false)
			if err != nil {
				t.Fatalf("%s %s: %v", mix, c.key(), err)
			}
			if mix != "media-logs" || c.Sched != "sebf" || c.Set != Settings[0] {
				continue
			}
			ci := func(k codecprof.Class) int {
				for i, x := range m.classes {
					if x == k {
						return i
					}
				}
				t.Fatalf("no class %v", k)
				return -1
			}
			logs, enc := ci(codecprof.ApacheLogs), ci(codecprof.EncryptedBlocks)
			if r.classRaw[logs] == 0 || r.classRaw[enc] == 0 {
				t.Fatalf("media-logs: a class drew no job on this trace: raw %v", r.classRaw)
			}
			lw, ew := r.classWire[logs]/r.classRaw[logs], r.classWire[enc]/r.classRaw[enc]
			if !(lw < 0.3 && ew > 0.99) {
				t.Fatalf("media-logs wire/raw: logs %.3f, encrypted %.3f", lw, ew)
			}
		}
	}
}

// TestSynthTraces: the synthetic trace of a seed and load is
// deterministic, has the load asked for, and a matrix on synthetic traces
// draws a different trace for each seed.
func TestSynthTraces(t *testing.T) {
	for _, l := range SynthLoads {
		a, err := SynthTrace(l, 1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := SynthTrace(l, 1)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("load %v: not deterministic", l)
		}
		if got := coflow.OfferedLoad(a, SynthRefBps); got < 0.99*l || got > 1.01*l {
			t.Fatalf("load %v: offered %v", l, got)
		}
	}
	o := options{seeds: 2, only: regexp.MustCompile(""), protocol: "full", settings: []int{0}, resched: []string{"varys"}, coalesce: CoalesceWindow, synthLoad: 0.55, coflows: 40}
	m, err := newMatrix(nil, o)
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := m.work[0].plan.Coflows, m.work[1].plan.Coflows
	if len(p0) == 0 || p0[len(p0)-1].Arrival == p1[len(p1)-1].Arrival && p0[0].Width() == p1[0].Width() && p0[1].Width() == p1[1].Width() {
		t.Fatal("the two seeds' synthetic traces look the same")
	}
	if m.tr == nil || len(m.tr.Coflows) != 40 {
		t.Fatalf("slice: %v coflows", m.tr)
	}
}
