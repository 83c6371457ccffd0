package model

import (
	"fmt"
	"math"
)

// Kernel is one distinct kernel shape of a decode step and how often a step
// launches it. Over a step's Kernels, Repeat * FLOPs adds up to FLOPsPerStep
// (exactly for a dense model; a little more for a mixture of experts, whose
// tokens per expert are rounded up), and the weights the linear and grouped
// linear calls read add up to WeightBytesPerStep less the embedding rows, the
// norms, the QK-norm weights and the MLA norms, which no kernel here reads, and
// the sinks, which the attention call reads.
type Kernel struct {
	// Name is one of "qkv_proj" (multi-head latent attention: "q_a_proj",
	// "q_b_proj" or "q_proj", "kv_a_proj", "q_absorb", "v_absorb"), "attention"
	// ("attention_local" for the sliding-window layers once the context passes
	// their window, "attention_chunked" for chunked layers past their chunk),
	// "o_proj", "gate_up_proj" (or "up_proj" for an MLP without a gate),
	// "down_proj", "router", "shared_expert_gate_up" (or "shared_expert_up"),
	// "shared_expert_down", "expert_gate_up" (or "expert_up"), "expert_down",
	// "lm_head".
	Name   string  `json:"name"`
	Kind   string  `json:"kind"`   // KindLinear, KindLinearGrouped, KindAttention or KindAttentionMLA
	Repeat float64 `json:"repeat"` // calls per step: Layers, Layers * ExpectedDistinctExperts for experts, 1 for the LM head

	// Linear: Y[M x N] = X[M x K] * W^T. M is the tokens in the call: the batch,
	// or for an expert the expected tokens per touched expert,
	// B*k / ExpectedDistinctExperts(B), rounded up, at least 1. A grouped linear
	// does Groups such products in one call, each with its own W and X (MLA's
	// absorbed per-head W_UK and W_UV).
	M      int `json:"m,omitempty"`
	N      int `json:"n,omitempty"`
	K      int `json:"k,omitempty"`
	Groups int `json:"groups,omitempty"`
	// WeightFormat names the stored format of W when it is not the shape's
	// WeightDType (Quantization.String: "mxfp4 (e2m1, one e8m0 scale per 32)").
	WeightFormat string `json:"weight_format,omitempty"`

	// Attention: one layer, Batch sequences of Context cached tokens each. For
	// MLA, KVHeads is 1 (the latent every query head reads), HeadDim the QK width
	// (latent + rotary key, 576) and VHeadDim the V width (the latent, 512).
	Batch    int  `json:"batch,omitempty"`
	QHeads   int  `json:"q_heads,omitempty"`
	KVHeads  int  `json:"kv_heads,omitempty"`
	HeadDim  int  `json:"head_dim,omitempty"`
	VHeadDim int  `json:"v_head_dim,omitempty"`
	Context  int  `json:"context,omitempty"`
	Sinks    bool `json:"sinks,omitempty"` // a learned logit per query head joins the softmax
	// A span's kernel (attention_local, attention_chunked): the layer's Window or Chunk and
	// the tokens each sequence has cached, of which the call reads Context (its span).
	Window        int `json:"window,omitempty"`
	Chunk         int `json:"chunk,omitempty"`
	CachedContext int `json:"cached_context,omitempty"`

	Bytes float64 `json:"bytes"` // minimum bytes one call moves: weights (and bias) + activations in + out, or K and V + Q + O (+ sinks)
	FLOPs float64 `json:"flops"` // per call: 2*Groups*M*N*K, or 2*Batch*QHeads*(HeadDim+VHeadDim)*Context
}

const (
	KindLinear        = "linear"
	KindLinearGrouped = "linear_grouped" // Groups independent products in one call
	KindAttention     = "attention"
	KindAttentionMLA  = "attention_mla" // every query head over one latent cache
	// KindGatedDeltaNet is one Gated DeltaNet layer's step between its projections: the
	// convolution update, the delta rule over each value head's state, the gated norm.
	KindGatedDeltaNet = "gated_deltanet"
	// KindMamba2 is one Mamba-2 layer's step between its projections: the convolution update,
	// the selective-state update of each head, the gated norm.
	KindMamba2 = "mamba2"
)

// Variant names what a call needs beyond a plain linear of the activation dtype
// or a grouped-query attention over the cache: "" for those, else a phrase such
// as "MLA attention (QK width 576, V width 512)", "attention with sinks",
// "grouped linear", "linear with mxfp4 weights". A consumer whose kernels lack
// the variant says so by this name.
func (k Kernel) Variant() string {
	switch {
	case k.Kind == KindGatedDeltaNet:
		return "Gated DeltaNet step (convolution update, gated delta rule, gated norm)"
	case k.Kind == KindMamba2:
		return "Mamba-2 step (convolution update, selective-state update, gated norm)"
	case k.Kind == KindAttentionMLA:
		return fmt.Sprintf("MLA attention (QK width %d, V width %d)", k.HeadDim, k.VHeadDim)
	case k.Kind == KindAttention && k.Sinks:
		return "attention with sinks"
	case k.Kind == KindLinearGrouped && k.WeightFormat != "":
		return "grouped linear with " + k.WeightFormat + " weights"
	case k.Kind == KindLinearGrouped:
		return "grouped linear"
	case k.Kind == KindLinear && k.WeightFormat != "":
		return "linear with " + k.WeightFormat + " weights"
	}
	return ""
}

// ActivationDType is the type of the activations the kernels read and write:
// WeightDType for bf16, fp16 and fp32 weights, bf16 for 8-bit weights (decode
// with fp8 or int8 weights usually keeps 16-bit activations).
func (s Shape) ActivationDType() DType {
	if s.WeightDType == FP8 || s.WeightDType == INT8 {
		return BF16
	}
	return s.WeightDType
}

// Kernels lists the distinct kernel shapes of one decode step of batch
// sequences with context cached tokens each, in launch order within a layer,
// the LM head last. A batch below 1 counts as 1.
func (s Shape) Kernels(batch, context int) []Kernel {
	batch, context = max(batch, 1), max(context, 0)
	layers := float64(s.attentionLayers())
	h := s.Hidden
	var kernels []Kernel
	if s.LinearLayers > 0 {
		kernels = append(kernels, s.gatedDeltaNet(batch)...)
	}
	if s.Mamba != nil {
		kernels = append(kernels, s.mamba2(batch)...)
	}
	if s.IsMLA() {
		qOut := s.QHeads * s.HeadDim
		if s.QLoRARank > 0 {
			kernels = append(kernels,
				s.linear("q_a_proj", layers, batch, s.QLoRARank, h, false, true),
				s.linear("q_b_proj", layers, batch, qOut, s.QLoRARank, false, true))
		} else {
			kernels = append(kernels, s.linear("q_proj", layers, batch, qOut, h, false, true))
		}
		kernels = append(kernels,
			s.linear("kv_a_proj", layers, batch, s.KVLoRARank+s.RoPEHeadDim, h, false, true),
			s.grouped("q_absorb", layers, s.QHeads, batch, s.KVLoRARank, s.QKNopeHeadDim()))
	} else {
		kernels = append(kernels, s.linear("qkv_proj", layers, batch, int(s.qkvOut()), h, s.AttnBias, true))
	}
	// Layers that attend to fewer tokens than the context (sliding windows past
	// the window, chunks past the chunk) have their own attention shape.
	for _, g := range s.spans(context) {
		k := s.attention(g.name, float64(g.layers), batch, g.context)
		switch g.name {
		case "attention_local":
			k.Window, k.CachedContext = s.SlidingWindow, context
		case "attention_chunked":
			k.Chunk, k.CachedContext = s.AttentionChunk, context
		}
		kernels = append(kernels, k)
	}
	if s.IsMLA() {
		kernels = append(kernels, s.grouped("v_absorb", layers, s.QHeads, batch, s.VHeadDim, s.KVLoRARank))
	}
	kernels = append(kernels, s.linear("o_proj", layers, batch, h, int(s.attnOut()), s.OProjBias, true))
	if s.IsMoE() {
		moeLayers := float64(s.MoELayers())
		distinct := s.ExpectedDistinctExperts(batch)
		// Expected tokens per touched expert; the epsilon keeps B=1 (exactly k
		// tokens over exactly k experts) from rounding up to 2 on float noise.
		tokens := float64(batch*s.ExpertsPerToken) / distinct
		m := max(1, int(math.Ceil(tokens-1e-9)))
		kernels = append(kernels, s.linear("router", moeLayers, batch, s.Experts, h, s.RouterBias, false))
		if s.SharedExpertGate {
			kernels = append(kernels, s.linear("shared_expert_gate", moeLayers, batch, 1, h, false, false))
		}
		kernels = append(kernels, s.mlp("shared_expert_", moeLayers, batch, s.sharedFFN())...)
		if s.MoELatent > 0 {
			kernels = append(kernels, s.linear("latent_down_proj", moeLayers, batch, s.MoELatent, h, false, false))
		}
		experts := s.mlp("expert_", moeLayers*distinct, m, s.ExpertFFN)
		if s.MoELatent > 0 {
			experts = []Kernel{}
			for i, mat := range s.expertMatrices() {
				name := []string{"expert_up", "expert_down"}[i]
				if s.GatedMLP && i == 0 {
					name, mat.n = "expert_gate_up", 2*mat.n
				}
				experts = append(experts, s.linear(name, moeLayers*distinct, m, mat.n, mat.k, s.MLPBias, false))
			}
		}
		kernels = append(kernels, experts...)
		if s.MoELatent > 0 {
			kernels = append(kernels, s.linear("latent_up_proj", moeLayers, batch, h, s.MoELatent, false, false))
		}
	}
	denseLayers, denseFFN := s.denseMLP()
	kernels = append(kernels, s.mlp("", float64(denseLayers), batch, denseFFN)...)
	return append(kernels, s.linear("lm_head", 1, batch, s.Vocab, h, s.LMHeadBias, false))
}

// gatedDeltaNet lists the Gated DeltaNet layers' calls: the input projection (q, k, v, z, b
// and a), the recurrent step, and the output projection.
func (s Shape) gatedDeltaNet(batch int) []Kernel {
	g := s.LinearAttention
	step := Kernel{Name: "gated_deltanet", Kind: KindGatedDeltaNet,
		QHeads: g.ValueHeads, KVHeads: g.KeyHeads, HeadDim: g.KeyHeadDim, VHeadDim: g.ValueHeadDim}
	// q k v z b a in, the output out
	return s.recurrentCalls(batch, MixerGatedDeltaNet, "linear_attn_", step, g.convDim()+g.valueDim()+2*g.ValueHeads+g.valueDim(), false)
}

// mamba2 lists the Mamba-2 layers' calls: the input projection (z, x, B, C, dt), the
// recurrent step, and the output projection.
func (s Shape) mamba2(batch int) []Kernel {
	mb := s.Mamba
	step := Kernel{Name: "mamba2", Kind: KindMamba2,
		QHeads: mb.Heads, KVHeads: mb.Groups, HeadDim: mb.HeadDim, VHeadDim: mb.StateSize}
	// z, x, B, C and dt in; the output out
	return s.recurrentCalls(batch, MixerMamba2, "mamba_", step, mb.inner()+mb.convDim()+mb.Heads+mb.inner(), mb.ProjBias)
}

// recurrentCalls lists a recurrent mixer's calls in its layers: <prefix>in_proj, the step (which
// reads and writes each sequence's state and ioElements activations a token), <prefix>out_proj.
func (s Shape) recurrentCalls(batch int, kind MixerKind, prefix string, step Kernel, ioElements int, bias bool) []Kernel {
	l, n := s.layersOf(kind)
	m, b, repeat := mixers[kind], float64(batch), float64(n)
	step.Repeat, step.Batch = repeat, batch
	step.Bytes = b * (2*m.stateBytesPerSequence(s, l) + float64(ioElements)*s.ActivationDType().Bytes())
	step.FLOPs = b * m.flopsPerToken(s, l)
	mats := m.matrices(s, l)
	return []Kernel{
		s.linear(prefix+"in_proj", repeat, batch, mats[0].n, mats[0].k, bias, true),
		step,
		s.linear(prefix+"out_proj", repeat, batch, mats[1].n, mats[1].k, bias, true),
	}
}

// mlp lists an MLP's two linears, "<prefix>gate_up(_proj)" (or up) and
// "<prefix>down(_proj)"; the dense MLP's names end in _proj. None when ffn is 0
// or repeat is.
func (s Shape) mlp(prefix string, repeat float64, m, ffn int) []Kernel {
	if ffn == 0 || repeat == 0 {
		return nil
	}
	suffix := ""
	if prefix == "" {
		suffix = "_proj"
	}
	upName, upWidth := prefix+"up"+suffix, ffn
	if s.GatedMLP {
		upName, upWidth = prefix+"gate_up"+suffix, 2*ffn
	}
	return []Kernel{
		s.linear(upName, repeat, m, upWidth, s.Hidden, s.MLPBias, false),
		s.linear(prefix+"down"+suffix, repeat, m, s.Hidden, ffn, s.MLPBias, false),
	}
}

// linear describes Y[m x n] = X[m x k] * W^T (+ bias[n]); attn marks an
// attention projection. The LM head and the router are never quantized.
func (s Shape) linear(name string, repeat float64, m, n, k int, bias, attn bool) Kernel {
	weights, format := s.matrixBytes(n, k, attn), s.matrixFormat(attn)
	if name == "lm_head" || name == "router" || name == "shared_expert_gate" {
		weights, format = float64(n)*float64(k)*s.WeightDType.Bytes(), ""
	}
	if bias {
		weights += float64(n) * s.WeightDType.Bytes()
	}
	act := s.ActivationDType().Bytes()
	return Kernel{
		Name: name, Kind: KindLinear, Repeat: repeat,
		M: m, N: n, K: k, WeightFormat: format,
		Bytes: weights + float64(m)*float64(k)*act + float64(m)*float64(n)*act,
		FLOPs: 2 * float64(m) * float64(n) * float64(k),
	}
}

// grouped describes groups products Y_g[m x n] = X_g[m x k] * W_g^T in one call.
func (s Shape) grouped(name string, repeat float64, groups, m, n, k int) Kernel {
	g := float64(groups)
	act := s.ActivationDType().Bytes()
	return Kernel{
		Name: name, Kind: KindLinearGrouped, Repeat: repeat,
		M: m, N: n, K: k, Groups: groups, WeightFormat: s.matrixFormat(false),
		Bytes: g * (s.matrixBytes(n, k, false) + float64(m)*float64(k)*act + float64(m)*float64(n)*act),
		FLOPs: 2 * g * float64(m) * float64(n) * float64(k),
	}
}

// attention describes one layer's decode attention: read the whole KV cache of
// every sequence (for MLA, the latent and rotary key, once for all heads) and
// the new queries (and sinks), write one output vector per query head.
func (s Shape) attention(name string, repeat float64, batch, context int) Kernel {
	b, ctx := float64(batch), float64(context)
	act := s.ActivationDType().Bytes()
	k := Kernel{Name: name, Kind: KindAttention, Repeat: repeat, Batch: batch, QHeads: s.QHeads, Context: context,
		Sinks: s.AttentionSinks}
	if s.IsMLA() {
		k.Kind, k.KVHeads = KindAttentionMLA, 1
		k.HeadDim, k.VHeadDim = s.KVLoRARank+s.RoPEHeadDim, s.KVLoRARank
	} else {
		k.KVHeads, k.HeadDim = s.KVHeads, s.HeadDim
	}
	vWidth := k.HeadDim
	if s.IsMLA() {
		vWidth = k.VHeadDim
	}
	q := float64(s.QHeads) * float64(k.HeadDim) * act
	o := float64(s.QHeads) * float64(vWidth) * act
	k.Bytes = b*ctx*float64(s.KVElementsPerLayerToken())*s.KVDType.Bytes() + b*(q+o)
	if s.AttentionSinks {
		k.Bytes += float64(s.QHeads) * s.WeightDType.Bytes()
	}
	k.FLOPs = b * s.attentionFLOPsPerToken() * ctx
	return k
}
