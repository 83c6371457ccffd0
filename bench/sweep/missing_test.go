package sweep

import (
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/cgo"
)

// MissingKernel names what the library lacks: nothing for a bf16 model, the weight dtype for
// an fp32 one (every linear, the LM head too), nothing for fp8 weights (the projections read
// per output channel, the LM head in bf16) or an fp8 cache; MissingKernels names each once
// with its calls.
func TestMissingKernel(t *testing.T) {
	bf16 := tinyModel()
	for _, k := range bf16.Kernels(4, 128) {
		if why := MissingKernel(k, bf16); why != "" {
			t.Errorf("bf16 %s: %q", k.Name, why)
		}
	}
	fp32 := tinyModel()
	fp32.WeightDType = model.FP32
	fp8 := tinyModel()
	fp8.WeightDType = model.FP8
	fp8kv := tinyModel()
	fp8kv.KVDType = model.FP8
	for _, k := range fp32.Kernels(4, 128) {
		if why := MissingKernel(k, fp32); (k.Kind == model.KindLinear) != (why == "linear with fp32 weights") {
			t.Errorf("fp32 weights, %s (%s): %q", k.Name, k.Kind, why)
		}
	}
	for _, k := range fp8.Kernels(4, 128) {
		if why := MissingKernel(k, fp8); why != "" {
			t.Errorf("fp8 weights, %s (%s): %q", k.Name, k.Kind, why)
		}
		if spec := SpecOf(k, fp8); k.Kind == model.KindLinear {
			want := cgo.WeightFP8
			if k.Name == "lm_head" {
				want = cgo.WeightDense
			}
			if spec.Linear == nil || spec.Linear.WeightFormat != want || spec.Linear.DType != cgo.DTypeBF16 {
				t.Errorf("fp8 weights, %s: spec %+v, want %v weights beside bf16", k.Name, spec, want)
			}
		}
	}
	// an fp8 cache runs: its attention spec reads e4m3 codes beside bf16 activations
	for _, k := range fp8kv.Kernels(4, 128) {
		if why := MissingKernel(k, fp8kv); why != "" {
			t.Errorf("fp8 cache, %s (%s): %q", k.Name, k.Kind, why)
		}
		if spec := SpecOf(k, fp8kv); k.Kind == model.KindAttention &&
			(spec.Attention == nil || spec.Attention.KVDType != cgo.DTypeFP8E4M3 || spec.Attention.DType != cgo.DTypeBF16) {
			t.Errorf("fp8 cache, %s: spec %+v", k.Name, spec)
		}
	}
	why := MissingKernels(fp32.Kernels(4, 128), fp32)
	if !strings.HasPrefix(why, "the kernel library has no kernel yet for linear with fp32 weights (qkv_proj, ") || strings.Count(why, "fp32") != 1 || !strings.Contains(why, "lm_head") {
		t.Errorf("MissingKernels: %q", why)
	}
	if why := MissingKernels(bf16.Kernels(4, 128), bf16); why != "" {
		t.Errorf("bf16: %q", why)
	}

	// DeepSeek-V3 and Kimi-K2: the MLA attention runs (its spec is an MLA one); their grouped
	// linears (the absorbed projections, the experts) are what the library still lacks.
	for _, name := range []string{"DeepSeek-V3", "Kimi-K2"} {
		s, err := model.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		mla := 0
		for _, k := range s.Kernels(4, 4096) {
			if k.Kind != model.KindAttentionMLA {
				continue
			}
			mla++
			if why := MissingKernel(k, s); why != "" {
				t.Errorf("%s %s: %q", name, k.Name, why)
			}
			if spec := SpecOf(k, s); spec.Kind != "attention_mla" || spec.MLA == nil || spec.MLA.QHeads != s.QHeads || spec.MLA.Scale != MLAScale(s) {
				t.Errorf("%s %s: spec %+v", name, k.Name, spec)
			}
		}
		if why := MissingKernels(s.Kernels(4, 4096), s); mla == 0 || strings.Contains(why, "MLA") || !strings.Contains(why, "grouped linear") {
			t.Errorf("%s: %d MLA kernels; MissingKernels %q", name, mla, why)
		}
		// In bf16 the absorbed projections are db_grouped_linear's calls without offsets, laid
		// out as the step holds them.
		bf16 := s
		bf16.Quant = nil
		grouped := 0
		for _, k := range bf16.Kernels(4, 4096) {
			if k.Kind != model.KindLinearGrouped {
				continue
			}
			grouped++
			if why := MissingKernel(k, bf16); why != "" {
				t.Errorf("%s bf16 %s: %q", name, k.Name, why)
			}
			spec := SpecOf(k, bf16)
			g := spec.Grouped
			if spec.Kind != measure.KindLinearGrouped || g == nil || g.Groups != s.QHeads || g.Rows != 4 {
				t.Fatalf("%s bf16 %s: spec %+v", name, k.Name, spec)
			}
			switch k.Name {
			case "q_absorb":
				if g.N != 512 || g.K != 128 || g.XGroupStride != 192 || g.XRowStride != 192*s.QHeads || g.YGroupStride != 576 || g.YRowStride != 576*s.QHeads {
					t.Errorf("%s q_absorb %+v", name, *g)
				}
			case "v_absorb":
				if g.N != 128 || g.K != 512 || g.XGroupStride != 512 || g.XRowStride != 512*s.QHeads || g.YGroupStride != 128 || g.YRowStride != 128*s.QHeads {
					t.Errorf("%s v_absorb %+v", name, *g)
				}
			}
		}
		if why := MissingKernels(bf16.Kernels(4, 4096), bf16); grouped != 2 || strings.Contains(why, "grouped") {
			t.Errorf("%s bf16: %d grouped kernels; MissingKernels %q", name, grouped, why)
		}
		fp8 := s
		fp8.KVDType = model.FP8
		for _, k := range fp8.Kernels(4, 4096) {
			if why := MissingKernel(k, fp8); k.Kind == model.KindAttentionMLA && why != "MLA attention over a fp8 latent cache" {
				t.Errorf("%s, fp8 latent cache: %q", name, why)
			}
		}
	}
}
