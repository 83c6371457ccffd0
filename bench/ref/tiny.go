package ref

import "github.com/decodebench/decodebench/bench/model"

// TinyModel is a small model of one shape family with the step it is run at: small enough
// for the emulator and the float64 forward pass, shaped as the kernels take it (hidden <= 256,
// a head dim the attention kernels are compiled for, every row length a multiple of 8) and with
// a context longer than its sliding window or chunk, so that the span matters.
type TinyModel struct {
	Shape                 model.Shape
	Batch, Context, Steps int
}

func tinyShape(family, name string, hidden, ffn, layers, qHeads, kvHeads, headDim, vocab int, tied bool) model.Shape {
	return model.Shape{Name: name, Family: family, Hidden: hidden, FFN: ffn, Layers: layers,
		QHeads: qHeads, KVHeads: kvHeads, HeadDim: headDim, Vocab: vocab, TiedEmbeddings: tied,
		GatedMLP: true, WeightDType: model.BF16, KVDType: model.BF16, TP: 1, Source: "tiny"}
}

// TinyModels lists the tiny models the step is checked on, one or more features each:
// several layers, GQA with a group of 3, multi-query, vocabularies that are not powers of two,
// tied and untied embeddings, QKV / output / MLP / LM-head biases, QK-norm, partial rotary,
// layers without rotary, sliding windows and chunks shorter than the context, attention
// sinks, Gemma's scaled embedding, unit-offset norms, four norms a layer and GeLU-tanh,
// gpt-oss's clamped SwiGLU, mixtures of experts routed as Mixtral, Qwen3-MoE (with and
// without norm_topk_prob), gpt-oss, DeepSeek-V3 (sigmoid, correction bias, groups, scaling)
// and Llama 4 (sigmoid on the expert's input) do, with shared experts and dense first layers,
// and multi-head latent attention (with and without q_lora_rank, dense and MoE).
func TinyModels() []TinyModel {
	var ms []TinyModel
	add := func(s model.Shape, batch, context, steps int) {
		ms = append(ms, TinyModel{Shape: s, Batch: batch, Context: context, Steps: steps})
	}

	// Llama: 4 layers, GQA of 6 query heads over 2 KV heads (group 3), untied, vocab 200.
	add(tinyShape("llama", "tiny-llama-gqa3", 128, 256, 4, 6, 2, 64, 200, false), 3, 21, 4)

	// Multi-query (one KV head), tied embeddings, head dim 80, vocab 152.
	add(tinyShape("llama", "tiny-llama-mqa-tied", 96, 192, 2, 4, 1, 80, 152, true), 2, 13, 4)

	// Qwen2: QKV biases, head dim 96, untied.
	add(tinyShape("qwen2", "tiny-qwen2-bias", 128, 256, 2, 4, 2, 96, 248, false), 3, 9, 4)

	// Mistral: a sliding window of 8 in every layer, shorter than the context of 19.
	s := tinyShape("mistral", "tiny-mistral-window", 128, 256, 2, 2, 1, 128, 136, false)
	s.SlidingWindow, s.SlidingLayers = 8, 2
	add(s, 2, 19, 4)

	// Mixtral: every layer routes to the top 2 of 4 experts, renormalised.
	s = tinyShape("mixtral", "tiny-mixtral-top2of4", 128, 0, 2, 4, 2, 64, 200, false)
	s.Experts, s.ExpertsPerToken, s.ExpertFFN = 4, 2, 128
	add(s, 3, 11, 4)

	// Qwen3: QK-norm (weighted RMSNorm on every q and k head), tied.
	s = tinyShape("qwen3", "tiny-qwen3-qknorm", 128, 256, 2, 4, 2, 128, 184, true)
	s.QKNorm = "rms"
	add(s, 2, 10, 4)

	// Qwen3-MoE: QK-norm, top 2 of 8 experts.
	s = tinyShape("qwen3_moe", "tiny-qwen3-moe", 128, 0, 2, 4, 2, 64, 200, false)
	s.QKNorm, s.Experts, s.ExpertsPerToken, s.ExpertFFN = "rms", 8, 2, 64
	add(s, 3, 9, 3)

	// Gemma 3: embedding times sqrt(256) = 16, unit-offset norms, four norms a layer, GeLU-tanh,
	// QK-norm, tied; 2 of 3 layers slide over 6 tokens.
	s = tinyShape("gemma3_text", "tiny-gemma3", 256, 256, 3, 2, 1, 256, 264, true)
	s.QKNorm, s.SlidingWindow, s.SlidingLayers = "rms", 6, 2
	add(s, 2, 14, 4)

	// gpt-oss-like (gpt_oss): the clamped SwiGLU, attention sinks, biases on QKV, output,
	// experts and router, a sliding window of 8 in every other layer, the top 2 of 8 logits
	// then their softmax.
	s = tinyShape("gpt_oss", "tiny-gptoss-like", 128, 0, 2, 4, 2, 64, 200, false)
	s.AttnBias, s.OProjBias, s.MLPBias, s.RouterBias, s.AttentionSinks = true, true, true, true, true
	s.SlidingWindow, s.SlidingLayers = 8, 1
	s.Experts, s.ExpertsPerToken, s.ExpertFFN = 8, 2, 64 // a router bias is a 16-byte row: experts a multiple of 8
	s.SwiGLULimit = 7
	add(s, 2, 17, 4)

	// DeepSeek-V3-like routing (deepseek_v3, with GQA attention in place of latent attention):
	// a dense first layer, shared experts of 64 beside the top 3 of 16 routed ones, sigmoid
	// scores with a correction bias, 2 of 4 expert groups kept, renormalised and scaled by 2.5.
	s = tinyShape("deepseek_v3", "tiny-deepseek-like", 128, 64, 3, 4, 4, 64, 160, false)
	s.DenseLayers, s.DenseFFN = 1, 256
	s.Experts, s.ExpertsPerToken, s.ExpertFFN, s.RouterBias = 16, 3, 64, true
	s.RouterScoring, s.ExpertGroups, s.GroupsKept, s.RoutedScaling = "sigmoid", 4, 2, 2.5
	add(s, 2, 9, 4)

	// Llama-4-like spans (custom, dense): 2 of 3 layers attend within chunks of 8, one layer
	// without rotary.
	s = tinyShape("custom", "tiny-chunked-norope", 128, 256, 3, 4, 2, 64, 120, false)
	s.AttentionChunk, s.ChunkedLayers, s.NoRoPELayers = 8, 2, 1
	add(s, 2, 14, 4)

	// GLM-like partial rotary (32 of 64) with an LM-head bias (custom, dense), fp16-friendly.
	s = tinyShape("custom", "tiny-partial-rotary", 64, 128, 2, 2, 2, 64, 104, false)
	s.RotaryDim, s.LMHeadBias = 32, true
	add(s, 4, 7, 4)

	// Llama-4-like mixture of experts (llama4_text): the top 1 of 8 logits, its sigmoid scaling
	// the expert's input, beside a shared expert of 128; the unweighted L2 QK-norm in the layers
	// with rotary, and one layer of 3 without.
	s = tinyShape("llama4_text", "tiny-llama4-moe", 128, 128, 3, 4, 2, 64, 176, false)
	s.Experts, s.ExpertsPerToken, s.ExpertFFN = 8, 1, 64
	s.RouterScoring, s.RawTopKWeights = "sigmoid", true
	s.QKNorm, s.NoRoPELayers = "l2", 1
	add(s, 3, 9, 3)
	s.Name = "tiny-llama4-moe-b1" // batch 1: q, k and v in one linear, the norms over its rows
	add(s, 1, 9, 2)

	// Qwen3-MoE with norm_topk_prob false: the top 2 of 8 softmax weights as they are.
	s = tinyShape("qwen3_moe", "tiny-qwen3-moe-raw", 128, 0, 2, 4, 2, 64, 200, false)
	s.QKNorm, s.Experts, s.ExpertsPerToken, s.ExpertFFN, s.RawTopKWeights = "rms", 8, 2, 64, true
	add(s, 3, 9, 3)
	// DeepSeek-V3-like multi-head latent attention, dense,
	// absorbed: q through a rank-64 q_a / q_b, 3 heads of 32 + 64 over one latent of 512 + 64,
	// values of 24 (o_proj's input 72), tied.
	s = tinyShape("deepseek_v3", "tiny-deepseek-mla", 128, 256, 2, 3, 3, 32+64, 152, true)
	s.QLoRARank, s.KVLoRARank, s.RoPEHeadDim, s.VHeadDim = 64, 512, 64, 24
	add(s, 3, 9, 3)

	// DeepSeek-V3 as a whole, small: latent attention as above, a dense first layer, then a
	// shared expert of 64 beside the top 3 of 16 routed ones, sigmoid scores with a correction
	// bias, 2 of 4 groups kept, renormalised and scaled by 2.5.
	s = tinyShape("deepseek_v3", "tiny-deepseek-v3", 128, 64, 2, 3, 3, 32+64, 152, false)
	s.QLoRARank, s.KVLoRARank, s.RoPEHeadDim, s.VHeadDim = 64, 512, 64, 32
	s.DenseLayers, s.DenseFFN = 1, 256
	s.Experts, s.ExpertsPerToken, s.ExpertFFN, s.RouterBias = 16, 3, 64, true
	s.RouterScoring, s.ExpertGroups, s.GroupsKept, s.RoutedScaling = "sigmoid", 4, 2, 2.5
	add(s, 3, 9, 3)

	// MLA without q_lora_rank (q_proj from the hidden state, as DeepSeek-V2-Lite), 2 heads of
	// 16 + 64 and values of 64, in a mixture of experts with softmax routing (custom) and a
	// dense first layer.
	s = tinyShape("custom", "tiny-mla-moe", 96, 0, 2, 2, 2, 16+64, 120, false)
	s.KVLoRARank, s.RoPEHeadDim, s.VHeadDim = 512, 64, 64
	s.DenseLayers, s.DenseFFN = 1, 192
	s.Experts, s.ExpertsPerToken, s.ExpertFFN = 4, 2, 64
	add(s, 2, 6, 3)
	return ms
}
