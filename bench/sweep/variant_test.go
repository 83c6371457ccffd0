package sweep

import (
	"context"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
)

// A step that needs a kernel the library lacks (MLA attention, attention with sinks, MXFP4
// or fp8 weights) is skipped with a reason naming it, and nothing of it is measured.
func TestRunSkipsKernelVariantsTheLibraryLacks(t *testing.T) {
	mla := tinyModel()
	mla.Name, mla.Family = "tiny-mla", "deepseek_v3"
	mla.KVHeads, mla.HeadDim = mla.QHeads, 96
	mla.QLoRARank, mla.KVLoRARank, mla.RoPEHeadDim, mla.VHeadDim = 64, 64, 32, 64
	sinks := tinyModel()
	sinks.Name, sinks.AttentionSinks = "tiny-sinks", true
	mxfp4 := tinyModel()
	mxfp4.Name, mxfp4.Quant = "tiny-mxfp4", &model.Quantization{Method: model.QuantMXFP4, Bits: 4, GroupSize: 32}
	want := map[string]string{
		"tiny-mla":   "no kernel yet for grouped linear (q_absorb), MLA attention (QK width 96, V width 64) (attention), grouped linear (v_absorb)",
		"tiny-sinks": "no kernel yet for attention with sinks (attention)",
		"tiny-mxfp4": "no kernel yet for linear with mxfp4 (e2m1, one e8m0 scale per 32) weights (qkv_proj)",
	}
	clock := newClock()
	f := newFake(clock)
	dir := t.TempDir()
	axes := Axes{Models: []model.Shape{mla, sinks, mxfp4}, Batches: []int{1, 2}, Contexts: []int{128}}
	if err := axes.Validate(); err != nil {
		t.Fatal(err)
	}
	r, prior := newRun(t, dir, f, clock, axes)
	res, err := r.Run(context.Background(), axes.Configs(), prior)
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != 6 || res.OK != 0 {
		t.Errorf("result %+v: want all 6 steps skipped", res)
	}
	if n := f.count("linear") + f.count("attention"); n != 0 {
		t.Errorf("%d kernels measured for steps that were skipped", n)
	}
	p, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range p.Records {
		if rec.Status != StatusSkipped || !strings.Contains(rec.Reason, want[rec.Model]) {
			t.Errorf("%s: %s %q, want skipped: %q", rec.Key, rec.Status, rec.Reason, want[rec.Model])
		}
	}
}
