package plots

import (
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// axisKind says what an axis of a line chart carries, which sets its scale, range and ticks.
type axisKind int

const (
	batchAxis   axisKind = iota // log2, powers of two labelled 1 ... 256
	contextAxis                 // log2, labelled 1k ... 128k (binary k)
	rateAxis                    // tokens/s: log10 past a range of axisSpec.logAbove, else linear
)

type axisSpec struct {
	label string
	kind  axisKind
	// For a rateAxis: logAbove is the ratio of largest to smallest value past which the axis
	// is logarithmic (100 unless set), and fromZero starts a linear axis at zero.
	logAbove float64
	fromZero bool
}

// defaultLogAbove: a tokens/s axis turns logarithmic when its values span more than 100x, where
// a linear one would squeeze the smaller curves onto the axis line.
const defaultLogAbove = 100

// styler gives each group a colour and marker shape, in order of first appearance, so that
// panels of one figure (and figures fed series in the same order) agree.
type styler struct{ index map[string]int }

func newStyler(lists ...[]curve) *styler {
	s := &styler{index: map[string]int{}}
	for _, l := range lists {
		for _, c := range l {
			s.of(c.group())
		}
	}
	return s
}

func (s *styler) of(group string) (color.RGBA, draw.GlyphDrawer) {
	i, ok := s.index[group]
	if !ok {
		i = len(s.index)
		s.index[group] = i
	}
	return paletteColor(i), markerShape(i)
}

// configureAxis sets scale, ticks and range of a for values spanning e (drawable, so positive).
func configureAxis(a *plot.Axis, spec axisSpec, e extent) {
	switch spec.kind {
	case batchAxis, contextAxis:
		format := batchLabel
		if spec.kind == contextAxis {
			format = contextLabel
		}
		a.Scale = plot.LogScale{}
		a.Tick.Marker = log2Ticks{format}
		r := pow2Extent(e)
		a.Min, a.Max = r.Min, r.Max
	case rateAxis:
		logAbove := spec.logAbove
		if logAbove == 0 {
			logAbove = defaultLogAbove
		}
		if e.Max/e.Min > logAbove {
			a.Scale = plot.LogScale{}
			a.Tick.Marker = log10Ticks{siLabel}
			r := logPadded(e)
			a.Min, a.Max = r.Min, r.Max
		} else {
			a.Scale = plot.LinearScale{}
			a.Tick.Marker = linearTicks{siLabel}
			r := linearPadded(e)
			if spec.fromZero {
				r = zeroBased(e)
			}
			a.Min, a.Max = r.Min, r.Max
		}
	}
}

// linePanel draws curves on one panel, with their point labels when withPointLabels is set.
// It expects at least one drawable point.
func linePanel(title string, x, y axisSpec, curves []curve, st *styler, withPointLabels bool) (*plot.Plot, error) {
	p := newThemedPlot(title, x.label, y.label)
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = gridColor, gridColor
	p.Add(grid)

	labels := newPointLabels()
	var noFit []curve
	for _, c := range curves {
		clr, shape := st.of(c.group())
		if c.Style == NoFit {
			noFit = append(noFit, c)
			continue
		}
		for _, run := range c.runs {
			xys := toXYs(run)
			if len(run) == 1 && c.Style == Bound {
				// A lone bound point draws no line: mark it with a ring instead of losing it.
				s, err := plotter.NewScatter(xys)
				if err != nil {
					return nil, err
				}
				s.GlyphStyle = draw.GlyphStyle{Color: clr, Radius: markerRadius, Shape: draw.RingGlyph{}}
				p.Add(s)
				continue
			}
			line, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			line.LineStyle = lineStyle(c.Style, clr)
			p.Add(line)
			if len(run) > 1 {
				labels.curves = append(labels.curves, run)
			}
		}
		if c.Style == Bound {
			continue
		}
		for _, run := range c.runs {
			s, err := plotter.NewScatter(toXYs(run))
			if err != nil {
				return nil, err
			}
			s.GlyphStyle = glyphStyle(clr, shape)
			if c.Style == EndToEnd {
				s.GlyphStyle = ringStyle(clr)
			}
			p.Add(s)
			for _, pt := range run {
				labels.markers = append(labels.markers, pt)
				if withPointLabels && pt.Label != "" {
					labels.items = append(labels.items, labelItem{X: pt.X, Y: pt.Y, Text: pt.Label, Color: darker(clr)})
				}
			}
		}
	}
	if len(labels.items) > 0 {
		p.Add(labels)
	}

	xs, ys := curvesExtent(curves)
	configureAxis(&p.X, x, xs)
	configureAxis(&p.Y, y, ys)
	// The no-fit crosses sit on the floor, just above the x axis, where no value is: one row
	// per series, so that two contexts that both do not fit at a batch stay apart.
	_, isLog := p.Y.Scale.(plot.LogScale)
	for i, c := range noFit {
		at := 0.03 + 0.04*float64(i)
		floor := p.Y.Min + at*(p.Y.Max-p.Y.Min)
		if isLog {
			floor = p.Y.Min * math.Pow(p.Y.Max/p.Y.Min, at)
		}
		clr, _ := st.of(c.group())
		var xys plotter.XYs
		for _, pt := range c.points() {
			xys = append(xys, plotter.XY{X: pt.X, Y: floor})
		}
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = noFitGlyph(clr)
		p.Add(s)
	}
	return p, nil
}

// noFitGlyph is the cross of a configuration that does not fit.
func noFitGlyph(clr color.Color) draw.GlyphStyle {
	return draw.GlyphStyle{Color: clr, Radius: markerRadius * 1.3, Shape: crossGlyph{}}
}

// crossGlyph is an x of strokes as wide as the curves', which gonum's hairline CrossGlyph is not.
type crossGlyph struct{}

func (crossGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.SetLineStyle(draw.LineStyle{Color: sty.Color, Width: vg.Points(1.6)})
	r := sty.Radius * 0.9
	var p vg.Path
	p.Move(vg.Point{X: pt.X - r, Y: pt.Y - r})
	p.Line(vg.Point{X: pt.X + r, Y: pt.Y + r})
	p.Move(vg.Point{X: pt.X - r, Y: pt.Y + r})
	p.Line(vg.Point{X: pt.X + r, Y: pt.Y - r})
	c.Stroke(p)
}

// addSeriesLegend adds one legend entry per distinct label and style, in order. A label that
// several groups share (say "roofline bound" on every context's dashed curve) names a style, not
// a colour, so its entry is drawn in neutral grey.
func addSeriesLegend(l *legendBlock, st *styler, lists ...[]curve) {
	type key struct {
		label string
		style SeriesStyle
	}
	groups := map[key]map[string]bool{}
	var order []key
	for _, list := range lists {
		for _, c := range list {
			k := key{c.Label, c.Style}
			if c.Label == "" {
				continue
			}
			if groups[k] == nil {
				groups[k] = map[string]bool{}
				order = append(order, k)
			}
			groups[k][c.group()] = true
		}
	}
	var shared []key // style entries go after the colour entries
	for _, k := range order {
		if len(groups[k]) > 1 {
			shared = append(shared, k)
			continue
		}
		for g := range groups[k] {
			clr, shape := st.of(g)
			l.add(k.label, seriesThumbs(k.style, clr, shape)...)
		}
	}
	for _, k := range shared {
		l.add(k.label, seriesThumbs(k.style, mutedColor, draw.CircleGlyph{})...)
	}
}

func toXYs(run []xy) plotter.XYs {
	xys := make(plotter.XYs, len(run))
	for i, p := range run {
		xys[i].X, xys[i].Y = p.X, p.Y
	}
	return xys
}

// darker is the colour for text drawn in a series' colour: a little darker reads better at
// small sizes on white.
func darker(c color.RGBA) color.RGBA {
	return color.RGBA{R: uint8(int(c.R) * 3 / 4), G: uint8(int(c.G) * 3 / 4), B: uint8(int(c.B) * 3 / 4), A: c.A}
}
