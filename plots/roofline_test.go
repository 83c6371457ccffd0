package plots

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// h200Ceilings are the datasheet roof and a plausible measured one.
var h200Ceilings = []RooflineCeiling{
	{Label: "H200 datasheet", BandwidthBytesPerSec: 4.8e12, FLOPsPerSec: 989e12},
	{Label: "H200 measured", BandwidthBytesPerSec: 4.31e12, FLOPsPerSec: 742e12, Dashed: true},
}

// llamaKernels are decode kernels of Llama-3-8B on an H200: bf16 GEMV and skinny GEMM run at
// about 85% of the measured bandwidth until the batch makes them compute-bound; decode
// attention reads the KV cache once per group of 4 query heads.
func llamaKernels() []RooflinePoint {
	at := func(label string, intensity, fractionOfBW float64) RooflinePoint {
		return RooflinePoint{Label: label, Intensity: intensity, FLOPsPerSec: math.Min(intensity*4.31e12*fractionOfBW, 742e12*0.8)}
	}
	return []RooflinePoint{
		at("GEMV qkv B=1", 1.0, 0.86),
		at("GEMV mlp-up B=1", 1.0, 0.91),
		at("GEMM qkv B=16", 15.9, 0.83),
		at("GEMM qkv B=64", 61.7, 0.8),
		at("GEMM mlp B=256", 228, 0.75),
		at("attention GQA S=4k", 3.9, 0.78),
		at("attention split-KV S=32k", 3.95, 0.84),
		{Label: "attention fp8 S=128k", Intensity: 7.8, FLOPsPerSec: math.NaN(), Failed: true},
		{Label: "GEMM int4 B=8", Intensity: 30, FLOPsPerSec: 2e14, Failed: true},
	}
}

func TestRoofline(t *testing.T) {
	c := testChart
	c.Title = "Roofline: Llama-3-8B decode kernels"
	base := outBase(t, "roofline")
	paths, err := Roofline(c, h200Ceilings, llamaKernels(), base)
	if err != nil {
		t.Fatal(err)
	}
	texts := checkOutputs(t, paths, base, 1200, 800)
	// Every kernel named once (next to its marker or in the legend); the failed ones only in
	// the footnote; both ridges marked.
	for _, k := range llamaKernels() {
		if k.Failed {
			wantTexts(t, texts, 0, k.Label)
		} else {
			wantTexts(t, texts, 1, k.Label)
		}
	}
	wantTexts(t, texts, 1, "ridge 206 FLOP/byte", "ridge 172 FLOP/byte",
		"H200 datasheet (4.8 TB/s, 989 TFLOP/s)", "H200 measured (4.31 TB/s, 742 TFLOP/s)",
		"Failed verification, not drawn: attention fp8 S=128k, GEMM int4 B=8.",
		intensityLabelText, tflopsLabelText, "0.1")
	wantTexts(t, texts, 2, "1", "10", "100", "1000") // on both axes
}

func TestRooflineNote(t *testing.T) {
	note := rooflineNote([]string{"a", "b", "c", "d", "e", "f"}, []string{"z"})
	for _, want := range []string{"Failed verification, not drawn: a, b, c, d and 2 more", "no positive finite result, not drawn: z"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q does not say %q", note, want)
		}
	}
	if rooflineNote(nil, nil) != "" {
		t.Error("a note with nothing left out")
	}
}

// Every failed or undrawable kernel leaves the roofs, which still make a chart.
func TestRooflineOnlyCeilings(t *testing.T) {
	points := []RooflinePoint{{Label: "bad", Intensity: 2, FLOPsPerSec: 1e12, Failed: true}, {Label: "zero", Intensity: 0, FLOPsPerSec: 1e12}}
	base := outBase(t, "roofline-no-kernels")
	paths, err := Roofline(testChart, h200Ceilings[:1], points, base)
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, paths, base, 1200, 800)
}

// Many kernels at nearly the same place: the names that do not fit move to the legend.
func TestRooflineCrowdedLabels(t *testing.T) {
	var points []RooflinePoint
	for i := range 14 {
		// 4% apart: crowded, but not so close that they merge into one marker.
		points = append(points, RooflinePoint{Label: "GEMV layer " + batchLabel(float64(i)), Intensity: 1 + 0.04*float64(i), FLOPsPerSec: 3.6e12 + 1.5e11*float64(i)})
	}
	base := outBase(t, "roofline-crowded")
	paths, err := Roofline(testChart, h200Ceilings, points, base)
	if err != nil {
		t.Fatal(err)
	}
	texts := checkOutputs(t, paths, base, 1200, 800)
	for _, k := range points {
		wantTexts(t, texts, 1, k.Label)
	}
}

func TestRooflineRejectsBadInput(t *testing.T) {
	good := h200Ceilings[:1]
	cases := []struct {
		desc     string
		ceilings []RooflineCeiling
		points   []RooflinePoint
		want     string // in the error; ErrNothingToDraw when empty
	}{
		{"nothing", nil, nil, ""},
		{"only failed points", nil, []RooflinePoint{{Label: "x", Intensity: 1, FLOPsPerSec: 1e12, Failed: true}}, ""},
		{"only undrawable points", nil, []RooflinePoint{{Label: "x", Intensity: -1, FLOPsPerSec: 1e12}, {Label: "y", Intensity: 1, FLOPsPerSec: math.Inf(1)}}, ""},
		{"zero bandwidth", []RooflineCeiling{{Label: "broken", FLOPsPerSec: 1e15}}, nil, "broken"},
		{"NaN rate", append([]RooflineCeiling{}, good[0], RooflineCeiling{BandwidthBytesPerSec: 1e12, FLOPsPerSec: math.NaN()}), nil, "ceiling #1"},
	}
	for _, tc := range cases {
		err := noPanic(t, tc.desc, func() error {
			_, err := Roofline(testChart, tc.ceilings, tc.points, t.TempDir()+"/x")
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

// Points only, and a point far above its roof: still drawn.
func TestRooflineAwkwardData(t *testing.T) {
	cases := []struct {
		desc     string
		ceilings []RooflineCeiling
		points   []RooflinePoint
	}{
		{"points without ceilings", nil, llamaKernels()},
		{"one point", nil, []RooflinePoint{{Label: "only", Intensity: 1, FLOPsPerSec: 4e12}}},
		{"above the roof", h200Ceilings[:1], []RooflinePoint{{Label: "suspicious", Intensity: 1, FLOPsPerSec: 4e15}}},
		{"unlabelled", h200Ceilings[:1], []RooflinePoint{{Intensity: 1, FLOPsPerSec: 4e12}}},
		{"five ceilings", append(append(append([]RooflineCeiling{}, h200Ceilings...), h200Ceilings...), h200Ceilings[0]), nil},
	}
	for _, tc := range cases {
		err := noPanic(t, tc.desc, func() error {
			_, err := Roofline(testChart, tc.ceilings, tc.points, outBase(t, slug("roofline "+tc.desc)))
			return err
		})
		if err != nil {
			t.Errorf("%s: %v", tc.desc, err)
		}
	}
}

// The linear kernels of one step at batch 1 all sit at one FLOP per byte: they share one
// marker and one label instead of stacking four; kernels at another batch stay apart, their
// markers larger, with a size legend of the batches drawn.
func TestRooflineMergesCoincidentPoints(t *testing.T) {
	var points []RooflinePoint
	for _, b := range []int{1, 256} {
		for i, name := range []string{"qkv_proj", "o_proj", "gate_up_proj", "down_proj"} {
			intensity := 1.0 + 0.001*float64(i)
			if b == 256 {
				intensity = 228 + 0.5*float64(i)
			}
			points = append(points, RooflinePoint{Label: fmt.Sprintf("%s B=%d", name, b), Intensity: intensity,
				FLOPsPerSec: math.Min(intensity*4.8e12, 989e12), Batch: b})
		}
		points = append(points, RooflinePoint{Label: fmt.Sprintf("attention B=%d", b), Intensity: 3.99, FLOPsPerSec: 3.99 * 4.8e12, Batch: b})
	}
	base := outBase(t, "roofline-merged")
	paths, err := Roofline(testChart, h200Ceilings[:1], points, base)
	if err != nil {
		t.Fatal(err)
	}
	texts := checkOutputs(t, paths, base, 1200, 800)
	wantTexts(t, texts, 1, "qkv_proj, o_proj, gate_up_proj, down_proj B=1", "qkv_proj, o_proj, gate_up_proj, down_proj B=256",
		"attention B=1", "attention B=256", "B=1", "B=256")
	wantTexts(t, texts, 0, "qkv_proj B=1", "o_proj B=1")
}

func TestMergedLabelAndBatchSizes(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"qkv B=1"}, "qkv B=1"},
		{[]string{"qkv B=1", "o B=1"}, "qkv, o B=1"},
		{[]string{"attention S=1k", "attention S=4k"}, "attention S=1k, S=4k"},
		{[]string{"a x", "b y"}, "a x, b y"},
	} {
		if got := mergedLabel(c.in); got != c.want {
			t.Errorf("mergedLabel(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	s := newBatchSizer([]RooflinePoint{{Batch: 1}, {Batch: 16}, {Batch: 256}, {Batch: 16}, {}})
	if !(s.radius(1) < s.radius(16) && s.radius(16) < s.radius(256)) || s.radius(0) != markerRadius {
		t.Errorf("radii %v %v %v (unknown %v): want growing with the batch", s.radius(1), s.radius(16), s.radius(256), s.radius(0))
	}
	if got := s.sizes(); fmt.Sprint(got) != "[1 16 256]" {
		t.Errorf("size legend %v", got)
	}
	if got := newBatchSizer([]RooflinePoint{{Batch: 8}}).sizes(); got != nil {
		t.Errorf("one batch needs no size legend, got %v", got)
	}
}
