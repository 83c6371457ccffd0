package model

import (
	"bytes"
	"encoding/json"
	"strings"
)

// What the newer model types state beyond the fields every Llama-like config has: nested
// text configs, mixtures of experts with shared experts and dense layers, per-layer attention
// spans, multi-head latent attention, and quantized formats.

// sub returns the object under key as a config of its own, whose errors name the outer type.
func (c hfConfig) sub(key, outerType string) (hfConfig, error) {
	if !c.has(key) {
		return hfConfig{}, c.errorf("model_type %q keeps its language model in %s, which is missing", outerType, key)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(c.fields[key], &fields); err != nil || fields == nil {
		return hfConfig{}, c.errorf("%s of model_type %q = %s: not a JSON object", key, outerType, bytes.TrimSpace(c.fields[key]))
	}
	return hfConfig{source: c.source, fields: fields, within: key + " of " + outerType}, nil
}

// typeName is the config's model_type.
func (c hfConfig) typeName() string {
	name, _ := c.str("model_type", "")
	return name
}

// truthy reports whether key holds something other than null, false, 0, "" or an empty list.
func (c hfConfig) truthy(key string) bool {
	if !c.has(key) {
		return false
	}
	switch string(bytes.TrimSpace(c.fields[key])) {
	case "false", "0", `""`, "[]", "{}", "0.0":
		return false
	}
	return true
}

// refuseUnmodelled names a feature the config asks for that the shape of its type cannot
// hold, rather than counting the model without it.
//
// Every other key a supported config carries is either read (the fields of ParseHFConfig and
// the rules of hfArch, including layer_types, partial_rotary_factor, quantization_config) or
// irrelevant to what a decode step reads and computes, and ignored on purpose:
//   - rope_theta, rope_scaling of any type (linear, dynamic, yarn, llama3, longrope and its
//     factor lists), rope_local_base_freq, original_max_position_embeddings: the rotary
//     frequencies, not which elements rotate;
//   - query_pre_attn_scalar (Gemma's attention scale), attn_temperature_tuning, floor_scale and
//     attn_scale (Llama 4's query scaling in its no-rotary layers), final_logit_softcapping and
//     attn_logit_softcapping (Gemma 2's tanh caps): one scalar or elementwise op on data a step
//     already reads;
//   - topk_method, router_jitter_noise, input_jitter_noise: training-time details of a router
//     (scoring_func, n_group, topk_group, norm_topk_prob, routed_scaling_factor and swiglu_limit
//     are read, by routing.go, for the step's routing and activation; the expert bytes follow
//     ExpectedDistinctExperts either way);
//   - hidden_act and hidden_activation: the activation of a gated MLP whose matrices are
//     counted either way;
//   - rms_norm_eps, initializer_range, router_aux_loss_coef, output_router_logits,
//     attention_dropout, use_cache, pretraining_tp, ep_size, token ids and the like: training
//     or serving settings.
func (c hfConfig) refuseUnmodelled(arch hfArch, modelType string) error {
	features := []struct {
		key, feature string
		refused      bool
	}{
		{"full_attention_interval", "linear-attention layers", !arch.gdn},
		{"linear_num_value_heads", "linear-attention layers", !arch.gdn},
		{"kv_lora_rank", "multi-head latent attention", !arch.mla},
		{"shared_expert_intermediate_size", "a shared expert", !(arch.gdn && arch.moe == moeQwen3)},
		{"n_shared_experts", "shared experts", arch.moe != moeDeepSeek && !arch.pattern},
		{"n_routed_experts", "a mixture of experts", arch.moe != moeDeepSeek && !arch.pattern},
		{"num_local_experts", "a mixture of experts", arch.moe != moeMixtral && arch.moe != moeLlama4 && arch.moe != moeGptOss},
		{"num_experts", "a mixture of experts", arch.moe != moeQwen3 && arch.moe != moeGptOss},
		{"num_nextn_predict_layers", "multi-token-prediction layers", !arch.mtp},
		// Llama 4's layer pattern: elsewhere transformers would not read these keys, and a model
		// that means them would be counted with rotary and full attention in every layer.
		{"no_rope_layers", "layers without rotary", arch.window != windowLlama4 && !arch.noRoPE},
		{"no_rope_layer_interval", "layers without rotary", arch.window != windowLlama4 && !arch.noRoPE},
		// A flag only glm4_moe and llama4_text read; Qwen3 and Gemma 3 always have QK-norm.
		{"use_qk_norm", "QK-norm", arch.qkNorm == "" && modelType != "glm4_moe" && modelType != "llama4_text"},
		// Each family's way of saying which layers route and how wide the experts are; in another
		// family's config they would be dropped and every layer counted alike.
		{"moe_intermediate_size", "experts narrower than intermediate_size", arch.moe != moeQwen3 && arch.moe != moeDeepSeek && !arch.pattern},
		{"first_k_dense_replace", "dense first layers", arch.moe != moeDeepSeek},
		{"moe_layer_freq", "dense layers between MoE layers", arch.moe != moeDeepSeek},
		{"decoder_sparse_step", "dense layers between MoE layers", arch.moe != moeQwen3},
		{"mlp_only_layers", "dense layers among MoE layers", arch.moe != moeQwen3},
		{"interleave_moe_layer_step", "dense layers between MoE layers", arch.moe != moeLlama4},
		{"moe_layers", "dense layers among MoE layers", arch.moe != moeLlama4},
		{"intermediate_size_mlp", "dense layers of another width", arch.moe != moeLlama4},
	}
	// A step of 1 routes every layer, as the type's own default does: nothing to refuse.
	noop := map[string]string{"decoder_sparse_step": "1", "moe_layer_freq": "1", "interleave_moe_layer_step": "1"}
	for _, f := range features {
		if f.refused && c.truthy(f.key) && string(bytes.TrimSpace(c.fields[f.key])) != noop[f.key] {
			return c.errorf("%s = %s: %s is not modelled for model_type %q; decodebench would count this model wrong, so it refuses it",
				f.key, bytes.TrimSpace(c.fields[f.key]), f.feature, modelType)
		}
	}
	return nil
}

// nonNegativeInt reads a whole number >= 0; a missing key gives def (-1: required).
func (c hfConfig) nonNegativeInt(key string, def int) (int, error) {
	if !c.has(key) {
		if def < 0 {
			return 0, c.errorf("%s is missing: a whole number >= 0 is required", key)
		}
		return def, nil
	}
	if strings.TrimSpace(string(c.fields[key])) == "0" {
		return 0, nil
	}
	return c.positiveInt(key, 0, true)
}

// intList reads a list of whole numbers; ok is false when the key is absent.
func (c hfConfig) intList(key string) (values []int, ok bool, err error) {
	if !c.has(key) {
		return nil, false, nil
	}
	if err := json.Unmarshal(c.fields[key], &values); err != nil {
		return nil, false, c.errorf("%s = %s: must be a list of whole numbers", key, bytes.TrimSpace(c.fields[key]))
	}
	return values, true, nil
}

func (c hfConfig) strList(key string) (values []string, ok bool, err error) {
	if !c.has(key) {
		return nil, false, nil
	}
	if err := json.Unmarshal(c.fields[key], &values); err != nil {
		return nil, false, c.errorf("%s = %s: must be a list of strings", key, bytes.TrimSpace(c.fields[key]))
	}
	return values, true, nil
}

// attentionDetails reads biases, QK-norm, sinks, LayerNorm biases and MLA's widths.
func (c hfConfig) attentionDetails(arch hfArch, s *Shape) error {
	var err error
	s.AttnBias = arch.qkvBias
	if arch.readsBiasFlags {
		if s.AttnBias, err = c.boolean("attention_bias", arch.biasDefault); err != nil {
			return err
		}
		s.OProjBias = s.AttnBias
		// Of these types only Llama's MLP takes mlp_bias; the others' MLPs and experts are
		// bias-free in transformers whatever a config says (gpt-oss's expert biases are set
		// with its experts).
		if s.Family == "llama" {
			if s.MLPBias, err = c.boolean("mlp_bias", false); err != nil {
				return err
			}
		}
	}
	if arch.qkvBiasFlag {
		if s.AttnBias, err = c.boolean("attention_bias", false); err != nil {
			return err
		}
	}
	s.QKNorm = arch.qkNorm
	switch s.Family {
	case "glm4_moe":
		if use, err := c.boolean("use_qk_norm", false); err != nil {
			return err
		} else if use {
			s.QKNorm = "rms"
		}
		if err := c.partialRotary(s, 0.5); err != nil {
			return err
		}
	case "llama4_text":
		if use, err := c.boolean("use_qk_norm", true); err != nil {
			return err
		} else if use {
			s.QKNorm = "l2"
		}
	}
	// transformers' default rotary initialisation honours partial_rotary_factor in every model
	// type (Phi-4-mini, a phi3 config, rotates 0.75 of each head); MLA's rotary part is its own
	// qk_rope_head_dim, which a factor would not shrink in the cache the arithmetic counts.
	if s.Family != "glm4_moe" && !arch.mla {
		if err := c.partialRotary(s, 1); err != nil {
			return err
		}
	}
	s.AttentionSinks = arch.sinks
	if arch.normBias {
		s.NormBias = true
		if s.LMHeadBias, err = c.boolean("lm_head_bias", false); err != nil {
			return err
		}
	}
	if !arch.mla {
		return nil
	}
	switch {
	case c.has("partial_rotary_factor"):
		return c.errorf("partial_rotary_factor = %s: a rotary factor on multi-head latent attention is not modelled for model_type %q (its rotary part is qk_rope_head_dim)",
			bytes.TrimSpace(c.fields["partial_rotary_factor"]), s.Family)
	case s.AttnBias:
		// DeepSeek's attention_bias puts a bias on q_a_proj, kv_a_proj_with_mqa and o_proj only,
		// which the grouped-query count of the biases would get wrong.
		return c.errorf("attention_bias = true: biases on multi-head latent attention's projections are not modelled for model_type %q", s.Family)
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"kv_lora_rank", &s.KVLoRARank}, {"qk_rope_head_dim", &s.RoPEHeadDim}, {"v_head_dim", &s.VHeadDim}} {
		if *f.dst, err = c.positiveInt(f.key, 0, true); err != nil {
			return err
		}
	}
	nope, err := c.positiveInt("qk_nope_head_dim", 0, true)
	if err != nil {
		return err
	}
	// q_lora_rank null (DeepSeek-V2-Lite) projects the query straight from the hidden state.
	if s.QLoRARank, err = c.nonNegativeInt("q_lora_rank", 0); err != nil {
		return err
	}
	// head_dim, where a config states it, is the rotary width transformers uses; the query
	// head is nope + rope wide, and every query head gets its own decompressed key and value.
	s.HeadDim, s.KVHeads = nope+s.RoPEHeadDim, s.QHeads
	return nil
}

// experts reads the mixture of experts: which layers route, to how many experts of what
// width, and what the other layers (or shared experts) hold.
func (c hfConfig) experts(arch hfArch, s *Shape) error {
	var err error
	required := func(key string, dst *int) error {
		*dst, err = c.positiveInt(key, 0, true)
		return err
	}
	perToken := func(alias string) error {
		if alias != "" && !c.has("num_experts_per_tok") && c.has(alias) {
			return required(alias, &s.ExpertsPerToken)
		}
		return required("num_experts_per_tok", &s.ExpertsPerToken)
	}
	// setLayers records which layers route (moe[i]); the rest have a dense MLP of denseFFN.
	setLayers := func(moe func(layer int) bool, denseFFNKey string) error {
		dense := 0
		for i := 0; i < s.Layers; i++ {
			if !moe(i) {
				dense++
			}
		}
		if dense == s.Layers {
			return c.errorf("no layer routes to experts (the layers' MoE pattern leaves all %d dense); decodebench models such a config as the dense model it is only when the file says so", s.Layers)
		}
		s.DenseLayers = dense
		if dense > 0 {
			return required(denseFFNKey, &s.DenseFFN)
		}
		return nil
	}
	switch arch.moe {
	case moeNone:
		return nil
	case moeMixtral, moeGptOss:
		if err := required("num_local_experts", &s.Experts); err != nil {
			return err
		}
		if err := perToken("experts_per_token"); err != nil {
			return err
		}
		s.ExpertFFN, s.FFN = s.FFN, 0 // intermediate_size is each expert's width
		if arch.moe == moeGptOss {
			s.MLPBias, s.RouterBias = true, true
		}
	case moeQwen3:
		if err := required("num_experts", &s.Experts); err != nil {
			return err
		}
		if err := perToken(""); err != nil {
			return err
		}
		if err := required("moe_intermediate_size", &s.ExpertFFN); err != nil {
			return err
		}
		step, err := c.positiveInt("decoder_sparse_step", 1, false)
		if err != nil {
			return err
		}
		mlpOnly, _, err := c.intList("mlp_only_layers")
		if err != nil {
			return err
		}
		denseFFN := s.FFN
		s.FFN = 0
		only := map[int]bool{}
		for _, l := range mlpOnly {
			only[l] = true
		}
		if err := setLayers(func(i int) bool { return !only[i] && (i+1)%step == 0 }, "intermediate_size"); err != nil {
			return err
		}
		if s.DenseLayers > 0 {
			if denseFFN == 0 {
				return c.errorf("intermediate_size is missing: the dense layers of mlp_only_layers need their MLP width")
			}
			s.DenseFFN = denseFFN
		}
	case moeDeepSeek:
		if err := required("n_routed_experts", &s.Experts); err != nil {
			return err
		}
		if err := perToken(""); err != nil {
			return err
		}
		if err := required("moe_intermediate_size", &s.ExpertFFN); err != nil {
			return err
		}
		shared, err := c.nonNegativeInt("n_shared_experts", -1)
		if err != nil {
			return err
		}
		firstDense, err := c.nonNegativeInt("first_k_dense_replace", -1)
		if err != nil {
			return err
		}
		freq, err := c.positiveInt("moe_layer_freq", 1, false)
		if err != nil {
			return err
		}
		denseFFN := s.FFN
		s.FFN = shared * s.ExpertFFN // the shared experts act as one MLP of their summed width
		s.RouterBias = true          // e_score_correction_bias, one per routed expert
		if err := setLayers(func(i int) bool { return i >= firstDense && i%freq == 0 }, "intermediate_size"); err != nil {
			return err
		}
		if s.DenseLayers > 0 {
			s.DenseFFN = denseFFN
		}
	case moeLlama4:
		if err := required("num_local_experts", &s.Experts); err != nil {
			return err
		}
		if err := perToken(""); err != nil {
			return err
		}
		s.ExpertFFN = s.FFN // intermediate_size: each routed expert and the shared one
		layers, listed, err := c.intList("moe_layers")
		if err != nil {
			return err
		}
		isMoE := map[int]bool{}
		if listed {
			for _, l := range layers {
				isMoE[l] = true
			}
		} else {
			step, err := c.positiveInt("interleave_moe_layer_step", 1, false)
			if err != nil {
				return err
			}
			for l := step - 1; l < s.Layers; l += step {
				isMoE[l] = true
			}
		}
		if err := setLayers(func(i int) bool { return isMoE[i] }, "intermediate_size_mlp"); err != nil {
			return err
		}
	}
	if s.ExpertsPerToken > s.Experts {
		key := map[moeRule]string{moeMixtral: "num_local_experts", moeGptOss: "num_local_experts", moeLlama4: "num_local_experts",
			moeQwen3: "num_experts", moeDeepSeek: "n_routed_experts"}[arch.moe]
		return c.errorf("num_experts_per_tok = %d exceeds %s = %d", s.ExpertsPerToken, key, s.Experts)
	}
	return c.routing(arch, s)
}

// partialRotary reads partial_rotary_factor (def when absent: GLM-4.5's transformers default
// is 0.5, everyone else's 1): rotary covers that fraction of each head.
func (c hfConfig) partialRotary(s *Shape, def float64) error {
	factor := def
	if c.has("partial_rotary_factor") {
		if err := json.Unmarshal(c.fields["partial_rotary_factor"], &factor); err != nil || factor <= 0 || factor > 1 {
			return c.errorf("partial_rotary_factor = %s: must be a number in (0, 1]", bytes.TrimSpace(c.fields["partial_rotary_factor"]))
		}
	}
	if factor < 1 {
		// transformers rotates int(head_dim * factor) dimensions in pairs: an odd one is left out.
		s.RotaryDim = int(float64(s.HeadDim)*factor) &^ 1
		if s.RotaryDim < 2 {
			return c.errorf("partial_rotary_factor = %s leaves fewer than 2 of head_dim = %d rotated: want a factor of at least %g",
				bytes.TrimSpace(c.fields["partial_rotary_factor"]), s.HeadDim, 2/float64(s.HeadDim))
		}
	}
	return nil
}
