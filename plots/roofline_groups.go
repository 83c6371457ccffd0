package plots

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// RooflineGroup is a family of kernel results drawn alike: one kernel (say "attention") at
// every batch and context a sweep measured.
type RooflineGroup struct {
	Label  string
	Points []RooflinePoint // each point's Label names it in the footnote when it cannot be drawn
}

// RooflineGroups draws the log-log roofline of a whole sweep: each ceiling as in Roofline, and
// every measured kernel as a marker with the colour and shape of its group, one legend entry
// per group instead of a label per point, so that a hundred measurements stay readable.
// Failed and undrawable points are left out and named in a footnote.
func RooflineGroups(c Chart, ceilings []RooflineCeiling, groups []RooflineGroup, base string) ([]string, error) {
	for i, ceil := range ceilings {
		if !drawable(ceil.BandwidthBytesPerSec) || !drawable(ceil.FLOPsPerSec) {
			return nil, fmt.Errorf("plots: RooflineGroups: ceiling %s: bandwidth %g B/s and rate %g FLOP/s must be positive and finite",
				nameOr(ceil.Label, i), ceil.BandwidthBytesPerSec, ceil.FLOPsPerSec)
		}
	}
	type keptGroup struct {
		label   string
		xys     plotter.XYs
		batches []int
	}
	var kept []keptGroup
	var all []RooflinePoint
	var failed, undrawable []string
	for gi, g := range groups {
		k := keptGroup{label: nameOr(g.Label, gi)}
		for i, p := range g.Points {
			name := nameOr(p.Label, i)
			switch {
			case p.Failed:
				failed = append(failed, name)
			case !drawable(p.Intensity) || !drawable(p.FLOPsPerSec):
				undrawable = append(undrawable, name)
			default:
				k.xys = append(k.xys, plotter.XY{X: p.Intensity, Y: p.FLOPsPerSec / tera})
				k.batches = append(k.batches, p.Batch)
				all = append(all, p)
			}
		}
		if len(k.xys) > 0 {
			kept = append(kept, k)
		}
	}
	if len(ceilings) == 0 && len(all) == 0 {
		return nil, fmt.Errorf("plots: RooflineGroups: %w (no ceiling and no kernel result that can be drawn)", ErrNothingToDraw)
	}

	xs, ys := rooflineExtents(ceilings, all)
	p := newThemedPlot("", intensityLabelText, tflopsLabelText)
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = gridColor, gridColor
	p.Add(grid)
	f := newFigure(c)

	for i, ceil := range ceilings {
		clr := ceilingPalette[i%len(ceilingPalette)]
		ridge := ceil.FLOPsPerSec / ceil.BandwidthBytesPerSec
		line, err := plotter.NewLine(plotter.XYs{
			{X: xs.Min, Y: ceil.BandwidthBytesPerSec * xs.Min / tera},
			{X: ridge, Y: ceil.FLOPsPerSec / tera},
			{X: xs.Max, Y: ceil.FLOPsPerSec / tera},
		})
		if err != nil {
			return nil, err
		}
		line.LineStyle = draw.LineStyle{Color: clr, Width: vg.Points(2)}
		if ceil.Dashed {
			line.LineStyle.Dashes = boundDashes
		}
		p.Add(line)
		ridgeMark, err := plotter.NewScatter(plotter.XYs{{X: ridge, Y: ceil.FLOPsPerSec / tera}})
		if err != nil {
			return nil, err
		}
		ridgeMark.GlyphStyle = draw.GlyphStyle{Color: clr, Radius: markerRadius * 1.4, Shape: draw.RingGlyph{}}
		p.Add(ridgeMark)
		f.legend.add(fmt.Sprintf("%s, ridge %s FLOP/byte", ceilingLegendText(ceil), plainLabel(ridge)), &plotter.Line{LineStyle: line.LineStyle})
	}
	// Colour and shape say the kernel, size the batch.
	size := newBatchSizer(all)
	for i, g := range kept {
		s, err := plotter.NewScatter(g.xys)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = glyphStyle(paletteColor(i), markerShape(i))
		s.GlyphStyleFunc = func(j int) draw.GlyphStyle {
			sty := glyphStyle(paletteColor(i), markerShape(i))
			sty.Radius = size.radius(g.batches[j])
			return sty
		}
		p.Add(s)
		f.legend.add(g.label, markerThumb(s.GlyphStyle.Color, s.GlyphStyle.Shape))
	}
	size.legend(&f.legend, 1)

	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = log10Ticks{plainLabel}, log10Ticks{plainLabel}
	p.X.Min, p.X.Max = xs.Min, xs.Max
	p.Y.Min, p.Y.Max = ys.Min, ys.Max
	f.panels = append(f.panels, p)
	f.note = rooflineNote(failed, undrawable)
	return f.save(base)
}
