package plan

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/bench/sweep/sweeptest"
)

// handFrontier is measured at four batches, TP 2:
//
//	batch   per-request tok/s   per-server tok/s
//	1       100                 100
//	4       80                  320
//	16      50                  800
//	64      20                  1280
func handFrontier() Frontier {
	f := Frontier{Model: "hand", Context: 4096, TP: 2, Source: SourceMeasured}
	for _, k := range []struct {
		batch int
		rate  float64
	}{{1, 100}, {4, 80}, {16, 50}, {64, 20}} {
		f.Knots = append(f.Knots, Point{Batch: k.batch, PerRequestTokensPerSec: k.rate, PerServerTokensPerSec: float64(k.batch) * k.rate, Source: SourceMeasured})
	}
	return f
}

func near(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

// TestPlanByHand checks a plan against the arithmetic written out here.
//
// Target 60 tok/s per request: batch 4 gives 80 (meets), batch 16 gives 50 (misses), so the
// answer lies between them. In log batch and log rate the segment is r(b) = 80 (b/4)^k with
// k = ln(50/80) / ln(16/4) = -0.470004 / 1.386294 = -0.339036. r(b) = 60 at
// b = 4 * 0.75^(1/k) = 4 * exp(-0.287682 / -0.339036) = 4 * exp(0.848530) = 9.3452, so the
// largest whole batch is 9:
//
//	r(9)  = 80 * exp(-0.339036 * ln 2.25) = 80 * exp(-0.274935) = 60.774 tok/s (meets)
//	r(10) = 80 * exp(-0.339036 * ln 2.5)  = 80 * exp(-0.310656) = 58.639 tok/s (misses)
//	per-server at 9 = 9 * 60.774 = 546.96 tok/s
//
// Traffic 10 requests/s x 500 output tokens = 5000 tok/s. Headroom 0.2: each server serves
// 0.8 * 546.96 = 437.57 tok/s, so 5000 / 437.57 = 11.43 servers, rounded up to 12, of TP 2:
// 24 GPUs. At 2.50 per GPU-hour: 24 * 2.50 = 60.00 per hour for 5000 * 3600 = 18e6 tokens per
// hour, 60 / 18 = 3.3333 per million tokens; one server at full load: 2 * 2.50 / (546.96 *
// 3600) * 1e6 = 2.5393 per million.
//
// Neighbours: batch 4 (320 tok/s per server: 5000 / 256 = 19.53 -> 20 servers, 40 GPUs) and
// batch 16 (misses the target; 800 tok/s: 5000 / 640 = 7.81 -> 8 servers, 16 GPUs).
func TestPlanByHand(t *testing.T) {
	p, err := Make(handFrontier(), Request{MinRequestRate: 60, RequestsPerSec: 10, OutputTokens: 500, Headroom: 0.2, PricePerGPUHour: 2.5})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Chosen
	if c.Batch != 9 || c.Source != SourceInterpolated || !c.MeetsTarget || p.AtRangeEnd {
		t.Fatalf("chosen %+v (at range end %v), want interpolated batch 9 meeting the target", c, p.AtRangeEnd)
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"per-request tok/s at 9", c.PerRequestTokensPerSec, 60.774},
		{"per-server tok/s at 9", c.PerServerTokensPerSec, 546.96},
		{"demand tok/s", p.DemandTokensPerSec, 5000},
		{"servers", float64(c.Servers), 12},
		{"GPUs", float64(c.GPUs), 24},
		{"cost per million tokens", c.CostPerMillionTokens, 3.3333},
		{"full-load cost per million tokens", c.FullLoadCostPerMillionTokens, 2.5393},
	}
	for _, ck := range checks {
		if !near(ck.got, ck.want, 2e-4) {
			t.Errorf("%s = %.5g, want %.5g", ck.name, ck.got, ck.want)
		}
	}
	if next, _ := handFrontier().At(10); !near(next.PerRequestTokensPerSec, 58.639, 2e-4) || next.PerRequestTokensPerSec >= 60 {
		t.Errorf("batch 10: %.5g tok/s, want 58.639 (below the target)", next.PerRequestTokensPerSec)
	}
	if len(p.Neighbours) != 2 {
		t.Fatalf("neighbours %+v, want batches 4 and 16", p.Neighbours)
	}
	lo, hi := p.Neighbours[0], p.Neighbours[1]
	if lo.Batch != 4 || !lo.MeetsTarget || lo.Servers != 20 || lo.GPUs != 40 {
		t.Errorf("neighbour below: %+v, want batch 4, meets, 20 servers, 40 GPUs", lo)
	}
	if hi.Batch != 16 || hi.MeetsTarget || hi.Servers != 8 || hi.GPUs != 16 {
		t.Errorf("neighbour above: %+v, want batch 16, misses, 8 servers, 16 GPUs", hi)
	}
	if !strings.Contains(p.Method, "log batch") {
		t.Errorf("the method does not say how it interpolates: %q", p.Method)
	}
}

func TestPlanAtKnotsAndEnds(t *testing.T) {
	f := handFrontier()
	// Exactly a knot's rate: that knot, and its neighbours are the knots either side.
	p, err := Make(f, Request{MinRequestRate: 50, TokensPerSec: 800})
	if err != nil {
		t.Fatal(err)
	}
	if p.Chosen.Batch != 16 || p.Chosen.Source != SourceMeasured || p.Chosen.Servers != 1 || len(p.Neighbours) != 2 ||
		p.Neighbours[0].Batch != 4 || p.Neighbours[1].Batch != 64 {
		t.Errorf("target 50: chosen %+v, neighbours %+v", p.Chosen, p.Neighbours)
	}
	// Met at the largest batch measured: the plan stops there, not beyond.
	p, err = Make(f, Request{MinRequestRate: 15})
	if err != nil {
		t.Fatal(err)
	}
	if p.Chosen.Batch != 64 || !p.AtRangeEnd || len(p.Neighbours) != 1 || p.Neighbours[0].Batch != 16 || p.Chosen.GPUs != 0 {
		t.Errorf("target 15: chosen %+v, at range end %v, neighbours %+v", p.Chosen, p.AtRangeEnd, p.Neighbours)
	}
	// Beyond the best batch: refused, naming the best rate reachable.
	_, err = Make(f, Request{MinRequestRate: 120})
	var unreachable UnreachableError
	if !errors.As(err, &unreachable) || unreachable.Best.Batch != 1 ||
		!strings.Contains(err.Error(), "the best reachable is 100 at batch 1 (batches 1–64 measured)") {
		t.Errorf("target 120: %v", err)
	}
	// The frontier refuses to extrapolate either way.
	for _, b := range []int{0, 65, 1000} {
		if _, err := f.At(b); err == nil || !strings.Contains(err.Error(), "outside the batches 1–64 measured") {
			t.Errorf("At(%d): %v, want a refusal naming the range", b, err)
		}
	}
	// Between knots the interpolation is monotone and stays between the knots' rates.
	prev := math.Inf(1)
	for b := 1; b <= 64; b++ {
		pt, err := f.At(b)
		if err != nil {
			t.Fatal(err)
		}
		if pt.PerRequestTokensPerSec > prev || pt.PerRequestTokensPerSec < 20 || pt.PerRequestTokensPerSec > 100 {
			t.Fatalf("At(%d) = %g after %g: not monotone within [20, 100]", b, pt.PerRequestTokensPerSec, prev)
		}
		prev = pt.PerRequestTokensPerSec
	}
}

func TestRequestValidate(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		desc string
		r    Request
		want string
	}{
		{"zero target", Request{}, "minimum request rate 0"},
		{"negative target", Request{MinRequestRate: -5}, "minimum request rate -5"},
		{"NaN target", Request{MinRequestRate: nan}, "minimum request rate NaN"},
		{"infinite target", Request{MinRequestRate: math.Inf(1)}, "minimum request rate +Inf"},
		{"traffic twice", Request{MinRequestRate: 1, TokensPerSec: 100, RequestsPerSec: 1, OutputTokens: 10}, "traffic given twice"},
		{"requests without tokens", Request{MinRequestRate: 1, RequestsPerSec: 1}, "go together"},
		{"tokens without requests", Request{MinRequestRate: 1, OutputTokens: 100}, "go together"},
		{"negative requests", Request{MinRequestRate: 1, RequestsPerSec: -1, OutputTokens: 100}, "must be positive"},
		{"negative tokens/s", Request{MinRequestRate: 1, TokensPerSec: -1}, "tokens per second -1"},
		{"headroom 1", Request{MinRequestRate: 1, Headroom: 1}, "headroom 1"},
		{"negative headroom", Request{MinRequestRate: 1, Headroom: -0.1}, "headroom -0.1"},
		{"NaN headroom", Request{MinRequestRate: 1, Headroom: nan}, "headroom NaN"},
		{"negative price", Request{MinRequestRate: 1, PricePerGPUHour: -2}, "price per GPU-hour -2"},
	}
	for _, tc := range cases {
		if err := tc.r.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.desc, err, tc.want)
		}
		if _, err := Make(handFrontier(), tc.r); err == nil {
			t.Errorf("%s: Make accepted it", tc.desc)
		}
	}
}

func TestPredicted(t *testing.T) {
	s, err := model.Lookup("llama3-8b")
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := roofline.LookupGPU("h200")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Predicted(s, gpu, 8192, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	_, hi := f.Range()
	if want := roofline.MaxBatchThatFits(s, gpu.MemoryBytes, 8192, 0.1); hi != want {
		t.Errorf("range ends at %d, want the largest batch that fits, %d", hi, want)
	}
	p, err := Make(f, Request{MinRequestRate: 40, TokensPerSec: 1e5, PricePerGPUHour: 3})
	if err != nil {
		t.Fatal(err)
	}
	// The chosen batch meets the target and the next does not, by the bound itself.
	ceiling := roofline.DatasheetCeiling(gpu)
	at := roofline.StepBound(s, ceiling, p.Chosen.Batch, 8192)
	next := roofline.StepBound(s, ceiling, p.Chosen.Batch+1, 8192)
	if at.PerRequestTokensPerSec < 40 || next.PerRequestTokensPerSec >= 40 || p.Chosen.PerServerTokensPerSec != at.PerServerTokensPerSec {
		t.Errorf("chosen batch %d: %g tok/s, next %g: not the largest batch meeting 40", p.Chosen.Batch, at.PerRequestTokensPerSec, next.PerRequestTokensPerSec)
	}
	if want := int(math.Ceil(1e5 / at.PerServerTokensPerSec)); p.Chosen.GPUs != want {
		t.Errorf("%d GPUs, want %d", p.Chosen.GPUs, want)
	}
	if _, err := f.At(hi + 1); err == nil {
		t.Errorf("a predicted frontier answered past the batch that fits")
	}
	big, _ := model.Lookup("llama3-70b")
	if _, err := Predicted(big, gpu, 8192, 0.1); err == nil || !strings.Contains(err.Error(), "--tp") {
		t.Errorf("70B on one H200: %v, want a refusal suggesting --tp", err)
	}
}

func TestMeasured(t *testing.T) {
	s, err := model.Lookup("llama3-8b")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	r := sweeptest.Run{Card: "NVIDIA H200", Model: s, Batches: []int{1, 8, 64}, Contexts: []int{1024, 8192}, Noise: 0.003, Samples: 20,
		Fail: [][2]int{{64, 8192}}}
	if err := sweeptest.Write(dir, r); err != nil {
		t.Fatal(err)
	}
	run, err := sweep.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, notes, err := Measured(dir, run.Records, "NVIDIA H200", "", 8192)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Knots) != 2 || f.Knots[1].Batch != 8 || len(notes) != 1 || !strings.Contains(notes[0], "batch 64 is failed") {
		t.Errorf("knots %+v, notes %q: want batches 1 and 8, and batch 64 named as failed", f.Knots, notes)
	}
	for _, want := range run.Records {
		if want.Context == 8192 && want.Batch == 8 && f.Knots[1].PerRequestTokensPerSec != want.PerRequestTokensPerSec {
			t.Errorf("batch 8: %g tok/s, the record says %g", f.Knots[1].PerRequestTokensPerSec, want.PerRequestTokensPerSec)
		}
	}
	if f, _, err := Measured(dir, run.Records, "", "llama3-8b", 1024); err != nil || len(f.Knots) != 3 {
		t.Errorf("by preset name: %v, %+v", err, f.Knots)
	}
	bad := []struct {
		desc    string
		model   string
		context int
		want    string
	}{
		{"two contexts, none chosen", "", 0, "at 2 contexts (1024, 8192): choose one with --context"},
		{"a context not measured", "", 2048, "no configuration of Llama-3-8B measured ok at context 2048: it has contexts 1024, 8192"},
		{"a model not measured", "qwen2.5-7b", 1024, `no configuration of model "qwen2.5-7b" measured ok: it has Llama-3-8B`},
	}
	for _, tc := range bad {
		if _, _, err := Measured(dir, run.Records, "", tc.model, tc.context); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.desc, err, tc.want)
		}
	}
	if _, _, err := Measured(dir, nil, "", "", 0); err == nil || !strings.Contains(err.Error(), "no configuration measured ok") {
		t.Errorf("no records: %v", err)
	}
}
