package model

import (
	"fmt"
	"strings"
)

// gatedDeltaNet reads a Gated DeltaNet hybrid (qwen3_next, qwen3_5_text, qwen3_5_moe_text): which
// layers are linear_attention (layer_types, else every layer but each full_attention_interval-th,
// as transformers does), the linear_* widths, the gated attention's output gate and the shared
// expert's gate. The attention layers must sit where Shape.Layer puts them, spread evenly and
// each ending a stretch (every released checkpoint does); another pattern is refused by name.
func (c hfConfig) gatedDeltaNet(s *Shape) error {
	full := make([]bool, s.Layers)
	if c.has("layer_types") {
		types, _, err := c.strList("layer_types")
		if err != nil {
			return err
		}
		if len(types) != s.Layers {
			return c.errorf("layer_types has %d entries for num_hidden_layers = %d: want one per layer", len(types), s.Layers)
		}
		for i, t := range types {
			switch t {
			case "full_attention":
				full[i] = true
			case "linear_attention":
			default:
				return c.errorf("layer_types[%d] = %q is not a layer kind decodebench implements for model_type %q: accepted are linear_attention (Gated DeltaNet) and full_attention",
					i, t, s.Family)
			}
		}
	} else {
		interval, err := c.positiveInt("full_attention_interval", 4, false)
		if err != nil {
			return err
		}
		for i := range full {
			full[i] = (i+1)%interval == 0
		}
	}
	for _, f := range full {
		if !f {
			s.LinearLayers++
		}
	}
	if s.LinearLayers == s.Layers {
		return c.errorf("no full_attention layer among the %d: a Gated DeltaNet model without attention layers is not modelled", s.Layers)
	}
	g := GatedDeltaNet{StateDType: FP32}
	for _, f := range []struct {
		key string
		dst *int
		def int
	}{{"linear_num_key_heads", &g.KeyHeads, 16}, {"linear_num_value_heads", &g.ValueHeads, 32},
		{"linear_key_head_dim", &g.KeyHeadDim, 128}, {"linear_value_head_dim", &g.ValueHeadDim, 128},
		{"linear_conv_kernel_dim", &g.ConvKernel, 4}} {
		var err error
		if *f.dst, err = c.positiveInt(f.key, f.def, false); err != nil {
			return err
		}
	}
	state, err := c.stateDType("mamba_ssm_dtype", FP32)
	if err != nil {
		return err
	}
	g.StateDType = state
	if err := g.validate(); err != nil {
		return c.errorf("%v", err)
	}
	s.LinearAttention = &g
	for i := range full {
		if got := s.Layer(i).Mixer != MixerGatedDeltaNet; got != full[i] {
			return c.errorf("layer %d is %s, but decodebench places the %d attention layers evenly, each ending a stretch (%s): this layer pattern is not modelled",
				i, map[bool]string{true: "full_attention", false: "linear_attention"}[full[i]], s.Layers-s.LinearLayers, attentionLayerList(*s))
		}
	}
	// Qwen3-Next always gates its attention output; Qwen3.5 says so with attn_output_gate.
	gate, err := c.boolean("attn_output_gate", true)
	if err != nil {
		return err
	}
	s.AttnOutputGate = gate
	if s.IsMoE() {
		shared, err := c.nonNegativeInt("shared_expert_intermediate_size", 0)
		if err != nil {
			return err
		}
		s.FFN, s.SharedExpertGate = shared, shared > 0
	}
	if n, err := c.nonNegativeInt("mtp_num_hidden_layers", 0); err != nil {
		return err
	} else if n > 0 {
		s.LeftOut = joinLeftOut(s.LeftOut, fmt.Sprintf("%d multi-token-prediction layer(s) (mtp_num_hidden_layers), which a plain decode step does not run", n))
	}
	return nil
}

// stateDType reads a recurrent state's dtype (float32, bfloat16 or float16), def when absent.
func (c hfConfig) stateDType(key string, def DType) (DType, error) {
	if !c.has(key) {
		return def, nil
	}
	name, err := c.str(key, "")
	if err != nil {
		return "", err
	}
	dt, ok := map[string]DType{"float32": FP32, "bfloat16": BF16, "float16": FP16}[name]
	if !ok {
		return "", c.errorf("%s = %q: accepted are float32, bfloat16 and float16", key, name)
	}
	return dt, nil
}

// attentionLayerList names the first attention layers Shape.Layer places: "3, 7, 11, ...".
func attentionLayerList(s Shape) string {
	var at []string
	for i := 0; i < s.Layers && len(at) < 4; i++ {
		if s.Layer(i).Mixer != MixerGatedDeltaNet {
			at = append(at, fmt.Sprint(i))
		}
	}
	return "layers " + strings.Join(at, ", ") + ", ..."
}

// nemotronH reads a Mamba-2 hybrid (nemotron_h): one layer per character of
// hybrid_override_pattern, the mamba_* widths, the relu^2 MLP of the - layers and the mixture
// of experts of the E layers (sigmoid routing with a correction bias, shared experts, and the
// experts' latent where moe_latent_size is set).
func (c hfConfig) nemotronH(arch hfArch, s *Shape) error {
	pattern, err := c.str("hybrid_override_pattern", "")
	if err != nil {
		return err
	}
	if pattern == "" {
		return c.errorf("hybrid_override_pattern is missing: nemotron_h configs say what each layer is (M, *, - or E)")
	}
	if len(pattern) != s.Layers {
		return c.errorf("hybrid_override_pattern has %d layers for num_hidden_layers = %d: want one character per layer", len(pattern), s.Layers)
	}
	for i, ch := range pattern {
		if !strings.ContainsRune("M*-E", ch) {
			return c.errorf("hybrid_override_pattern[%d] = %q is not a layer kind decodebench implements: accepted are M (Mamba-2), * (attention), - (MLP) and E (mixture of experts)", i, ch)
		}
	}
	s.Pattern, s.GatedMLP = pattern, false
	if act, err := c.str("mlp_hidden_act", "relu2"); err != nil {
		return err
	} else if act != "relu2" {
		return c.errorf("mlp_hidden_act = %q: nemotron_h's MLP is modelled with relu2 (not gated); accepted is relu2", act)
	}
	if strings.Contains(pattern, "M") {
		m := Mamba2{StateDType: s.WeightDType}
		for _, f := range []struct {
			key string
			dst *int
			def int
		}{{"mamba_num_heads", &m.Heads, 128}, {"mamba_head_dim", &m.HeadDim, 64}, {"n_groups", &m.Groups, 8},
			{"ssm_state_size", &m.StateSize, 128}, {"conv_kernel", &m.ConvKernel, 4}} {
			if *f.dst, err = c.positiveInt(f.key, f.def, false); err != nil {
				return err
			}
		}
		if m.ConvBias, err = c.boolean("use_conv_bias", true); err != nil {
			return err
		}
		if m.ProjBias, err = c.boolean("use_bias", false); err != nil {
			return err
		}
		if m.StateDType, err = c.stateDType("mamba_ssm_cache_dtype", s.WeightDType); err != nil {
			return err
		}
		if err := m.validate(); err != nil {
			return c.errorf("%v", err)
		}
		s.Mamba = &m
	}
	if !strings.Contains(pattern, "E") {
		return nil
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"n_routed_experts", &s.Experts}, {"num_experts_per_tok", &s.ExpertsPerToken}, {"moe_intermediate_size", &s.ExpertFFN}} {
		if *f.dst, err = c.positiveInt(f.key, 0, true); err != nil {
			return err
		}
	}
	if s.ExpertsPerToken > s.Experts {
		return c.errorf("num_experts_per_tok = %d exceeds n_routed_experts = %d", s.ExpertsPerToken, s.Experts)
	}
	shared, err := c.nonNegativeInt("n_shared_experts", 1)
	if err != nil {
		return err
	}
	width, err := c.nonNegativeInt("moe_shared_expert_intermediate_size", 0)
	if err != nil {
		return err
	}
	if s.MoELatent, err = c.nonNegativeInt("moe_latent_size", 0); err != nil {
		return err
	}
	denseFFN := s.FFN
	s.FFN, s.RouterBias = shared*width, true // e_score_correction_bias
	if n := strings.Count(pattern, "-"); n > 0 {
		s.DenseLayers, s.DenseFFN = n, denseFFN
	}
	routing := arch
	routing.moe = moeDeepSeek // noaux_tc: sigmoid scores, the correction bias for the choice, groups
	return c.routing(routing, s)
}
