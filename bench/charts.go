package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// palette: one color per contender (Tableau 10).
var palette = []color.Color{
	color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255},
	color.RGBA{214, 39, 40, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255},
	color.RGBA{227, 119, 194, 255}, color.RGBA{127, 127, 127, 255}, color.RGBA{188, 189, 34, 255},
	color.RGBA{23, 190, 207, 255},
}

// series is one contender's line.
type series struct {
	name string
	pts  []point
}

// writeCharts renders the charts of r into dir and returns their paths.
func writeCharts(r *results, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, p := range paths {
		tp, cpu := r.callerSeries(p.name)
		f := filepath.Join(dir, "throughput-"+p.name+".svg")
		title := fmt.Sprintf("Decisions per second on one hot key, %s path", p.name)
		if err := lineChart(f, title, "concurrent callers", "decisions/s", tp, true, r.env.caption()); err != nil {
			return nil, err
		}
		files = append(files, f)
		f = filepath.Join(dir, "cpu-"+p.name+".svg")
		title = fmt.Sprintf("Redis CPU per decision (INFO cpu), %s path", p.name)
		if err := lineChart(f, title, "concurrent callers", "µs per decision", cpu, true, r.env.caption()); err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	var bursts []series
	for i, name := range r.names {
		if !r.exact[i].noRule {
			bursts = append(bursts, series{name, r.exact[i].series})
		}
	}
	f := filepath.Join(dir, "boundary-burst.svg")
	title := fmt.Sprintf("Bursts at window boundaries: grants in the last %v / rate (rate %d per %v)",
		measuredWindow(r.plan.exactInterval), r.plan.exactRate, r.plan.exactInterval)
	if err := lineChart(f, title, "time (intervals)", "grants in the sliding window / rate", bursts, false, r.env.caption()); err != nil {
		return nil, err
	}
	return append(files, f), nil
}

// callerSeries returns, per contender, the median decisions/s and CPU per
// decision against callers on one path.
func (r *results) callerSeries(pathName string) (tp, cpu []series) {
	for i, name := range r.names {
		var a, b []point
		for _, callers := range r.plan.callers {
			s := r.tp[pathName][callers][i]
			a = append(a, point{float64(callers), median(pick(s, func(x sample) float64 { return x.perSec }))})
			b = append(b, point{float64(callers), median(pick(s, func(x sample) float64 { return x.cpuUs }))})
		}
		tp = append(tp, series{name, a})
		cpu = append(cpu, series{name, b})
	}
	return tp, cpu
}

func pick[T any](xs []T, f func(T) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// lineChart writes one SVG with a line per series; logX puts x on a log
// scale with the data's x values as ticks.
func lineChart(file, title, xLabel, yLabel string, ss []series, logX bool, caption string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel + "\n" + caption
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = !logX
	p.Add(plotter.NewGrid())
	if logX && len(ss) > 0 {
		p.X.Scale = plot.LogScale{}
		var ticks []plot.Tick
		for _, pt := range ss[0].pts {
			ticks = append(ticks, plot.Tick{Value: pt.x, Label: fmt.Sprint(pt.x)})
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
	}
	for i, s := range ss {
		xys := make(plotter.XYs, len(s.pts))
		for j, pt := range s.pts {
			xys[j] = plotter.XY{X: pt.x, Y: pt.y}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", file, s.name, err)
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.2)
		if i == 0 {
			l.Width = vg.Points(2.5)
		}
		l.Dashes = dashes(i)
		p.Add(l)
		if logX {
			pts, err := plotter.NewScatter(xys)
			if err != nil {
				return err
			}
			pts.Color = l.Color
			pts.Shape = draw.CircleGlyph{}
			p.Add(pts)
		}
		p.Legend.Add(s.name, l)
	}
	return p.Save(26*vg.Centimeter, 15*vg.Centimeter, file)
}

// dashes: solid for the first five contenders, dashed after.
func dashes(i int) []vg.Length {
	if i < 5 {
		return nil
	}
	return []vg.Length{vg.Points(5), vg.Points(2)}
}
