package plots

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// missFill shades the per-request speeds below the target: the batches a plan cannot use. It is
// translucent because it is drawn over the curves (gonum draws plotters in the order added).
var missFill = color.NRGBA{0xD5, 0x5E, 0x00, 0x1C}

// FrontierData is what a capacity plan draws: the batches of one context as per-server
// against per-request tokens/s, the per-request target and the batch the plan chose.
type FrontierData struct {
	// Points are the batches known: measured (Style Measured) or predicted (Style Bound), X
	// per-request and Y per-server tokens/s, PointLabels such as "B=8".
	Points Series
	// Between, when it has points, is the curve the plan reads between measured batches
	// (drawn dashed): its interpolation.
	Between Series
	// Target is the per-request tokens/s every request must get.
	Target float64
	// Chosen is the plan's batch: its per-request and per-server tokens/s and a label.
	ChosenPerRequest, ChosenPerServer float64
	ChosenLabel                       string
}

// Frontier draws the trade between per-request and per-server tokens/s (the frontier), the
// target as a vertical line with the speeds below it shaded, and the chosen batch ringed.
func Frontier(c Chart, d FrontierData, base string) ([]string, error) {
	const what = "Frontier"
	if !drawable(d.Target) || !drawable(d.ChosenPerRequest) || !drawable(d.ChosenPerServer) {
		return nil, fmt.Errorf("plots: %s: target %g and chosen point (%g, %g) must be positive and finite",
			what, d.Target, d.ChosenPerRequest, d.ChosenPerServer)
	}
	series := []Series{d.Points}
	if len(d.Between.X) > 0 {
		between := d.Between
		between.Style, between.Group, between.PointLabels = Bound, d.Points.group(), nil
		series = []Series{between, markersOnly(d.Points)}
	}
	curves, err := prepareCurves(what, series, false)
	if err != nil {
		return nil, err
	}
	if countPoints(curves) == 0 {
		return nil, fmt.Errorf("plots: %s: %w", what, ErrNothingToDraw)
	}
	st := newStyler(curves)
	xSpec := axisSpec{label: perRequestLabelText, kind: rateAxis}
	ySpec := axisSpec{label: perServerLabelText, kind: rateAxis, logAbove: 10}
	p, err := linePanel("", xSpec, ySpec, curves, st, true)
	if err != nil {
		return nil, err
	}
	xs, ys := curvesExtent(curves)
	xs.add(d.Target)
	xs.add(d.ChosenPerRequest)
	ys.add(d.ChosenPerServer)
	configureAxis(&p.X, xSpec, xs)
	configureAxis(&p.Y, ySpec, ys)

	chosenColor := paletteColor(1)
	p.Add(&targetMark{target: d.Target})
	chosen, err := plotter.NewScatter(plotter.XYs{{X: d.ChosenPerRequest, Y: d.ChosenPerServer}})
	if err != nil {
		return nil, err
	}
	chosen.GlyphStyle = draw.GlyphStyle{Color: chosenColor, Radius: markerRadius * 2.4, Shape: thickRing{}}
	p.Add(chosen)

	f := newFigure(c)
	f.panels = append(f.panels, p)
	addSeriesLegend(&f.legend, st, curves)
	f.legend.add(fmt.Sprintf("target: %s tokens/s per request (below it shaded)", shortNumber(d.Target)),
		&plotter.Line{LineStyle: targetLine})
	if d.ChosenLabel != "" {
		f.legend.add(d.ChosenLabel, &plotter.Scatter{GlyphStyle: draw.GlyphStyle{Color: chosenColor, Radius: markerRadius * 1.6, Shape: thickRing{}}})
	}
	return f.save(base)
}

var targetLine = draw.LineStyle{Color: color.RGBA{0x88, 0x22, 0x22, 0xFF}, Width: vg.Points(1.6), Dashes: []vg.Length{vg.Points(2), vg.Points(2.5)}}

// targetMark shades the per-request speeds below the target and draws the target line.
type targetMark struct{ target float64 }

func (t *targetMark) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	x := trX(t.target)
	y0, y1 := trY(p.Y.Min), trY(p.Y.Max)
	rect := vg.Rectangle{Min: vg.Point{X: trX(p.X.Min), Y: y0}, Max: vg.Point{X: x, Y: y1}}
	c.SetColor(missFill)
	c.Fill(rect.Path())
	c.StrokeLine2(targetLine, x, y0, x, y1)
}

// thickRing is an open circle with a heavy stroke: it rings a point without hiding it.
type thickRing struct{}

func (thickRing) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.SetLineStyle(draw.LineStyle{Color: sty.Color, Width: vg.Points(2.2)})
	var path vg.Path
	path.Move(vg.Point{X: pt.X + sty.Radius, Y: pt.Y})
	path.Arc(pt, sty.Radius, 0, 2*3.141592653589793)
	path.Close()
	c.Stroke(path)
}

// markersOnly breaks a series after every point (a NaN between each two), so that it draws its
// markers without the straight lines between them: the curve between them is Between's.
func markersOnly(s Series) Series {
	out := Series{Label: s.Label, Style: s.Style, Group: s.group()}
	for i := range s.X {
		if i > 0 {
			out.X, out.Y = append(out.X, math.NaN()), append(out.Y, math.NaN())
			if s.PointLabels != nil {
				out.PointLabels = append(out.PointLabels, "")
			}
		}
		out.X, out.Y = append(out.X, s.X[i]), append(out.Y, s.Y[i])
		if s.PointLabels != nil {
			out.PointLabels = append(out.PointLabels, s.PointLabels[i])
		}
	}
	return out
}
