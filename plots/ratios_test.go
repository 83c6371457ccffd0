package plots

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestRatioVsBatch(t *testing.T) {
	var series []RatioSeries
	for i, ctx := range []int{1024, 8192} {
		s := RatioSeries{Label: "context " + contextLabel(float64(ctx))}
		for j, b := range sweepBatches {
			r := 0.91 + 0.01*float64(i) + 0.005*float64(j%3)
			s.X, s.Ratio = append(s.X, float64(b)), append(s.Ratio, r)
			s.Lo, s.Hi = append(s.Lo, r-0.012), append(s.Hi, r+0.015)
		}
		s.Lo[2], s.Hi[2] = math.NaN(), math.NaN() // no interval: a marker alone
		series = append(series, s)
	}
	base := outBase(t, "ratio-vs-batch")
	paths, err := RatioVsBatch(testChart, series, 0.03, base)
	if err != nil {
		t.Fatal(err)
	}
	texts := checkOutputs(t, paths, base, 1200, 800)
	wantTexts(t, texts, 1, "context 1k", "context 8k", "within ±3%: the same speed", ratioLabelText, batchLabelText, "256")
}

func TestRatioVsBatchRejectsBadInput(t *testing.T) {
	good := RatioSeries{Label: "ok", X: []float64{1, 2}, Ratio: []float64{1, 1}, Lo: []float64{0.99, 0.99}, Hi: []float64{1.01, 1.01}}
	cases := []struct {
		desc      string
		series    []RatioSeries
		threshold float64
		want      string // in the error; empty: ErrNothingToDraw
	}{
		{"no series", nil, 0.03, ""},
		{"only NaN ratios", []RatioSeries{{Label: "nan", X: []float64{1}, Ratio: []float64{math.NaN()}, Lo: []float64{1}, Hi: []float64{1}}}, 0.03, ""},
		{"lengths differ", []RatioSeries{good, {Label: "short", X: []float64{1, 2}, Ratio: []float64{1}, Lo: []float64{1}, Hi: []float64{1}}}, 0.03, "series short"},
		{"zero threshold", []RatioSeries{good}, 0, "threshold"},
		{"NaN threshold", []RatioSeries{good}, math.NaN(), "threshold"},
	}
	for _, tc := range cases {
		err := noPanic(t, tc.desc, func() error {
			_, err := RatioVsBatch(testChart, tc.series, tc.threshold, t.TempDir()+"/x")
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
