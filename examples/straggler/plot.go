package main

import (
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/falconml/falcon/ps/sim"
)

// palette holds distinguishable line colours (Tableau 10 plus black).
var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
	{188, 189, 34, 255}, {23, 190, 207, 255}, {0, 0, 0, 255},
}

// plotAccuracy writes a PNG of test accuracy against virtual time, one line
// per policy, with the target as a dashed horizontal line. Each line is the
// accuracy averaged over the last window evaluations, the quantity the
// time to target is read from. The time axis stops at twice the slowest
// finite time to target (or the run's end).
func plotAccuracy(path, title string, target float64, window int, results []*sim.Result) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "virtual time (s)"
	p.Y.Label.Text = fmt.Sprintf("test accuracy (mean of last %d evaluations)", max(window, 1))
	p.Legend.Top = false
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	var end, slowest float64
	for _, r := range results {
		end = max(end, r.End.Seconds())
		if t := r.TimeToTargetSeconds(); !math.IsInf(t, 1) {
			slowest = max(slowest, t)
		}
	}
	xmax := end
	if slowest > 0 {
		xmax = min(end, 2*slowest)
	}
	for i, r := range results {
		var pts plotter.XYs
		var sum float64
		for j, e := range r.Evals {
			sum += e.Accuracy
			if j >= window {
				sum -= r.Evals[j-window].Accuracy
			}
			if e.Time.Seconds() > xmax {
				break
			}
			pts = append(pts, plotter.XY{X: e.Time.Seconds(), Y: sum / float64(min(j+1, max(window, 1)))})
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", r.Policy, err)
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.2)
		if strings.HasPrefix(r.Policy, "epsp") {
			l.Width = vg.Points(2.2)
		}
		if i >= len(palette) {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l)
		p.Legend.Add(r.Policy, l)
	}
	if target > 0 && xmax > 0 {
		tl, err := plotter.NewLine(plotter.XYs{{X: 0, Y: target}, {X: xmax, Y: target}})
		if err == nil {
			tl.Color = color.Gray{Y: 90}
			tl.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
			p.Add(tl)
			p.Legend.Add(fmt.Sprintf("target %.2f", target), tl)
		}
	}
	p.Y.Min, p.Y.Max = 0.5, 1
	p.X.Min, p.X.Max = 0, xmax
	p.Legend.ThumbnailWidth = vg.Points(14)
	p.Legend.Padding = vg.Points(1)
	return p.Save(9*vg.Inch, 6*vg.Inch, path)
}
