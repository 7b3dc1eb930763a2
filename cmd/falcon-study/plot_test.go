package main

import (
	"fmt"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/falconml/falcon/ps/sim"
)

// fakeResult has evaluations every second up to end, accuracy rising
// linearly from acc0 to 1, reaching its target at ttt (0: never).
func fakeResult(policy string, end, ttt time.Duration, acc0 float64) *sim.Result {
	r := &sim.Result{Policy: policy, End: end, Reached: ttt > 0, TimeToTarget: ttt}
	n := int(end / time.Second)
	for k := 0; k <= n; k++ {
		r.Evals = append(r.Evals, sim.EvalPoint{Time: time.Duration(k) * time.Second, Accuracy: acc0 + (1-acc0)*float64(k)/float64(n)})
	}
	return r
}

// TestPlot_AxisShowsEveryRun checks the axis rule: the full panel reaches
// the end of the longest run (it used to stop at twice the slowest time to
// target, hiding the rest silently), a zoomed panel is added only when the
// runs to target are short against it, and the y-axis reaches the lowest
// plotted accuracy (it used to start at 0.5).
func TestPlot_AxisShowsEveryRun(t *testing.T) {
	tests := []struct {
		name             string
		results          []*sim.Result
		full, zoom, ymin float64
	}{
		{"long tail", []*sim.Result{fakeResult("a", 100*time.Second, 5*time.Second, 0.6), fakeResult("b", 30*time.Second, 0, 0.55)}, 100, 10, 0.5},
		{"no zoom needed", []*sim.Result{fakeResult("a", 20*time.Second, 8*time.Second, 0.7)}, 20, 0, 0.5},
		{"never reached", []*sim.Result{fakeResult("a", 40*time.Second, 0, 0.7), fakeResult("b", 50*time.Second, 0, 0.7)}, 50, 0, 0.5},
		{"low start", []*sim.Result{fakeResult("a", 10*time.Second, 0, 0.23)}, 10, 0, 0.2},
	}
	for _, tc := range tests {
		full, zoom, ymin := axes(1, tc.results)
		if full != tc.full || zoom != tc.zoom || math.Abs(ymin-tc.ymin) > 1e-12 {
			t.Errorf("%s: axes = (%v, %v, %v), want (%v, %v, %v)", tc.name, full, zoom, ymin, tc.full, tc.zoom, tc.ymin)
		}
		for _, r := range tc.results {
			for _, p := range smoothed(r, 1) {
				if p.X > full || p.Y < ymin {
					t.Errorf("%s: point %v of %s outside the full panel", tc.name, p, r.Policy)
				}
			}
		}
	}
	// An evaluation after End (a final one) widens the axis too.
	r := fakeResult("a", 10*time.Second, 0, 0.7)
	r.Evals = append(r.Evals, sim.EvalPoint{Time: 12 * time.Second, Accuracy: 1})
	if full, _, _ := axes(1, []*sim.Result{r}); full != 12 {
		t.Errorf("last evaluation at 12 s, full axis %v", full)
	}
}

// TestPlot_Writes checks that the PNG is written with one panel, or two
// stacked panels when zoomed, also with more policies than colours.
func TestPlot_Writes(t *testing.T) {
	dir := t.TempDir()
	var many []*sim.Result
	for i := range 15 {
		many = append(many, fakeResult(fmt.Sprintf("p%d", i), time.Duration(20+i)*time.Second, 0, 0.6))
	}
	for _, tc := range []struct {
		name    string
		results []*sim.Result
		inches  float64
	}{
		{"one panel", many, 6},
		{"zoomed", []*sim.Result{fakeResult("a", 100*time.Second, 5*time.Second, 0.6), fakeResult("epsp", 60*time.Second, 4*time.Second, 0.6)}, 10},
	} {
		path := filepath.Join(dir, tc.name+".png")
		if err := plotAccuracy(path, "t", 0.9, 2, tc.results); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if want := int(math.Round(tc.inches * 96)); cfg.Height != want {
			t.Errorf("%s: height %d px, want %d (%.0f in at 96 dpi)", tc.name, cfg.Height, want, tc.inches)
		}
	}
}

// TestPlot_ColoursDiffer checks that the palette's colours, and the target
// line's, are pairwise at least ΔE*76 = 25 apart in CIELAB (D65), and that
// line styles (colour, dashes) stay distinct for 44 policies.
func TestPlot_ColoursDiffer(t *testing.T) {
	cs := append(append([]color.RGBA(nil), palette...), targetColor)
	for i := range cs {
		for j := range i {
			if d := deltaE76(cs[i], cs[j]); d < 25 {
				t.Errorf("colours %v and %v are only ΔE %.1f apart", cs[i], cs[j], d)
			}
		}
	}
	type style struct {
		c color.RGBA
		d string
	}
	seen := map[style]int{}
	for i := range len(palette) * len(dashes) {
		c, d := lineStyle(i)
		s := style{c, fmt.Sprint(d)}
		if j, dup := seen[s]; dup {
			t.Fatalf("policies %d and %d share colour %v and dashes %v", j, i, c, d)
		}
		seen[s] = i
		if i < len(palette) && d != nil {
			t.Errorf("policy %d (within the palette) is dashed", i)
		}
	}
	if c0, d0 := lineStyle(0); !reflect.DeepEqual(c0, palette[0]) || d0 != nil {
		t.Errorf("first policy style %v %v", c0, d0)
	}
}

// deltaE76 is the Euclidean distance of two sRGB colours in CIELAB (D65).
func deltaE76(a, b color.RGBA) float64 {
	la, lb := lab(a), lab(b)
	return math.Sqrt((la[0]-lb[0])*(la[0]-lb[0]) + (la[1]-lb[1])*(la[1]-lb[1]) + (la[2]-lb[2])*(la[2]-lb[2]))
}

func lab(c color.RGBA) [3]float64 {
	lin := func(u uint8) float64 {
		v := float64(u) / 255
		if v > 0.04045 {
			return math.Pow((v+0.055)/1.055, 2.4)
		}
		return v / 12.92
	}
	r, g, b := lin(c.R), lin(c.G), lin(c.B)
	x := (0.4124*r + 0.3576*g + 0.1805*b) / 0.95047
	y := 0.2126*r + 0.7152*g + 0.0722*b
	z := (0.0193*r + 0.1192*g + 0.9505*b) / 1.08883
	f := func(t float64) float64 {
		if t > 0.008856 {
			return math.Cbrt(t)
		}
		return 7.787*t + 16.0/116
	}
	return [3]float64{116*f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))}
}
