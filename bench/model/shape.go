package model

import (
	"fmt"
	"strings"
)

// Shape is everything about a decoder-only transformer that decides the cost of
// a decode step. Every layer is attention (fused QKV projection, attention over
// the KV cache, output projection) followed by an MLP: a dense one, a mixture of
// experts, or both. Norms are RMSNorm (one weight vector of Hidden each).
type Shape struct {
	Name   string `json:"name"`
	Family string `json:"family"` // a Hugging Face model_type (see Families) or "custom"

	Hidden  int `json:"hidden"` // model width: residual stream, embedding rows
	FFN     int `json:"ffn"`    // dense MLP width; 0 for a mixture of experts without a dense MLP (Mixtral)
	Layers  int `json:"layers"`
	QHeads  int `json:"q_heads"`
	KVHeads int `json:"kv_heads"` // < QHeads for grouped-query attention; must divide QHeads
	HeadDim int `json:"head_dim"` // need not be Hidden/QHeads (Gemma-7B: 16 x 256 on a 3072-wide model)
	Vocab   int `json:"vocab"`

	TiedEmbeddings bool `json:"tied_embeddings,omitempty"` // the LM head reuses the embedding table
	AttnBias       bool `json:"attn_bias,omitempty"`       // bias on the Q, K and V projections (Qwen2 always; Llama's attention_bias)
	OProjBias      bool `json:"o_proj_bias,omitempty"`     // bias on the output projection (Llama's attention_bias sets it with AttnBias)
	MLPBias        bool `json:"mlp_bias,omitempty"`        // bias on the MLP and expert projections (Llama's mlp_bias)
	GatedMLP       bool `json:"gated_mlp"`                 // gate and up projections (SwiGLU, GeGLU); false: up projection only

	// Mixture of experts: each token goes to ExpertsPerToken of Experts MLPs of
	// width ExpertFFN, chosen by a router (a Hidden x Experts linear).
	Experts         int `json:"experts,omitempty"` // 0: dense
	ExpertsPerToken int `json:"experts_per_token,omitempty"`
	ExpertFFN       int `json:"expert_ffn,omitempty"`

	// Sliding-window attention: SlidingLayers of the Layers attend to at most the last
	// SlidingWindow tokens (Mistral-7B-v0.1: all 32 layers, 4096; Gemma 2: every other layer,
	// 4096; Phi-3-mini-4k: all, 2047). A decode step reads, and a server need keep, only that
	// window of those layers' KV cache. 0 and 0: every layer attends to the whole context.
	SlidingWindow int `json:"sliding_window,omitempty"`
	SlidingLayers int `json:"sliding_layers,omitempty"`

	// A mixture of experts may keep dense layers: DenseLayers of its Layers have a dense MLP of
	// width DenseFFN in place of the router and experts (DeepSeek-V3's first_k_dense_replace = 3
	// of 18432; Llama 4 Maverick's every other layer). In the MoE layers, FFN is then the width
	// of the shared experts every token passes through (DeepSeek: n_shared_experts x
	// moe_intermediate_size; Llama 4: intermediate_size), 0 without any (Mixtral, Qwen3-MoE).
	DenseLayers int  `json:"dense_layers,omitempty"`
	DenseFFN    int  `json:"dense_ffn,omitempty"`
	RouterBias  bool `json:"router_bias,omitempty"` // a bias per expert on the router (gpt-oss; DeepSeek's e_score_correction_bias)

	// How the router picks and weighs the experts (routing.go; the zero values are Mixtral's
	// softmax over the top k). RouterScoring "sigmoid" scores each expert by the sigmoid of its
	// logit (DeepSeek-V3, Kimi-K2, GLM-4.5's scoring_func; Llama 4); RouterBias is then the
	// e_score_correction_bias, added to the scores for the choice only. ExpertGroups > 1 limits
	// the choice to the GroupsKept groups whose two best scores sum highest (n_group,
	// topk_group). RawTopKWeights: the chosen weights are not divided by their sum
	// (norm_topk_prob false; Llama 4). RoutedScaling multiplies them (routed_scaling_factor; 0
	// means 1). SwiGLULimit is gpt-oss's clamp of its SwiGLU (swiglu_limit; the family implies
	// the clamped activation).
	RouterScoring  string  `json:"router_scoring,omitempty"`
	ExpertGroups   int     `json:"expert_groups,omitempty"`
	GroupsKept     int     `json:"groups_kept,omitempty"`
	RawTopKWeights bool    `json:"raw_topk_weights,omitempty"`
	RoutedScaling  float64 `json:"routed_scaling,omitempty"`
	SwiGLULimit    float64 `json:"swiglu_limit,omitempty"`

	// Chunked attention (Llama 4): ChunkedLayers of the layers attend only to the tokens of the
	// current chunk of AttentionChunk positions, ((context-1) mod AttentionChunk) + 1 of them.
	AttentionChunk int `json:"attention_chunk,omitempty"`
	ChunkedLayers  int `json:"chunked_layers,omitempty"`
	// NoRoPELayers of the layers apply no rotary embedding (Llama 4's every fourth layer).
	NoRoPELayers int `json:"no_rope_layers,omitempty"`
	// RotaryDim: rotary covers only the first RotaryDim of each head (GLM-4.5's
	// partial_rotary_factor 0.5: 64 of 128); 0: the whole head.
	RotaryDim int `json:"rotary_dim,omitempty"`
	// QKNorm normalizes each query and key head before rotary: "rms", a learned RMSNorm of
	// HeadDim on q and one on k in every layer (Qwen3, Gemma 3); "l2", an unweighted L2 norm in
	// the layers with rotary (Llama 4's use_qk_norm); "" none.
	QKNorm string `json:"qk_norm,omitempty"`
	// AttentionSinks: one learned logit per query head joins each softmax denominator (gpt-oss).
	AttentionSinks bool `json:"attention_sinks,omitempty"`
	NormBias       bool `json:"norm_bias,omitempty"`    // LayerNorm with a bias vector, not RMSNorm (PhiMoE)
	LMHeadBias     bool `json:"lm_head_bias,omitempty"` // a bias on the LM head (PhiMoE's lm_head_bias)

	// Multi-head latent attention (DeepSeek-V3, Kimi-K2) when KVLoRARank > 0: the cache holds
	// per layer and token one latent of KVLoRARank plus a shared rotary key of RoPEHeadDim.
	// HeadDim is then a query head's width in the unabsorbed form (qk_nope_head_dim +
	// qk_rope_head_dim), VHeadDim a value head's; QLoRARank is the query's low-rank width (0:
	// queries projected straight from the hidden state). KVHeads equals QHeads.
	QLoRARank   int `json:"q_lora_rank,omitempty"`
	KVLoRARank  int `json:"kv_lora_rank,omitempty"`
	RoPEHeadDim int `json:"rope_head_dim,omitempty"`
	VHeadDim    int `json:"v_head_dim,omitempty"`

	// Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5): LinearLayers of the Layers are Gated
	// DeltaNet layers of the LinearAttention shape (recurrent.go), the others attention; the
	// attention layers are spread evenly through the stack, each ending a stretch (Qwen's every
	// full_attention_interval-th layer).
	LinearLayers    int            `json:"linear_layers,omitempty"`
	LinearAttention *GatedDeltaNet `json:"linear_attention,omitempty"`
	// AttnOutputGate: the query projection is twice as wide, its second half a per-element
	// sigmoid gate on the attention output (Qwen3-Next's and Qwen3.5's gated attention).
	AttnOutputGate bool `json:"attn_output_gate,omitempty"`
	// SharedExpertGate: a Hidden x 1 linear whose sigmoid scales the shared expert's output in
	// each MoE layer (Qwen3-Next, Qwen3.5-MoE).
	SharedExpertGate bool `json:"shared_expert_gate,omitempty"`

	// Pattern, when set, says what each layer is, one character a layer (Nemotron-H's
	// hybrid_override_pattern): M a Mamba-2 mixer of the Mamba shape, * attention, - a dense MLP
	// of FFN (DenseFFN in a mixture of experts), E a mixture of experts with FFN-wide shared
	// experts. Each such layer is a mixer or a feed-forward, never both, with one norm.
	Pattern string  `json:"pattern,omitempty"`
	Mamba   *Mamba2 `json:"mamba,omitempty"`
	// MoELatent > 0: the routed experts work in a latent of this width, one down projection
	// from Hidden before them and one up projection after them in each MoE layer (Nemotron 3's
	// moe_latent_size); the shared experts work on the hidden state.
	MoELatent int `json:"moe_latent,omitempty"`

	WeightDType DType `json:"weight_dtype"`
	KVDType     DType `json:"kv_dtype"`
	// KVScales is an fp8 KV cache's scales (quantization_config.kv_cache_scheme's strategy):
	// "" or KVScalesTensor (one k and v scale a layer), or KVScalesHead (one a KV head). Static
	// either way: the KV bytes per token are the codes' alone.
	KVScales string `json:"kv_scales,omitempty"`
	// Quant, when set, is the format of the quantized projection matrices (config.json's
	// quantization_config); every other weight is WeightDType.
	Quant *Quantization `json:"quant,omitempty"`

	// LeftOut names the parts of the checkpoint the shape does not hold: "vision tower and
	// multimodal projector" for a model whose text_config was read.
	LeftOut string `json:"left_out,omitempty"`

	// MaxPositions is the longest sequence the model's positions cover (config.json's
	// max_position_embeddings), 0 when unknown: a decode step past it is refused.
	MaxPositions int `json:"max_positions,omitempty"`

	TP int `json:"tp"` // tensor-parallel degree this shape is one GPU's shard of (1 = whole model)

	PublishedParams float64 `json:"published_params,omitempty"` // published parameter count of the whole model for presets, 0 when unknown
	Source          string  `json:"source"`                     // "preset" or the config.json path
}

// Families lists the accepted values of Shape.Family.
func Families() []string {
	return []string{"llama", "mistral", "mixtral", "qwen2", "gemma", "gemma2", "phi3",
		"qwen3", "qwen3_moe", "llama4_text", "gemma3_text", "deepseek_v3", "kimi_k2", "gpt_oss", "phimoe", "glm4_moe",
		"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "nemotron_h",
		"ministral3", "qwen3_vl_text", "qwen3_vl_moe_text", "smollm3", "custom"}
}

// IsMLA reports whether attention is multi-head latent attention.
func (s Shape) IsMLA() bool { return s.KVLoRARank > 0 }

// QKNopeHeadDim is the part of an MLA query head without rotary: HeadDim - RoPEHeadDim.
func (s Shape) QKNopeHeadDim() int { return s.HeadDim - s.RoPEHeadDim }

// MoELayers is how many layers route to experts: Layers - DenseLayers, 0 for a dense model.
func (s Shape) MoELayers() int {
	if !s.IsMoE() {
		return 0
	}
	n := 0
	for _, g := range s.Stack() {
		if g.Layer.MoE {
			n += g.Count
		}
	}
	return n
}

// denseMLP is how many layers have a dense MLP (not shared experts) and its width.
func (s Shape) denseMLP() (layers, width int) {
	for _, g := range s.Stack() {
		if !g.Layer.MoE && g.Layer.FFN > 0 {
			layers += g.Count
		}
	}
	return layers, s.denseFFNWidth()
}

// denseFFNWidth is the width of the dense MLP layers: FFN, or DenseFFN in a mixture of experts
// (whose FFN is the shared experts').
func (s Shape) denseFFNWidth() int {
	if s.IsMoE() {
		return s.DenseFFN
	}
	return s.FFN
}

// sharedFFN is the width of the shared experts of each MoE layer.
func (s Shape) sharedFFN() int {
	if !s.IsMoE() {
		return 0
	}
	return s.FFN
}

// IsMoE reports whether the layers route tokens to experts.
func (s Shape) IsMoE() bool { return s.Experts > 0 }

// NormsPerLayer is the number of RMSNorm weight vectors per layer: 2 (before
// attention and before the MLP), 4 for Gemma 2 and 3, which also norm each output.
func (s Shape) NormsPerLayer() int {
	switch {
	case s.Pattern != "":
		return 1 // a pattern's layer is a mixer or a feed-forward, each behind one norm
	case s.Family == "gemma2" || s.Family == "gemma3_text":
		return 4
	}
	return 2
}

// String names the model and, for a shard, the tensor-parallel degree.
func (s Shape) String() string {
	if s.TP > 1 {
		return fmt.Sprintf("%s (1/%d tensor-parallel shard)", s.label(), s.TP)
	}
	return s.label()
}

func (s Shape) label() string {
	if s.Name == "" {
		return "(unnamed model)"
	}
	return s.Name
}

// Validate checks that the shape describes a model the arithmetic can count:
// every size positive, the heads grouped evenly, experts consistent, known
// dtypes. The error names the field and its value.
func (s Shape) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("model %s: "+format, append([]any{s.label()}, args...)...)
	}
	known := false
	for _, f := range Families() {
		known = known || s.Family == f
	}
	if !known {
		return bad("Family = %q: accepted are %s", s.Family, strings.Join(Families(), ", "))
	}
	for _, f := range []struct {
		name  string
		value int
	}{
		{"Hidden", s.Hidden}, {"Layers", s.Layers}, {"QHeads", s.QHeads},
		{"KVHeads", s.KVHeads}, {"HeadDim", s.HeadDim}, {"Vocab", s.Vocab}, {"TP", s.TP},
	} {
		if f.value <= 0 {
			return bad("%s = %d: must be positive", f.name, f.value)
		}
	}
	if s.QHeads%s.KVHeads != 0 {
		return bad("QHeads = %d is not a multiple of KVHeads = %d: each KV head serves a whole group of query heads", s.QHeads, s.KVHeads)
	}
	switch {
	case s.Experts < 0:
		return bad("Experts = %d: must be 0 (dense) or positive", s.Experts)
	case s.Experts == 0 && s.FFN <= 0:
		return bad("FFN = %d: a dense model needs a positive MLP width", s.FFN)
	case s.Experts == 0 && (s.ExpertsPerToken != 0 || s.ExpertFFN != 0):
		return bad("ExpertsPerToken = %d, ExpertFFN = %d with Experts = 0: set Experts for a mixture of experts, or zero both", s.ExpertsPerToken, s.ExpertFFN)
	case s.Experts > 0 && (s.ExpertsPerToken < 1 || s.ExpertsPerToken > s.Experts):
		return bad("ExpertsPerToken = %d: must be between 1 and Experts = %d", s.ExpertsPerToken, s.Experts)
	case s.Experts > 0 && s.ExpertFFN <= 0:
		return bad("ExpertFFN = %d: must be positive for a mixture of experts", s.ExpertFFN)
	case s.FFN < 0:
		return bad("FFN = %d: must be 0 (no dense MLP) or positive", s.FFN)
	case s.SlidingWindow < 0 || s.SlidingLayers < 0 || s.SlidingLayers > s.Layers:
		return bad("SlidingWindow = %d, SlidingLayers = %d: want a window >= 0 and 0..%d layers", s.SlidingWindow, s.SlidingLayers, s.Layers)
	case (s.SlidingWindow == 0) != (s.SlidingLayers == 0):
		return bad("SlidingWindow = %d with SlidingLayers = %d: give both (a window and the layers that use it) or neither", s.SlidingWindow, s.SlidingLayers)
	}
	switch {
	case s.DenseLayers < 0 || s.DenseLayers > s.Layers || (s.DenseLayers > 0 && !s.IsMoE()):
		return bad("DenseLayers = %d: want 0..%d dense layers, and only in a mixture of experts", s.DenseLayers, s.Layers)
	case (s.DenseLayers > 0) != (s.DenseFFN > 0) || s.DenseFFN < 0:
		return bad("DenseLayers = %d with DenseFFN = %d: give both (the dense layers and their MLP width) or neither", s.DenseLayers, s.DenseFFN)
	case s.AttentionChunk < 0 || s.ChunkedLayers < 0 || (s.AttentionChunk == 0) != (s.ChunkedLayers == 0):
		return bad("AttentionChunk = %d, ChunkedLayers = %d: give both (a chunk and the layers that use it) or neither", s.AttentionChunk, s.ChunkedLayers)
	case s.SlidingLayers+s.ChunkedLayers > s.Layers:
		return bad("SlidingLayers = %d plus ChunkedLayers = %d exceed the %d layers", s.SlidingLayers, s.ChunkedLayers, s.Layers)
	case s.NoRoPELayers < 0 || s.NoRoPELayers > s.Layers:
		return bad("NoRoPELayers = %d: want 0..%d", s.NoRoPELayers, s.Layers)
	case s.RotaryDim < 0 || s.RotaryDim > s.HeadDim:
		return bad("RotaryDim = %d: want 0 (the whole head) up to HeadDim = %d", s.RotaryDim, s.HeadDim)
	case s.QKNorm != "" && s.QKNorm != "rms" && s.QKNorm != "l2":
		return bad("QKNorm = %q: accepted are \"\" (none), rms and l2", s.QKNorm)
	case s.routingProblem() != "":
		return bad("%s", s.routingProblem())
	}
	if s.IsMLA() {
		switch {
		case s.RoPEHeadDim <= 0 || s.RoPEHeadDim >= s.HeadDim:
			return bad("RoPEHeadDim = %d: an MLA query head of HeadDim = %d needs a rotary part of 1..%d", s.RoPEHeadDim, s.HeadDim, s.HeadDim-1)
		case s.VHeadDim <= 0:
			return bad("VHeadDim = %d: must be positive for multi-head latent attention", s.VHeadDim)
		case s.QLoRARank < 0:
			return bad("QLoRARank = %d: must be 0 (no query compression) or positive", s.QLoRARank)
		case s.KVHeads != s.QHeads:
			return bad("KVHeads = %d with QHeads = %d: multi-head latent attention decompresses one key and value per query head", s.KVHeads, s.QHeads)
		}
	} else if s.QLoRARank != 0 || s.RoPEHeadDim != 0 || s.VHeadDim != 0 {
		return bad("QLoRARank = %d, RoPEHeadDim = %d, VHeadDim = %d without KVLoRARank: these describe multi-head latent attention only", s.QLoRARank, s.RoPEHeadDim, s.VHeadDim)
	}
	switch {
	case s.LinearLayers < 0 || s.LinearLayers >= s.Layers:
		return bad("LinearLayers = %d: want 0..%d (at least one attention layer)", s.LinearLayers, s.Layers-1)
	case (s.LinearLayers > 0) != (s.LinearAttention != nil):
		return bad("LinearLayers = %d: give both the Gated DeltaNet layers and their shape (LinearAttention), or neither", s.LinearLayers)
	case s.LinearLayers > 0 && (s.SlidingLayers > 0 || s.ChunkedLayers > 0 || s.IsMLA()):
		return bad("LinearLayers = %d with sliding, chunked or latent attention layers: a Gated DeltaNet hybrid has full grouped-query attention layers only", s.LinearLayers)
	case s.SharedExpertGate && (!s.IsMoE() || s.FFN == 0):
		return bad("SharedExpertGate with no shared expert (Experts = %d, FFN = %d): the gate scales a shared expert", s.Experts, s.FFN)
	}
	if s.LinearAttention != nil {
		if err := s.LinearAttention.validate(); err != nil {
			return bad("%v", err)
		}
	}
	if p := s.patternProblem(); p != "" {
		return bad("%s", p)
	}
	if s.Quant != nil {
		if err := s.Quant.validate(); err != nil {
			return bad("%v", err)
		}
	}
	if !s.WeightDType.valid() {
		return bad("WeightDType = %q: accepted are %s", s.WeightDType, dtypeList())
	}
	if s.KVScales != "" && s.KVScales != KVScalesTensor && !(s.KVScales == KVScalesHead && s.KVDType == FP8) {
		return bad("KVScales = %q with KVDType %q: accepted are %q, and %q for an fp8 cache", s.KVScales, s.KVDType, KVScalesTensor, KVScalesHead)
	}
	if !s.KVDType.valid() {
		return bad("KVDType = %q: accepted are %s", s.KVDType, dtypeList())
	}
	if s.PublishedParams < 0 {
		return bad("PublishedParams = %g: must be 0 (unknown) or positive", s.PublishedParams)
	}
	return nil
}

// Shard returns what one GPU holds when the model is split tp ways by Megatron
// tensor parallelism: the query and KV heads, the MLP width and each expert's
// width divide by tp; the vocabulary splits into ceil(Vocab/tp) rows per GPU
// (the last shard padded); Hidden, norms and the router are replicated. A tp
// that does not divide the heads or the MLP widths is rejected: a GPU must hold
// whole heads and equal slices. Multi-head latent attention splits its query heads; the
// latent cache, needed by every head, is replicated. Sharding a shard multiplies TP. Shard(1)
// returns the shape unchanged.
func (s Shape) Shard(tp int) (Shape, error) {
	if err := s.Validate(); err != nil {
		return Shape{}, err
	}
	if tp < 1 {
		return Shape{}, fmt.Errorf("model %s: tensor-parallel degree %d: must be 1 or more", s.label(), tp)
	}
	if tp == 1 {
		return s, nil
	}
	var misfits []string
	if s.QHeads%tp != 0 {
		misfits = append(misfits, fmt.Sprintf("%d query heads", s.QHeads))
	}
	if s.KVHeads%tp != 0 {
		misfits = append(misfits, fmt.Sprintf("%d KV heads", s.KVHeads))
	}
	if s.FFN%tp != 0 {
		misfits = append(misfits, fmt.Sprintf("MLP width %d", s.FFN))
	}
	if s.DenseFFN%tp != 0 {
		misfits = append(misfits, fmt.Sprintf("dense-layer MLP width %d", s.DenseFFN))
	}
	if s.ExpertFFN%tp != 0 {
		misfits = append(misfits, fmt.Sprintf("expert MLP width %d", s.ExpertFFN))
	}
	if g := s.LinearAttention; g != nil && g.KeyHeads%tp != 0 {
		misfits = append(misfits, fmt.Sprintf("%d Gated DeltaNet key heads", g.KeyHeads))
	}
	if m := s.Mamba; m != nil && m.Groups%tp != 0 {
		misfits = append(misfits, fmt.Sprintf("%d Mamba-2 groups", m.Groups))
	}
	if len(misfits) > 0 {
		return Shape{}, fmt.Errorf("model %s: tensor-parallel degree %d does not divide its %s; each GPU must hold whole heads and an equal slice of the MLP",
			s.label(), tp, joinAnd(misfits))
	}
	shard := s
	shard.QHeads /= tp
	shard.KVHeads /= tp
	shard.FFN /= tp
	shard.ExpertFFN /= tp
	shard.DenseFFN /= tp
	if g := s.LinearAttention; g != nil {
		split := *g
		split.KeyHeads /= tp
		split.ValueHeads /= tp
		shard.LinearAttention = &split
	}
	if m := s.Mamba; m != nil {
		split := *m
		split.Heads /= tp
		split.Groups /= tp
		shard.Mamba = &split
	}
	shard.Vocab = (s.Vocab + tp - 1) / tp
	shard.TP = s.TP * tp
	return shard, nil
}

// joinAnd joins items as "a, b and c".
func joinAnd(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
