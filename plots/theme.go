package plots

import (
	"image/color"

	"codeberg.org/go-fonts/liberation/liberationsansbold"
	"codeberg.org/go-fonts/liberation/liberationsansregular"
	xfont "golang.org/x/image/font"
	"golang.org/x/image/font/opentype"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The figure is laid out on a 10 in wide canvas whatever the pixel size, so a 1200x800 PNG is
// drawn at 120 dpi and a 12 pt label is 20 px tall: readable when the image is shown at half size
// in a report. The SVG has the same size in points, hence the same layout.
const (
	defaultWidthPx  = 1200
	defaultHeightPx = 800
	figureWidth     = 10 * vg.Inch
	minSidePx       = 300
	maxSidePx       = 8000
)

// Font sizes in points.
const (
	titleSize      = 16
	subtitleSize   = 11
	panelTitleSize = 12.5
	axisLabelSize  = 12
	tickLabelSize  = 10.5
	legendSize     = 10.5
	annotationSize = 9.5
	noteSize       = 9.5
)

// Line widths and marker sizes.
var (
	measuredLineWidth = vg.Points(1.8)
	boundLineWidth    = vg.Points(1.6)
	boundDashes       = []vg.Length{vg.Points(6), vg.Points(3.5)}
	endToEndDashes    = []vg.Length{vg.Points(1.5), vg.Points(2.5)}
	markerRadius      = vg.Points(3.2)
	margin            = vg.Points(14) // around the whole figure
)

// palette is the Okabe–Ito set (distinguishable with the common colour-vision deficiencies),
// without its yellow, which is unreadable on white, followed by four of Paul Tol's muted colours.
var palette = []color.RGBA{
	{0x00, 0x72, 0xB2, 0xFF}, // blue
	{0xD5, 0x5E, 0x00, 0xFF}, // vermillion
	{0x00, 0x9E, 0x73, 0xFF}, // bluish green
	{0xCC, 0x79, 0xA7, 0xFF}, // reddish purple
	{0xE6, 0x9F, 0x00, 0xFF}, // orange
	{0x56, 0xB4, 0xE9, 0xFF}, // sky blue
	{0x88, 0x22, 0x55, 0xFF}, // wine
	{0x44, 0xAA, 0x99, 0xFF}, // teal
	{0x99, 0x99, 0x33, 0xFF}, // olive
	{0x33, 0x22, 0x88, 0xFF}, // indigo
}

// ceilingPalette draws roofline ceilings in neutral tones so that the kernels keep the colours.
var ceilingPalette = []color.RGBA{
	{0x22, 0x22, 0x22, 0xFF},
	{0x6E, 0x6E, 0x6E, 0xFF},
	{0xA0, 0xA0, 0xA0, 0xFF},
}

var (
	textColor     = color.RGBA{0x22, 0x22, 0x22, 0xFF}
	mutedColor    = color.RGBA{0x5F, 0x5F, 0x5F, 0xFF}
	gridColor     = color.RGBA{0xE3, 0xE3, 0xE3, 0xFF}
	notMeasured   = color.RGBA{0xC8, 0xC8, 0xC8, 0xFF}
	labelHaloFill = color.NRGBA{0xFF, 0xFF, 0xFF, 0xC8}
)

// markerShapes cycle with the colours so that a curve stays identifiable in greyscale print.
var markerShapes = []draw.GlyphDrawer{
	draw.CircleGlyph{},
	draw.BoxGlyph{},
	draw.PyramidGlyph{},
	diamondGlyph{},
}

func paletteColor(i int) color.RGBA { return palette[i%len(palette)] }

func markerShape(i int) draw.GlyphDrawer { return markerShapes[i%len(markerShapes)] }

// ChartFont is a face the charts' text is measured with, as a file: HTML reports embed it
// (@font-face) so that a browser draws the text with the very face the layout measured.
type ChartFont struct {
	Family string // as the SVG names it
	Weight string // CSS: "normal" or "bold"
	TTF    []byte
	face   font.Font
}

// ChartFonts is the charts' one typeface, Liberation Sans, in its two weights. The files ship
// in a Go module (codeberg.org/go-fonts/liberation), so every machine measures with the same
// metrics; the SVG's font-family names them first.
var ChartFonts = []ChartFont{
	{Family: "Liberation Sans", Weight: "normal", TTF: liberationsansregular.TTF, face: font.Font{Typeface: "Liberation", Variant: "Sans"}},
	{Family: "Liberation Sans", Weight: "bold", TTF: liberationsansbold.TTF, face: font.Font{Typeface: "Liberation", Variant: "Sans", Weight: xfont.WeightBold}},
}

// The faces are registered from ChartFonts' own bytes: what is measured is what is embedded.
func init() {
	var faces font.Collection
	for _, f := range ChartFonts {
		parsed, err := opentype.Parse(f.TTF)
		if err != nil {
			panic("plots: the chart font " + f.Family + " " + f.Weight + ": " + err.Error())
		}
		faces = append(faces, font.Face{Font: f.face, Face: parsed})
	}
	font.DefaultCache.Add(faces)
}

// textStyle returns a sans-serif style; gonum's default face is a serif.
func textStyle(size float64, bold bool, clr color.Color) text.Style {
	f := font.Font{Typeface: "Liberation", Variant: "Sans"}
	if bold {
		f.Weight = xfont.WeightBold
	}
	return text.Style{
		Color:   clr,
		Font:    font.From(f, vg.Points(size)),
		XAlign:  draw.XLeft,
		YAlign:  draw.YBottom,
		Handler: plot.DefaultTextHandler,
	}
}

// newThemedPlot returns a plot with the package's fonts and axis styling; callers set scales,
// tickers, ranges and labels.
func newThemedPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title // the figure takes it out and draws it (see figure.panelTitles)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle = textStyle(axisLabelSize, false, textColor)
		a.Label.TextStyle.XAlign = draw.XCenter
		a.Label.Padding = vg.Points(4)
		a.Tick.Label = textStyle(tickLabelSize, false, textColor)
		a.Tick.Length = vg.Points(5)
		a.Tick.LineStyle.Color = mutedColor
		a.LineStyle.Color = mutedColor
		a.LineStyle.Width = vg.Points(0.8)
		a.Padding = vg.Points(2)
	}
	p.X.Label.Text = xLabel
	p.X.Label.TextStyle.YAlign = draw.YBottom
	p.X.Tick.Label.XAlign = draw.XCenter
	p.X.Tick.Label.YAlign = draw.YTop
	p.Y.Label.Text = yLabel
	p.Y.Label.TextStyle.YAlign = draw.YBottom
	p.Y.Tick.Label.XAlign = draw.XRight
	p.Y.Tick.Label.YAlign = draw.YCenter
	// The figure draws its own legend outside the panels.
	p.Legend = plot.NewLegend()
	return p
}

// diamondGlyph is a filled diamond, the fourth marker shape.
type diamondGlyph struct{}

func (diamondGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	r := sty.Radius * 1.25
	var p vg.Path
	p.Move(vg.Point{X: pt.X, Y: pt.Y + r})
	p.Line(vg.Point{X: pt.X + r, Y: pt.Y})
	p.Line(vg.Point{X: pt.X, Y: pt.Y - r})
	p.Line(vg.Point{X: pt.X - r, Y: pt.Y})
	p.Close()
	c.SetColor(sty.Color)
	c.Fill(p)
}
