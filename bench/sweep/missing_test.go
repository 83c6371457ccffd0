package sweep

import (
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
)

// MissingKernel names what the library lacks: nothing for a bf16 model, the weight dtype for
// an fp8 one (every linear, the LM head too), the KV dtype for an fp8 cache; MissingKernels
// names each once with its calls.
func TestMissingKernel(t *testing.T) {
	bf16 := tinyModel()
	for _, k := range bf16.Kernels(4, 128) {
		if why := MissingKernel(k, bf16); why != "" {
			t.Errorf("bf16 %s: %q", k.Name, why)
		}
	}
	fp8 := tinyModel()
	fp8.WeightDType = model.FP8
	fp8kv := tinyModel()
	fp8kv.KVDType = model.FP8
	for _, k := range fp8.Kernels(4, 128) {
		if why := MissingKernel(k, fp8); (k.Kind == model.KindLinear) != (why == "linear with fp8 weights") {
			t.Errorf("fp8 weights, %s (%s): %q", k.Name, k.Kind, why)
		}
	}
	for _, k := range fp8kv.Kernels(4, 128) {
		if why := MissingKernel(k, fp8kv); (k.Kind == model.KindAttention) != (why == "attention over a fp8 KV cache") {
			t.Errorf("fp8 cache, %s (%s): %q", k.Name, k.Kind, why)
		}
	}
	why := MissingKernels(fp8.Kernels(4, 128), fp8)
	if !strings.HasPrefix(why, "the kernel library has no kernel yet for linear with fp8 weights (qkv_proj, ") || strings.Count(why, "fp8") != 1 || !strings.Contains(why, "lm_head") {
		t.Errorf("MissingKernels: %q", why)
	}
	if why := MissingKernels(bf16.Kernels(4, 128), bf16); why != "" {
		t.Errorf("bf16: %q", why)
	}
}
