package epsp_test

import (
	"errors"
	"testing"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/epsp/epsptest"
)

// Reference: baselines-params.md §5 (DSSP, Zhao et al. ICDCS'19, as in the
// public reimplementations): proceed if t_p − t_slowest ≤ s_L; otherwise
// the fastest asks the controller for r extra iterations chosen so that
// its next push lands closest to a push of the slowest.
func TestDSSP_RulesAndController(t *testing.T) {
	p, err := epsp.NewDSSP(epsp.DSSPConfig{Lower: 1, Upper: 4})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := epsptest.NewDriver(epsp.Config{NumWorkers: 2, Batch: 4}, p)
	err = d.Run(`
		@100ms
		clock w=0   # lead 1 ≤ s_L: proceed
		@200ms
		clock w=0   # lead 2, fastest, but the slowest's interval is unknown: r = 0, wait
		@500ms
		clock w=1   # the slowest pushes (interval 500ms): both proceed (lead 1)
		@600ms
		clock w=0   # lead 2: I_f = 400ms, I_s = 500ms; r = 1 lands on the slowest's push at 1s
	`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"@100ms clock w=0 c=0 -> release[0]",
		"@200ms clock w=0 c=1 -> -",
		"@500ms clock w=1 c=0 -> release[1 0]",
		"@600ms clock w=0 c=2 -> release[0]",
	}
	got := splitLines(d.Trace())
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("trace:\n%s\nwant line %d: %s", d.Trace(), i, want[i])
		}
	}
	if st := p.Stats(); st.Credited != 1 || st.CreditTotal != 1 {
		t.Fatalf("stats %+v, want one credit of 1", st)
	}
}

func TestDSSP_Config(t *testing.T) {
	p, _ := epsp.NewDSSP(epsp.DSSPConfig{})
	if lo, hi := p.Bounds(); lo != 3 || hi != 15 || p.Name() != "dssp(3..15)" {
		t.Fatalf("defaults %d %d %q", lo, hi, p.Name())
	}
	if _, err := epsp.NewDSSP(epsp.DSSPConfig{Lower: 5, Upper: 2}); !errors.Is(err, epsp.ErrBadConfig) {
		t.Fatal(err)
	}
}
