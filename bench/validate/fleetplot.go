package validate

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// referenceLabel says what a gate's fraction is of, for an axis.
func referenceLabel(gate string) string {
	switch gate {
	case GateReadBandwidth:
		return "% of the datasheet bandwidth"
	case GateTensor:
		return "% of the datasheet dense bf16 rate"
	case GateLinearBatch1, GateAttentionLong:
		return "% of the card's measured read bandwidth"
	case GateModelStep:
		return "% of the roofline bound (datasheet)"
	}
	return "% of reference"
}

var (
	colorCard      = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colorFailing   = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colorOutlier   = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	colorThreshold = color.RGBA{R: 0x80, G: 0x00, B: 0x00, A: 0xff}
)

// PlotGateDistributions draws one chart per gate: every card's value as a percentage of the
// gate's reference, one column per kind of card, the kind's threshold as a dashed line,
// failing cards red and fleet outliers orange. Cards whose gate has no reference (no spec
// row, an absolute threshold) are left out. It writes <dir>/fleet-<gate>.png and .svg and
// returns the paths written.
func PlotGateDistributions(s FleetSummary, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	outlier := map[string]bool{}
	for _, o := range s.Outliers {
		outlier[o.UUID+"/"+o.Gate] = true
	}
	var paths []string
	for _, gate := range Gates {
		p, ok, err := gatePlot(s, gate, outlier)
		if err != nil {
			return paths, err
		}
		if !ok {
			continue
		}
		for _, ext := range []string{".png", ".svg"} {
			path := filepath.Join(dir, "fleet-"+gate+ext)
			if err := p.Save(8*vg.Inch, 5*vg.Inch, path); err != nil {
				return paths, fmt.Errorf("plotting %s: %w", path, err)
			}
			paths = append(paths, path)
		}
	}
	return paths, nil
}

func gatePlot(s FleetSummary, gate string, outlier map[string]bool) (*plot.Plot, bool, error) {
	var cards, failing, outliers plotter.XYs
	var thresholds []plotter.XYs
	var kinds []string
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for _, kind := range s.Kinds {
		col := float64(len(kinds))
		var members []FleetCard
		for _, c := range s.Cards {
			if g, ok := c.Gates[gate]; ok && c.Kind == kind && g.Fraction > 0 && !math.IsInf(g.Fraction, 0) {
				members = append(members, c)
			}
		}
		n, required := 0, 0.0
		for _, c := range members {
			g := c.Gates[gate]
			// Cards spread evenly across the column, in fleet order: equal values stay apart
			// and every run draws the same picture.
			x := col
			if len(members) > 1 {
				x += 0.7 * (float64(n)/float64(len(members)-1) - 0.5)
			}
			pt := plotter.XY{X: x, Y: 100 * g.Fraction}
			n++
			required = max(required, g.RequiredFraction)
			ymin, ymax = min(ymin, pt.Y), max(ymax, pt.Y)
			switch {
			case c.Verdict == Fail:
				failing = append(failing, pt)
			case outlier[c.UUID+"/"+gate]:
				outliers = append(outliers, pt)
			default:
				cards = append(cards, pt)
			}
		}
		if n == 0 {
			continue
		}
		kinds = append(kinds, fmt.Sprintf("%s (%d)", kind, n))
		if required > 0 {
			thresholds = append(thresholds, plotter.XYs{{X: col - 0.4, Y: 100 * required}, {X: col + 0.4, Y: 100 * required}})
			ymin, ymax = min(ymin, 100*required), max(ymax, 100*required)
		}
	}
	if len(kinds) == 0 {
		return nil, false, nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s across the fleet (%d boxes)", gateLabel(gate), s.Boxes)
	if len(s.EmulatedBoxes) > 0 {
		p.Title.Text += ": includes emulated runs, no speed"
	}
	p.Y.Label.Text = referenceLabel(gate)
	p.NominalX(kinds...)
	p.X.Min, p.X.Max = -0.6, float64(len(kinds))-0.4
	pad := max(1, 0.08*(ymax-ymin))
	p.Y.Min, p.Y.Max = ymin-pad, ymax+pad
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for _, set := range []struct {
		xys   plotter.XYs
		c     color.Color
		shape draw.GlyphDrawer
		name  string
	}{
		{cards, colorCard, draw.CircleGlyph{}, "card"},
		{outliers, colorOutlier, draw.TriangleGlyph{}, "fleet outlier"},
		{failing, colorFailing, draw.CrossGlyph{}, "failing card"},
	} {
		if len(set.xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(set.xys)
		if err != nil {
			return nil, false, err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: set.c, Radius: vg.Points(3), Shape: set.shape}
		p.Add(sc)
		p.Legend.Add(set.name, sc)
	}
	for i, xys := range thresholds {
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, false, err
		}
		l.LineStyle = draw.LineStyle{Color: colorThreshold, Width: vg.Points(1.5), Dashes: []vg.Length{vg.Points(5), vg.Points(3)}}
		p.Add(l)
		if i == 0 {
			p.Legend.Add("threshold", l)
		}
	}
	return p, true, nil
}
