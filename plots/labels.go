package plots

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// pointLabels writes short texts next to points. Each label goes to the first of eight places
// around its point (then eight a little farther out) where it stays inside the data area and
// covers no marker and no label placed before it, preferring places that cross no curve either. A label with no such place is left
// out, and reported by place, so that a chart can move it to its legend: unreadable labels are
// worse than none.
type pointLabels struct {
	items []labelItem
	style text.Style
	// markers and curves are what labels should not cover, in data coordinates.
	markers []xy
	curves  [][]xy
	// skip marks items shown elsewhere (in the legend) and not to be drawn here.
	skip map[int]bool
}

type labelItem struct {
	X, Y  float64 // the point, in data coordinates
	Text  string
	Color color.Color
}

func newPointLabels() *pointLabels {
	return &pointLabels{style: textStyle(annotationSize, false, textColor), skip: map[int]bool{}}
}

// labelOffsets are the candidate places around a point, as the direction from the point to the
// label's box, in order of preference: right, upper right, lower right, above, below, left ...
var labelOffsets = []struct{ dx, dy float64 }{
	{1, 0}, {1, 1}, {1, -1}, {0, 1}, {0, -1}, {-1, 0}, {-1, 1}, {-1, -1},
}

// place returns the box of each placed label (by item index) and the items left out.
func (l *pointLabels) place(c draw.Canvas, p *plot.Plot) (boxes map[int]vg.Rectangle, unplaced []int) {
	trX, trY := p.Transforms(&c)
	toCanvas := func(pts []xy) []vg.Point {
		out := make([]vg.Point, len(pts))
		for i, q := range pts {
			out[i] = vg.Point{X: trX(q.X), Y: trY(q.Y)}
		}
		return out
	}
	reach := markerRadius * 1.3 // half the size of a marker's box, diamond included
	var blocked []vg.Rectangle
	for _, m := range toCanvas(l.markers) {
		blocked = append(blocked, vg.Rectangle{
			Min: vg.Point{X: m.X - reach, Y: m.Y - reach},
			Max: vg.Point{X: m.X + reach, Y: m.Y + reach},
		})
	}
	var curves [][]vg.Point
	for _, cv := range l.curves {
		curves = append(curves, toCanvas(cv))
	}

	boxes = map[int]vg.Rectangle{}
	height := l.style.FontExtents().Ascent + l.style.FontExtents().Descent
	gap := reach + vg.Points(2)
	for i, it := range l.items {
		if l.skip[i] || it.Text == "" {
			continue
		}
		pt := vg.Point{X: trX(it.X), Y: trY(it.Y)}
		width := l.style.Width(it.Text)
		// Near places first; farther ones before giving up on keeping clear of the curves.
		var candidates []vg.Rectangle
		for _, g := range []vg.Length{gap, 2.5 * gap} {
			for _, o := range labelOffsets {
				candidates = append(candidates, boxAround(pt, o.dx, o.dy, width, height, g))
			}
		}
		free := func(r vg.Rectangle, avoidCurves bool) bool {
			if !insideRect(r, c.Rectangle) {
				return false
			}
			for _, b := range blocked {
				if overlaps(r, b) {
					return false
				}
			}
			if avoidCurves {
				for _, cv := range curves {
					if polylineHits(cv, r) {
						return false
					}
				}
			}
			return true
		}
		placed := false
		for _, avoidCurves := range []bool{true, false} {
			near := candidates
			if !avoidCurves {
				near = candidates[:len(labelOffsets)] // crossing a curve, stay next to the point
			}
			for _, r := range near {
				if free(r, avoidCurves) {
					boxes[i] = r
					blocked = append(blocked, grow(r, vg.Points(1.5)))
					placed = true
					break
				}
			}
			if placed {
				break
			}
		}
		if !placed {
			unplaced = append(unplaced, i)
		}
	}
	return boxes, unplaced
}

// Plot draws the labels that found a place, each on a faint white ground that keeps grid lines
// and curves from running through the letters.
func (l *pointLabels) Plot(c draw.Canvas, p *plot.Plot) {
	boxes, _ := l.place(c, p)
	sty := l.style
	sty.XAlign = draw.XLeft
	sty.YAlign = draw.YCenter
	for i, it := range l.items {
		r, ok := boxes[i]
		if !ok {
			continue
		}
		c.SetColor(labelHaloFill)
		c.Fill(grow(r, vg.Points(1)).Path())
		sty.Color = it.Color
		c.FillText(sty, vg.Point{X: r.Min.X, Y: (r.Min.Y + r.Max.Y) / 2}, it.Text)
	}
}

// boxAround is a w x h box at distance gap from pt in direction (dx, dy), each -1, 0 or 1.
func boxAround(pt vg.Point, dx, dy float64, w, h, gap vg.Length) vg.Rectangle {
	var minX, minY vg.Length
	switch {
	case dx > 0:
		minX = pt.X + gap
	case dx < 0:
		minX = pt.X - gap - w
	default:
		minX = pt.X - w/2
	}
	switch {
	case dy > 0:
		minY = pt.Y + gap*0.6
	case dy < 0:
		minY = pt.Y - gap*0.6 - h
	default:
		minY = pt.Y - h/2
	}
	if dx == 0 { // straight above or below: clear the marker fully
		minY += vg.Length(dy) * gap * 0.4
	}
	return vg.Rectangle{Min: vg.Point{X: minX, Y: minY}, Max: vg.Point{X: minX + w, Y: minY + h}}
}

func grow(r vg.Rectangle, d vg.Length) vg.Rectangle {
	return vg.Rectangle{Min: vg.Point{X: r.Min.X - d, Y: r.Min.Y - d}, Max: vg.Point{X: r.Max.X + d, Y: r.Max.Y + d}}
}

func overlaps(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}

func insideRect(r, outer vg.Rectangle) bool {
	return r.Min.X >= outer.Min.X && r.Max.X <= outer.Max.X && r.Min.Y >= outer.Min.Y && r.Max.Y <= outer.Max.Y
}

// polylineHits says whether any segment of a polyline passes through r.
func polylineHits(pts []vg.Point, r vg.Rectangle) bool {
	for i := 1; i < len(pts); i++ {
		if segmentHits(pts[i-1], pts[i], r) {
			return true
		}
	}
	return false
}

// segmentHits clips the segment a-b to r (Liang–Barsky) and says whether anything is left.
func segmentHits(a, b vg.Point, r vg.Rectangle) bool {
	t0, t1 := 0.0, 1.0
	dx, dy := float64(b.X-a.X), float64(b.Y-a.Y)
	edges := [4][2]float64{
		{-dx, float64(a.X - r.Min.X)},
		{dx, float64(r.Max.X - a.X)},
		{-dy, float64(a.Y - r.Min.Y)},
		{dy, float64(r.Max.Y - a.Y)},
	}
	for _, e := range edges {
		p, q := e[0], e[1]
		if p == 0 {
			if q < 0 {
				return false
			}
			continue
		}
		t := q / p
		if p < 0 {
			t0 = max(t0, t)
		} else {
			t1 = min(t1, t)
		}
		if t0 > t1 {
			return false
		}
	}
	return true
}
