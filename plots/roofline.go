package plots

import (
	"fmt"
	"math"
	"slices"
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
	// Batch, when known (> 0), sets the marker's size: larger batches, larger markers, so that
	// the batch reads off the chart beside the kernel's colour. A size legend says which.
	Batch int
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
	kept = mergeCoincident(kept)
	size := newBatchSizer(kept)

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
		sty.Radius = size.radius(k.Batch) * 1.25
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
	size.legend(&f.legend, 1.25)

	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = log10Ticks{plainLabel}, log10Ticks{plainLabel}
	p.X.Min, p.X.Max = xs.Min, xs.Max
	p.Y.Min, p.Y.Max = ys.Min, ys.Max

	f.panels = append(f.panels, p)
	f.note = rooflineNote(failed, undrawable)
	// Kernel names that find no room next to their markers move to the legend; a ridge note
	// that finds none is left out (the ridge is still marked).
	nCeilingEntries := len(f.legend.entries) - size.entries()
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
		size.legend(&f.legend, 1.25)
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

// coincidentDecades: points closer than this on both log axes (2.3%) share one marker and one
// label; the linear kernels of one decode step at batch 1 all sit at one FLOP per byte.
const coincidentDecades = 0.01

// mergeCoincident merges points that would be drawn on top of each other, in order, each
// into the first of its cluster, their labels joined (mergedLabel).
func mergeCoincident(points []RooflinePoint) []RooflinePoint {
	var out []RooflinePoint
	var labels [][]string
	for _, p := range points {
		merged := false
		for i, q := range out {
			if math.Abs(math.Log10(p.Intensity/q.Intensity)) < coincidentDecades && math.Abs(math.Log10(p.FLOPsPerSec/q.FLOPsPerSec)) < coincidentDecades && p.Batch == q.Batch {
				labels[i] = append(labels[i], p.Label)
				merged = true
				break
			}
		}
		if !merged {
			out, labels = append(out, p), append(labels, []string{p.Label})
		}
	}
	for i := range out {
		out[i].Label = mergedLabel(labels[i])
	}
	return out
}

// mergedLabel names several kernels at one point: "qkv_proj, o_proj, down_proj B=1" when
// they share the last word (the batch), "attention S=1k, S=4k" when they share the rest.
func mergedLabel(labels []string) string {
	if len(labels) == 1 {
		return labels[0]
	}
	split := func(l string) (string, string) {
		if i := strings.LastIndex(l, " "); i > 0 {
			return l[:i], l[i+1:]
		}
		return l, ""
	}
	var heads, tails []string
	for _, l := range labels {
		h, t := split(l)
		heads, tails = append(heads, h), append(tails, t)
	}
	same := func(v []string) bool {
		for _, x := range v {
			if x != v[0] {
				return false
			}
		}
		return v[0] != ""
	}
	switch {
	case same(tails):
		return strings.Join(heads, ", ") + " " + tails[0]
	case same(heads):
		return heads[0] + " " + strings.Join(tails, ", ")
	}
	return strings.Join(labels, ", ")
}

// batchSizer sizes markers by batch on a log scale, from 0.7x the usual radius at the
// smallest batch drawn to 1.9x at the largest.
type batchSizer struct{ batches []int } // distinct, ascending

func newBatchSizer(points []RooflinePoint) batchSizer {
	var s batchSizer
	for _, p := range points {
		if p.Batch > 0 && !slices.Contains(s.batches, p.Batch) {
			s.batches = append(s.batches, p.Batch)
		}
	}
	slices.Sort(s.batches)
	return s
}

func (s batchSizer) radius(batch int) vg.Length {
	if batch <= 0 || len(s.batches) < 2 {
		return markerRadius
	}
	lo, hi := s.batches[0], s.batches[len(s.batches)-1]
	f := math.Log2(float64(batch)/float64(lo)) / math.Log2(float64(hi)/float64(lo))
	return markerRadius * vg.Length(0.7+1.2*f)
}

// sizes are the batches the size legend shows, of those drawn: the smallest, the middle one
// and the largest.
func (s batchSizer) sizes() []int {
	switch n := len(s.batches); {
	case n < 2:
		return nil
	case n == 2:
		return s.batches
	default:
		return []int{s.batches[0], s.batches[n/2], s.batches[n-1]}
	}
}

func (s batchSizer) entries() int { return len(s.sizes()) }

// legend adds one grey marker per size, "B=1" ... "B=256", scaled as the points are.
func (s batchSizer) legend(l *legendBlock, scale float64) {
	for _, b := range s.sizes() {
		sty := draw.GlyphStyle{Color: mutedColor, Radius: s.radius(b) * vg.Length(scale), Shape: draw.CircleGlyph{}}
		l.add(fmt.Sprintf("B=%d", b), &plotter.Scatter{GlyphStyle: sty})
	}
}
