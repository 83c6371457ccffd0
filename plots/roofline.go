package plots

import (
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// RooflineCeiling is one roof: a memory bandwidth slope meeting a flat arithmetic rate.
type RooflineCeiling struct {
	Label                string // e.g. "datasheet", "measured"
	BandwidthBytesPerSec float64
	FLOPsPerSec          float64
	Dashed               bool
}

// RooflinePoint is one kernel's result.
type RooflinePoint struct {
	Label       string
	Intensity   float64 // FLOP per byte moved
	FLOPsPerSec float64
	// Failed results (wrong output, NaN) are never drawn as a speed; the chart's footnote
	// names them.
	Failed bool
}

const (
	intensityLabelText = "arithmetic intensity (FLOP/byte)"
	tflopsLabelText    = "attainable performance, TFLOP/s (1e12 FLOP/s)"
	tera               = 1e12
	maxNamesInNote     = 4
)

// Roofline draws the classic log-log roofline: each ceiling as its bandwidth slope and flat
// compute roof, with the ridge point (where the two meet) marked and its intensity written, and
// each kernel as a marker labelled with its name; a name that does not fit next to its marker
// goes to the legend. Failed and undrawable points are left out and named in a footnote.
func Roofline(c Chart, ceilings []RooflineCeiling, points []RooflinePoint, base string) ([]string, error) {
	for i, ceil := range ceilings {
		if !drawable(ceil.BandwidthBytesPerSec) || !drawable(ceil.FLOPsPerSec) {
			return nil, fmt.Errorf("plots: Roofline: ceiling %s: bandwidth %g B/s and rate %g FLOP/s must be positive and finite",
				nameOr(ceil.Label, i), ceil.BandwidthBytesPerSec, ceil.FLOPsPerSec)
		}
	}
	var kept []RooflinePoint
	var failed, undrawable []string
	for i, p := range points {
		switch {
		case p.Failed:
			failed = append(failed, nameOr(p.Label, i))
		case !drawable(p.Intensity) || !drawable(p.FLOPsPerSec):
			undrawable = append(undrawable, nameOr(p.Label, i))
		default:
			kept = append(kept, p)
		}
	}
	if len(ceilings) == 0 && len(kept) == 0 {
		return nil, fmt.Errorf("plots: Roofline: %w (no ceiling and no kernel result that can be drawn)", ErrNothingToDraw)
	}

	xs, ys := rooflineExtents(ceilings, kept)
	p := newThemedPlot("", intensityLabelText, tflopsLabelText)
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = gridColor, gridColor
	p.Add(grid)

	f := newFigure(c)
	labels := newPointLabels()
	for i, ceil := range ceilings {
		clr := ceilingPalette[i%len(ceilingPalette)]
		if i >= len(ceilingPalette) {
			clr = paletteColor(len(palette) - 1 - i%len(palette))
		}
		ridge := ceil.FLOPsPerSec / ceil.BandwidthBytesPerSec
		roof := plotter.XYs{
			{X: xs.Min, Y: ceil.BandwidthBytesPerSec * xs.Min / tera},
			{X: ridge, Y: ceil.FLOPsPerSec / tera},
			{X: xs.Max, Y: ceil.FLOPsPerSec / tera},
		}
		line, err := plotter.NewLine(roof)
		if err != nil {
			return nil, err
		}
		line.LineStyle = draw.LineStyle{Color: clr, Width: vg.Points(2)}
		if ceil.Dashed {
			line.LineStyle.Dashes = boundDashes
		}
		p.Add(line)
		labels.curves = append(labels.curves, []xy{{X: roof[0].X, Y: roof[0].Y}, {X: roof[1].X, Y: roof[1].Y}, {X: roof[2].X, Y: roof[2].Y}})

		ridgeMark, err := plotter.NewScatter(plotter.XYs{{X: ridge, Y: ceil.FLOPsPerSec / tera}})
		if err != nil {
			return nil, err
		}
		ridgeMark.GlyphStyle = draw.GlyphStyle{Color: clr, Radius: markerRadius * 1.4, Shape: draw.RingGlyph{}}
		p.Add(ridgeMark)
		labels.markers = append(labels.markers, xy{X: ridge, Y: ceil.FLOPsPerSec / tera})
		labels.items = append(labels.items, labelItem{X: ridge, Y: ceil.FLOPsPerSec / tera,
			Text: "ridge " + plainLabel(ridge) + " FLOP/byte", Color: clr})
		f.legend.add(ceilingLegendText(ceil), &plotter.Line{LineStyle: line.LineStyle})
	}

	type kernel struct {
		item  int
		style draw.GlyphStyle
		label string
	}
	var kernels []kernel
	for i, k := range kept {
		sty := glyphStyle(paletteColor(i), markerShape(i))
		sty.Radius = markerRadius * 1.25
		s, err := plotter.NewScatter(plotter.XYs{{X: k.Intensity, Y: k.FLOPsPerSec / tera}})
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = sty
		p.Add(s)
		labels.markers = append(labels.markers, xy{X: k.Intensity, Y: k.FLOPsPerSec / tera})
		kernels = append(kernels, kernel{item: len(labels.items), style: sty, label: k.Label})
		labels.items = append(labels.items, labelItem{X: k.Intensity, Y: k.FLOPsPerSec / tera,
			Text: k.Label, Color: darker(paletteColor(i))})
	}
	p.Add(labels)

	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = log10Ticks{plainLabel}, log10Ticks{plainLabel}
	p.X.Min, p.X.Max = xs.Min, xs.Max
	p.Y.Min, p.Y.Max = ys.Min, ys.Max

	f.panels = append(f.panels, p)
	f.note = rooflineNote(failed, undrawable)
	// Kernel names that find no room next to their markers move to the legend; a ridge note
	// that finds none is left out (the ridge is still marked).
	nCeilingEntries := len(f.legend.entries)
	f.relayout = func(data []draw.Canvas) bool {
		_, unplaced := labels.place(data[0], p)
		if len(unplaced) == 0 {
			return false
		}
		for _, i := range unplaced {
			labels.skip[i] = true
		}
		// Rebuild the kernel entries so that they stay in the kernels' order.
		f.legend.entries = f.legend.entries[:nCeilingEntries]
		for _, k := range kernels {
			if labels.skip[k.item] {
				f.legend.add(k.label, markerThumb(k.style.Color, k.style.Shape))
			}
		}
		return true
	}
	return f.save(base)
}

// rooflineExtents returns the axis ranges: intensity in FLOP/byte, performance in TFLOP/s.
// The intensity axis spans whole decades around the kernels and ridge points with room on
// both sides; the performance axis leaves room above the highest roof for its ridge note.
func rooflineExtents(ceilings []RooflineCeiling, kept []RooflinePoint) (xs, ys extent) {
	xs, ys = emptyExtent(), emptyExtent()
	for _, ceil := range ceilings {
		xs.add(ceil.FLOPsPerSec / ceil.BandwidthBytesPerSec)
		ys.add(ceil.FLOPsPerSec / tera)
	}
	for _, k := range kept {
		xs.add(k.Intensity)
		ys.add(k.FLOPsPerSec / tera)
	}
	xs = extent{
		Min: math.Pow10(int(math.Floor(math.Log10(xs.Min / 3)))),
		Max: math.Pow10(int(math.Ceil(math.Log10(xs.Max * 3)))),
	}
	top := ys.Max * 2.5
	bottom := ys.Min / 3
	for _, ceil := range ceilings {
		// Show the slope over at least a decade and a half below its roof.
		bottom = math.Min(bottom, ceil.FLOPsPerSec/tera/30)
	}
	return xs, extent{Min: math.Pow10(int(math.Floor(math.Log10(bottom)))), Max: top}
}

func ceilingLegendText(c RooflineCeiling) string {
	numbers := fmt.Sprintf("%s TB/s, %s TFLOP/s", shortNumber(c.BandwidthBytesPerSec/tera), plainLabel(c.FLOPsPerSec/tera))
	if c.Label == "" {
		return numbers
	}
	return c.Label + " (" + numbers + ")"
}

func rooflineNote(failed, undrawable []string) string {
	var parts []string
	if len(failed) > 0 {
		parts = append(parts, "failed verification, not drawn: "+nameList(failed))
	}
	if len(undrawable) > 0 {
		parts = append(parts, "no positive finite result, not drawn: "+nameList(undrawable))
	}
	if len(parts) == 0 {
		return ""
	}
	s := strings.Join(parts, "; ")
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

func nameList(names []string) string {
	if len(names) <= maxNamesInNote {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxNamesInNote], ", "), len(names)-maxNamesInNote)
}

func nameOr(label string, i int) string {
	if label != "" {
		return label
	}
	return fmt.Sprintf("#%d", i)
}
