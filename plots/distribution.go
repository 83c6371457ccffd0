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

// Mark says what a value of a Distribution is.
type Mark int

const (
	MarkOK      Mark = iota // a card within the fleet
	MarkOutlier             // an outlier of its kind
	MarkFailing             // a card that fails its gate
)

// DistributionColumn is one category of a Distribution (one kind of card): its values, a
// Mark per value (nil: all MarkOK) and the threshold they are held to (0: none).
type DistributionColumn struct {
	Label     string
	Values    []float64
	Marks     []Mark
	Threshold float64
	// ThresholdText is written by the threshold's line; empty: "threshold <value>".
	ThresholdText string
}

// markStyles: what each Mark looks like and what the legend calls it.
var markStyles = []struct {
	name  string
	color color.RGBA
	shape draw.GlyphDrawer
}{
	MarkOK:      {"card", palette[0], draw.CircleGlyph{}},
	MarkOutlier: {"fleet outlier", palette[4], draw.PyramidGlyph{}},
	MarkFailing: {"failing card", palette[1], crossGlyph{}},
}

var thresholdColor = color.RGBA{0x80, 0x00, 0x00, 0xFF}

// Distribution draws every value of each column as a marker, spread across its column in
// order so that equal values stay apart, coloured by its Mark, and each column's threshold as
// a dashed line across it, written with its value inside the frame. yLabel says what the
// values are (a percentage of a reference, say). Values that cannot be drawn (NaN, ±Inf) are
// left out; a chart with none left is ErrNothingToDraw.
func Distribution(c Chart, yLabel string, columns []DistributionColumn, base string) ([]string, error) {
	const what = "Distribution"
	ys := emptyExtent()
	var labels []string
	var sets [3]plotter.XYs
	var thresholds []thresholdMark
	for col, column := range columns {
		if column.Marks != nil && len(column.Marks) != len(column.Values) {
			return nil, fmt.Errorf("plots: %s: column %s: %d marks for %d values", what, nameOr(column.Label, col), len(column.Marks), len(column.Values))
		}
		labels = append(labels, column.Label)
		var finite []int
		for i, v := range column.Values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				finite = append(finite, i)
			}
		}
		for n, i := range finite {
			x := float64(col)
			if len(finite) > 1 {
				x += 0.7 * (float64(n)/float64(len(finite)-1) - 0.5)
			}
			m := MarkOK
			if column.Marks != nil {
				m = column.Marks[i]
			}
			if m < MarkOK || m > MarkFailing {
				return nil, fmt.Errorf("plots: %s: column %s: unknown mark %d", what, nameOr(column.Label, col), m)
			}
			sets[m] = append(sets[m], plotter.XY{X: x, Y: column.Values[i]})
			ys.add(column.Values[i])
		}
		if t := column.Threshold; t != 0 && !math.IsNaN(t) && !math.IsInf(t, 0) {
			text := column.ThresholdText
			if text == "" {
				text = "threshold " + shortNumber(t)
			}
			thresholds = append(thresholds, thresholdMark{x0: float64(col) - 0.42, x1: float64(col) + 0.42, y: t, text: text})
			ys.add(t)
		}
	}
	if !ys.valid() || len(sets[0])+len(sets[1])+len(sets[2]) == 0 {
		return nil, fmt.Errorf("plots: %s: %w", what, ErrNothingToDraw)
	}

	p := newThemedPlot("", "", yLabel)
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = gridColor, gridColor
	grid.Vertical.Width = 0 // the columns are categories: no vertical grid
	p.Add(grid)
	p.X.Tick.Marker = indexTicks(labels, 1)
	p.X.Tick.Length = 0
	p.X.Min, p.X.Max = -0.6, float64(len(columns))-0.4
	// Room above and below for the markers and for a threshold's label, inside the frame.
	pad := math.Max(1e-9, 0.12*(ys.Max-ys.Min))
	if ys.Max == ys.Min {
		pad = math.Max(1, 0.1*math.Abs(ys.Max))
	}
	p.Y.Min, p.Y.Max = ys.Min-pad, ys.Max+pad
	p.Y.Tick.Marker = linearTicks{plainLabel}

	f := newFigure(c)
	for m, xys := range sets {
		if len(xys) == 0 {
			continue
		}
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, err
		}
		st := markStyles[m]
		s.GlyphStyle = draw.GlyphStyle{Color: st.color, Radius: markerRadius * 1.1, Shape: st.shape}
		p.Add(s)
		f.legend.add(st.name, &plotter.Scatter{GlyphStyle: s.GlyphStyle})
	}
	if len(thresholds) > 0 {
		p.Add(&thresholdSet{items: thresholds})
		f.legend.add("threshold", &plotter.Line{LineStyle: thresholdLine()})
	}
	f.panels = append(f.panels, p)
	return f.save(base)
}

func thresholdLine() draw.LineStyle {
	return draw.LineStyle{Color: thresholdColor, Width: vg.Points(1.6), Dashes: boundDashes}
}

type thresholdMark struct {
	x0, x1, y float64
	text      string
}

// thresholdSet draws each threshold's line and its value, above the line at its right end,
// or below it when the frame's top is too near: never outside the frame.
type thresholdSet struct{ items []thresholdMark }

func (t *thresholdSet) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := textStyle(annotationSize, false, thresholdColor)
	sty.XAlign = draw.XRight
	gap := vg.Points(2)
	for _, it := range t.items {
		x0, x1, y := trX(it.x0), trX(it.x1), trY(it.y)
		c.StrokeLine2(thresholdLine(), x0, y, x1, y)
		label := it.text
		h := sty.Height(label)
		at := vg.Point{X: x1, Y: y + gap}
		sty.YAlign = draw.YBottom
		if y+gap+h > c.Max.Y {
			at.Y, sty.YAlign = y-gap, draw.YTop
		}
		c.FillText(sty, at, label)
	}
}
