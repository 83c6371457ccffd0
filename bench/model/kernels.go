package model

import "math"

// Kernel is one distinct kernel shape of a decode step and how often a step
// launches it. Over a step's Kernels, Repeat * FLOPs adds up to FLOPsPerStep
// (exactly for a dense model; a little more for a mixture of experts, whose
// tokens per expert are rounded up), and the weights the linear calls read add
// up to WeightBytesPerStep less the embedding rows and the norms, which no
// kernel here reads.
type Kernel struct {
	// Name is one of "qkv_proj", "attention" ("attention_local" for the
	// sliding-window layers once the context passes their window), "o_proj",
	// "gate_up_proj" (or "up_proj" for an MLP without a gate), "down_proj",
	// "router", "expert_gate_up" (or "expert_up"), "expert_down", "lm_head".
	Name   string  `json:"name"`
	Kind   string  `json:"kind"`   // "linear" or "attention"
	Repeat float64 `json:"repeat"` // calls per step: Layers, Layers * ExpectedDistinctExperts for experts, 1 for the LM head

	// Linear: Y[M x N] = X[M x K] * W^T. M is the tokens in the call: the batch,
	// or for an expert the expected tokens per touched expert,
	// B*k / ExpectedDistinctExperts(B), rounded up, at least 1.
	M int `json:"m,omitempty"`
	N int `json:"n,omitempty"`
	K int `json:"k,omitempty"`

	// Attention: one layer, Batch sequences of Context cached tokens each.
	Batch   int `json:"batch,omitempty"`
	QHeads  int `json:"q_heads,omitempty"`
	KVHeads int `json:"kv_heads,omitempty"`
	HeadDim int `json:"head_dim,omitempty"`
	Context int `json:"context,omitempty"`

	Bytes float64 `json:"bytes"` // minimum bytes one call moves: weights (and bias) + activations in + out, or K and V + Q + O
	FLOPs float64 `json:"flops"` // per call: 2*M*N*K, or 4*Batch*QHeads*HeadDim*Context
}

const (
	KindLinear    = "linear"
	KindAttention = "attention"
)

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
	layers := float64(s.Layers)
	h := s.Hidden
	kernels := []Kernel{s.linear("qkv_proj", layers, batch, int(s.qkvOut()), h, s.AttnBias)}
	// Sliding-window layers attend to fewer tokens once the context passes the window: a
	// second attention shape, "attention_local".
	full, local, localContext := s.layerContexts(context)
	if local > 0 && localContext == context {
		full, local = s.Layers, 0
	}
	if full > 0 {
		kernels = append(kernels, s.attention("attention", float64(full), batch, context))
	}
	if local > 0 {
		kernels = append(kernels, s.attention("attention_local", float64(local), batch, localContext))
	}
	kernels = append(kernels, s.linear("o_proj", layers, batch, h, int(s.attnOut()), s.OProjBias))
	if s.IsMoE() {
		distinct := s.ExpectedDistinctExperts(batch)
		// Expected tokens per touched expert; the epsilon keeps B=1 (exactly k
		// tokens over exactly k experts) from rounding up to 2 on float noise.
		tokens := float64(batch*s.ExpertsPerToken) / distinct
		m := max(1, int(math.Ceil(tokens-1e-9)))
		upName, upWidth := "expert_up", s.ExpertFFN
		if s.GatedMLP {
			upName, upWidth = "expert_gate_up", 2*s.ExpertFFN
		}
		kernels = append(kernels,
			s.linear("router", layers, batch, s.Experts, h, false),
			s.linear(upName, layers*distinct, m, upWidth, h, s.MLPBias),
			s.linear("expert_down", layers*distinct, m, h, s.ExpertFFN, s.MLPBias),
		)
	}
	if s.FFN > 0 {
		upName, upWidth := "up_proj", s.FFN
		if s.GatedMLP {
			upName, upWidth = "gate_up_proj", 2*s.FFN
		}
		kernels = append(kernels,
			s.linear(upName, layers, batch, upWidth, h, s.MLPBias),
			s.linear("down_proj", layers, batch, h, s.FFN, s.MLPBias),
		)
	}
	return append(kernels, s.linear("lm_head", 1, batch, s.Vocab, h, false))
}

// linear describes Y[m x n] = X[m x k] * W^T (+ bias[n]).
func (s Shape) linear(name string, repeat float64, m, n, k int, bias bool) Kernel {
	weights := float64(n) * float64(k)
	if bias {
		weights += float64(n)
	}
	act := s.ActivationDType().Bytes()
	return Kernel{
		Name: name, Kind: KindLinear, Repeat: repeat,
		M: m, N: n, K: k,
		Bytes: weights*s.WeightDType.Bytes() + float64(m)*float64(k)*act + float64(m)*float64(n)*act,
		FLOPs: 2 * float64(m) * float64(n) * float64(k),
	}
}

// attention describes one layer's decode attention: read the whole KV cache of
// every sequence and the new queries, write one output vector per query head.
func (s Shape) attention(name string, repeat float64, batch, context int) Kernel {
	b, ctx := float64(batch), float64(context)
	qo := float64(s.QHeads) * float64(s.HeadDim) * s.ActivationDType().Bytes()
	kv := 2 * float64(s.KVHeads) * float64(s.HeadDim) * s.KVDType.Bytes()
	return Kernel{
		Name: name, Kind: KindAttention, Repeat: repeat,
		Batch: batch, QHeads: s.QHeads, KVHeads: s.KVHeads, HeadDim: s.HeadDim, Context: context,
		Bytes: b*ctx*kv + 2*b*qo,
		FLOPs: s.attentionFLOPs(batch, context),
	}
}
