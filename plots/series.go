// Package plots draws the charts of decodebench as PNG and SVG files of report quality.
//
// It takes plain data (no other decodebench package is imported) and writes each chart twice,
// base+".png" (1200x800 px unless the Chart says otherwise) and base+".svg" with the same layout.
// Every axis says its unit and which thousand it means: tokens/s and FLOP/s are decimal
// (1k = 1000), context lengths binary (1k = 1024 tokens).
//
// Values that a chart cannot draw (NaN, ±Inf, and non-positive numbers, which no speed or
// intensity can be and which gonum/plot's log axes panic on) are dropped, leaving a gap in the
// curve; a chart left with nothing to draw is an error, never an empty picture or a panic.
package plots

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// SeriesStyle says what a curve is.
type SeriesStyle int

const (
	// Measured draws a solid line with a marker at every point.
	Measured SeriesStyle = iota
	// Bound draws a dashed line without markers: a roofline or another model bound.
	Bound
	// EndToEnd draws a dotted line with a ring at every point: a whole decode step measured
	// end to end, beside the Measured curve composed from its kernels.
	EndToEnd
	// NoFit marks configurations that do not fit (in memory, say) with a cross on the floor of
	// the panel at each X; its Y values are ignored, there being no rate to draw.
	NoFit
)

func (s SeriesStyle) String() string {
	switch s {
	case Measured:
		return "measured"
	case Bound:
		return "bound"
	case EndToEnd:
		return "end-to-end"
	case NoFit:
		return "no-fit"
	}
	return fmt.Sprintf("SeriesStyle(%d)", int(s))
}

// Series is one curve.
type Series struct {
	Label string
	X, Y  []float64
	Style SeriesStyle
	// PointLabels, when not nil, holds one label per point (the batch size, say "B=8"). Tradeoff
	// draws them next to the points where they fit without covering other labels or markers;
	// the charts whose x axis already says the batch or context ignore them.
	PointLabels []string
	// Group picks the colour: series with the same Group share it, so a measured curve and its
	// bound can be paired. Empty means the Label.
	Group string
}

// Chart holds what every chart has.
type Chart struct {
	Title string
	// Subtitle names the setting, e.g. "NVIDIA H200 · bf16 · roofline from datasheet 4.8 TB/s".
	Subtitle string
	// WidthPx and HeightPx size the PNG; zero means 1200x800. The layout depends only on the
	// aspect ratio, so larger images are sharper, not smaller-lettered.
	WidthPx, HeightPx int
	// ValueLabel, when set, replaces the y-axis label of TokensVsContext (for instance
	// "per-request tokens/s (1k = 1000)"); the other charts label their axes themselves.
	ValueLabel string
}

// ErrNothingToDraw is returned (wrapped) when every value of a chart was dropped or missing.
var ErrNothingToDraw = errors.New("no drawable point")

func (s Series) group() string {
	if s.Group != "" {
		return s.Group
	}
	return s.Label
}

// xy is one drawable point of a series.
type xy struct {
	X, Y  float64
	Label string
}

// curve is a validated series: its drawable points, split into runs wherever a point had to be
// dropped, so that a line never bridges a missing measurement.
type curve struct {
	Series
	runs [][]xy
}

func (c curve) points() []xy {
	var all []xy
	for _, r := range c.runs {
		all = append(all, r...)
	}
	return all
}

// drawable says whether a value can go on a log axis. The bounds keep the ratio of any two
// drawable values finite, which gonum's LogScale divides by; no speed, intensity or size comes
// near them.
func drawable(v float64) bool { return v >= 1e-150 && v <= 1e150 } // false for NaN too

// validateSeries checks the shape of a series; what is the series called in errors is
// its label, or its position when it has none.
func validateSeries(what string, i int, s Series) error {
	name := fmt.Sprintf("%s series %q", what, s.Label)
	if s.Label == "" {
		name = fmt.Sprintf("%s series #%d", what, i)
	}
	switch {
	case len(s.X) != len(s.Y):
		return fmt.Errorf("plots: %s: %d x values but %d y values", name, len(s.X), len(s.Y))
	case s.PointLabels != nil && len(s.PointLabels) != len(s.X):
		return fmt.Errorf("plots: %s: %d point labels for %d points", name, len(s.PointLabels), len(s.X))
	case s.Style != Measured && s.Style != Bound && s.Style != EndToEnd && s.Style != NoFit:
		return fmt.Errorf("plots: %s: unknown style %v", name, s.Style)
	}
	return nil
}

// prepareCurves validates every series and keeps their drawable points. sortByX orders the
// points of each series by x first (for charts whose x is a swept parameter).
func prepareCurves(what string, series []Series, sortByX bool) ([]curve, error) {
	curves := make([]curve, 0, len(series))
	for i, s := range series {
		if err := validateSeries(what, i, s); err != nil {
			return nil, err
		}
		curves = append(curves, curve{Series: s, runs: splitRuns(s, sortByX)})
	}
	return curves, nil
}

func splitRuns(s Series, sortByX bool) [][]xy {
	type raw struct {
		xy
		ok bool
	}
	pts := make([]raw, 0, len(s.X))
	for i := range s.X {
		if sortByX && math.IsNaN(s.X[i]) {
			continue // it has no place in the order, so it cannot mark a gap either
		}
		y := s.Y[i]
		if s.Style == NoFit {
			y = 1 // drawn on the panel's floor: only X counts
		}
		p := raw{xy: xy{X: s.X[i], Y: y}, ok: drawable(s.X[i]) && drawable(y)}
		if s.PointLabels != nil {
			p.Label = s.PointLabels[i]
		}
		pts = append(pts, p)
	}
	if sortByX {
		slices.SortStableFunc(pts, func(a, b raw) int { return cmp.Compare(a.X, b.X) })
	}
	var runs [][]xy
	var run []xy
	for _, p := range pts {
		if !p.ok {
			if len(run) > 0 {
				runs = append(runs, run)
				run = nil
			}
			continue
		}
		run = append(run, p.xy)
	}
	if len(run) > 0 {
		runs = append(runs, run)
	}
	return runs
}

// countPoints is the number of drawable points over all curves (no-fit marks are none).
func countPoints(curves []curve) int {
	n := 0
	for _, c := range curves {
		if c.Style == NoFit {
			continue
		}
		for _, r := range c.runs {
			n += len(r)
		}
	}
	return n
}

// extent is the range of drawable values along one axis.
type extent struct{ Min, Max float64 }

func emptyExtent() extent { return extent{Min: math.Inf(1), Max: math.Inf(-1)} }

func (e *extent) add(v float64) {
	e.Min = math.Min(e.Min, v)
	e.Max = math.Max(e.Max, v)
}

func (e extent) valid() bool { return e.Min <= e.Max }

func curvesExtent(curves []curve) (xs, ys extent) {
	xs, ys = emptyExtent(), emptyExtent()
	for _, c := range curves {
		for _, p := range c.points() {
			xs.add(p.X)
			if c.Style != NoFit { // its Y is no value
				ys.add(p.Y)
			}
		}
	}
	return xs, ys
}
