package model

// Presets are built from each model's Hugging Face config.json. PublishedParams
// is the count on the model card or the Hugging Face page; presets_test.go
// checks ParamsTotal against it within 0.5%.

// dense builds a bf16, whole-model preset with a gated MLP.
func dense(family, name string, hidden, ffn, layers, qHeads, kvHeads, headDim, vocab int, tied bool, published float64) Shape {
	return Shape{
		Name: name, Family: family,
		Hidden: hidden, FFN: ffn, Layers: layers,
		QHeads: qHeads, KVHeads: kvHeads, HeadDim: headDim, Vocab: vocab,
		TiedEmbeddings: tied, AttnBias: family == "qwen2", GatedMLP: true,
		WeightDType: BF16, KVDType: BF16, TP: 1,
		PublishedParams: published, Source: "preset",
	}
}

// moe builds a Mixtral-style preset: no dense MLP, experts of width expertFFN.
func moe(name string, hidden, expertFFN, layers, qHeads, kvHeads, vocab, experts, perToken int, published float64) Shape {
	s := dense("mixtral", name, hidden, 0, layers, qHeads, kvHeads, hidden/qHeads, vocab, false, published)
	s.Experts, s.ExpertsPerToken, s.ExpertFFN = experts, perToken, expertFFN
	return s
}

// windowed gives s sliding-window attention: layers of its layers attend to the last window
// tokens only.
func windowed(s Shape, window, layers int) Shape {
	s.SlidingWindow, s.SlidingLayers = window, layers
	return s
}

// qwen3 builds a Qwen3 dense preset: QK-norm, no biases.
func qwen3(name string, hidden, ffn, layers, qHeads, kvHeads int, tied bool, published float64) Shape {
	s := dense("qwen3", name, hidden, ffn, layers, qHeads, kvHeads, 128, 151936, tied, published)
	s.AttnBias, s.QKNorm = false, "rms"
	return s
}

// qwen3MoE builds a Qwen3-MoE preset: every layer routes to 8 of 128 experts, no shared expert.
func qwen3MoE(name string, hidden, expertFFN, layers, qHeads, kvHeads int, published float64) Shape {
	s := qwen3(name, hidden, 0, layers, qHeads, kvHeads, false, published)
	s.Family = "qwen3_moe"
	s.Experts, s.ExpertsPerToken, s.ExpertFFN = 128, 8, expertFFN
	return s
}

// deepseekV3 builds a DeepSeek-V3-shaped preset (DeepSeek-V3, Kimi-K2): multi-head latent
// attention (q rank 1536, latent 512 + rotary 64, heads of 128 + 64 and values of 128), the
// first dense layers of 18432, then experts of 2048 with one shared expert, in the
// checkpoint's fp8 with 128 x 128 block scales.
func deepseekV3(family, name string, qHeads, experts, denseLayers, vocab int, published float64) Shape {
	s := dense(family, name, 7168, 2048, 61, qHeads, qHeads, 128+64, vocab, false, published)
	s.Experts, s.ExpertsPerToken, s.ExpertFFN = experts, 8, 2048
	s.DenseLayers, s.DenseFFN, s.RouterBias = denseLayers, 18432, true
	s.QLoRARank, s.KVLoRARank, s.RoPEHeadDim, s.VHeadDim = 1536, 512, 64, 128
	s.Quant = &Quantization{Method: QuantFP8, Bits: 8, BlockN: 128, BlockK: 128}
	// noaux_tc routing: sigmoid scores, the correction bias for the choice, 4 of 8 groups
	// (DeepSeek-V3; Kimi-K2's one group is no limit), the weights renormalised times 2.5
	// (Kimi-K2's config: 2.827)
	s.RouterScoring, s.RoutedScaling = "sigmoid", 2.5
	if experts == 256 {
		s.ExpertGroups, s.GroupsKept = 8, 4
	} else {
		s.RoutedScaling = 2.827
	}
	return s
}

// gptOSS builds a gpt-oss preset: biases everywhere, attention sinks, a 128-token window
// in every other layer, experts of 2880 in MXFP4 (attention, router, embedding and LM head
// bf16).
func gptOSS(name string, layers, experts int, published float64) Shape {
	s := dense("gpt_oss", name, 2880, 0, layers, 64, 8, 64, 201088, false, published)
	s.AttnBias, s.OProjBias, s.MLPBias, s.RouterBias, s.AttentionSinks = true, true, true, true, true
	s.Experts, s.ExpertsPerToken, s.ExpertFFN, s.SwiGLULimit = experts, 4, 2880, 7
	s.Quant = &Quantization{Method: QuantMXFP4, Bits: 4, GroupSize: 32, AttentionKept: true}
	return windowed(s, 128, (layers+1)/2)
}

// presets holds each preset with the other names Lookup accepts for it. Lookup
// already ignores case, separators, an "org/" prefix, "Meta-" and the suffixes
// -Instruct, -Chat, -hf, -it and -Base, so aliases list only what differs.
var presets = []struct {
	shape   Shape
	aliases []string
}{
	{dense("llama", "Llama-2-7B", 4096, 11008, 32, 32, 32, 128, 32000, false, 6.74e9), nil},
	{dense("llama", "Llama-2-13B", 5120, 13824, 40, 40, 40, 128, 32000, false, 13.0e9), nil},
	{dense("llama", "Llama-2-70B", 8192, 28672, 80, 64, 8, 128, 32000, false, 69.0e9), nil},
	{dense("llama", "Llama-3-8B", 4096, 14336, 32, 32, 8, 128, 128256, false, 8.03e9), nil},
	{dense("llama", "Llama-3-70B", 8192, 28672, 80, 64, 8, 128, 128256, false, 70.6e9), nil},
	// Llama 3.1 changes RoPE scaling (128k context), not the shape.
	{dense("llama", "Llama-3.1-8B", 4096, 14336, 32, 32, 8, 128, 128256, false, 8.03e9), nil},
	{dense("llama", "Llama-3.1-70B", 8192, 28672, 80, 64, 8, 128, 128256, false, 70.6e9), []string{"Llama-3.3-70B"}},
	{dense("llama", "Llama-3.1-405B", 16384, 53248, 126, 128, 8, 128, 128256, false, 405.9e9), nil},
	{dense("llama", "Llama-3.2-1B", 2048, 8192, 16, 32, 8, 64, 128256, true, 1.24e9), nil},
	{dense("llama", "Llama-3.2-3B", 3072, 8192, 28, 24, 8, 128, 128256, true, 3.21e9), nil},

	// Mistral-7B v0.1 and v0.2 share a shape; v0.3 grows the vocabulary to 32768.
	// v0.2 dropped v0.1's 4096-token sliding window.
	{dense("mistral", "Mistral-7B", 4096, 14336, 32, 32, 8, 128, 32000, false, 7.24e9),
		[]string{"Mistral-7B-v0.2"}},
	{windowed(dense("mistral", "Mistral-7B-v0.1", 4096, 14336, 32, 32, 8, 128, 32000, false, 7.24e9), 4096, 32), nil},
	{dense("mistral", "Mistral-7B-v0.3", 4096, 14336, 32, 32, 8, 128, 32768, false, 7.25e9), nil},
	// Nemo: head_dim 128 on a 5120-wide model with 32 heads.
	{dense("mistral", "Mistral-Nemo-12B", 5120, 14336, 40, 32, 8, 128, 131072, false, 12.2e9),
		[]string{"Mistral-Nemo", "Mistral-Nemo-2407", "Mistral-Nemo-12B-2407"}},
	// Active: 12.9B and 39B.
	{moe("Mixtral-8x7B", 4096, 14336, 32, 32, 8, 32000, 8, 2, 46.7e9), []string{"Mixtral-8x7B-v0.1"}},
	{moe("Mixtral-8x22B", 6144, 16384, 56, 48, 8, 32768, 8, 2, 141e9), []string{"Mixtral-8x22B-v0.1"}},

	// Qwen2.5 counts from the Hugging Face pages (0.5B: 494M). The 14B and 32B
	// model cards say 14.7B and 32.5B, 0.5% and 0.8% below what their
	// config.json shapes hold (14.77B, 32.76B); no count is checked for them.
	{dense("qwen2", "Qwen2.5-0.5B", 896, 4864, 24, 14, 2, 64, 151936, true, 0.494e9), nil},
	{dense("qwen2", "Qwen2.5-1.5B", 1536, 8960, 28, 12, 2, 128, 151936, true, 1.54e9), nil},
	{dense("qwen2", "Qwen2.5-3B", 2048, 11008, 36, 16, 2, 128, 151936, true, 3.09e9), nil},
	{dense("qwen2", "Qwen2.5-7B", 3584, 18944, 28, 28, 4, 128, 152064, false, 7.62e9), nil},
	{dense("qwen2", "Qwen2.5-14B", 5120, 13824, 48, 40, 8, 128, 152064, false, 0), nil},
	{dense("qwen2", "Qwen2.5-32B", 5120, 27648, 64, 40, 8, 128, 152064, false, 0), nil},
	{dense("qwen2", "Qwen2.5-72B", 8192, 29568, 80, 64, 8, 128, 152064, false, 72.7e9), nil},

	// Gemma: GeGLU MLP, tied embeddings over a 256000-token vocabulary, and
	// head_dim not tied to the width (Gemma-7B: 16 x 256 = 4096 on 3072).
	{dense("gemma", "Gemma-2B", 2048, 16384, 18, 8, 1, 256, 256000, true, 2.51e9), nil},
	{dense("gemma", "Gemma-7B", 3072, 24576, 28, 16, 16, 256, 256000, true, 8.54e9), nil},
	// Gemma 2 alternates local (4096-token sliding window: layers 0, 2, 4, ...) and global layers.
	{windowed(dense("gemma2", "Gemma-2-2B", 2304, 9216, 26, 8, 4, 256, 256000, true, 2.61e9), 4096, 13), nil},
	{windowed(dense("gemma2", "Gemma-2-9B", 3584, 14336, 42, 16, 8, 256, 256000, true, 9.24e9), 4096, 21), nil},
	{windowed(dense("gemma2", "Gemma-2-27B", 4608, 36864, 46, 32, 16, 128, 256000, true, 27.2e9), 4096, 23), nil},

	// Qwen3: QK-norm; counts from the model cards (8.2B, 32.8B; 30.5B with 3.3B activated;
	// 235B with 22B activated).
	{qwen3("Qwen3-8B", 4096, 12288, 36, 32, 8, false, 8.2e9), nil},
	{qwen3("Qwen3-32B", 5120, 25600, 64, 64, 8, false, 32.8e9), nil},
	{qwen3MoE("Qwen3-30B-A3B", 2048, 768, 48, 32, 4, 30.5e9), nil},
	{qwen3MoE("Qwen3-235B-A22B", 4096, 1536, 94, 64, 4, 235e9), nil},

	// Llama 4 Scout, its text model: 16 experts of 8192 (top-1) and a shared one in every
	// layer; three of every four layers attend within 8192-token chunks with rotary, the
	// fourth to everything without (QK L2-norm in the rotary layers). Meta's 109B total
	// counts the vision tower, which is left out: no published count of the text model.
	{llama4Scout(), []string{"Llama-4-Scout-17B-16E"}},

	// Gemma 3 27B, its text model: 5 of every 6 layers attend through a 1024-token window;
	// QK-norm; 262208-token vocabulary. The technical report counts 25.6B parameters besides
	// the 1.4B embedding and the 0.4B vision encoder (left out); presets_test.go checks the
	// first.
	{gemma3("Gemma-3-27B", 5376, 21504, 62, 32, 16, 128, 1024, 0), nil},

	// DeepSeek-V3 (and R1, same shape): 671B in the main model (the checkpoint's 685B adds
	// the multi-token-prediction layer, left out), 36.6B activated without the input
	// embedding. Kimi-K2: 384 experts, 64 heads, one dense layer.
	{withMTP(deepseekV3("deepseek_v3", "DeepSeek-V3", 128, 256, 3, 129280, 671e9)), []string{"DeepSeek-R1", "DeepSeek-V3-0324"}},
	{deepseekV3("kimi_k2", "Kimi-K2", 64, 384, 1, 163840, 0), []string{"Kimi-K2-Instruct"}},

	// gpt-oss: OpenAI's model card counts 20.91B and 116.83B in all, 3.61B and 5.13B active
	// without the input embedding.
	{gptOSS("gpt-oss-20b", 24, 32, 20.91e9), nil},
	{gptOSS("gpt-oss-120b", 36, 128, 116.83e9), nil},

	// Phi-3: the 4k and 128k variants share a shape; the 4k ones attend through a 2047-token
	// sliding window in every layer (config.json's sliding_window), the 128k ones and
	// Phi-3.5-mini through windows longer than any context measured here (none modelled).
	{windowed(dense("phi3", "Phi-3-mini", 3072, 8192, 32, 32, 32, 96, 32064, false, 3.82e9), 2047, 32),
		[]string{"Phi-3-mini-4k"}},
	{dense("phi3", "Phi-3-mini-128k", 3072, 8192, 32, 32, 32, 96, 32064, false, 3.82e9),
		[]string{"Phi-3.5-mini"}},
	// Published as "14B"; the shape holds 13.96B.
	{windowed(dense("phi3", "Phi-3-medium", 5120, 17920, 40, 40, 10, 128, 32064, false, 14.0e9), 2047, 40),
		[]string{"Phi-3-medium-4k"}},
	{dense("phi3", "Phi-3-medium-128k", 5120, 17920, 40, 40, 10, 128, 32064, false, 14.0e9), nil},

	// tiny-emu is no published model: a Llama-shaped toy small enough that a whole emulated
	// sweep (README, "Quick start") finishes in about a minute on two cores. Its count is by
	// hand: embedding and LM head 2 x 2048 x 256, per layer QKV 256 x (4 + 2 x 2) x 64, output
	// 256 x 256, gate/up 2 x 512 x 256, down 512 x 256 and two norms of 256, a final norm:
	// 1048576 + 2 x 590336 + 256 = 2229504.
	{dense("llama", "tiny-emu", 256, 512, 2, 4, 2, 64, 2048, false, 2229504), nil},
}

// Presets returns every built-in shape, whole-model and bf16, in a stable order.
func Presets() []Shape {
	out := make([]Shape, len(presets))
	for i, p := range presets {
		out[i] = p.shape
	}
	return out
}

// llama4Scout is Llama-4-Scout-17B-16E's text model.
func llama4Scout() Shape {
	s := dense("llama4_text", "Llama-4-Scout", 5120, 8192, 48, 40, 8, 128, 202048, false, 0)
	s.Experts, s.ExpertsPerToken, s.ExpertFFN = 16, 1, 8192
	s.RouterScoring, s.RawTopKWeights = "sigmoid", true // sigmoid(logit) of the top 1, on the expert's input
	s.AttentionChunk, s.ChunkedLayers, s.NoRoPELayers, s.QKNorm = 8192, 36, 12, "l2"
	s.LeftOut = "vision tower and multimodal projector (llama4's text_config read)"
	return s
}

// withMTP notes the one multi-token-prediction layer of the checkpoint, which the shape
// leaves out.
func withMTP(s Shape) Shape {
	s.LeftOut = "1 multi-token-prediction layer(s) (num_nextn_predict_layers), which a plain decode step does not run"
	return s
}

// gemma3 builds a Gemma 3 text preset: GeGLU, tied 262208-token embedding, four norms a
// layer, QK-norm, five of every six layers local.
func gemma3(name string, hidden, ffn, layers, qHeads, kvHeads, headDim, window int, published float64) Shape {
	s := dense("gemma3_text", name, hidden, ffn, layers, qHeads, kvHeads, headDim, 262208, true, published)
	s.QKNorm, s.LeftOut = "rms", "vision tower and multimodal projector (gemma3's text_config read)"
	return windowed(s, window, layers-layers/6)
}
