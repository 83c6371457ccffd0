package plots

import (
	"fmt"
	"image"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// figure is a whole chart: title and subtitle, a legend, one or more panels side by side, an
// optional side strip (the heat map's colour bar) and an optional footnote.
type figure struct {
	chart  Chart
	panels []*plot.Plot
	legend legendBlock
	note   string
	// side, when set, is drawn in a strip of sideWidth right of the panels, given the data
	// area of the last panel so that it can line up with it.
	sideWidth vg.Length
	side      func(strip, data draw.Canvas)
	// relayout is given each panel's data area before drawing; it returns true when it changed
	// the figure (moved a label into the legend, say) so that the layout must be done again.
	// It must return false once it has nothing left to move.
	relayout func(data []draw.Canvas) bool
	// yLabels are the panels' y-axis labels, which the figure draws itself: gonum places the
	// label's glyph box at the data midpoint of the axis, which on a log axis is near its top,
	// and then pushes the data area down to make room for a box that is not there.
	yLabels []string
	// panelTitles are drawn by the figure too, in one row above the panels, so that they line
	// up even when one panel's tick labels need more room at the top than the other's.
	panelTitles []string
}

func newFigure(c Chart) *figure {
	return &figure{chart: c, legend: newLegendBlock()}
}

var (
	headerGap  = vg.Points(4)  // between title, subtitle and legend
	sectionGap = vg.Points(12) // between the header and the panels, the panels and the note
	panelGap   = vg.Points(30) // between panels side by side
)

// layout is where everything of a figure goes on one canvas.
type layout struct {
	header, legend, note, side draw.Canvas
	panels, data               []draw.Canvas
	yLabelAt                   []vg.Point // middle of the left edge of each y-axis label
	panelTitleAt               []vg.Point // middle of the top edge of each panel title
	title, subtitle, noteText  string     // wrapped to the figure's width
}

func (f *figure) layoutOn(c draw.Canvas) layout {
	var l layout
	inner := draw.Crop(c, margin, -margin, margin, -margin)
	width := inner.Max.X - inner.Min.X

	l.title = wrapText(titleStyle(), f.chart.Title, width)
	l.subtitle = wrapText(subtitleStyle(), f.chart.Subtitle, width)
	top := inner.Max.Y
	top -= l.headerHeight()
	l.header = inner
	l.header.Min.Y = top
	if h := f.legend.height(width); h > 0 {
		top -= headerGap * 2
		l.legend = inner
		l.legend.Max.Y = top
		top -= h
		l.legend.Min.Y = top
	}
	top -= sectionGap

	bottom := inner.Min.Y
	if f.note != "" {
		l.noteText = wrapText(noteStyle(), f.note, width)
		l.note = inner
		l.note.Max.Y = bottom + noteStyle().Height(l.noteText)
		bottom = l.note.Max.Y + sectionGap
	}

	area := inner
	area.Min.Y, area.Max.Y = bottom, top
	if f.side != nil {
		area.Max.X -= f.sideWidth
		l.side = inner
		l.side.Min.X, l.side.Min.Y, l.side.Max.Y = area.Max.X, bottom, top
	}
	if len(f.panels) == 0 || area.Max.Y <= area.Min.Y || area.Max.X <= area.Min.X {
		return l
	}
	var titleRow vg.Length
	for _, t := range f.panelTitles {
		if t != "" {
			titleRow = max(titleRow, panelTitleStyle().Height(t)+vg.Points(8))
		}
	}
	titleTop := area.Max.Y
	area.Max.Y -= titleRow
	if area.Max.Y <= area.Min.Y {
		return l
	}
	reserve := make([]vg.Length, len(f.panels))
	sty := yLabelStyle()
	for i, text := range f.yLabels {
		if text != "" {
			reserve[i] = sty.Height(text) + vg.Points(6)
		}
	}
	l.panels = alignRow(f.panels, reserve, area, panelGap)
	for i, p := range f.panels {
		l.data = append(l.data, p.DataCanvas(l.panels[i]))
		mid := (l.data[i].Min.Y + l.data[i].Max.Y) / 2
		l.yLabelAt = append(l.yLabelAt, vg.Point{X: l.panels[i].Min.X - reserve[i], Y: mid})
		center := (l.data[i].Min.X + l.data[i].Max.X) / 2
		l.panelTitleAt = append(l.panelTitleAt, vg.Point{X: center, Y: titleTop})
	}
	return l
}

func yLabelStyle() text.Style {
	sty := textStyle(axisLabelSize, false, textColor)
	sty.Rotation = math.Pi / 2
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YTop
	return sty
}

func panelTitleStyle() text.Style {
	sty := textStyle(panelTitleSize, true, textColor)
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YTop
	return sty
}

// takePanelTexts moves the panels' titles and y-axis labels into the figure (see
// figure.yLabels and figure.panelTitles).
func (f *figure) takePanelTexts() {
	if f.yLabels != nil {
		return
	}
	f.yLabels = make([]string, len(f.panels))
	f.panelTitles = make([]string, len(f.panels))
	for i, p := range f.panels {
		f.yLabels[i], p.Y.Label.Text = p.Y.Label.Text, ""
		f.panelTitles[i], p.Title.Text = p.Title.Text, ""
	}
}

// alignRow places plots side by side in area so that their data areas have the same width,
// top and bottom, whatever their tick labels take. (plot.Align does this for grids, but left
// a band of white over the log-scale panel of TokensVsBatch.) The space around a data area
// barely depends on the panel's size, so two passes settle it.
//
// reserve[i] is kept free left of panel i (for its y-axis label); the canvases returned
// exclude it.
func alignRow(plots []*plot.Plot, reserve []vg.Length, area draw.Canvas, gap vg.Length) []draw.Canvas {
	n := len(plots)
	width := (area.Max.X - area.Min.X - gap*vg.Length(n-1)) / vg.Length(n)
	tiles := make([]draw.Canvas, n)
	for i := range tiles {
		tiles[i] = area
		tiles[i].Min.X = area.Min.X + vg.Length(i)*(width+gap)
		tiles[i].Max.X = tiles[i].Min.X + width
	}
	for range 2 {
		left, right, top, bottom := make([]vg.Length, n), make([]vg.Length, n), make([]vg.Length, n), make([]vg.Length, n)
		var sumSides, maxTop, maxBottom vg.Length
		for i, p := range plots {
			inner := tiles[i]
			inner.Min.X += reserve[i]
			d := p.DataCanvas(inner)
			left[i], right[i] = d.Min.X-tiles[i].Min.X, tiles[i].Max.X-d.Max.X
			top[i], bottom[i] = tiles[i].Max.Y-d.Max.Y, d.Min.Y-tiles[i].Min.Y
			sumSides += left[i] + right[i]
			maxTop, maxBottom = max(maxTop, top[i]), max(maxBottom, bottom[i])
		}
		dataWidth := (area.Max.X - area.Min.X - gap*vg.Length(n-1) - sumSides) / vg.Length(n)
		x := area.Min.X
		for i := range tiles {
			tiles[i].Min.X = x
			tiles[i].Max.X = x + left[i] + dataWidth + right[i]
			x = tiles[i].Max.X + gap
			tiles[i].Max.Y = area.Max.Y - (maxTop - top[i])
			tiles[i].Min.Y = area.Min.Y + (maxBottom - bottom[i])
		}
	}
	for i := range tiles {
		tiles[i].Min.X += reserve[i]
	}
	return tiles
}

// minDataSide is the smallest data area worth drawing.
var minDataSide = vg.Points(40)

// usable says whether every panel got a data area of a sane size: a NaN or negative rectangle
// would send the rasteriser into an endless loop.
func (l layout) usable(panels int) bool {
	if len(l.panels) != panels || len(l.data) != panels {
		return false
	}
	for _, d := range l.data {
		w, h := float64(d.Max.X-d.Min.X), float64(d.Max.Y-d.Min.Y)
		if !(w >= float64(minDataSide)) || !(h >= float64(minDataSide)) || math.IsInf(w+h, 0) {
			return false
		}
	}
	return true
}

func titleStyle() text.Style {
	sty := textStyle(titleSize, true, textColor)
	sty.YAlign = draw.YTop
	return sty
}

func subtitleStyle() text.Style {
	sty := textStyle(subtitleSize, false, mutedColor)
	sty.YAlign = draw.YTop
	return sty
}

func noteStyle() text.Style {
	sty := textStyle(noteSize, false, mutedColor)
	sty.YAlign = draw.YTop
	return sty
}

// headerHeight is the height of the wrapped title and subtitle.
func (l layout) headerHeight() vg.Length {
	var h vg.Length
	if l.title != "" {
		h += titleStyle().Height(l.title)
	}
	if l.subtitle != "" {
		if h > 0 {
			h += headerGap
		}
		h += subtitleStyle().Height(l.subtitle)
	}
	return h
}

// wrapText breaks text at spaces into lines no wider than width (a single word wider than
// that keeps a line of its own).
func wrapText(sty text.Style, s string, width vg.Length) string {
	words := strings.Fields(s)
	var lines []string
	line := ""
	for _, w := range words {
		switch {
		case line == "":
			line = w
		case sty.Width(line+" "+w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

func (f *figure) draw(c draw.Canvas) error {
	f.takePanelTexts()
	l := f.layoutOn(c)
	// Each pass that changes something moves at least one label out of the data area for good,
	// so this ends.
	for f.relayout != nil && len(l.data) == len(f.panels) && f.relayout(l.data) {
		l = f.layoutOn(c)
	}
	if !l.usable(len(f.panels)) {
		return fmt.Errorf("plots: %q: no room left for the data (a very long legend or label?)", f.chart.Title)
	}

	c.SetColor(image.White)
	c.Fill(c.Rectangle.Path())

	y := l.header.Max.Y
	if l.title != "" {
		c.FillText(titleStyle(), vg.Point{X: l.header.Min.X, Y: y}, l.title)
		y -= titleStyle().Height(l.title) + headerGap
	}
	if l.subtitle != "" {
		c.FillText(subtitleStyle(), vg.Point{X: l.header.Min.X, Y: y}, l.subtitle)
	}
	if len(f.legend.entries) > 0 {
		f.legend.draw(l.legend)
	}
	for i, p := range f.panels {
		p.Draw(l.panels[i])
		if f.yLabels[i] != "" {
			c.FillText(yLabelStyle(), l.yLabelAt[i], f.yLabels[i])
		}
		if f.panelTitles[i] != "" {
			c.FillText(panelTitleStyle(), l.panelTitleAt[i], f.panelTitles[i])
		}
	}
	if f.side != nil {
		f.side(l.side, l.data[len(l.data)-1])
	}
	if l.noteText != "" {
		c.FillText(noteStyle(), vg.Point{X: l.note.Min.X, Y: l.note.Max.Y}, l.noteText)
	}
	return nil
}
