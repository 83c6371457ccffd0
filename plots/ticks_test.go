package plots

import (
	"math"
	"reflect"
	"testing"

	"gonum.org/v1/plot"
)

func labelsOf(ticks []plot.Tick) []string {
	var out []string
	for _, t := range ticks {
		if t.Label != "" {
			out = append(out, t.Label)
		}
	}
	return out
}

func TestTickLabels(t *testing.T) {
	cases := []struct {
		desc     string
		ticker   plot.Ticker
		min, max float64
		want     []string
	}{
		{"batch 1..256", log2Ticks{batchLabel}, 1, 256, []string{"1", "2", "4", "8", "16", "32", "64", "128", "256"}},
		{"batch 1..1024 thinned", log2Ticks{batchLabel}, 1, 1024, []string{"1", "4", "16", "64", "256", "1024"}},
		{"context 1k..32k", log2Ticks{contextLabel}, 1024, 32768, []string{"1k", "2k", "4k", "8k", "16k", "32k"}},
		{"context to 1M", log2Ticks{contextLabel}, 65536, 1 << 20, []string{"64k", "128k", "256k", "512k", "1M"}},
		{"tokens/s decades", log10Ticks{siLabel}, 8, 120000, []string{"10", "100", "1k", "10k", "100k"}},
		{"tokens/s 1-2-5", log10Ticks{siLabel}, 150, 25000, []string{"200", "500", "1k", "2k", "5k", "10k", "20k"}},
		{"tokens/s short range", log10Ticks{siLabel}, 250, 900, []string{"300", "400", "500", "600", "700", "800", "900"}},
		{"TFLOP/s plain", log10Ticks{plainLabel}, 0.1, 2000, []string{"0.1", "1", "10", "100", "1000"}},
		{"linear from zero", linearTicks{siLabel}, 0, 350, []string{"0", "50", "100", "150", "200", "250", "300", "350"}},
		{"linear thousands", linearTicks{siLabel}, 0, 8000, []string{"0", "2k", "4k", "6k", "8k"}},
	}
	for _, tc := range cases {
		if got := labelsOf(tc.ticker.Ticks(tc.min, tc.max)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: labels %q, want %q", tc.desc, got, tc.want)
		}
	}
}

// A ticker given a range it cannot label returns nothing or a fallback, never panics.
func TestTickersOnDegenerateRanges(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tickers := map[string]plot.Ticker{
		"log2": log2Ticks{batchLabel}, "log10": log10Ticks{siLabel}, "linear": linearTicks{siLabel},
	}
	for name, tk := range tickers {
		for _, r := range [][2]float64{{0, 10}, {-5, 5}, {5, 5}, {10, 1}, {nan, 1}, {1, nan}, {1, inf}, {-inf, inf}, {1.1, 1.2}} {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s on [%v, %v]: panic: %v", name, r[0], r[1], p)
					}
				}()
				tk.Ticks(r[0], r[1])
			}()
		}
	}
}

func TestNumberFormats(t *testing.T) {
	cases := []struct {
		format func(float64) string
		in     float64
		want   string
	}{
		{siLabel, 20000, "20k"}, {siLabel, 1500, "1.5k"}, {siLabel, 320, "320"}, {siLabel, 2.5e6, "2.5M"},
		{siLabel, 0, "0"}, {siLabel, 0.5, "0.5"},
		{plainLabel, 1000, "1000"}, {plainLabel, 0.1, "0.1"}, {plainLabel, 206.04, "206"},
		{contextLabel, 4096, "4k"}, {contextLabel, 131072, "128k"}, {contextLabel, 1 << 21, "2M"},
		{contextLabel, 1536, "1.5k"}, {contextLabel, 512, "512"},
		{batchLabel, 256, "256"},
		{percentLabel, 0.75, "75%"}, {percentLabel, 0.7000000000000001, "70%"},
	}
	for _, tc := range cases {
		if got := tc.format(tc.in); got != tc.want {
			t.Errorf("format(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRanges(t *testing.T) {
	if got := pow2Extent(extent{1, 256}); got != (extent{1, 256}) {
		t.Errorf("pow2Extent(1, 256) = %v", got)
	}
	if got := pow2Extent(extent{3, 100}); got != (extent{2, 128}) {
		t.Errorf("pow2Extent(3, 100) = %v", got)
	}
	if got := pow2Extent(extent{8, 8}); got != (extent{4, 16}) {
		t.Errorf("pow2Extent(8, 8) = %v", got)
	}
	if got := zeroBased(extent{40, 308}); got != (extent{0, 350}) {
		t.Errorf("zeroBased(.., 308) = %v, want a labelled top at 350", got)
	}
	if got := logPadded(extent{1e-150, 1e150}); !(got.Min > 0) || math.IsInf(got.Max, 0) {
		t.Errorf("logPadded at the drawable limits = %v", got)
	}
}

func TestColorScale(t *testing.T) {
	cases := []struct {
		values extent
		want   colorScale
	}{
		{extent{0.78, 0.88}, colorScale{0.7, 0.9}},
		{extent{0.12, 0.95}, colorScale{0.1, 1}},
		{extent{0.8, 0.8}, colorScale{0.7, 0.8}},
		{extent{0.5, 1.3}, colorScale{0.5, 1}},
		{extent{0, 0.02}, colorScale{0, 0.1}},
	}
	for _, tc := range cases {
		got := colorScaleFor(tc.values)
		if math.Abs(got.lo-tc.want.lo) > 1e-9 || math.Abs(got.hi-tc.want.hi) > 1e-9 {
			t.Errorf("colorScaleFor(%v) = %v, want %v", tc.values, got, tc.want)
		}
	}
}

func TestWrapText(t *testing.T) {
	sty := textStyle(subtitleSize, false, textColor)
	long := "NVIDIA H200 141GB HBM3e · bf16 weights, bf16 KV cache · roofline from the datasheet at 4.8 TB/s"
	wrapped := wrapText(sty, long, sty.Width(long)/2)
	if n := len(sty.Handler.Lines(wrapped)); n < 2 || n > 3 {
		t.Errorf("wrapped into %d lines: %q", n, wrapped)
	}
	if got := wrapText(sty, "short", 1000); got != "short" {
		t.Errorf("wrapText(short) = %q", got)
	}
}
