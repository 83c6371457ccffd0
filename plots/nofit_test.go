package plots

import (
	"errors"
	"math"
	"os"
	"regexp"
	"testing"
)

// crossPath matches the two strokes of a no-fit cross in the SVG (each cross is one path of
// two segments, 1.6 pt wide).
var crossPath = regexp.MustCompile(`<path d="M[-0-9.,]+L[-0-9.,]+M[-0-9.,]+L[-0-9.,]+" style="fill:none;stroke:#[0-9A-F]{6};stroke-width:1.6"`)

// Batches that do not fit are crossed on the floor of both panels, one row per context, with
// one legend entry; the axes span them, and the crosses alone are nothing to draw.
func TestTokensVsBatchMarksWhatDoesNotFit(t *testing.T) {
	var perServer, perRequest []Series
	for _, ctx := range []int{1024, 8192} {
		srv, req := speedSeries(ctx, false)
		noFit := Series{Label: "does not fit in memory", Group: srv.Group, Style: NoFit}
		for i, b := range srv.X {
			if b > 64 && ctx == 8192 {
				srv.Y[i], req.Y[i] = math.NaN(), math.NaN()
				noFit.X, noFit.Y = append(noFit.X, b), append(noFit.Y, 0)
			}
		}
		perServer, perRequest = append(perServer, srv), append(perRequest, req)
		if len(noFit.X) > 0 {
			perServer, perRequest = append(perServer, noFit), append(perRequest, noFit)
		}
	}
	base := outBase(t, "tokens-vs-batch-nofit")
	paths, err := TokensVsBatch(testChart, perServer, perRequest, base)
	if err != nil {
		t.Fatal(err)
	}
	texts := checkOutputs(t, paths, base, 1200, 800)
	wantTexts(t, texts, 1, "does not fit in memory")
	svg, _ := os.ReadFile(base + ".svg")
	n := 0
	for _, p := range perServer {
		if p.Style == NoFit {
			n += len(p.X)
		}
	}
	if n == 0 {
		t.Fatal("the synthetic series have no batch that does not fit")
	}
	if got := len(crossPath.FindAll(svg, -1)); got != 2*n+1 {
		t.Errorf("%d crosses drawn, want %d in each panel and one in the legend", got, n)
	}

	_, err = TokensVsBatch(testChart, []Series{{Label: "x", X: []float64{4}, Y: []float64{0}, Style: NoFit}},
		[]Series{{Label: "x", X: []float64{4}, Y: []float64{0}, Style: NoFit}}, outBase(t, "nofit-only"))
	if !errors.Is(err, ErrNothingToDraw) {
		t.Errorf("crosses alone: %v, want ErrNothingToDraw", err)
	}
}
