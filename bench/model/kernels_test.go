package model

import (
	"math"
	"testing"
)

func TestKernelsLlama(t *testing.T) {
	s := mustLookup(t, "llama3-8b")
	got := s.Kernels(4, 1024)
	want := []Kernel{
		// weights 6144x4096 bf16 + X 4x4096 + Y 4x6144
		{Name: "qkv_proj", Kind: "linear", Repeat: 32, M: 4, N: 6144, K: 4096,
			Bytes: 2 * (6144*4096 + 4*4096 + 4*6144), FLOPs: 2 * 4 * 6144 * 4096},
		// K and V of 4 sequences x 1024 tokens x 8 heads x 128, + Q and O of 32 heads
		{Name: "attention", Kind: "attention", Repeat: 32, Batch: 4, QHeads: 32, KVHeads: 8, HeadDim: 128, Context: 1024,
			Bytes: 4*1024*2*8*128*2 + 2*4*32*128*2, FLOPs: 4 * 4 * 32 * 128 * 1024},
		{Name: "o_proj", Kind: "linear", Repeat: 32, M: 4, N: 4096, K: 4096,
			Bytes: 2 * (4096*4096 + 4*4096 + 4*4096), FLOPs: 2 * 4 * 4096 * 4096},
		{Name: "gate_up_proj", Kind: "linear", Repeat: 32, M: 4, N: 28672, K: 4096,
			Bytes: 2 * (28672*4096 + 4*4096 + 4*28672), FLOPs: 2 * 4 * 28672 * 4096},
		{Name: "down_proj", Kind: "linear", Repeat: 32, M: 4, N: 4096, K: 14336,
			Bytes: 2 * (4096*14336 + 4*14336 + 4*4096), FLOPs: 2 * 4 * 4096 * 14336},
		{Name: "lm_head", Kind: "linear", Repeat: 1, M: 4, N: 128256, K: 4096,
			Bytes: 2 * (128256*4096 + 4*4096 + 4*128256), FLOPs: 2 * 4 * 128256 * 4096},
	}
	if len(got) != len(want) {
		t.Fatalf("Kernels = %+v\nwant %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("kernel %d = %+v\nwant       %+v", i, got[i], want[i])
		}
	}
}

func TestKernelsShapes(t *testing.T) {
	tests := []struct {
		desc    string
		model   string
		batch   int
		name    string
		repeat  float64
		m, n, k int
	}{
		{"Qwen2.5-7B fused QKV", "qwen2.5-7b", 1, "qkv_proj", 28, 1, (28 + 8) * 128, 3584},
		{"Gemma-7B o_proj reads 16 x 256", "gemma-7b", 1, "o_proj", 28, 1, 3072, 4096},
		{"Mixtral batch 1: 2 experts of 1 token", "mixtral-8x7b", 1, "expert_gate_up", 64, 1, 28672, 4096},
		{"Mixtral batch 2: 3.5 experts of 4/3.5 tokens", "mixtral-8x7b", 2, "expert_down", 32 * 3.5, 2, 4096, 14336},
		{"Mixtral router", "mixtral-8x7b", 16, "router", 32, 16, 8, 4096},
		{"Mixtral batch 256: 8 experts of 64 tokens", "mixtral-8x7b", 256, "expert_gate_up", 32 * 8, 64, 28672, 4096},
		{"batch 0 counts as 1", "llama3-8b", 0, "lm_head", 1, 1, 128256, 4096},
	}
	for _, tc := range tests {
		var found *Kernel
		for _, k := range mustLookup(t, tc.model).Kernels(tc.batch, 512) {
			if k.Name == tc.name {
				found = &k
			}
		}
		if found == nil {
			t.Errorf("%s: no %s kernel", tc.desc, tc.name)
			continue
		}
		if !near(found.Repeat, tc.repeat, 1e-9) || found.M != tc.m || found.N != tc.n || found.K != tc.k {
			t.Errorf("%s: %s repeat %g M %d N %d K %d; want %g, %d, %d, %d",
				tc.desc, tc.name, found.Repeat, found.M, found.N, found.K, tc.repeat, tc.m, tc.n, tc.k)
		}
	}
}

// The kernels of a step must add up to the step's own totals, for every preset.
func TestKernelsSumToStep(t *testing.T) {
	for _, s := range Presets() {
		for _, batch := range []int{1, 3, 64} {
			const context = 2048
			var flops, weightBytes float64
			act := s.ActivationDType().Bytes()
			for _, k := range s.Kernels(batch, context) {
				flops += k.Repeat * k.FLOPs
				switch k.Kind {
				case KindLinear:
					weightBytes += k.Repeat * (k.Bytes - act*float64(k.M*k.K+k.M*k.N))
				case KindLinearGrouped:
					weightBytes += k.Repeat * (k.Bytes - act*float64(k.Groups*(k.M*k.K+k.M*k.N)))
				}
			}
			stepFLOPs := s.FLOPsPerStep(batch, context)
			if !s.IsMoE() && !near(flops, stepFLOPs, 1e-12) {
				t.Errorf("%s batch %d: kernels do %g FLOPs, the step %g", s.Name, batch, flops, stepFLOPs)
			}
			// MoE rounds tokens per expert up: at most one extra token per touched expert.
			oneToken := 2 * float64(s.MoELayers()) * s.ExpectedDistinctExperts(batch) * float64(sumParams(s.mlpMatrices(s.ExpertFFN)))
			if s.IsMoE() && (flops < stepFLOPs*(1-1e-12) || flops > stepFLOPs+oneToken) {
				t.Errorf("%s batch %d: kernels do %g FLOPs, the step %g", s.Name, batch, flops, stepFLOPs)
			}
			// What no kernel here reads: the embedding rows (untied), the norms, the QK-norm
			// weights and MLA's norms; the sinks are the attention kernel's.
			rest := float64(int64(s.Layers)*s.normParams() + s.finalNormParams())
			if s.QKNorm == "rms" {
				rest += float64(s.Layers * 2 * s.HeadDim)
			}
			if s.IsMLA() {
				rest += float64(s.Layers * (s.QLoRARank + s.KVLoRARank))
			}
			if s.AttentionSinks {
				rest += float64(s.Layers * s.QHeads)
			}
			if !s.TiedEmbeddings {
				rest += float64(batch * s.Hidden)
			}
			if want := s.WeightBytesPerStep(batch); !near(weightBytes+rest*s.WeightDType.Bytes(), want, 1e-9) {
				t.Errorf("%s batch %d: kernels read %g weight bytes + %g, the step %g", s.Name, batch, weightBytes, rest, want)
			}
		}
	}
}

func TestActivationDType(t *testing.T) {
	s := mustLookup(t, "llama3-8b")
	for weights, want := range map[DType]DType{BF16: BF16, FP16: FP16, FP32: FP32, FP8: BF16, INT8: BF16} {
		s.WeightDType = weights
		if got := s.ActivationDType(); got != want {
			t.Errorf("weights %s: activations %s, want %s", weights, got, want)
		}
	}
	s.WeightDType = FP8
	qkv := s.Kernels(1, 0)[0]
	if want := float64(6144*4096) + 2*(4096+6144); qkv.Bytes != want || math.IsNaN(qkv.Bytes) {
		t.Errorf("fp8 qkv_proj bytes = %g, want %g", qkv.Bytes, want)
	}
}
