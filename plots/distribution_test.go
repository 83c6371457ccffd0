package plots

import (
	"errors"
	"math"
	"testing"
)

func TestDistribution(t *testing.T) {
	cols := []DistributionColumn{
		{Label: "h100-sxm (4)", Values: []float64{93, 92.5, 87, 60}, Marks: []Mark{MarkOK, MarkOK, MarkOutlier, MarkFailing}, Threshold: 85, ThresholdText: "threshold 85%"},
		{Label: "h200 (3)", Values: []float64{91, math.NaN(), 90}, Threshold: 92},
	}
	c := testChart
	c.Title = "Read bandwidth across the fleet (2 boxes)"
	base := outBase(t, "distribution")
	paths, err := Distribution(c, "% of the datasheet bandwidth", cols, base)
	if err != nil {
		t.Fatal(err)
	}
	texts := checkOutputs(t, paths, base, 1200, 800)
	wantTexts(t, texts, 1, "threshold 85%", "threshold 92", "h100-sxm (4)", "h200 (3)", "card", "fleet outlier", "failing card", "threshold",
		"% of the datasheet bandwidth", c.Title)

	if _, err := Distribution(c, "x", []DistributionColumn{{Label: "a", Values: []float64{math.NaN()}}}, outBase(t, "distribution-empty")); !errors.Is(err, ErrNothingToDraw) {
		t.Errorf("no drawable value: %v, want ErrNothingToDraw", err)
	}
	if _, err := Distribution(c, "x", []DistributionColumn{{Label: "a", Values: []float64{1, 2}, Marks: []Mark{MarkOK}}}, outBase(t, "distribution-bad")); err == nil {
		t.Errorf("one mark for two values: no error")
	}
}
