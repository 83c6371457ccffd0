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

const ratioLabelText = "B / A tokens/s (above 1: B is faster)"

// bandFill shades the threshold band: light enough that whiskers and markers read on it.
var bandFill = color.RGBA{0xEC, 0xEC, 0xEC, 0xFF}

// RatioSeries is one group of ratios (typically one context length) against the batch size,
// each with its confidence interval [Lo, Hi].
type RatioSeries struct {
	Label         string
	X             []float64 // batch sizes
	Ratio, Lo, Hi []float64 // a NaN Lo or Hi draws the ratio without a whisker
}

// RatioVsBatch draws ratios of tokens/s with their intervals against the batch size (log2
// axis): a marker at each ratio, a whisker over its interval, the band [1 - threshold, 1 +
// threshold] shaded and a line at 1, so that a whisker wholly below the band reads as slower
// at a glance. Series side by side at one batch are nudged apart along x so that their
// whiskers do not cover each other.
func RatioVsBatch(c Chart, series []RatioSeries, threshold float64, base string) ([]string, error) {
	const what = "RatioVsBatch"
	if !(threshold > 0 && threshold < 1) {
		return nil, fmt.Errorf("plots: %s: threshold %g: must be in (0, 1)", what, threshold)
	}
	for i, s := range series {
		if len(s.Ratio) != len(s.X) || len(s.Lo) != len(s.X) || len(s.Hi) != len(s.X) {
			return nil, fmt.Errorf("plots: %s: series %s: %d x, %d ratio, %d lo and %d hi values",
				what, nameOr(s.Label, i), len(s.X), len(s.Ratio), len(s.Lo), len(s.Hi))
		}
	}
	xs, ys := emptyExtent(), extent{Min: 1 - threshold, Max: 1 + threshold}
	var whiskers []whisker
	st := &styler{index: map[string]int{}}
	n := len(series)
	for i, s := range series {
		nudge := math.Exp2(0.07 * (float64(i) - float64(n-1)/2))
		clr, shape := st.of(s.Label + fmt.Sprint(i))
		for j, x := range s.X {
			if !drawable(x) || !drawable(s.Ratio[j]) {
				continue
			}
			w := whisker{x: x * nudge, ratio: s.Ratio[j], lo: math.NaN(), hi: math.NaN(), color: clr, shape: shape}
			if drawable(s.Lo[j]) && drawable(s.Hi[j]) && s.Lo[j] <= s.Hi[j] {
				w.lo, w.hi = s.Lo[j], s.Hi[j]
				ys.add(w.lo)
				ys.add(w.hi)
			}
			xs.add(x)
			ys.add(w.ratio)
			whiskers = append(whiskers, w)
		}
	}
	if len(whiskers) == 0 {
		return nil, fmt.Errorf("plots: %s: %w", what, ErrNothingToDraw)
	}

	p := newThemedPlot("", batchLabelText, ratioLabelText)
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = gridColor, gridColor
	p.Add(&band{lo: 1 - threshold, hi: 1 + threshold}, grid, &whiskerSet{items: whiskers})
	configureAxis(&p.X, axisSpec{kind: batchAxis}, xs)
	// The nudged markers of the first and last batch must stay inside the frame.
	edge := math.Exp2(0.07 * float64(max(n, 2)))
	p.X.Min /= edge
	p.X.Max *= edge
	p.Y.Scale = plot.LinearScale{}
	p.Y.Tick.Marker = linearTicks{plainLabel}
	pad := 0.08 * (ys.Max - ys.Min)
	p.Y.Min, p.Y.Max = ys.Min-pad, ys.Max+pad

	f := newFigure(c)
	f.panels = append(f.panels, p)
	for i, s := range series {
		if s.Label == "" {
			continue
		}
		clr, shape := st.of(s.Label + fmt.Sprint(i))
		f.legend.add(s.Label, markerThumb(clr, shape))
	}
	f.legend.add(fmt.Sprintf("within ±%s: the same speed", percentText(threshold)), swatchThumb{bandFill})
	return f.save(base)
}

// percentText writes a fraction as a percentage without trailing zeros: 0.03 -> "3%".
func percentText(f float64) string { return shortNumber(f*100) + "%" }

type whisker struct {
	x, ratio, lo, hi float64
	color            color.RGBA
	shape            draw.GlyphDrawer
}

// whiskerSet draws each ratio's interval as a vertical line with caps, then its marker.
type whiskerSet struct{ items []whisker }

func (w *whiskerSet) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	capHalf := vg.Points(3.5)
	for _, it := range w.items {
		x := trX(it.x)
		if !math.IsNaN(it.lo) {
			sty := draw.LineStyle{Color: it.color, Width: vg.Points(1.4)}
			lo, hi := trY(it.lo), trY(it.hi)
			c.StrokeLine2(sty, x, lo, x, hi)
			c.StrokeLine2(sty, x-capHalf, lo, x+capHalf, lo)
			c.StrokeLine2(sty, x-capHalf, hi, x+capHalf, hi)
		}
		c.DrawGlyph(glyphStyle(it.color, it.shape), vg.Point{X: x, Y: trY(it.ratio)})
	}
}

// band shades [lo, hi] across the whole panel and draws the line at 1.
type band struct{ lo, hi float64 }

func (b *band) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	x0, x1 := trX(p.X.Min), trX(p.X.Max)
	rect := vg.Rectangle{Min: vg.Point{X: x0, Y: trY(b.lo)}, Max: vg.Point{X: x1, Y: trY(b.hi)}}
	c.SetColor(bandFill)
	c.Fill(rect.Path())
	c.StrokeLine2(draw.LineStyle{Color: mutedColor, Width: vg.Points(1)}, x0, trY(1), x1, trY(1))
}
