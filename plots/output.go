package plots

import (
	"bytes"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/decodebench/decodebench/bench/atomicfile"
)

// size returns the PNG size in pixels.
func (c Chart) size() (w, h int, err error) {
	w, h = c.WidthPx, c.HeightPx
	if w == 0 && h == 0 {
		return defaultWidthPx, defaultHeightPx, nil
	}
	if w < minSidePx || h < minSidePx || w > maxSidePx || h > maxSidePx {
		return 0, 0, fmt.Errorf("plots: image size %dx%d px: each side must be in %d..%d",
			w, h, minSidePx, maxSidePx)
	}
	if h > 2*w || w > 3*h {
		return 0, 0, fmt.Errorf("plots: image size %dx%d px: aspect ratio outside 1:2..3:1", w, h)
	}
	return w, h, nil
}

// save draws the figure to base+".png" and base+".svg" and returns the two paths.
func (f *figure) save(base string) (paths []string, err error) {
	if base == "" {
		return nil, fmt.Errorf("plots: empty output path")
	}
	wpx, hpx, err := f.chart.size()
	if err != nil {
		return nil, err
	}
	// gonum/plot panics on some inputs deep in its drawing code; the inputs are checked before,
	// and this only keeps a bug from taking a benchmark run down with it.
	defer func() {
		if r := recover(); r != nil {
			paths, err = nil, fmt.Errorf("plots: drawing %s: %v", base, r)
		}
	}()
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return nil, fmt.Errorf("plots: %w", err)
	}

	dpi := max(1, int(math.Round(float64(wpx)/float64(figureWidth/vg.Inch))))
	img := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, wpx, hpx))), vgimg.UseDPI(dpi))
	if err := f.draw(draw.New(img)); err != nil {
		return nil, err
	}
	var png bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&png); err != nil {
		return nil, fmt.Errorf("plots: encoding %s.png: %w", base, err)
	}

	w, h := img.Size()
	svg := vgsvg.New(w, h)
	if err := f.draw(draw.New(svg)); err != nil {
		return nil, err
	}
	var svgText bytes.Buffer
	if _, err := svg.WriteTo(&svgText); err != nil {
		return nil, fmt.Errorf("plots: encoding %s.svg: %w", base, err)
	}

	paths = []string{base + ".png", base + ".svg"}
	if err := atomicfile.Write(paths[0], png.Bytes()); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(paths[1], svgFontFallback(svgText.Bytes())); err != nil {
		return nil, err
	}
	return paths, nil
}

// svgFontFallback lets a browser without Liberation Sans use Arial or Helvetica, which have the
// same metrics, so the text still fits the boxes it was laid out in (instead of falling back to
// the browser's default serif face).
func svgFontFallback(svg []byte) []byte {
	return bytes.ReplaceAll(svg, []byte("font-family:Liberation Sans;"),
		[]byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"))
}
