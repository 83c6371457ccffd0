package sweep

import (
	"context"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/cgo"
)

// A step that needs a kernel the library lacks (MLA attention of other widths than the kernel's,
// fp8 weights with block scales other than 128 x 128) is skipped with a reason naming it, and nothing of it is measured; attention with
// sinks and MXFP4 weights run.
func TestRunSkipsKernelVariantsTheLibraryLacks(t *testing.T) {
	mla := tinyModel()
	mla.Name, mla.Family = "tiny-mla", "deepseek_v3"
	mla.KVHeads, mla.HeadDim = mla.QHeads, 96
	mla.QLoRARank, mla.KVLoRARank, mla.RoPEHeadDim, mla.VHeadDim = 64, 64, 32, 64
	block := tinyModel()
	block.Name, block.Quant = "tiny-fp8-block", &model.Quantization{Method: model.QuantFP8, Bits: 8, BlockN: 64, BlockK: 64}
	want := map[string]string{
		"tiny-mla":       "no kernel yet for MLA attention (QK width 96, V width 64) (attention);",
		"tiny-fp8-block": "no kernel yet for linear with fp8 (64x64 block scales) weights (qkv_proj, o_proj, gate_up_proj, down_proj)",
	}
	clock := newClock()
	f := newFake(clock)
	dir := t.TempDir()
	axes := Axes{Models: []model.Shape{mla, block}, Batches: []int{1, 2}, Contexts: []int{128}}
	if err := axes.Validate(); err != nil {
		t.Fatal(err)
	}
	r, prior := newRun(t, dir, f, clock, axes)
	res, err := r.Run(context.Background(), axes.Configs(), prior)
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != 4 || res.OK != 0 {
		t.Errorf("result %+v: want all 4 steps skipped", res)
	}
	if n := f.count("linear") + f.count("attention"); n != 0 {
		t.Errorf("%d kernels measured for steps that were skipped", n)
	}
	p, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range p.Records {
		if rec.Status != measure.StatusSkipped || !strings.Contains(rec.Reason, want[rec.Model]) {
			t.Errorf("%s: %s %q, want skipped: %q", rec.Key, rec.Status, rec.Reason, want[rec.Model])
		}
	}
}

// MXFP4, fp8 (per channel and DeepSeek-V3's 128 x 128 blocks), AWQ and GPTQ projections run on the quantized kernels: the sweep's
// linear specs carry the format and its group.
func TestQuantizedProjectionsRun(t *testing.T) {
	for _, tc := range []struct {
		q     model.Quantization
		f     cgo.WeightFormat
		group int
	}{
		{model.Quantization{Method: model.QuantMXFP4, Bits: 4, GroupSize: 32}, cgo.WeightMXFP4, 32},
		{model.Quantization{Method: model.QuantFP8, Bits: 8}, cgo.WeightFP8, 0},
		{model.Quantization{Method: model.QuantFP8, Bits: 8, BlockN: 128, BlockK: 128}, cgo.WeightFP8Block, 0},
		{model.Quantization{Method: model.QuantAWQ, Bits: 4, GroupSize: 128}, cgo.WeightINT4ZeroPt, 128},
		{model.Quantization{Method: model.QuantGPTQ, Bits: 4, GroupSize: 64}, cgo.WeightINT4, 64},
	} {
		s := tinyModel()
		s.Quant = &tc.q
		quantized := 0
		for _, k := range s.Kernels(4, 128) {
			if why := MissingKernel(k, s); why != "" {
				t.Errorf("%s: %s is missing: %s", tc.q.Method, k.Name, why)
			}
			spec := SpecOf(k, s)
			if k.WeightFormat != "" {
				quantized++
				if spec.Linear == nil || spec.Linear.WeightFormat != tc.f || spec.Linear.GroupSize != tc.group {
					t.Errorf("%s: %s measured as %+v, want format %v group %d", tc.q.Method, k.Name, spec.Linear, tc.f, tc.group)
				}
			}
		}
		if quantized == 0 {
			t.Errorf("%s: no quantized projection in the step", tc.q.Method)
		}
	}
	// A group that does not divide K is named, not run.
	s := tinyModel()
	s.Quant = &model.Quantization{Method: model.QuantGPTQ, Bits: 4, GroupSize: 96}
	for _, k := range s.Kernels(1, 128) {
		if k.WeightFormat != "" && !strings.Contains(MissingKernel(k, s), "linear with") {
			t.Errorf("gptq group 96: %s: %q, want it named missing", k.Name, MissingKernel(k, s))
		}
	}
}

// The small ops follow the newer architectures: MLA appends 576 values a layer and rotates
// only the rotary parts, QK-norm reads and writes every q and k head, Llama 4's no-rotary
// layers rotate nothing, and a MoE's dense layers and shared experts have their activations.
func TestSmallOpsNewArchitectures(t *testing.T) {
	ops := func(name string, batch int) map[string]SmallOp {
		s, err := model.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]SmallOp{}
		for _, op := range SmallOps(s, batch) {
			byName[op.Name] = op
		}
		return byName
	}
	ds := ops("deepseek-v3", 2)
	if got, want := ds["kv_append"].Bytes, 2*576*2.0+2*576*2; got != want {
		t.Errorf("DeepSeek-V3 kv_append %g bytes, want %g (latent 512 + rotary key 64)", got, want)
	}
	if got, want := ds["rotary"].Bytes, 2*2*129*64*2.0; got != want {
		t.Errorf("DeepSeek-V3 rotary %g bytes, want %g (128 query heads' and the key's 64 rotary values)", got, want)
	}
	if n := ds["latent_norm"]; n.Repeat != 61 || n.Bytes != 2*2*(1536+512)*2+(1536+512)*2 {
		t.Errorf("DeepSeek-V3 latent_norm %+v", n)
	}
	if ds["mlp_activation"].Repeat != 3 || ds["shared_expert_activation"].Repeat != 58 || ds["router_topk"].Repeat != 58 {
		t.Errorf("DeepSeek-V3 activations: dense %+v, shared %+v, router %+v", ds["mlp_activation"], ds["shared_expert_activation"], ds["router_topk"])
	}
	q := ops("qwen3-8b", 4)
	if n := q["qk_norm"]; n.Repeat != 36 || n.Bytes != 2*4*(32+8)*128*2+2*128*2 {
		t.Errorf("Qwen3-8B qk_norm %+v", n)
	}
	if _, ok := ops("llama3-8b", 4)["qk_norm"]; ok {
		t.Error("Llama-3-8B has no QK-norm")
	}
	if r := ops("llama-4-scout", 1)["rotary"]; r.Repeat != 36 {
		t.Errorf("Llama-4-Scout rotates in %g layers, want 36 of 48", r.Repeat)
	}
}

// A model with sinks and sliding layers (gpt-oss's attention) measures its attention with the
// sinks, and its sliding layers' attention over the whole cache with their window, not over a
// cache cut to the window.
func TestRunMeasuresSinksAndSpans(t *testing.T) {
	m := tinyModel()
	m.Name, m.AttentionSinks = "tiny-sinks", true
	m.SlidingLayers, m.SlidingWindow = m.Layers/2, 32
	clock := newClock()
	f := newFake(clock)
	axes := Axes{Models: []model.Shape{m}, Batches: []int{2}, Contexts: []int{128}}
	if err := axes.Validate(); err != nil {
		t.Fatal(err)
	}
	r, prior := newRun(t, t.TempDir(), f, clock, axes)
	res, err := r.Run(context.Background(), axes.Configs(), prior)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 1 || res.Skipped != 0 {
		t.Errorf("result %+v: want the step measured", res)
	}
	full, local := 0, 0
	for key, n := range f.calls {
		switch {
		case strings.HasPrefix(key, "attention ") && strings.Contains(key, "ctx=128 window=32 sinks"):
			local += n
		case strings.HasPrefix(key, "attention ") && strings.HasSuffix(key, "ctx=128 sinks"):
			full += n
		case strings.HasPrefix(key, "attention "):
			t.Errorf("attention measured as %q: want ctx=128 with sinks, and window=32 for the sliding layers", key)
		}
	}
	if full == 0 || local == 0 {
		t.Errorf("measured %v: want the full layers' and the sliding layers' attention, both with sinks", f.calls)
	}
}
