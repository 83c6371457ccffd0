package step

import "github.com/decodebench/decodebench/bench/model"

// Tiny model shapes, one of each family trait the step implements, small enough for the
// emulator to run a few steps in seconds (hidden <= 256, a few layers, a vocabulary near
// 1000): what the tests and the engine-versus-reference comparison run.
func Tiny() []model.Shape {
	base := func(name string) model.Shape {
		return model.Shape{Name: name, Family: "llama", Hidden: 128, FFN: 256, Layers: 3, QHeads: 6, KVHeads: 2, HeadDim: 64,
			Vocab: 1000, GatedMLP: true, WeightDType: model.BF16, KVDType: model.BF16, TP: 1, Source: "tiny", MaxPositions: 4096}
	}
	var out []model.Shape
	// GQA with an odd group (3 query heads a KV head), a vocabulary not a power of two, untied.
	out = append(out, base("tiny-gqa"))
	// Multi-query, tied embeddings, fp16, an odd vocabulary.
	mq := base("tiny-mqa-tied")
	mq.QHeads, mq.KVHeads, mq.TiedEmbeddings, mq.Vocab = 4, 1, true, 997
	mq.WeightDType, mq.KVDType = model.FP16, model.FP16
	out = append(out, mq)
	// QKV biases (Qwen2).
	qw := base("tiny-qwen2")
	qw.Family, qw.AttnBias, qw.QHeads, qw.KVHeads, qw.Hidden = "qwen2", true, 4, 2, 256
	out = append(out, qw)
	// QK-norm (Qwen3), partial rotary.
	q3 := base("tiny-qwen3")
	q3.Family, q3.QKNorm, q3.RotaryDim = "qwen3", "rms", 32
	out = append(out, q3)
	// Gemma: unit-offset norms, scaled embedding, GeLU-tanh, head dim 128 on a 128-wide model.
	g := base("tiny-gemma")
	g.Family, g.TiedEmbeddings, g.QHeads, g.KVHeads, g.HeadDim = "gemma", true, 2, 1, 128
	out = append(out, g)
	return out
}

// TinyMoE is a mixture of experts with top-2 of 4 (needs db_grouped_linear).
func TinyMoE() model.Shape {
	s := Tiny()[0]
	s.Name, s.Family, s.FFN = "tiny-moe", "mixtral", 0
	s.Experts, s.ExpertsPerToken, s.ExpertFFN = 4, 2, 128
	return s
}

// TinySliding has a sliding window shorter than the context in every other layer (needs the
// attention's window).
func TinySliding() model.Shape {
	s := Tiny()[0]
	s.Name, s.Family, s.Layers = "tiny-sliding", "mistral", 4
	s.SlidingWindow, s.SlidingLayers = 16, 2
	return s
}

// TinyMLA is DeepSeek-like multi-head latent attention (dense, absorbed): q through a rank-64
// q_a / q_b, 4 heads of 32 + 64 over one latent of 512 + 64, values of 32 (needs
// db_mla_rope_append, db_mla_attention and db_grouped_linear's strides).
func TinyMLA() model.Shape {
	s := Tiny()[0]
	s.Name, s.Family, s.Layers, s.QHeads, s.KVHeads, s.HeadDim = "tiny-mla", "deepseek_v3", 2, 4, 4, 32+64
	s.QLoRARank, s.KVLoRARank, s.RoPEHeadDim, s.VHeadDim = 64, 512, 64, 32
	return s
}
