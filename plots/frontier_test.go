package plots

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestFrontier(t *testing.T) {
	ps, pr := speedSeries(4096, false)
	points := Series{Label: "measured, context 4k", X: pr.Y, Y: ps.Y}
	for _, b := range sweepBatches {
		points.PointLabels = append(points.PointLabels, fmt.Sprintf("B=%d", b))
	}
	between := Series{Label: "interpolated (log batch)"}
	for i := 0; i+1 < len(pr.Y); i++ {
		between.X = append(between.X, pr.Y[i], (pr.Y[i]+pr.Y[i+1])/2)
		between.Y = append(between.Y, ps.Y[i], (ps.Y[i]+ps.Y[i+1])/2)
	}
	d := FrontierData{Points: points, Between: between, Target: 60,
		ChosenPerRequest: 61, ChosenPerServer: 61 * 80, ChosenLabel: "chosen: B=80"}
	base := outBase(t, "frontier")
	paths, err := Frontier(testChart, d, base)
	if err != nil {
		t.Fatal(err)
	}
	texts := checkOutputs(t, paths, base, 1200, 800)
	wantTexts(t, texts, 1, "measured, context 4k", "interpolated (log batch)", "chosen: B=80",
		"target: 60 tokens/s per request (below it shaded)", perRequestLabelText, perServerLabelText)
}

func TestFrontierRejectsBadInput(t *testing.T) {
	good := Series{Label: "ok", X: []float64{100, 60}, Y: []float64{100, 480}}
	cases := []struct {
		desc string
		d    FrontierData
		want string // in the error; empty: ErrNothingToDraw
	}{
		{"no points", FrontierData{Target: 10, ChosenPerRequest: 10, ChosenPerServer: 10}, ""},
		{"zero target", FrontierData{Points: good, ChosenPerRequest: 10, ChosenPerServer: 10}, "target"},
		{"NaN chosen", FrontierData{Points: good, Target: 10, ChosenPerRequest: math.NaN(), ChosenPerServer: 10}, "chosen"},
		{"lengths differ", FrontierData{Points: Series{Label: "short", X: []float64{1}}, Target: 1, ChosenPerRequest: 1, ChosenPerServer: 1}, `"short"`},
	}
	for _, tc := range cases {
		err := noPanic(t, tc.desc, func() error {
			_, err := Frontier(testChart, tc.d, t.TempDir()+"/x")
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
