package plots

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Synthetic but realistic numbers: Llama-3-8B in bf16 decoding on an NVIDIA H200, bounded by
// the datasheet roofline, with a measured efficiency between about 70% and 88%.
const (
	llamaWeightBytes     = 16.06e9 // 8.03e9 parameters x 2 bytes
	llamaKVBytesPerToken = 131072  // 32 layers x 8 KV heads x 128 dims x (K, V) x 2 bytes
	llamaFLOPsPerToken   = 2 * 8.03e9
	h200BytesPerSec      = 4.8e12 // datasheet HBM3e
	h200FLOPsPerSec      = 989e12 // dense bf16 tensor cores
	h200UsableBytes      = 0.9 * 141e9
)

var (
	sweepBatches  = []int{1, 2, 4, 8, 16, 32, 64, 128, 256}
	sweepContexts = []int{1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072}
)

// boundStepSeconds is the roofline step time, or NaN when the KV cache does not fit.
func boundStepSeconds(batch, context int) float64 {
	bytes := llamaWeightBytes + float64(batch)*float64(context)*llamaKVBytesPerToken
	if bytes > h200UsableBytes {
		return math.NaN()
	}
	return math.Max(bytes/h200BytesPerSec, float64(batch)*llamaFLOPsPerToken/h200FLOPsPerSec)
}

// efficiency is a made-up measured fraction of the roofline: good at small batches, a little
// worse as the attention share grows.
func efficiency(batch, context int) float64 {
	return 0.88 - 0.012*math.Log2(float64(batch)) - 0.008*math.Log2(float64(context)/1024)
}

func speedSeries(context int, bound bool) (perServer, perRequest Series) {
	group := contextLabel(float64(context))
	label := "context " + group
	style := Measured
	if bound {
		label, style = "roofline bound (datasheet)", Bound
	}
	perServer = Series{Label: label, Group: group, Style: style}
	perRequest = perServer
	for _, b := range sweepBatches {
		step := boundStepSeconds(b, context)
		if !bound {
			step /= efficiency(b, context)
		}
		perServer.X = append(perServer.X, float64(b))
		perServer.Y = append(perServer.Y, float64(b)/step)
		perRequest.X = append(perRequest.X, float64(b))
		perRequest.Y = append(perRequest.Y, 1/step)
	}
	return perServer, perRequest
}

func llamaSpeedSeries(contexts []int) (perServer, perRequest []Series) {
	for _, bound := range []bool{false, true} {
		for _, s := range contexts {
			ps, pr := speedSeries(s, bound)
			perServer = append(perServer, ps)
			perRequest = append(perRequest, pr)
		}
	}
	return perServer, perRequest
}

func llamaTradeoffSeries(contexts []int) []Series {
	var out []Series
	for _, s := range contexts {
		ps, pr := speedSeries(s, false)
		t := Series{Label: "context " + contextLabel(float64(s)), X: pr.Y, Y: ps.Y}
		for _, b := range sweepBatches {
			t.PointLabels = append(t.PointLabels, fmt.Sprintf("B=%d", b))
		}
		out = append(out, t)
	}
	return out
}

func llamaEfficiency() [][]float64 {
	fraction := make([][]float64, len(sweepContexts))
	for i, s := range sweepContexts {
		for _, b := range sweepBatches {
			v := efficiency(b, s)
			if math.IsNaN(boundStepSeconds(b, s)) {
				v = math.NaN()
			}
			fraction[i] = append(fraction[i], v)
		}
	}
	return fraction
}

var testChart = Chart{
	Title:    "Llama-3-8B decode",
	Subtitle: "NVIDIA H200 · bf16 · roofline from datasheet 4.8 TB/s",
}

// outBase returns where a test writes its chart: a temporary directory, or the directory
// named by PLOTS_SAMPLE_DIR when a person wants to look at the images.
func outBase(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("PLOTS_SAMPLE_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	return filepath.Join(dir, name)
}

// checkOutputs checks that a chart wrote a PNG of the wanted size with something drawn on it
// and a well-formed SVG, and returns the texts of the SVG (titles, tick labels, legend ...),
// which tests can check without depending on how fonts are rasterised.
func checkOutputs(t *testing.T, paths []string, base string, wantW, wantH int) (texts []string) {
	t.Helper()
	if len(paths) != 2 || paths[0] != base+".png" || paths[1] != base+".svg" {
		t.Fatalf("paths = %q, want [%s.png %s.svg]", paths, base, base)
	}
	data, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", paths[0], err)
	}
	if b := img.Bounds(); b.Dx() != wantW || b.Dy() != wantH {
		t.Errorf("%s: %dx%d px, want %dx%d", paths[0], b.Dx(), b.Dy(), wantW, wantH)
	}
	if inked := inkedFraction(img); inked < 0.01 || inked > 0.6 {
		t.Errorf("%s: %.1f%% of the pixels are not white: blank or flooded", paths[0], 100*inked)
	}

	svg, err := os.ReadFile(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	root := ""
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed XML: %v", paths[1], err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			inText = tok.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts = append(texts, string(tok))
			}
		case xml.EndElement:
			inText = false
		}
	}
	if root != "svg" {
		t.Errorf("%s: root element %q, want svg", paths[1], root)
	}
	if !strings.Contains(string(svg), "sans-serif") {
		t.Errorf("%s: no sans-serif fallback in the font families", paths[1])
	}
	return texts
}

// inkedFraction is the fraction of pixels that are not white.
func inkedFraction(img image.Image) float64 {
	b := img.Bounds()
	inked := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if r, g, bl, _ := img.At(x, y).RGBA(); r < 0xF000 || g < 0xF000 || bl < 0xF000 {
				inked++
			}
		}
	}
	return float64(inked) / float64(b.Dx()*b.Dy())
}

// wantTexts checks that each of want is one of the texts drawn, count times.
func wantTexts(t *testing.T, texts []string, count int, want ...string) {
	t.Helper()
	for _, w := range want {
		n := 0
		for _, s := range texts {
			if s == w {
				n++
			}
		}
		if n != count {
			t.Errorf("text %q drawn %d times, want %d", w, n, count)
		}
	}
}

// noPanic runs f and turns a panic into a test failure naming the case.
func noPanic(t *testing.T, name string, f func() error) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: panic: %v", name, r)
		}
	}()
	return f()
}

// slug turns a test case's description into a file name.
func slug(desc string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, desc)
}
