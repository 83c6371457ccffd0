package plots

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestTokensVsBatch(t *testing.T) {
	perServer, perRequest := llamaSpeedSeries([]int{1024, 4096, 16384, 32768})
	base := outBase(t, "tokens-vs-batch")
	paths, err := TokensVsBatch(testChart, perServer, perRequest, base)
	if err != nil {
		t.Fatal(err)
	}
	texts := checkOutputs(t, paths, base, 1200, 800)
	// One legend entry per context and one for the bounds' style; batch ticks on both panels;
	// tokens/s ticks in decimal k.
	wantTexts(t, texts, 1, "context 1k", "context 32k", "roofline bound (datasheet)",
		"Per-server throughput", "Per-request speed", perServerLabelText, perRequestLabelText,
		"Llama-3-8B decode", "20k", "1k")
	wantTexts(t, texts, 2, "1", "2", "4", "8", "16", "32", "64", "128", "256", batchLabelText)
}

func TestTokensVsBatchRequestedSize(t *testing.T) {
	perServer, perRequest := llamaSpeedSeries([]int{4096})
	c := testChart
	c.WidthPx, c.HeightPx = 1600, 900
	base := outBase(t, "tokens-vs-batch-1600x900")
	paths, err := TokensVsBatch(c, perServer, perRequest, base)
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, paths, base, 1600, 900)
}

func TestTradeoff(t *testing.T) {
	base := outBase(t, "tradeoff")
	paths, err := Tradeoff(testChart, llamaTradeoffSeries([]int{1024, 4096, 16384, 32768}), base)
	if err != nil {
		t.Fatal(err)
	}
	texts := checkOutputs(t, paths, base, 1200, 800)
	wantTexts(t, texts, 1, "B=256", "context 4k", perRequestLabelText, perServerLabelText)
	wantTexts(t, texts, 2, "B=128") // 1k and 4k contexts; the KV cache of 16k and 32k does not fit
}

func TestTokensVsContext(t *testing.T) {
	var series []Series
	for _, b := range []int{1, 8, 64} {
		measured := Series{Label: "batch " + batchLabel(float64(b)), Group: batchLabel(float64(b))}
		bound := Series{Label: "roofline bound (datasheet)", Group: measured.Group, Style: Bound}
		for _, s := range sweepContexts {
			step := boundStepSeconds(b, s) // NaN where the KV cache does not fit: a gap
			measured.X = append(measured.X, float64(s))
			measured.Y = append(measured.Y, efficiency(b, s)/step)
			bound.X = append(bound.X, float64(s))
			bound.Y = append(bound.Y, 1/step)
		}
		series = append(series, measured, bound)
	}
	c := testChart
	c.ValueLabel = perRequestLabelText
	base := outBase(t, "tokens-vs-context")
	paths, err := TokensVsContext(c, series, base)
	if err != nil {
		t.Fatal(err)
	}
	texts := checkOutputs(t, paths, base, 1200, 800)
	wantTexts(t, texts, 1, "1k", "4k", "32k", "128k", "batch 64", contextLabelText, perRequestLabelText)
}

func TestLineChartsRejectBadInput(t *testing.T) {
	good := Series{Label: "good", X: []float64{1, 2, 4}, Y: []float64{300, 590, 1100}}
	nan := math.NaN()
	cases := []struct {
		desc   string
		series []Series
		want   string // in the error; ErrNothingToDraw when empty
	}{
		{"no series", nil, ""},
		{"series without points", []Series{{Label: "empty"}}, ""},
		{"all non-positive", []Series{{Label: "zeros", X: []float64{1, 2}, Y: []float64{0, -3}}}, ""},
		{"all NaN and Inf", []Series{{Label: "nan", X: []float64{1, nan, 4}, Y: []float64{nan, 2, math.Inf(1)}}}, ""},
		{"only values at the float limits", []Series{{Label: "edge", X: []float64{5e-324, 1.7e308}, Y: []float64{5e-324, 1.7e308}}}, ""},
		{"x and y lengths differ", []Series{good, {Label: "short y", X: []float64{1, 2}, Y: []float64{1}}}, `"short y"`},
		{"unnamed series", []Series{{X: []float64{1}, Y: nil}}, "series #0"},
		{"point labels length", []Series{{Label: "labels", X: []float64{1, 2}, Y: []float64{1, 2}, PointLabels: []string{"B=1"}}}, `"labels"`},
		{"unknown style", []Series{{Label: "odd", X: []float64{1}, Y: []float64{1}, Style: 7}}, "unknown style"},
	}
	charts := map[string]func(Chart, []Series, string) ([]string, error){
		"TokensVsBatch/server": func(c Chart, s []Series, b string) ([]string, error) {
			return TokensVsBatch(c, s, []Series{good}, b)
		},
		"TokensVsBatch/request": func(c Chart, s []Series, b string) ([]string, error) {
			return TokensVsBatch(c, []Series{good}, s, b)
		},
		"Tradeoff":        Tradeoff,
		"TokensVsContext": TokensVsContext,
	}
	for name, chart := range charts {
		for _, tc := range cases {
			err := noPanic(t, name+": "+tc.desc, func() error {
				_, err := chart(testChart, tc.series, t.TempDir()+"/x")
				return err
			})
			switch {
			case err == nil:
				t.Errorf("%s: %s: no error", name, tc.desc)
			case tc.want == "" && !errors.Is(err, ErrNothingToDraw):
				t.Errorf("%s: %s: error %q, want ErrNothingToDraw", name, tc.desc, err)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("%s: %s: error %q does not say %q", name, tc.desc, err, tc.want)
			}
		}
	}
}

// Awkward but drawable data must draw, without a panic.
func TestLineChartsDrawAwkwardData(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		desc   string
		series []Series
	}{
		{"one point", []Series{{Label: "one", X: []float64{8}, Y: []float64{2500}}}},
		{"one bound point", []Series{{Label: "one", X: []float64{8}, Y: []float64{2500}, Style: Bound}}},
		{"flat", []Series{{Label: "flat", X: []float64{1, 2, 4}, Y: []float64{100, 100, 100}}}},
		{"holes", []Series{{Label: "holes", X: []float64{1, 2, nan, 8, 16, 32}, Y: []float64{-1, 200, 300, 0, inf, 900}}}},
		{"extreme range", []Series{{Label: "wide", X: []float64{1e-300, 1, 1e300}, Y: []float64{1e-300, 1, 1e300}}}},
		{"unsorted with labels", []Series{{Label: "b", X: []float64{4, 1, 2}, Y: []float64{3, 1, 2}, PointLabels: []string{"c", "a", "b"}}}},
		{"no labels at all", []Series{{X: []float64{1, 2}, Y: []float64{5, 6}}}},
		{"wide sweep", []Series{wideSweep("measured", Measured), wideSweep("bound", Bound)}},
	}
	for _, tc := range cases {
		for name, chart := range map[string]func() ([]string, error){
			"TokensVsBatch": func() ([]string, error) {
				return TokensVsBatch(testChart, tc.series, tc.series, outBase(t, slug("batch "+tc.desc)))
			},
			"Tradeoff": func() ([]string, error) { return Tradeoff(testChart, tc.series, outBase(t, slug("tradeoff "+tc.desc))) },
			"TokensVsContext": func() ([]string, error) {
				return TokensVsContext(testChart, tc.series, outBase(t, slug("context "+tc.desc)))
			},
		} {
			err := noPanic(t, name+": "+tc.desc, func() error { _, err := chart(); return err })
			if err != nil {
				t.Errorf("%s: %s: %v", name, tc.desc, err)
			}
		}
	}
}

func TestChartSizeValidation(t *testing.T) {
	s := []Series{{Label: "a", X: []float64{1, 2}, Y: []float64{1, 2}}}
	for _, size := range [][2]int{{10, 10}, {1200, 0}, {20000, 800}, {3000, 300}} {
		c := Chart{WidthPx: size[0], HeightPx: size[1]}
		if _, err := Tradeoff(c, s, t.TempDir()+"/x"); err == nil {
			t.Errorf("size %dx%d: no error", size[0], size[1])
		}
	}
	if _, err := Tradeoff(Chart{}, s, ""); err == nil {
		t.Error("empty base: no error")
	}
}

// wideSweep runs batch 1 to 1024 (more powers of two than fit as labels) with rates over
// four decades.
func wideSweep(label string, style SeriesStyle) Series {
	s := Series{Label: label, Style: style, Group: "wide"}
	for b := 1.0; b <= 1024; b *= 2 {
		s.X = append(s.X, b)
		s.Y = append(s.Y, 10*b*b/(1+b/64))
		s.PointLabels = append(s.PointLabels, "B="+batchLabel(b))
	}
	return s
}

func TestLongTexts(t *testing.T) {
	c := Chart{
		Title:    "A very long title that goes on about the decode speed of a large language model on a GPU for a while longer",
		Subtitle: "NVIDIA H200 141GB HBM3e · bf16 weights, bf16 KV cache · roofline from the datasheet at 4.8 TB/s and 989 TFLOP/s dense · driver 550.54 · CUDA 12.4",
	}
	var series []Series
	for i := range 9 {
		s := wideSweep("a fairly long legend entry for series number "+batchLabel(float64(i)), Measured)
		s.Group = batchLabel(float64(i))
		for j := range s.Y {
			s.Y[j] *= float64(i + 1)
		}
		series = append(series, s)
	}
	base := outBase(t, "long-texts")
	paths, err := TokensVsBatch(c, series, series, base)
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, paths, base, 1200, 800)
}
