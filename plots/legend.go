package plots

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The legend is a block of entries that flows left to right under the subtitle, above the
// panels: it never covers data and does not take width from the panels.
var (
	legendThumbWidth = vg.Points(24)
	legendThumbGap   = vg.Points(5)
	legendEntryGap   = vg.Points(18)
	legendRowGap     = vg.Points(4)
)

type legendEntry struct {
	text   string
	thumbs []plot.Thumbnailer
}

type legendBlock struct {
	entries []legendEntry
	style   text.Style
}

func newLegendBlock() legendBlock {
	return legendBlock{style: textStyle(legendSize, false, textColor)}
}

func (l *legendBlock) add(text string, thumbs ...plot.Thumbnailer) {
	l.entries = append(l.entries, legendEntry{text: text, thumbs: thumbs})
}

func (l legendBlock) entryWidth(e legendEntry) vg.Length {
	return legendThumbWidth + legendThumbGap + l.style.Width(e.text)
}

func (l legendBlock) rowHeight() vg.Length {
	return l.style.FontExtents().Height
}

// rows breaks the entries into rows no wider than width.
func (l legendBlock) rows(width vg.Length) [][]legendEntry {
	var rows [][]legendEntry
	var row []legendEntry
	var x vg.Length
	for _, e := range l.entries {
		w := l.entryWidth(e)
		if len(row) > 0 && x+legendEntryGap+w > width {
			rows = append(rows, row)
			row, x = nil, 0
		}
		if len(row) > 0 {
			x += legendEntryGap
		}
		row = append(row, e)
		x += w
	}
	if len(row) > 0 {
		rows = append(rows, row)
	}
	return rows
}

// height is the height the legend takes in a figure of the given inner width.
func (l legendBlock) height(width vg.Length) vg.Length {
	n := len(l.rows(width))
	if n == 0 {
		return 0
	}
	return vg.Length(n)*l.rowHeight() + vg.Length(n-1)*legendRowGap
}

// draw draws the legend with its top-left corner at the top-left of c.
func (l legendBlock) draw(c draw.Canvas) {
	sty := l.style
	sty.YAlign = draw.YCenter
	h := l.rowHeight()
	y := c.Max.Y - h/2
	for _, row := range l.rows(c.Max.X - c.Min.X) {
		x := c.Min.X
		for _, e := range row {
			thumb := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
				Min: vg.Point{X: x, Y: y - h/2},
				Max: vg.Point{X: x + legendThumbWidth, Y: y + h/2},
			}}
			for _, t := range e.thumbs {
				t.Thumbnail(&thumb)
			}
			c.FillText(sty, vg.Point{X: x + legendThumbWidth + legendThumbGap, Y: y}, e.text)
			x += l.entryWidth(e) + legendEntryGap
		}
		y -= h + legendRowGap
	}
}

// seriesThumbs returns the legend thumbnail of a series style: a line, with a marker when the
// series is measured.
func seriesThumbs(style SeriesStyle, clr color.Color, shape draw.GlyphDrawer) []plot.Thumbnailer {
	if style == NoFit {
		return []plot.Thumbnailer{&plotter.Scatter{GlyphStyle: noFitGlyph(clr)}}
	}
	line := &plotter.Line{LineStyle: lineStyle(style, clr)}
	switch style {
	case Bound:
		return []plot.Thumbnailer{line}
	case EndToEnd:
		return []plot.Thumbnailer{line, &plotter.Scatter{GlyphStyle: ringStyle(clr)}}
	}
	return []plot.Thumbnailer{line, &plotter.Scatter{GlyphStyle: glyphStyle(clr, shape)}}
}

// markerThumb is a marker alone (a roofline kernel).
func markerThumb(clr color.Color, shape draw.GlyphDrawer) plot.Thumbnailer {
	return &plotter.Scatter{GlyphStyle: glyphStyle(clr, shape)}
}

// swatchThumb is a filled square (a heat-map colour).
type swatchThumb struct{ color color.Color }

func (s swatchThumb) Thumbnail(c *draw.Canvas) {
	side := c.Max.Y - c.Min.Y
	x := c.Min.X + (c.Max.X-c.Min.X-side)/2
	r := vg.Rectangle{Min: vg.Point{X: x, Y: c.Min.Y}, Max: vg.Point{X: x + side, Y: c.Max.Y}}
	c.SetColor(s.color)
	c.Fill(r.Path())
}

func lineStyle(style SeriesStyle, clr color.Color) draw.LineStyle {
	switch style {
	case Bound:
		return draw.LineStyle{Color: clr, Width: boundLineWidth, Dashes: boundDashes}
	case EndToEnd:
		return draw.LineStyle{Color: clr, Width: measuredLineWidth, Dashes: endToEndDashes}
	}
	return draw.LineStyle{Color: clr, Width: measuredLineWidth}
}

// ringStyle marks an end-to-end point: a ring of the group's colour, so it reads apart from
// the composed curve's filled marker at the same x.
func ringStyle(clr color.Color) draw.GlyphStyle {
	return draw.GlyphStyle{Color: clr, Radius: markerRadius * 1.3, Shape: draw.RingGlyph{}}
}

func glyphStyle(clr color.Color, shape draw.GlyphDrawer) draw.GlyphStyle {
	return draw.GlyphStyle{Color: clr, Radius: markerRadius, Shape: shape}
}
