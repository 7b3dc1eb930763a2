package main

import (
	"fmt"
	"image/color"

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
// per policy, with the target as a dashed horizontal line.
func plotAccuracy(path, title string, target float64, results []*sim.Result) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "virtual time (s)"
	p.Y.Label.Text = "test accuracy"
	p.Legend.Top = false
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	var maxT float64
	for i, r := range results {
		pts := make(plotter.XYs, len(r.Evals))
		for j, e := range r.Evals {
			pts[j].X = e.Time.Seconds()
			pts[j].Y = e.Accuracy
			maxT = max(maxT, pts[j].X)
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", r.Policy, err)
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.2)
		if i >= len(palette) {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l)
		p.Legend.Add(r.Policy, l)
	}
	if target > 0 && maxT > 0 {
		tl, err := plotter.NewLine(plotter.XYs{{X: 0, Y: target}, {X: maxT, Y: target}})
		if err == nil {
			tl.Color = color.Gray{Y: 90}
			tl.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
			p.Add(tl)
			p.Legend.Add(fmt.Sprintf("target %.2f", target), tl)
		}
	}
	p.Y.Max = 1
	p.Legend.ThumbnailWidth = vg.Points(14)
	p.Legend.Padding = vg.Points(1)
	return p.Save(9*vg.Inch, 6*vg.Inch, path)
}
