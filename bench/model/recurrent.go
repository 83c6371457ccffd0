package model

import (
	"fmt"
	"strings"
)

// MixerGatedDeltaNet is a Gated DeltaNet layer (Qwen3-Next, Qwen3.5's linear_attention
// layers): a fused input projection (q, k, v, the output gate z, and the per-head b and a), a
// depthwise causal convolution over the last ConvKernel inputs of q, k and v, the gated delta
// rule's recurrent step per value head over a KeyHeadDim x ValueHeadDim state, a gated RMSNorm
// of the output and the output projection. It caches nothing per token: its state per sequence
// is the same at any context, and a step reads and writes all of it.
const MixerGatedDeltaNet MixerKind = "gated_deltanet"

func init() { mixers[MixerGatedDeltaNet] = gdnMixer{} }

// GatedDeltaNet is the shape of a model's Gated DeltaNet layers (config.json's linear_*).
type GatedDeltaNet struct {
	KeyHeads     int   `json:"key_heads"`      // linear_num_key_heads: q and k heads
	ValueHeads   int   `json:"value_heads"`    // linear_num_value_heads: v heads, each with its own state; a multiple of KeyHeads
	KeyHeadDim   int   `json:"key_head_dim"`   // linear_key_head_dim
	ValueHeadDim int   `json:"value_head_dim"` // linear_value_head_dim
	ConvKernel   int   `json:"conv_kernel"`    // linear_conv_kernel_dim: the causal convolution's width
	StateDType   DType `json:"state_dtype"`    // the recurrent state's dtype (mamba_ssm_dtype; fp32 by default)
}

func (g GatedDeltaNet) keyDim() int   { return g.KeyHeads * g.KeyHeadDim }
func (g GatedDeltaNet) valueDim() int { return g.ValueHeads * g.ValueHeadDim }

// convDim is the channels the convolution runs over: q, k and v.
func (g GatedDeltaNet) convDim() int { return 2*g.keyDim() + g.valueDim() }

// validate names the first field out of range.
func (g GatedDeltaNet) validate() error {
	for _, f := range []struct {
		name  string
		value int
	}{{"KeyHeads", g.KeyHeads}, {"ValueHeads", g.ValueHeads}, {"KeyHeadDim", g.KeyHeadDim},
		{"ValueHeadDim", g.ValueHeadDim}, {"ConvKernel", g.ConvKernel}} {
		if f.value <= 0 {
			return fmt.Errorf("Gated DeltaNet %s = %d: must be positive", f.name, f.value)
		}
	}
	if g.ValueHeads%g.KeyHeads != 0 {
		return fmt.Errorf("Gated DeltaNet ValueHeads = %d is not a multiple of KeyHeads = %d: each key head serves a whole group of value heads", g.ValueHeads, g.KeyHeads)
	}
	if !g.StateDType.valid() {
		return fmt.Errorf("Gated DeltaNet StateDType = %q: accepted are %s", g.StateDType, dtypeList())
	}
	return nil
}

// gdnMixer counts a Gated DeltaNet layer.
type gdnMixer struct{}

// matrices: in_proj (q, k, v, z and the per-value-head b and a in one call, as in_proj_qkvz and
// in_proj_ba, or Qwen3.5's four projections, hold them) and out_proj.
func (gdnMixer) matrices(s Shape, _ Layer) []matrix {
	g := s.LinearAttention
	in := 2*g.keyDim() + 2*g.valueDim() + 2*g.ValueHeads
	return []matrix{{n: in, k: s.Hidden, count: 1, attn: true}, {n: s.Hidden, k: g.valueDim(), count: 1, attn: true}}
}

// smallParams: the depthwise convolution's weights (no bias), dt_bias and A_log per value head,
// and the gated RMSNorm's weight of one value head (shared by all).
func (gdnMixer) smallParams(s Shape, _ Layer) int64 {
	g := s.LinearAttention
	return int64(g.convDim())*int64(g.ConvKernel) + 2*int64(g.ValueHeads) + int64(g.ValueHeadDim)
}

func (gdnMixer) kvElementsPerToken(Shape, Layer) int        { return 0 }
func (gdnMixer) attendedTokens(Shape, Layer, int) int       { return 0 }
func (gdnMixer) flopsPerAttendedToken(Shape, Layer) float64 { return 0 }
func (gqaMixer) stateBytesPerSequence(Shape, Layer) float64 { return 0 }
func (mlaMixer) stateBytesPerSequence(Shape, Layer) float64 { return 0 }
func (gqaMixer) flopsPerToken(Shape, Layer) float64         { return 0 }
func (mlaMixer) flopsPerToken(Shape, Layer) float64         { return 0 }

// stateBytesPerSequence: the convolution's last ConvKernel-1 inputs in the activation dtype,
// and a KeyHeadDim x ValueHeadDim state per value head in StateDType.
func (gdnMixer) stateBytesPerSequence(s Shape, _ Layer) float64 {
	g := s.LinearAttention
	conv := float64(g.convDim()) * float64(g.ConvKernel-1) * s.ActivationDType().Bytes()
	return conv + float64(g.ValueHeads)*float64(g.KeyHeadDim)*float64(g.ValueHeadDim)*g.StateDType.Bytes()
}

// flopsPerToken: the convolution (2 a tap) and, per value head, the delta rule's four passes
// over the state: the decay (1 a state element), S^T k, the rank-1 update and S^T q (2 each).
func (gdnMixer) flopsPerToken(s Shape, _ Layer) float64 {
	g := s.LinearAttention
	return 2*float64(g.convDim())*float64(g.ConvKernel) +
		7*float64(g.ValueHeads)*float64(g.KeyHeadDim)*float64(g.ValueHeadDim)
}

// RecurrentFeature names what of a Gated DeltaNet hybrid the whole step and the float64
// forward pass do not run yet ("" for a model without it): the Gated DeltaNet layers, and the
// gated attention and gated shared expert that come with them. Their counts, bytes and kernel
// list are complete; the step's kernels for them are the next piece.
func (s Shape) RecurrentFeature() string {
	switch {
	case s.Pattern != "":
		return fmt.Sprintf("Nemotron-H's layer pattern (Mamba-2 layers, relu^2 MLPs; %d of %d layers recurrent: counted and predicted, but their kernels are not in the whole step)", s.RecurrentLayers(), s.Layers)
	case s.LinearLayers > 0:
		return fmt.Sprintf("Gated DeltaNet layers (%d of %d: counted and predicted, but their kernels are not in the whole step)", s.LinearLayers, s.Layers)
	case s.AttnOutputGate:
		return "gated attention (a sigmoid gate on the attention output)"
	case s.SharedExpertGate:
		return "a gated shared expert (shared_expert_gate)"
	}
	return ""
}

// RecurrentLayers counts the layers that keep a state per sequence.
func (s Shape) RecurrentLayers() int {
	n := 0
	for _, g := range s.Stack() {
		if mixerOf(g.Layer).stateBytesPerSequence(s, g.Layer) > 0 {
			n += g.Count
		}
	}
	return n
}

// StateBytesPerSequence is the recurrent state one sequence keeps over the layers, at any
// context (0 for a model of attention layers only). A step reads and writes all of it.
func (s Shape) StateBytesPerSequence() float64 {
	return s.sumLayers(func(l Layer) float64 { return mixerOf(l).stateBytesPerSequence(s, l) })
}

// MixerMamba2 is a Mamba-2 layer (Nemotron-H's M blocks): a fused input projection (the gate
// z, the convolution's x, B and C, and dt per head), a depthwise causal convolution with its
// bias over x, B and C, the selective-state update of each head's HeadDim x StateSize state
// (B and C shared by the heads of a group), D's skip, a grouped gated RMSNorm, the output
// projection. Like Gated DeltaNet it caches nothing per token and keeps a state per sequence.
const MixerMamba2 MixerKind = "mamba2"

// patternLayer is layer l of a Pattern: a Mamba-2 or attention mixer alone, or a dense MLP or
// a mixture of experts alone.
func (s Shape) patternLayer(l int) Layer {
	ly := Layer{Index: l, Mixer: MixerNone, RoPE: true}
	switch s.Pattern[l] {
	case 'M':
		ly.Mixer = MixerMamba2
	case '*':
		ly.Mixer = MixerAttention
	case '-':
		ly.FFN = s.denseFFNWidth()
	case 'E':
		ly.MoE, ly.FFN = true, s.sharedFFN()
	}
	return ly
}

// patternProblem names what is wrong with a Pattern, "" when nothing is.
func (s Shape) patternProblem() string {
	if s.Pattern == "" {
		if s.Mamba != nil {
			return "Mamba = set without a Pattern placing its layers"
		}
		return ""
	}
	if len(s.Pattern) != s.Layers {
		return fmt.Sprintf("Pattern %q has %d layers, want Layers = %d", s.Pattern, len(s.Pattern), s.Layers)
	}
	for i, c := range s.Pattern {
		switch {
		case !strings.ContainsRune("M*-E", c):
			return fmt.Sprintf("Pattern[%d] = %q: accepted are M (Mamba-2), * (attention), - (dense MLP) and E (mixture of experts)", i, c)
		case c == 'M' && s.Mamba == nil:
			return fmt.Sprintf("Pattern[%d] = M without a Mamba shape", i)
		case c == 'E' && !s.IsMoE():
			return fmt.Sprintf("Pattern[%d] = E without experts (Experts = 0)", i)
		case c == '-' && s.IsMoE() && s.DenseFFN == 0:
			return fmt.Sprintf("Pattern[%d] = - in a mixture of experts without DenseFFN", i)
		}
	}
	switch {
	case !strings.Contains(s.Pattern, "*"):
		return "Pattern without an attention layer (*): not modelled"
	case s.IsMoE() && s.DenseLayers != strings.Count(s.Pattern, "-"):
		return fmt.Sprintf("DenseLayers = %d, but the Pattern has %d dense MLP layers (-)", s.DenseLayers, strings.Count(s.Pattern, "-"))
	case s.LinearLayers > 0 || s.SlidingLayers > 0 || s.ChunkedLayers > 0 || s.IsMLA() || s.NoRoPELayers > 0:
		return "a Pattern with Gated DeltaNet, sliding, chunked, latent or rotary-less layers: not modelled"
	}
	if s.Mamba != nil {
		if err := s.Mamba.validate(); err != nil {
			return err.Error()
		}
	}
	return ""
}

// MixerNone is a layer without a mixer: a feed-forward block of its own (Nemotron-H's - and E).
const MixerNone MixerKind = "none"

func init() {
	mixers[MixerMamba2] = mamba2Mixer{}
	mixers[MixerNone] = noMixer{}
}

// Mamba2 is the shape of a model's Mamba-2 layers (config.json's mamba_*, ssm_state_size, ...).
type Mamba2 struct {
	Heads      int   `json:"heads"`       // mamba_num_heads
	HeadDim    int   `json:"head_dim"`    // mamba_head_dim
	Groups     int   `json:"groups"`      // n_groups: B and C are shared by Heads/Groups heads
	StateSize  int   `json:"state_size"`  // ssm_state_size
	ConvKernel int   `json:"conv_kernel"` // conv_kernel
	ConvBias   bool  `json:"conv_bias"`   // use_conv_bias
	ProjBias   bool  `json:"proj_bias"`   // use_bias: biases on in_proj and out_proj
	StateDType DType `json:"state_dtype"` // mamba_ssm_cache_dtype (the weight dtype when absent)
}

func (m Mamba2) inner() int { return m.Heads * m.HeadDim }

// convDim is the channels the convolution runs over: x, B and C.
func (m Mamba2) convDim() int { return m.inner() + 2*m.Groups*m.StateSize }

func (m Mamba2) validate() error {
	for _, f := range []struct {
		name  string
		value int
	}{{"Heads", m.Heads}, {"HeadDim", m.HeadDim}, {"Groups", m.Groups}, {"StateSize", m.StateSize}, {"ConvKernel", m.ConvKernel}} {
		if f.value <= 0 {
			return fmt.Errorf("Mamba-2 %s = %d: must be positive", f.name, f.value)
		}
	}
	if m.Heads%m.Groups != 0 {
		return fmt.Errorf("Mamba-2 Heads = %d is not a multiple of Groups = %d: each group of B and C serves whole heads", m.Heads, m.Groups)
	}
	if !m.StateDType.valid() {
		return fmt.Errorf("Mamba-2 StateDType = %q: accepted are %s", m.StateDType, dtypeList())
	}
	return nil
}

type mamba2Mixer struct{}

// matrices: in_proj (z, x, B, C and dt) and out_proj.
func (mamba2Mixer) matrices(s Shape, _ Layer) []matrix {
	m := s.Mamba
	return []matrix{{n: m.inner() + m.convDim() + m.Heads, k: s.Hidden, count: 1, attn: true},
		{n: s.Hidden, k: m.inner(), count: 1, attn: true}}
}

// smallParams: the convolution (and its bias), dt_bias, A_log and D per head, the gated norm's
// weight over the inner width, and the projections' biases where use_bias is set.
func (mamba2Mixer) smallParams(s Shape, _ Layer) int64 {
	m := s.Mamba
	n := int64(m.convDim())*int64(m.ConvKernel) + 3*int64(m.Heads) + int64(m.inner())
	if m.ConvBias {
		n += int64(m.convDim())
	}
	if m.ProjBias {
		n += int64(m.inner()+m.convDim()+m.Heads) + int64(s.Hidden)
	}
	return n
}

func (mamba2Mixer) kvElementsPerToken(Shape, Layer) int        { return 0 }
func (mamba2Mixer) attendedTokens(Shape, Layer, int) int       { return 0 }
func (mamba2Mixer) flopsPerAttendedToken(Shape, Layer) float64 { return 0 }

// stateBytesPerSequence: the convolution's last ConvKernel-1 inputs in the activation dtype and
// each head's HeadDim x StateSize state in StateDType.
func (mamba2Mixer) stateBytesPerSequence(s Shape, _ Layer) float64 {
	m := s.Mamba
	return float64(m.convDim())*float64(m.ConvKernel-1)*s.ActivationDType().Bytes() +
		float64(m.Heads)*float64(m.HeadDim)*float64(m.StateSize)*m.StateDType.Bytes()
}

// flopsPerToken: the convolution (2 a tap) and per state element the decay (1), the update
// with dt B x (2) and the read-out with C (2).
func (mamba2Mixer) flopsPerToken(s Shape, _ Layer) float64 {
	m := s.Mamba
	return 2*float64(m.convDim())*float64(m.ConvKernel) + 5*float64(m.Heads)*float64(m.HeadDim)*float64(m.StateSize)
}

// noMixer is the mixer of a feed-forward-only layer: nothing.
type noMixer struct{}

func (noMixer) matrices(Shape, Layer) []matrix             { return nil }
func (noMixer) smallParams(Shape, Layer) int64             { return 0 }
func (noMixer) kvElementsPerToken(Shape, Layer) int        { return 0 }
func (noMixer) attendedTokens(Shape, Layer, int) int       { return 0 }
func (noMixer) flopsPerAttendedToken(Shape, Layer) float64 { return 0 }
func (noMixer) stateBytesPerSequence(Shape, Layer) float64 { return 0 }
func (noMixer) flopsPerToken(Shape, Layer) float64         { return 0 }
