package report

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/decodebench/decodebench/bench/sweep/sweeptest"
	"github.com/decodebench/decodebench/bench/timing"
)

// sampledRun is a run of Llama-3-8B at three batches and two contexts whose kernels kept 200
// samples each with a 0.3% spread (a converged card run).
func sampledRun(t *testing.T) sweeptest.Run {
	return sweeptest.Run{Card: "NVIDIA H200", Model: llama8b(t), Batches: []int{1, 8, 64}, Contexts: []int{1024, 8192},
		Noise: 0.003, Samples: 200, Seed: 1}
}

func writeRun(t *testing.T, r sweeptest.Run) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	if err := sweeptest.Write(dir, r); err != nil {
		t.Fatal(err)
	}
	return dir
}

// verdicts returns the distinct verdicts of the pairs and of the kernels.
func verdicts(c Comparison) (configs, kernels []string) {
	for _, p := range c.Pairs {
		if !slices.Contains(configs, p.Verdict) {
			configs = append(configs, p.Verdict)
		}
	}
	for _, k := range c.Kernels {
		if !slices.Contains(kernels, k.Verdict) {
			kernels = append(kernels, k.Verdict)
		}
	}
	return configs, kernels
}

func TestCompareVerdicts(t *testing.T) {
	base := sampledRun(t)
	a := writeRun(t, base)

	slower := base
	slower.Scale, slower.Seed, slower.Started = 1.10, 2, base.Started.Add(24*time.Hour)
	faster := base
	faster.Scale, faster.Seed = 1/1.08, 3
	// Noisy: a spread of 25% over 15 samples. Its medians are as likely 5% off as not, and the
	// interval says so: it holds an edge of the 3% band.
	noisy := base
	noisy.Noise, noisy.Samples, noisy.Seed = 0.25, 15, 4
	barely := base // 1% slower: within the band, and the interval is narrow enough to say so
	barely.Scale, barely.Seed = 1.01, 5

	cases := []struct {
		desc     string
		b        string
		want     string
		ratio    float64 // the ratio the samples were made with
		regessed bool
	}{
		{"a run with itself", a, VerdictSame, 1, false},
		{"every sample x 1.10", writeRun(t, slower), VerdictSlower, 1 / 1.10, true},
		{"every sample / 1.08", writeRun(t, faster), VerdictFaster, 1.08, false},
		{"1% slower", writeRun(t, barely), VerdictSame, 1 / 1.01, false},
		{"noisy", writeRun(t, noisy), VerdictUnsure, 1, false},
	}
	for _, tc := range cases {
		c, err := Compare(a, tc.b)
		if err != nil {
			t.Fatalf("%s: %v", tc.desc, err)
		}
		configs, kernels := verdicts(c)
		if len(c.Pairs) != 6 || len(c.Kernels) == 0 {
			t.Fatalf("%s: %d pairs and %d kernels, want 6 and some", tc.desc, len(c.Pairs), len(c.Kernels))
		}
		if !slices.Equal(configs, []string{tc.want}) {
			t.Errorf("%s: configuration verdicts %v, want all %s", tc.desc, configs, tc.want)
		}
		if tc.desc != "noisy" && !slices.Equal(kernels, []string{tc.want}) {
			t.Errorf("%s: kernel verdicts %v, want all %s", tc.desc, kernels, tc.want)
		}
		if c.Regressed() != tc.regessed {
			t.Errorf("%s: Regressed() = %v", tc.desc, c.Regressed())
		}
		for _, p := range c.Pairs {
			if !p.HasInterval || !(p.Interval.Lo <= p.ServerRatio() && p.ServerRatio() <= p.Interval.Hi) {
				t.Errorf("%s: batch %d context %d: ratio %.4f outside its interval %+v (%s)", tc.desc, p.Batch, p.Context, p.ServerRatio(), p.Interval, p.NoInterval)
			}
			// The scaled runs' intervals hold the scale they were made with; the noisy one's too.
			if tc.desc != "a run with itself" && !(p.Interval.Lo <= tc.ratio*1.003 && tc.ratio*0.997 <= p.Interval.Hi) {
				t.Errorf("%s: batch %d context %d: interval %+v misses the true ratio %.4f", tc.desc, p.Batch, p.Context, p.Interval, tc.ratio)
			}
			if tc.desc == "noisy" && p.Interval.Hi-p.Interval.Lo < 0.03 {
				t.Errorf("noisy: batch %d context %d: interval %+v is narrower than the noise allows", p.Batch, p.Context, p.Interval)
			}
			if tc.desc == "a run with itself" && p.Interval.Hi-p.Interval.Lo > 0.01 {
				t.Errorf("itself: batch %d context %d: interval %+v wider than 0.3%% noise gives", p.Batch, p.Context, p.Interval)
			}
		}
	}
	// The same comparison gives the same intervals: the seed is fixed.
	c1, _ := Compare(a, cases[4].b)
	c2, _ := Compare(a, cases[4].b)
	if c1.Pairs[0].Interval != c2.Pairs[0].Interval {
		t.Errorf("two comparisons of the same runs: intervals %+v and %+v", c1.Pairs[0].Interval, c2.Pairs[0].Interval)
	}
}

func TestCompareListsConfigurationsInOneRunOnly(t *testing.T) {
	base := sampledRun(t)
	a := writeRun(t, base)
	b := base
	b.Drop, b.Fail = [][2]int{{64, 8192}}, [][2]int{{8, 1024}}
	c, err := Compare(a, writeRun(t, b))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Pairs) != 4 || c.OnlyA != 2 || c.OnlyB != 0 || len(c.Unpaired) != 2 {
		t.Fatalf("%d pairs, only A %d, only B %d, unpaired %+v", len(c.Pairs), c.OnlyA, c.OnlyB, c.Unpaired)
	}
	got := []string{unpairedText(c.Unpaired[0]), unpairedText(c.Unpaired[1])}
	want := []string{"Llama-3-8B batch 8 context 1k: ok in A only (B: failed: attention", "Llama-3-8B batch 64 context 8k: ok in A only (B: absent)"}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("unpaired %d: %q, want %q...", i, got[i], want[i])
		}
	}
	var out bytes.Buffer
	if err := WriteCompareText(&out, c, FormatTable); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "ok in one run only") || !strings.Contains(out.String(), "B: absent") {
		t.Errorf("the table does not list the configurations of one run:\n%s", out.String())
	}
}

func TestCompareOutputs(t *testing.T) {
	base := sampledRun(t)
	a := writeRun(t, base)
	slower := base
	slower.Scale, slower.Seed, slower.Card = 1.10, 2, "NVIDIA H100 80GB HBM3"
	bDir := writeRun(t, slower)
	c, err := Compare(a, bDir)
	if err != nil {
		t.Fatal(err)
	}
	if c.LabelA != "NVIDIA H200 · Llama-3-8B · 2026-11-02" || c.LabelB != "NVIDIA H100 80GB HBM3 · Llama-3-8B · 2026-11-02" {
		t.Errorf("labels %q and %q, want card · model · date", c.LabelA, c.LabelB)
	}
	for _, format := range CompareFormats {
		var out bytes.Buffer
		if err := WriteCompareText(&out, c, format); err != nil {
			t.Fatal(err)
		}
		text := out.String()
		switch format {
		case FormatJSON:
			var j CompareJSON
			if err := json.Unmarshal(out.Bytes(), &j); err != nil {
				t.Fatalf("json: %v", err)
			}
			if !j.Regressed || j.Verdicts[VerdictSlower] != 6 || j.Configurations[0].Interval == nil || j.A.Card != "NVIDIA H200" || j.Threshold != 0.03 {
				t.Errorf("json: %+v", j)
			}
		case FormatMarkdown:
			if !strings.Contains(text, "| model | batch |") || !strings.Contains(text, "**SLOWER:") {
				t.Errorf("md:\n%s", text)
			}
		default:
			if !strings.Contains(text, "SLOWER") || !strings.Contains(text, "geometric mean of B / A: 0.91") {
				t.Errorf("table:\n%s", text)
			}
		}
	}
	if err := WriteCompareText(&bytes.Buffer{}, c, "xml"); err == nil || !strings.Contains(err.Error(), "table, md, json") {
		t.Errorf("format xml: %v", err)
	}
	out := filepath.Join(t.TempDir(), "cmp")
	w, err := WriteComparison(c, out)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"plots/compare_ratios.png", "plots/compare_ratios.svg", CompareHTMLFile, CompareCSVFile} {
		if !exists(filepath.Join(out, name)) {
			t.Errorf("%s not written (%v)", name, w.Files)
		}
	}
	html, _ := os.ReadFile(filepath.Join(out, CompareHTMLFile))
	for _, want := range []string{"B IS SLOWER", "Verdicts", "SLOWER", "2026-11-02"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("compare.html lacks %q", want)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(out, CompareCSVFile))
	if !strings.Contains(string(csv), "ratio_lo,ratio_hi,verdict") || !strings.Contains(string(csv), ",SLOWER,") {
		t.Errorf("compare.csv lacks the intervals and verdicts:\n%s", csv)
	}
}

func TestGateVerdict(t *testing.T) {
	g := DefaultGate
	cases := []struct {
		lo, hi float64
		want   string
	}{
		{0.90, 0.96, VerdictSlower},
		{0.90, 0.9699, VerdictSlower},
		{0.90, 0.97, VerdictUnsure}, // holds the edge 0.97
		{0.96, 0.99, VerdictUnsure},
		{0.97, 1.03, VerdictSame},
		{0.99, 1.01, VerdictSame},
		{1.02, 1.05, VerdictUnsure},
		{1.0301, 1.2, VerdictFaster},
		{0.5, 1.5, VerdictUnsure}, // holds both edges
		{1.01, 0.99, VerdictUnsure},
		{math.NaN(), 1, VerdictUnsure},
	}
	for _, tc := range cases {
		if got := g.Verdict(Interval{tc.lo, tc.hi}, true); got != tc.want {
			t.Errorf("[%g, %g]: %s, want %s", tc.lo, tc.hi, got, tc.want)
		}
	}
	if got := g.Verdict(Interval{0.5, 0.6}, false); got != VerdictUnsure {
		t.Errorf("no interval: %s, want UNSURE", got)
	}
	for _, bad := range []Gate{{Threshold: 0, Confidence: 0.95, Resamples: 2000}, {Threshold: 1, Confidence: 0.95, Resamples: 2000},
		{Threshold: 0.03, Confidence: 1, Resamples: 2000}, {Threshold: math.NaN(), Confidence: 0.95, Resamples: 2000},
		{Threshold: 0.03, Confidence: 0.95, Resamples: 10}} {
		if bad.Validate() == nil {
			t.Errorf("gate %+v accepted", bad)
		}
	}
}

// The bootstrap medians walk counts over the sorted samples; they must equal the type-7 median
// of each resample drawn and sorted the plain way, from the same random stream.
func TestBootstrapMediansMatchSortedResamples(t *testing.T) {
	g := DefaultGate
	g.Resamples = 200
	for _, n := range []int{1, 2, 3, 10, 11, 64} {
		src := rand.New(rand.NewPCG(7, uint64(n)))
		samples := make([]float64, n)
		for i := range samples {
			samples[i] = 1e-4 * (1 + 0.1*src.NormFloat64())
		}
		got := g.bootstrapMedians(samples, "key", 1)
		sorted := slices.Clone(samples)
		slices.Sort(sorted)
		// The same stream as bootstrapMedians seeds.
		ref := g.bootstrapStream("key", 1)
		resample := make([]float64, n)
		for r := range got {
			for i := range resample {
				resample[i] = sorted[ref.next(n)]
			}
			slices.Sort(resample)
			if want := timing.Quantile(resample, 0.5); got[r] != want {
				t.Fatalf("n=%d resample %d: median %g, want %g", n, r, got[r], want)
			}
		}
	}
}
