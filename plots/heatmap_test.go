package plots

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestEfficiencyMap(t *testing.T) {
	c := testChart
	c.Title = "Llama-3-8B decode: fraction of the datasheet roofline"
	base := outBase(t, "efficiency-map")
	paths, err := EfficiencyMap(c, sweepBatches, sweepContexts, llamaEfficiency(), base)
	if err != nil {
		t.Fatal(err)
	}
	texts := checkOutputs(t, paths, base, 1200, 800)
	// 88% at batch 1 and 1k context; 21 cells where the KV cache does not fit.
	wantTexts(t, texts, 1, "88%", "not measured", "1k", "128k", "256", fractionLabelText)
	wantTexts(t, texts, 21, "–")
}

func TestEfficiencyMapAwkwardData(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		desc              string
		batches, contexts []int
		fraction          [][]float64
	}{
		{"one cell", []int{1}, []int{4096}, [][]float64{{0.8}}},
		{"above one, negative, infinite", []int{1, 2, 4}, []int{1024}, [][]float64{{1.07, -0.2, math.Inf(1)}}},
		{"mostly missing", []int{1, 2}, []int{1024, 2048}, [][]float64{{nan, nan}, {nan, 0.5}}},
		{"many small cells", consecutive(1, 40), consecutive(1024, 30), grid(30, 40, 0.5)},
		{"too many cells to label", consecutive(1000, 100), consecutive(1, 90), grid(90, 100, 0.5)},
	}
	for _, tc := range cases {
		err := noPanic(t, tc.desc, func() error {
			_, err := EfficiencyMap(testChart, tc.batches, tc.contexts, tc.fraction, outBase(t, slug("map "+tc.desc)))
			return err
		})
		if err != nil {
			t.Errorf("%s: %v", tc.desc, err)
		}
	}
}

func TestEfficiencyMapRejectsBadInput(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		desc              string
		batches, contexts []int
		fraction          [][]float64
		want              string // in the error; ErrNothingToDraw when empty
	}{
		{"empty", nil, nil, nil, ""},
		{"all NaN", []int{1, 2}, []int{1024}, [][]float64{{nan, nan}}, ""},
		{"all negative", []int{1}, []int{1024}, [][]float64{{-1}}, ""},
		{"rows for contexts", []int{1, 2}, []int{1024, 2048}, [][]float64{{0.5, 0.6}}, "1 rows of fractions for 2 context lengths"},
		{"short row", []int{1, 2}, []int{1024, 2048}, [][]float64{{0.5, 0.6}, {0.5}}, "row 1 (context 2048)"},
		{"zero batch", []int{0, 2}, []int{1024}, [][]float64{{0.5, 0.6}}, "batch size 0"},
		{"negative context", []int{1}, []int{-4}, [][]float64{{0.5}}, "context length -4"},
	}
	for _, tc := range cases {
		err := noPanic(t, tc.desc, func() error {
			_, err := EfficiencyMap(testChart, tc.batches, tc.contexts, tc.fraction, t.TempDir()+"/x")
			return err
		})
		switch {
		case err == nil:
			t.Errorf("%s: no error", tc.desc)
		case tc.want == "" && !errors.Is(err, ErrNothingToDraw):
			t.Errorf("%s: error %q, want ErrNothingToDraw", tc.desc, err)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: error %q does not say %q", tc.desc, err, tc.want)
		}
	}
}

func TestViridisEnds(t *testing.T) {
	if got := viridis(0); got != viridisAnchors[0] {
		t.Errorf("viridis(0) = %v", got)
	}
	if got := viridis(1); got != viridisAnchors[len(viridisAnchors)-1] {
		t.Errorf("viridis(1) = %v", got)
	}
	if viridis(2) != viridis(1) || viridis(-1) != viridis(0) {
		t.Error("viridis does not clamp")
	}
}

// consecutive returns n sizes counting up from first.
func consecutive(first, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = first + i
	}
	return out
}

func grid(rows, cols int, v float64) [][]float64 {
	out := make([][]float64, rows)
	for i := range out {
		out[i] = make([]float64, cols)
		for j := range out[i] {
			out[i][j] = v
		}
	}
	return out
}
