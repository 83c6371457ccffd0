package model

import (
	"math"
	"testing"
)

// The expected values below are worked by hand from the shapes, e.g. for
// Llama-3-8B (hidden 4096, 32 layers, 32/8 heads of 128, FFN 14336, vocab 128256):
//   attention weights per layer = 4096*(32+16)*128 + 32*128*4096 = 41,943,040
//   MLP weights per layer       = 3*4096*14336                    = 176,160,768
//   norms per layer             = 2*4096                          = 8,192
//   embedding = LM head         = 128256*4096                     = 525,336,576
//   total = 32*218,112,000 + 2*525,336,576 + 4096 (final norm)    = 8,030,261,248

func near(got, want, relTol float64) bool {
	return math.Abs(got-want) <= relTol*math.Abs(want)
}

func TestParams(t *testing.T) {
	tests := []struct {
		desc          string
		model         string
		total, active int64
	}{
		{"Llama-3-8B, untied", "llama3-8b", 8_030_261_248, 8_030_261_248},
		{"Llama-3.2-1B, tied: one 128256x2048 table", "llama3.2-1b", 1_235_814_400, 1_235_814_400},
		{"Qwen2.5-7B, QKV biases 28 x (3584+2*512)", "qwen2.5-7b", 7_615_616_512, 7_615_616_512},
		{"Gemma-7B, 16 x 256 heads on 3072", "gemma-7b", 8_537_680_896, 8_537_680_896},
		{"Gemma-2-9B, 4 norms per layer", "gemma-2-9b", 9_241_705_984, 9_241_705_984},
		{"Phi-3-mini, MHA", "phi-3-mini", 3_821_079_552, 3_821_079_552},
		{"Mixtral-8x7B: 6 of 8 experts idle per token", "mixtral-8x7b", 46_702_792_704, 12_879_925_248},
	}
	for _, tc := range tests {
		s := mustLookup(t, tc.model)
		if got := s.ParamsTotal(); got != tc.total {
			t.Errorf("%s: ParamsTotal = %d, want %d", tc.desc, got, tc.total)
		}
		if got := s.ParamsActive(); got != tc.active {
			t.Errorf("%s: ParamsActive = %d, want %d", tc.desc, got, tc.active)
		}
		if got, want := s.WeightBytesTotal(), 2*float64(tc.total); got != want {
			t.Errorf("%s: WeightBytesTotal = %g, want %g (bf16)", tc.desc, got, want)
		}
	}
}

func TestExpectedDistinctExperts(t *testing.T) {
	mixtral := mustLookup(t, "mixtral-8x7b") // 8 experts, top 2
	tests := []struct {
		desc  string
		batch int
		want  float64
	}{
		{"one token touches exactly k", 1, 2},
		{"two tokens: 8 * (1 - 0.75^2)", 2, 3.5},
		{"no tokens", 0, 0},
		{"a large batch touches them all", 1000, 8},
	}
	for _, tc := range tests {
		if got := mixtral.ExpectedDistinctExperts(tc.batch); !near(got, tc.want, 1e-12) {
			t.Errorf("%s: ExpectedDistinctExperts(%d) = %g, want %g", tc.desc, tc.batch, got, tc.want)
		}
	}
	prev := 0.0
	for b := 1; b <= 64; b++ {
		got := mixtral.ExpectedDistinctExperts(b)
		if got < prev || got > 8 {
			t.Fatalf("ExpectedDistinctExperts(%d) = %g after %g: want non-decreasing, at most 8", b, got, prev)
		}
		prev = got
	}
	if got := mustLookup(t, "llama3-8b").ExpectedDistinctExperts(8); got != 0 {
		t.Errorf("dense model: ExpectedDistinctExperts = %g, want 0", got)
	}
}

func TestWeightBytesPerStep(t *testing.T) {
	tests := []struct {
		desc  string
		model string
		batch int
		want  float64
	}{
		// Everything but the embedding table, plus one 4096-wide row of it, in bf16.
		{"Llama-3-8B batch 1", "llama3-8b", 1, 2 * (8_030_261_248 - 525_336_576 + 4096)},
		{"Llama-3-8B batch 64: 64 embedding rows", "llama3-8b", 64, 2 * (8_030_261_248 - 525_336_576 + 64*4096)},
		// Tied: the LM head reads the whole table, which holds the batch's rows.
		{"Gemma-7B batch 1: tied", "gemma-7b", 1, 2 * 8_537_680_896},
		{"Gemma-7B batch 256: tied", "gemma-7b", 256, 2 * 8_537_680_896},
		// Per layer: 41,984,000 (attention, router, norms) + touched experts x 176,160,768;
		// plus the LM head, B embedding rows and the final norm.
		{"Mixtral batch 1: 2 experts", "mixtral-8x7b", 1, 2 * (32*(41_984_000+2*176_160_768) + 131_072_000 + 4096 + 4096)},
		{"Mixtral batch 2: 3.5 experts", "mixtral-8x7b", 2, 2 * (32*(41_984_000+3.5*176_160_768) + 131_072_000 + 2*4096 + 4096)},
	}
	for _, tc := range tests {
		if got := mustLookup(t, tc.model).WeightBytesPerStep(tc.batch); !near(got, tc.want, 1e-12) {
			t.Errorf("%s: WeightBytesPerStep = %.0f, want %.0f", tc.desc, got, tc.want)
		}
	}

	llama := mustLookup(t, "llama3-8b")
	if got := llama.WeightBytesPerStep(1); got < 15.0e9 || got > 16.1e9 {
		t.Errorf("Llama-3-8B bf16 batch 1 reads %.3g B, want 15.0-16.1 GB", got)
	}
	mixtral := mustLookup(t, "mixtral-8x7b")
	// A batch of 4096 touches every expert: all weights but the embedding
	// table's unread rows.
	all := mixtral.WeightBytesTotal() - 2*(131_072_000-4096*4096)
	if got := mixtral.WeightBytesPerStep(4096); !near(got, all, 1e-9) {
		t.Errorf("Mixtral at batch 4096 reads %.6g B, want %.6g B", got, all)
	}
}

func TestKVBytes(t *testing.T) {
	llama := mustLookup(t, "llama3-8b")
	if got, want := llama.KVBytesPerToken(), float64(2*32*8*128*2); got != want || want != 131072 {
		t.Errorf("Llama-3-8B KV bytes per token = %g, want %g", got, want)
	}
	if got := llama.KVBytesPerSequence(8192); got != 8192*131072 {
		t.Errorf("Llama-3-8B KV bytes at 8192 = %g, want 1 GiB", got)
	}
	llama.KVDType = FP8
	if got := llama.KVBytesPerToken(); got != 65536 {
		t.Errorf("fp8 KV bytes per token = %g, want 65536", got)
	}
	// Gemma-7B: MHA with 256-wide heads, 2*28*16*256*2.
	if got := mustLookup(t, "gemma-7b").KVBytesPerToken(); got != 458752 {
		t.Errorf("Gemma-7B KV bytes per token = %g, want 458752", got)
	}
}

func TestFLOPsPerStep(t *testing.T) {
	// Llama-3-8B linear MACs per token: 32*(41,943,040 + 176,160,768) + 525,336,576 = 7,504,658,432.
	const llamaMACs = 7_504_658_432
	tests := []struct {
		desc           string
		model          string
		batch, context int
		want           float64
	}{
		{"Llama-3-8B batch 1, empty cache", "llama3-8b", 1, 0, 2 * llamaMACs},
		// attention: 32 layers * 4 * 8 * 32 heads * 128 * 4096
		{"Llama-3-8B batch 8, context 4096", "llama3-8b", 8, 4096, 8*2*llamaMACs + 32*4*8*32*128*4096},
		// Mixtral per token: 32*(41,943,040 + 32,768 router + 2*176,160,768) + 131,072,000.
		{"Mixtral batch 1: k experts per token", "mixtral-8x7b", 1, 0, 2 * (32*(41_943_040+32_768+2*176_160_768) + 131_072_000)},
		{"no tokens", "llama3-8b", 0, 4096, 0},
	}
	for _, tc := range tests {
		if got := mustLookup(t, tc.model).FLOPsPerStep(tc.batch, tc.context); !near(got, tc.want, 1e-12) {
			t.Errorf("%s: FLOPsPerStep = %.0f, want %.0f", tc.desc, got, tc.want)
		}
	}
}
