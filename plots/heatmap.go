package plots

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

const fractionLabelText = "fraction of roofline"

// EfficiencyMap draws a heat map of the fraction of the roofline reached (0..1), batch size
// across and context length up, each cell written as a percentage. fraction[i][j] is the
// result at contexts[i] and batches[j]. A NaN, infinite or negative cell was not measured (or
// failed) and is drawn grey. Fractions above 1 (a kernel beating the ceiling used) are written
// as they are and coloured as 1.
func EfficiencyMap(c Chart, batches, contexts []int, fraction [][]float64, base string) ([]string, error) {
	if err := validateGrid(batches, contexts, fraction); err != nil {
		return nil, err
	}
	measured, missing := 0, 0
	values := emptyExtent()
	for _, row := range fraction {
		for _, v := range row {
			if cellMeasured(v) {
				measured++
				values.add(v)
			} else {
				missing++
			}
		}
	}
	if measured == 0 {
		return nil, fmt.Errorf("plots: EfficiencyMap: %w (every cell is NaN, infinite or negative)", ErrNothingToDraw)
	}

	batchNames := make([]string, len(batches))
	for j, b := range batches {
		batchNames[j] = batchLabel(float64(b))
	}
	contextNames := make([]string, len(contexts))
	for i, s := range contexts {
		contextNames[i] = contextLabel(float64(s))
	}

	p := newThemedPlot("", batchLabelText, contextLabelText)
	scale := colorScaleFor(values)
	p.Add(&heatCells{fraction: fraction, scale: scale})
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Padding = 0
		a.Tick.Length = 0
		a.LineStyle.Width = 0
	}
	p.X.Tick.Marker = indexTicks(batchNames, 1)
	p.Y.Tick.Marker = indexTicks(contextNames, 1)
	p.X.Min, p.X.Max = -0.5, float64(len(batches))-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(len(contexts))-0.5

	f := newFigure(c)
	f.panels = append(f.panels, p)
	if missing > 0 {
		f.legend.add("not measured", swatchThumb{notMeasured})
	}
	f.sideWidth = vg.Points(78)
	f.side = scale.drawBar
	// On a big grid, label every second (third ...) row or column so the labels do not touch.
	// Strides only grow, so this settles.
	xStride, yStride := 1, 1
	f.relayout = func(data []draw.Canvas) bool {
		d := data[0]
		colWidth := (d.Max.X - d.Min.X) / vg.Length(len(batches))
		rowHeight := (d.Max.Y - d.Min.Y) / vg.Length(len(contexts))
		widest := vg.Length(0)
		for _, n := range batchNames {
			widest = max(widest, p.X.Tick.Label.Width(n))
		}
		x := max(xStride, strideFor(widest+vg.Points(6), colWidth))
		y := max(yStride, strideFor(p.Y.Tick.Label.Height("0")+vg.Points(2), rowHeight))
		if x == xStride && y == yStride {
			return false
		}
		xStride, yStride = x, y
		p.X.Tick.Marker = indexTicks(batchNames, xStride)
		p.Y.Tick.Marker = indexTicks(contextNames, yStride)
		return true
	}
	return f.save(base)
}

// colorScale maps fractions in [lo, hi] onto viridis. It spans the measured values rounded
// out to tenths (and at most 100%), not always 0..100%: measured fractions often sit within
// a few tenths of each other, which a full scale would paint one colour. Each cell still
// carries its number, and the colour bar says where the scale starts.
type colorScale struct{ lo, hi float64 }

func colorScaleFor(values extent) colorScale {
	lo := math.Floor(values.Min*10+1e-9) / 10
	hi := math.Min(1, math.Ceil(values.Max*10-1e-9)/10)
	if hi < lo+0.1 {
		if hi >= 0.1 {
			lo = hi - 0.1
		} else {
			hi = lo + 0.1
		}
	}
	return colorScale{lo: lo, hi: hi}
}

func (s colorScale) color(v float64) color.RGBA { return viridis((v - s.lo) / (s.hi - s.lo)) }

func validateGrid(batches, contexts []int, fraction [][]float64) error {
	if len(batches) == 0 || len(contexts) == 0 {
		return fmt.Errorf("plots: EfficiencyMap: %w (%d batch sizes, %d context lengths)",
			ErrNothingToDraw, len(batches), len(contexts))
	}
	for _, b := range batches {
		if b <= 0 {
			return fmt.Errorf("plots: EfficiencyMap: batch size %d: must be positive", b)
		}
	}
	for _, s := range contexts {
		if s <= 0 {
			return fmt.Errorf("plots: EfficiencyMap: context length %d: must be positive", s)
		}
	}
	if len(fraction) != len(contexts) {
		return fmt.Errorf("plots: EfficiencyMap: %d rows of fractions for %d context lengths", len(fraction), len(contexts))
	}
	for i, row := range fraction {
		if len(row) != len(batches) {
			return fmt.Errorf("plots: EfficiencyMap: row %d (context %d) has %d fractions for %d batch sizes",
				i, contexts[i], len(row), len(batches))
		}
	}
	return nil
}

// strideFor is how many cells of size cell one label of size need spans.
func strideFor(need, cell vg.Length) int {
	if cell <= 0 {
		return 1
	}
	return max(1, int(math.Ceil(float64(need/cell)-1e-9)))
}

func cellMeasured(v float64) bool { return v >= 0 && !math.IsInf(v, 1) } // false for NaN

// heatCells draws the grid of cells at integer positions, column j for batches[j] and row i
// for contexts[i], with the percentage in each cell when it fits.
type heatCells struct {
	fraction [][]float64
	scale    colorScale
}

func (h *heatCells) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i, row := range h.fraction {
		for j, v := range row {
			// A hairline of white between cells, thinner on a grid of tiny cells.
			inset := min(vg.Points(0.75), 0.08*(trX(float64(j)+0.5)-trX(float64(j)-0.5)),
				0.08*(trY(float64(i)+0.5)-trY(float64(i)-0.5)))
			r := vg.Rectangle{
				Min: vg.Point{X: trX(float64(j)-0.5) + inset, Y: trY(float64(i)-0.5) + inset},
				Max: vg.Point{X: trX(float64(j)+0.5) - inset, Y: trY(float64(i)+0.5) - inset},
			}
			fill := color.Color(notMeasured)
			label := "–"
			if cellMeasured(v) {
				fill = h.scale.color(v)
				label = fmt.Sprintf("%.0f%%", 100*v)
			}
			c.SetColor(fill)
			c.Fill(r.Path())
			drawCellLabel(c, r, label, contrastText(fill))
		}
	}
}

// drawCellLabel writes text centred in r at the largest of two sizes that fits, or not at all.
func drawCellLabel(c draw.Canvas, r vg.Rectangle, label string, clr color.Color) {
	for _, size := range []float64{annotationSize + 1, annotationSize - 1.5} {
		sty := textStyle(size, false, clr)
		sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
		if sty.Width(label) <= r.Size().X-vg.Points(3) && sty.Height(label) <= r.Size().Y-vg.Points(2) {
			c.FillText(sty, vg.Point{X: (r.Min.X + r.Max.X) / 2, Y: (r.Min.Y + r.Max.Y) / 2}, label)
			return
		}
	}
}

func (h *heatCells) DataRange() (xmin, xmax, ymin, ymax float64) {
	cols := 0
	if len(h.fraction) > 0 {
		cols = len(h.fraction[0])
	}
	return -0.5, float64(cols) - 0.5, -0.5, float64(len(h.fraction)) - 0.5
}

// drawBar draws the colour scale in the strip right of the heat map, as tall as its data area.
func (s colorScale) drawBar(strip, data draw.Canvas) {
	const steps = 100
	barWidth := vg.Points(13)
	x0 := strip.Min.X + vg.Points(16)
	y0, y1 := data.Min.Y, data.Max.Y
	for k := range steps {
		lo := y0 + (y1-y0)*vg.Length(k)/steps
		hi := y0 + (y1-y0)*vg.Length(k+1)/steps
		r := vg.Rectangle{Min: vg.Point{X: x0, Y: lo}, Max: vg.Point{X: x0 + barWidth, Y: hi + vg.Points(0.3)}}
		strip.SetColor(viridis((float64(k) + 0.5) / steps))
		strip.Fill(r.Path())
	}
	tick := draw.LineStyle{Color: mutedColor, Width: vg.Points(0.8)}
	sty := textStyle(tickLabelSize, false, textColor)
	sty.YAlign = draw.YCenter
	var labelRight vg.Length
	for _, tk := range (linearTicks{percentLabel}).Ticks(s.lo, s.hi) {
		if tk.Label == "" {
			continue
		}
		y := y0 + (y1-y0)*vg.Length((tk.Value-s.lo)/(s.hi-s.lo))
		strip.StrokeLine2(tick, x0+barWidth, y, x0+barWidth+vg.Points(4), y)
		strip.FillText(sty, vg.Point{X: x0 + barWidth + vg.Points(6), Y: y}, tk.Label)
		labelRight = max(labelRight, x0+barWidth+vg.Points(6)+sty.Width(tk.Label))
	}
	title := textStyle(axisLabelSize, false, textColor)
	title.Rotation = math.Pi / 2
	title.XAlign, title.YAlign = draw.XCenter, draw.YTop
	strip.FillText(title, vg.Point{X: labelRight + vg.Points(6), Y: (y0 + y1) / 2}, fractionLabelText)
}

func percentLabel(v float64) string { return shortNumber(100*v) + "%" }

// viridisAnchors are ten evenly spaced colours of matplotlib's viridis map: perceptually
// uniform, readable in greyscale and by colour-blind readers.
var viridisAnchors = []color.RGBA{
	{0x44, 0x01, 0x54, 0xFF}, {0x48, 0x28, 0x78, 0xFF}, {0x3E, 0x4A, 0x89, 0xFF},
	{0x31, 0x68, 0x8E, 0xFF}, {0x26, 0x82, 0x8E, 0xFF}, {0x1F, 0x9E, 0x89, 0xFF},
	{0x35, 0xB7, 0x79, 0xFF}, {0x6D, 0xCD, 0x59, 0xFF}, {0xB4, 0xDE, 0x2C, 0xFF},
	{0xFD, 0xE7, 0x25, 0xFF},
}

// viridis maps a fraction, clamped to 0..1, to a colour.
func viridis(v float64) color.RGBA {
	v = math.Max(0, math.Min(1, v))
	pos := v * float64(len(viridisAnchors)-1)
	k := min(int(pos), len(viridisAnchors)-2)
	t := pos - float64(k)
	a, b := viridisAnchors[k], viridisAnchors[k+1]
	mix := func(x, y uint8) uint8 { return uint8(math.Round(float64(x) + t*(float64(y)-float64(x)))) }
	return color.RGBA{mix(a.R, b.R), mix(a.G, b.G), mix(a.B, b.B), 0xFF}
}

// contrastText is black on light cells and white on dark ones.
func contrastText(bg color.Color) color.Color {
	r, g, b, _ := bg.RGBA()
	luminance := (0.2126*float64(r) + 0.7152*float64(g) + 0.0722*float64(b)) / 0xFFFF
	if luminance > 0.45 {
		return textColor
	}
	return color.White
}
