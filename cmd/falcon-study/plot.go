package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/falconml/falcon/ps/sim"
)

// palette holds distinguishable line colours: Tableau 10 with its grey
// replaced by navy (the target line is grey), plus black. Every pair, and
// every colour against targetColor, is at least ΔE*76 = 25 apart in CIELAB
// (TestPlot_ColoursDiffer).
var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {0, 0, 128, 255},
	{188, 189, 34, 255}, {23, 190, 207, 255}, {0, 0, 0, 255},
}

// targetColor draws the dashed target line.
var targetColor = color.RGBA{150, 150, 150, 255}

// dashes are the line patterns that tell apart policies beyond the
// palette: policy i gets palette[i mod 11] and dashes[(i div 11) mod 4],
// so up to 44 policies get distinct styles (solid, dashed, dotted,
// dash-dot); the legend names every line in any case.
var dashes = [][]vg.Length{
	nil,
	{vg.Points(6), vg.Points(3)},
	{vg.Points(1.5), vg.Points(2.5)},
	{vg.Points(6), vg.Points(2), vg.Points(1.5), vg.Points(2)},
}

// lineStyle returns the colour and dash pattern of the i-th policy.
func lineStyle(i int) (color.RGBA, []vg.Length) {
	return palette[i%len(palette)], dashes[(i/len(palette))%len(dashes)]
}

// smoothed returns the accuracy series the plot draws: at each evaluation,
// the mean accuracy of the last window evaluations (fewer at the start),
// the quantity the time to target is read from.
func smoothed(r *sim.Result, window int) plotter.XYs {
	window = max(window, 1)
	var pts plotter.XYs
	var sum float64
	for j, e := range r.Evals {
		sum += e.Accuracy
		if j >= window {
			sum -= r.Evals[j-window].Accuracy
		}
		pts = append(pts, plotter.XY{X: e.Time.Seconds(), Y: sum / float64(min(j+1, window))})
	}
	return pts
}

// axes returns the plot's ranges: the x-axis of the full panel ends at
// the end of the longest run (its End or its last evaluation, whichever
// is later), so every run shows in full; zoom > 0 is the end of a second,
// zoomed panel, twice the slowest finite time to target, drawn only when
// that is under 70 % of the full axis (otherwise the full panel already
// shows the interesting part). The y-axis goes from the lowest plotted
// value (rounded down to a tenth, 0.5 at most) to 1, so no point is cut.
func axes(window int, results []*sim.Result) (full, zoom, ymin float64) {
	var slowest float64
	ymin = 0.5
	for _, r := range results {
		full = max(full, r.End.Seconds())
		for _, p := range smoothed(r, window) {
			full = max(full, p.X)
			ymin = min(ymin, math.Floor(p.Y*10)/10)
		}
		if t := r.TimeToTargetSeconds(); !math.IsInf(t, 1) {
			slowest = max(slowest, t)
		}
	}
	if slowest > 0 && 2*slowest < 0.7*full {
		zoom = 2 * slowest
	}
	return full, zoom, max(ymin, 0)
}

// plotAccuracy writes a PNG of test accuracy against virtual time, one line
// per policy, with the target as a dashed horizontal line. Each line is the
// accuracy averaged over the last window evaluations, the quantity the
// time to target is read from. The top panel shows every run in full; when
// the runs to target are much shorter than the longest run, a second panel
// below zooms on [0, 2 × slowest time to target] and says so in its title.
func plotAccuracy(path, title string, target float64, window int, results []*sim.Result) error {
	full, zoom, ymin := axes(window, results)
	top, err := accuracyPanel(title+" (every run in full)", target, window, ymin, full, results)
	if err != nil {
		return err
	}
	const w = 9 * vg.Inch
	if zoom == 0 {
		top.Title.Text = title
		return top.Save(w, 6*vg.Inch, path)
	}
	bottom, err := accuracyPanel(fmt.Sprintf("zoom: first %.4g s (twice the slowest time to target)", zoom), target, window, ymin, zoom, results)
	if err != nil {
		return err
	}
	img := vgimg.New(w, 10*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter, PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: vg.Millimeter}
	plots := [][]*plot.Plot{{top}, {bottom}}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// accuracyPanel draws every policy's whole series on x ∈ [0, xmax] (lines
// are clipped to the axes, never dropped) and y ∈ [ymin, 1].
func accuracyPanel(title string, target float64, window int, ymin, xmax float64, results []*sim.Result) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "virtual time (s)"
	p.Y.Label.Text = fmt.Sprintf("test accuracy (mean of last %d evaluations)", max(window, 1))
	p.Legend.Top = false
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	for i, r := range results {
		pts := smoothed(r, window)
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", r.Policy, err)
		}
		l.Color, l.Dashes = lineStyle(i)
		l.Width = vg.Points(1.2)
		if strings.HasPrefix(r.Policy, "epsp") {
			l.Width = vg.Points(2.2)
		}
		p.Add(l)
		p.Legend.Add(r.Policy, l)
	}
	if target > 0 && xmax > 0 {
		tl, err := plotter.NewLine(plotter.XYs{{X: 0, Y: target}, {X: xmax, Y: target}})
		if err == nil {
			tl.Color = targetColor
			tl.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
			p.Add(tl)
			p.Legend.Add(fmt.Sprintf("target %.2f", target), tl)
		}
	}
	p.Y.Min, p.Y.Max = ymin, 1
	p.X.Min, p.X.Max = 0, xmax
	p.Legend.ThumbnailWidth = vg.Points(14)
	p.Legend.Padding = vg.Points(1)
	return p, nil
}
